import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Members() {
  useTitle("Members")
  return (
    <>
      <PageHeader title="Members" />
      <Empty title="Nothing here yet" />
    </>
  )
}
