import { useState } from "react"
import { api, signOut } from "../api.ts"
import { useAction, useQuery } from "../hooks.ts"
import { useTitle } from "../router.tsx"
import { useSession } from "../session.tsx"
import {
  Button,
  Card,
  ErrorState,
  InlineError,
  KeyValue,
  Loading,
  PageHeader,
  Select,
  TextInput,
  Time,
} from "../ui/index.tsx"

export default function Settings() {
  useTitle("Settings")
  const { workspaceId, session } = useSession()
  const ws = useQuery(() => api.workspaces.get.query({ id: workspaceId! }), [workspaceId])
  if (ws.error) return <ErrorState error={ws.error} retry={ws.reload} />
  if (!ws.data) return <Loading rows={6} />
  return (
    <>
      <PageHeader title="Workspace settings" />
      <Form key={ws.data.updatedAt} ws={ws.data} onSaved={ws.reload} />
      <Card title="Your session">
        <div className="stack">
          <KeyValue
            items={[
              ["Signed in as", session.user.email],
              ["Through", session.provider],
              ["Session ends", <Time key="e" iso={session.expiresAt} />],
            ]}
          />
          <div>
            <Button
              variant="danger"
              onClick={async () => {
                await signOut(true)
                location.assign("/")
              }}
            >
              Sign out everywhere
            </Button>
          </div>
        </div>
      </Card>
    </>
  )
}

function Form({ ws, onSaved }: { ws: Awaited<ReturnType<typeof api.workspaces.get.query>>; onSaved: () => void }) {
  const [name, setName] = useState(ws.name)
  const [guardDefault, setGuardDefault] = useState(ws.guardDefault)
  const save = useAction(() => api.workspaces.update.mutate({ id: ws.id, name, guardDefault }))
  return (
    <Card title="General">
      <div className="stack">
        <KeyValue
          items={[
            ["ID", <code key="i">{ws.id}</code>],
            ["Plan", ws.plan],
            ["Environment", ws.environment],
            ["Created", <Time key="c" iso={ws.createdAt} />],
          ]}
        />
        <TextInput
          label="Name"
          value={name}
          onChange={(e) => setName(e.target.value)}
          error={save.error?.field === "name" ? save.error.message : undefined}
        />
        <Select
          label="When no policy matches"
          value={guardDefault}
          onChange={(e) => setGuardDefault(e.target.value as "allow" | "deny")}
          options={[
            ["allow", "Allow the action"],
            ["deny", "Deny the action"],
          ]}
        />
        {save.error?.field !== "name" ? <InlineError error={save.error} /> : null}
        <div>
          <Button
            variant="primary"
            busy={save.pending}
            onClick={async () => {
              if (await save.call()) onSaved()
            }}
          >
            Save
          </Button>
        </div>
      </div>
    </Card>
  )
}
