import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Enforcement() {
  useTitle("Enforcement")
  return (
    <>
      <PageHeader title="Enforcement" />
      <Empty title="Nothing here yet" />
    </>
  )
}
