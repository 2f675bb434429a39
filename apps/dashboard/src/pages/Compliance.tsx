import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Compliance() {
  useTitle("Compliance")
  return (
    <>
      <PageHeader title="Compliance" />
      <Empty title="Nothing here yet" />
    </>
  )
}
