import { useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, usePaged } from "../hooks.ts"
import { useQueryState, useTitle } from "../router.tsx"
import { AGENT_KEY_SCOPES, AGENT_SCOPES, SCOPES, type Scope } from "../scopes.ts"
import { useCan } from "../session.tsx"
import {
  Button,
  Checkbox,
  Dialog,
  DialogActions,
  Empty,
  InlineError,
  PagedTable,
  PageHeader,
  Pill,
  QueryFilters,
  SecretOnce,
  Select,
  Status,
  TextInput,
  Time,
  toggled,
} from "../ui/index.tsx"

type Key = Outputs["apiKeys"]["get"]

export default function ApiKeys() {
  useTitle("API keys")
  const [q, setQ] = useQueryState()
  const status = (q.get("status") ?? "active") as "" | Key["status"]
  const agentId = q.get("agentId") ?? ""
  const paged = usePaged(
    (p) => api.apiKeys.list.query({ ...p, ...(status ? { status } : {}), ...(agentId ? { agentId } : {}) }),
    [status, agentId],
  )
  return (
    <>
      <PageHeader
        title="API keys"
        description="Keys authenticate agents and services. A key's secret is shown once, when it is created or rotated."
        actions={
          <Button variant="primary" needs="apikeys:write" onClick={() => setQ({ create: "1" })}>
            Create a key
          </Button>
        }
      />
      <QueryFilters
        filters={[
          {
            key: "status",
            label: "Status",
            fallback: "active",
            options: [
              ["active", "Active"],
              ["revoked", "Revoked"],
              ["", "Any status"],
            ],
          },
          { key: "agentId", label: "Agent", placeholder: "agt_…" },
        ]}
      />
      <KeyTable paged={paged} onCreate={() => setQ({ create: "1" })} />
      <CreateKey
        open={q.get("create") === "1"}
        agentId={q.get("agentId") ?? undefined}
        onClose={() => {
          setQ({ create: undefined })
          paged.reload()
        }}
      />
    </>
  )
}

export function KeyTable({ paged, onCreate }: { paged: ReturnType<typeof usePaged<Key>>; onCreate: () => void }) {
  const [secret, setSecret] = useState<{ name: string; value: string } | undefined>()
  const rotate = useAction((id: string) => api.apiKeys.rotate.mutate({ id, overlapSeconds: 3600 }))
  const revoke = useAction((id: string) => api.apiKeys.revoke.mutate({ id }))
  return (
    <>
      <InlineError error={rotate.error ?? revoke.error} />
      <PagedTable
        caption="API keys"
        paged={paged}
        empty={
          <Empty
            title="No keys here"
            action={
              <Button variant="primary" needs="apikeys:write" onClick={onCreate}>
                Create a key
              </Button>
            }
          >
            Create a key for an agent or a service to call agentgov.
          </Empty>
        }
        columns={[
          {
            header: "Name",
            cell: (k) => (
              <div>
                <strong>{k.name}</strong>
                <div className="muted">
                  <code>{k.prefix}…</code>
                </div>
              </div>
            ),
          },
          {
            header: "Type",
            cell: (k) => (k.type === "agent" ? <Pill tone="info">agent {k.agentId}</Pill> : <Pill>workspace</Pill>),
          },
          { header: "Scopes", cell: (k) => <span className="muted">{k.scopes.length} scopes</span> },
          { header: "Status", cell: (k) => <Status value={k.status} /> },
          { header: "Last used", cell: (k) => <Time iso={k.lastUsedAt} /> },
          {
            header: "Actions",
            cell: (k) =>
              k.status === "active" ? (
                <span className="row">
                  <Button
                    size="sm"
                    aria-label={`Rotate ${k.name}`}
                    needs="apikeys:write"
                    onClick={async () => {
                      const r = await rotate.call(k.id)
                      if (r) {
                        setSecret({ name: r.name, value: r.apiKey })
                        paged.reload()
                      }
                    }}
                  >
                    Rotate
                  </Button>
                  <Button
                    size="sm"
                    variant="danger"
                    aria-label={`Revoke ${k.name}`}
                    needs="apikeys:write"
                    onClick={async () => {
                      if (!confirm(`Revoke ${k.name}? Calls with it fail at once.`)) return
                      if (await revoke.call(k.id)) paged.reload()
                    }}
                  >
                    Revoke
                  </Button>
                </span>
              ) : null,
          },
        ]}
      />
      <Dialog open={secret !== undefined} onClose={() => setSecret(undefined)} title="Key rotated">
        {secret ? <SecretOnce label={`New secret of ${secret.name}`} value={secret.value} /> : null}
        <p className="muted">The previous secret keeps working for one hour, then stops.</p>
      </Dialog>
    </>
  )
}

export function CreateKey({
  open,
  onClose,
  agentId,
}: {
  open: boolean
  onClose: () => void
  agentId?: string | undefined
}) {
  const [name, setName] = useState("")
  const [type, setType] = useState<"workspace" | "agent">(agentId ? "agent" : "workspace")
  const [agent, setAgent] = useState(agentId ?? "")
  const [scopes, setScopes] = useState<ReadonlySet<Scope>>(new Set(agentId ? AGENT_SCOPES : ["agents:read"]))
  const [created, setCreated] = useState<Outputs["apiKeys"]["create"] | undefined>()
  const can = useCan()
  const create = useAction(() =>
    api.apiKeys.create.mutate({
      name,
      type,
      scopes: [...scopes].filter((s) => (type !== "agent" || AGENT_KEY_SCOPES.includes(s)) && can(s)),
      ...(type === "agent" ? { agentId: agent } : {}),
    }),
  )
  const close = () => {
    setCreated(undefined)
    setName("")
    create.clear()
    onClose()
  }
  const field = create.error?.field
  // A link with `?create=1` opens nothing for a role that cannot make keys.
  return (
    <Dialog
      open={open && can("apikeys:write")}
      onClose={close}
      title={created ? "Key created" : "Create an API key"}
      footer={
        <DialogActions
          label="Create key"
          done={created !== undefined}
          onCancel={close}
          busy={create.pending}
          onAction={async () => {
            const k = await create.call()
            if (k) setCreated(k)
          }}
        />
      }
    >
      {created ? (
        <SecretOnce label={created.name} value={created.apiKey} />
      ) : (
        <>
          <TextInput
            label="Name"
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="billing-bot production"
            error={field === "name" ? create.error?.message : undefined}
          />
          <Select
            label="Type"
            value={type}
            onChange={(e) => setType(e.target.value as "workspace" | "agent")}
            options={[
              ["workspace", "Workspace key: acts for the workspace"],
              ["agent", "Agent key: bound to one agent"],
            ]}
          />
          {type === "agent" ? (
            <TextInput
              label="Agent"
              value={agent}
              onChange={(e) => setAgent(e.target.value)}
              placeholder="agt_…"
              error={field === "agentId" ? create.error?.message : undefined}
            />
          ) : null}
          <fieldset className="checks">
            <legend>Scopes</legend>
            {(type === "agent" ? AGENT_KEY_SCOPES : SCOPES).map((s) => (
              // A scope the signed-in role does not hold cannot be given to a key (the service refuses it).
              <Checkbox
                key={s}
                label={s}
                needs={s}
                checked={scopes.has(s)}
                onChange={(checked) => setScopes(toggled(scopes, s, checked))}
              />
            ))}
          </fieldset>
          {field?.startsWith("scopes") ? <p className="field-error">{create.error?.message}</p> : null}
          {field && field !== "name" && field !== "agentId" && !field.startsWith("scopes") ? (
            <InlineError error={create.error} />
          ) : null}
          {!field ? <InlineError error={create.error} /> : null}
        </>
      )}
    </Dialog>
  )
}
