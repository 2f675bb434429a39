import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Agents() {
  useTitle("Agents")
  return (
    <>
      <PageHeader title="Agents" />
      <Empty title="Nothing here yet" />
    </>
  )
}
