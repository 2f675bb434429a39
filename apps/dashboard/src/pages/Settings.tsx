import { useEffect, useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, useQuery } from "../hooks.ts"
import { useTitle } from "../router.tsx"
import { useSession } from "../session.tsx"
import {
  Button,
  Card,
  ErrorState,
  Form,
  FormError,
  fieldError,
  InlineError,
  KeyValue,
  Loading,
  Mono,
  PageHeader,
  Pill,
  Select,
  TextInput,
  Time,
} from "../ui/index.tsx"

type Workspace = Outputs["workspaces"]["get"]

/** The workspace's settings: its name and the guard's default; plan and environment shown; deletion. */
export default function Settings() {
  useTitle("Settings")
  const { workspaceId } = useSession()
  const ws = useQuery(() => api.workspaces.get.query({ id: workspaceId ?? "" }), [workspaceId])
  return (
    <>
      <PageHeader title="Settings" description="This workspace's name, plan and defaults." />
      {ws.error ? (
        <ErrorState error={ws.error} retry={ws.reload} />
      ) : !ws.data ? (
        <Loading rows={6} label="Loading the settings" />
      ) : (
        <div className="stack">
          <General workspace={ws.data} onSaved={ws.reload} />
          <DeleteWorkspace workspace={ws.data} />
        </div>
      )}
    </>
  )
}

function General({ workspace, onSaved }: { workspace: Workspace; onSaved: () => void }) {
  const { refresh, membership, can } = useSession()
  const locked = !can("workspaces:write")
  const [name, setName] = useState(workspace.name)
  const [guardDefault, setGuardDefault] = useState(workspace.guardDefault)
  const [local, setLocal] = useState<string | undefined>()
  const [saved, setSaved] = useState(false)
  useEffect(() => {
    setName(workspace.name)
    setGuardDefault(workspace.guardDefault)
  }, [workspace])
  const save = useAction(() =>
    api.workspaces.update.mutate({
      id: workspace.id,
      ...(name.trim() !== workspace.name ? { name: name.trim() } : {}),
      ...(guardDefault !== workspace.guardDefault ? { guardDefault } : {}),
    }),
  )
  const dirty = name.trim() !== workspace.name || guardDefault !== workspace.guardDefault
  return (
    <Card title="General">
      <div className="stack">
        <KeyValue
          items={[
            ["Workspace id", <Mono key="i">{workspace.id}</Mono>],
            [
              "Plan",
              <Pill key="p" tone="accent">
                {workspace.plan}
              </Pill>,
            ],
            [
              "Environment",
              <Pill key="e" tone={workspace.environment === "live" ? "success" : "info"}>
                {workspace.environment}
              </Pill>,
            ],
            ["Your role", membership?.role ?? "—"],
            ["Created", <Time key="c" iso={workspace.createdAt} />],
            ["Updated", <Time key="u" iso={workspace.updatedAt} />],
          ]}
        />
        <p className="muted">
          <small>
            The environment is fixed when the workspace is created. The plan is changed by the service's operator.
          </small>
        </p>
        <Form
          label="Workspace settings"
          onSubmit={async () => {
            setSaved(false)
            const bad = name.trim() ? undefined : "a name"
            setLocal(bad)
            if (bad) return
            if (await save.call()) {
              setSaved(true)
              onSaved()
              await refresh()
            }
          }}
        >
          <div className="form-grid">
            <TextInput
              label="Name"
              value={name}
              onChange={(e) => setName(e.target.value)}
              disabled={locked}
              error={local ?? fieldError(save.error, "name")}
            />
            <Select
              label="When no policy matches"
              value={guardDefault}
              onChange={(e) => setGuardDefault(e.target.value as "allow" | "deny")}
              disabled={locked}
              options={[
                ["allow", "Allow the action"],
                ["deny", "Deny the action"],
              ]}
              hint="The guard's decision for an action no policy rule covers."
              error={fieldError(save.error, "guardDefault")}
            />
          </div>
          <div className="form-actions">
            <FormError error={save.error} fields={["name", "guardDefault"]} />
            {saved && !dirty ? (
              <span role="status">
                <Pill tone="success">Saved</Pill>
              </span>
            ) : null}
            <Button type="submit" variant="primary" busy={save.pending} disabled={!dirty} needs="workspaces:write">
              Save changes
            </Button>
          </div>
        </Form>
      </div>
    </Card>
  )
}

function DeleteWorkspace({ workspace }: { workspace: Workspace }) {
  const locked = !useSession().can("workspaces:admin")
  const [typed, setTyped] = useState("")
  const remove = useAction(() => api.workspaces.delete.mutate({ id: workspace.id }))
  const [done, setDone] = useState(false)
  return (
    <Card title="Delete this workspace" className="danger-zone">
      <Form
        label="Delete this workspace"
        onSubmit={async () => {
          if (typed !== workspace.name) return
          if (await remove.call()) {
            setDone(true)
            window.location.assign("/")
          }
        }}
      >
        <p>
          Deleting the workspace revokes its keys and stops its agents; its audit chain is kept. Deleting a workspace
          needs the service operator's <Mono>workspaces:admin</Mono>.
        </p>
        <TextInput
          label={`Type the workspace's name, ${workspace.name}, to confirm`}
          value={typed}
          autoComplete="off"
          disabled={locked}
          onChange={(e) => setTyped(e.target.value)}
          error={
            typed.length >= workspace.name.length && typed !== workspace.name ? "the name does not match" : undefined
          }
        />
        <div className="form-actions">
          <InlineError error={remove.error} />
          {done ? <span role="status">Deleted.</span> : null}
          <Button
            type="submit"
            variant="danger"
            busy={remove.pending}
            disabled={typed !== workspace.name}
            needs="workspaces:admin"
          >
            Delete workspace
          </Button>
        </div>
      </Form>
    </Card>
  )
}
