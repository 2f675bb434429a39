import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function PolicyEditor() {
  useTitle("PolicyEditor")
  return (
    <>
      <PageHeader title="PolicyEditor" />
      <Empty title="Nothing here yet" />
    </>
  )
}
