import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function ApiKeys() {
  useTitle("ApiKeys")
  return (
    <>
      <PageHeader title="ApiKeys" />
      <Empty title="Nothing here yet" />
    </>
  )
}
