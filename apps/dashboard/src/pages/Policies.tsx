import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Policies() {
  useTitle("Policies")
  return (
    <>
      <PageHeader title="Policies" />
      <Empty title="Nothing here yet" />
    </>
  )
}
