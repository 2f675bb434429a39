import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Connectors() {
  useTitle("Connectors")
  return (
    <>
      <PageHeader title="Connectors" />
      <Empty title="Nothing here yet" />
    </>
  )
}
