import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Audit() {
  useTitle("Audit")
  return (
    <>
      <PageHeader title="Audit" />
      <Empty title="Nothing here yet" />
    </>
  )
}
