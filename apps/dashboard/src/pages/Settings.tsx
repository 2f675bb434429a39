import { useTitle } from "../router.tsx"
import { Empty, PageHeader } from "../ui/index.tsx"

export default function Settings() {
  useTitle("Settings")
  return (
    <>
      <PageHeader title="Settings" />
      <Empty title="Nothing here yet" />
    </>
  )
}
