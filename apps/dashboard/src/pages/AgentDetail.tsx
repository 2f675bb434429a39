import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function AgentDetail() {
  useTitle("AgentDetail")
  return (
    <>
      <PageHeader title="AgentDetail" />
      <Empty title="Nothing here yet" />
    </>
  )
}
