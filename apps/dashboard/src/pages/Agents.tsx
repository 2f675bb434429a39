import { useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, usePaged } from "../hooks.ts"
import { Link, navigate, useQueryState, useTitle } from "../router.tsx"
import { useCan } from "../session.tsx"
import { tierOf } from "../tiers.ts"
import {
  Button,
  Dialog,
  DialogActions,
  Empty,
  InlineError,
  PagedTable,
  PageHeader,
  Pill,
  QueryFilters,
  Status,
  TextInput,
  Time,
} from "../ui/index.tsx"

type Agent = Outputs["agents"]["get"]

export default function Agents() {
  useTitle("Agents")
  const [q, setQ] = useQueryState()
  const status = (q.get("status") ?? "") as "" | Agent["status"]
  const namePrefix = q.get("name") ?? ""
  const label = q.get("label") ?? ""
  const paged = usePaged(
    (p) =>
      api.agents.list.query({
        ...p,
        ...(status ? { status } : {}),
        ...(namePrefix ? { namePrefix } : {}),
        ...(label ? { label } : {}),
      }),
    [status, namePrefix, label],
  )
  const creating = q.get("create") === "1"
  return (
    <>
      <PageHeader
        title="Agents"
        description="Every agent registered in this workspace, its status and trust."
        actions={
          <Button variant="primary" needs="agents:write" onClick={() => setQ({ create: "1" })}>
            Register an agent
          </Button>
        }
      />
      <QueryFilters
        filters={[
          { key: "name", label: "Name starts with", placeholder: "billing-" },
          { key: "label", label: "Label", placeholder: "prod" },
          {
            key: "status",
            label: "Status",
            options: [
              ["", "Any status"],
              ["active", "Active"],
              ["suspended", "Suspended"],
              ["deregistered", "Deregistered"],
            ],
          },
        ]}
      />
      <PagedTable
        caption="Agents"
        paged={paged}
        empty={
          <Empty
            title={status || namePrefix || label ? "No agent matches these filters" : "No agents yet"}
            action={
              <Button variant="primary" needs="agents:write" onClick={() => setQ({ create: "1" })}>
                Register an agent
              </Button>
            }
          >
            An agent is any program that acts on your behalf: register it to govern what it does.
          </Empty>
        }
        columns={[
          {
            header: "Name",
            cell: (a) => (
              <div>
                <Link to={`/agents/${a.id}`}>
                  <strong>{a.name}</strong>
                </Link>
                <div className="muted">
                  <code>{a.id}</code>
                </div>
              </div>
            ),
          },
          { header: "Status", cell: (a) => <Status value={a.status} /> },
          {
            header: "Trust",
            cell: (a) => (
              <span className="row">
                <span className="mono">{a.trustScore}</span> <Pill tone="accent">{tierOf(a.trustScore)}</Pill>
              </span>
            ),
          },
          {
            header: "Labels",
            cell: (a) =>
              a.labels.length ? (
                <span className="row">
                  {a.labels.map((l) => (
                    <Pill key={l}>{l}</Pill>
                  ))}
                </span>
              ) : (
                <span className="muted">—</span>
              ),
          },
          { header: "Version", cell: (a) => a.currentVersion ?? <span className="muted">—</span> },
          { header: "Registered", cell: (a) => <Time iso={a.createdAt} /> },
        ]}
      />
      <CreateAgent open={creating} onClose={() => setQ({ create: undefined })} />
    </>
  )
}

function CreateAgent({ open, onClose }: { open: boolean; onClose: () => void }) {
  const [name, setName] = useState("")
  const [description, setDescription] = useState("")
  const [labels, setLabels] = useState("")
  const create = useAction(() =>
    api.agents.create.mutate({
      // The service refuses a name with spaces at either end (422): a name typed with one is meant without it.
      name: name.trim(),
      ...(description ? { description } : {}),
      labels: labels
        .split(",")
        .map((l) => l.trim())
        .filter(Boolean),
    }),
  )
  const field = create.error?.field
  // A link with `?create=1` opens nothing for a role that cannot register agents.
  const can = useCan()
  return (
    <Dialog
      open={open && can("agents:write")}
      onClose={onClose}
      title="Register an agent"
      footer={
        <DialogActions
          label="Register"
          onCancel={onClose}
          busy={create.pending}
          onAction={async () => {
            const agent = await create.call()
            if (agent) navigate(`/agents/${agent.id}?registered=1`)
          }}
        />
      }
    >
      <TextInput
        label="Name"
        value={name}
        onChange={(e) => setName(e.target.value)}
        error={field === "name" ? create.error?.message : undefined}
        placeholder="billing-bot"
        autoFocus
      />
      <TextInput
        label="Description"
        value={description}
        onChange={(e) => setDescription(e.target.value)}
        error={field === "description" ? create.error?.message : undefined}
      />
      <TextInput
        label="Labels"
        hint="Comma-separated; policies can target agents by label."
        value={labels}
        onChange={(e) => setLabels(e.target.value)}
        error={field?.startsWith("labels") ? create.error?.message : undefined}
      />
      {field && !["name", "description"].includes(field) && !field.startsWith("labels") ? (
        <InlineError error={create.error} />
      ) : !field ? (
        <InlineError error={create.error} />
      ) : null}
    </Dialog>
  )
}
