import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Content() {
  useTitle("Content")
  return (
    <>
      <PageHeader title="Content" />
      <Empty title="Nothing here yet" />
    </>
  )
}
