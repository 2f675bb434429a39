import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Approvals() {
  useTitle("Approvals")
  return (
    <>
      <PageHeader title="Approvals" />
      <Empty title="Nothing here yet" />
    </>
  )
}
