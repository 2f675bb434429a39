import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Webhooks() {
  useTitle("Webhooks")
  return (
    <>
      <PageHeader title="Webhooks" />
      <Empty title="Nothing here yet" />
    </>
  )
}
