import { useState } from "react"
import { api } from "../api.ts"
import { useAction, usePaged, useQuery } from "../hooks.ts"
import { Link, useQueryState, useTitle } from "../router.tsx"
import { TimeChart } from "../ui/Chart.tsx"
import {
  Button,
  Card,
  Code,
  Dialog,
  DialogActions,
  Empty,
  ErrorState,
  InlineError,
  KeyValue,
  Loading,
  PagedTable,
  PageHeader,
  Pill,
  Status,
  Tabs,
  TextInput,
  Time,
} from "../ui/index.tsx"
import { CreateKey, KeyTable } from "./ApiKeys.tsx"

type Tab = "trust" | "badge" | "versions" | "keys" | "enforcement"

export default function AgentDetail({ params }: { params: Record<string, string> }) {
  const id = params.id!
  const agent = useQuery(() => api.agents.get.query({ id }), [id])
  useTitle(agent.data?.name ?? "Agent")
  const [q, setQ] = useQueryState()
  const tab = (q.get("tab") ?? "trust") as Tab
  const [suspendOpen, setSuspendOpen] = useState(false)
  const reinstate = useAction(async () => {
    const active = await api.enforcement.list.query({ agentId: id, type: ["suspension"], limit: 100 })
    for (const e of active.data.filter((e) => e.inForce))
      await api.enforcement.update.mutate({ id: e.id, resolution: "overturned", note: "reinstated from the dashboard" })
    agent.reload()
  })
  if (agent.error) return <ErrorState error={agent.error} retry={agent.reload} />
  if (!agent.data) return <Loading rows={8} />
  const a = agent.data
  return (
    <>
      <nav aria-label="Breadcrumb" className="muted">
        <Link to="/agents">Agents</Link> / {a.name}
      </nav>
      <PageHeader
        title={
          <span className="row">
            {a.name} <Status value={a.status} />
          </span>
        }
        description={a.description ?? undefined}
        actions={
          a.status === "suspended" ? (
            <Button
              variant="primary"
              busy={reinstate.pending}
              needs="enforcement:write"
              onClick={() => reinstate.call()}
            >
              Reinstate
            </Button>
          ) : a.status === "active" ? (
            <Button variant="danger" needs="enforcement:write" onClick={() => setSuspendOpen(true)}>
              Suspend
            </Button>
          ) : null
        }
      />
      <InlineError error={reinstate.error} />
      {q.get("registered") === "1" ? (
        <div className="notice row" role="status">
          Agent registered. Give it a key so it can call the guard.
          <Button
            size="sm"
            variant="primary"
            needs="apikeys:write"
            onClick={() => setQ({ tab: "keys", registered: undefined, create: "1" })}
          >
            Create a key for this agent
          </Button>
        </div>
      ) : null}
      <Card>
        <KeyValue
          items={[
            ["ID", <code key="id">{a.id}</code>],
            ["Trust score", a.trustScore],
            ["Current version", a.currentVersion ?? "—"],
            ["Labels", a.labels.join(", ") || "—"],
            ["Registered", <Time key="c" iso={a.createdAt} />],
            ["Updated", <Time key="u" iso={a.updatedAt} />],
          ]}
        />
      </Card>
      <Tabs<Tab>
        label="Agent sections"
        value={tab}
        onChange={(t) => setQ({ tab: t })}
        tabs={[
          ["trust", "Trust"],
          ["badge", "Badge"],
          ["versions", "Versions"],
          ["keys", "Keys"],
          ["enforcement", "Enforcements"],
        ]}
      />
      <div role="tabpanel" aria-label={tab}>
        {tab === "trust" ? <Trust id={id} /> : null}
        {tab === "badge" ? <Badge id={id} /> : null}
        {tab === "versions" ? <Versions id={id} /> : null}
        {tab === "keys" ? (
          <AgentKeys
            id={id}
            creating={q.get("create") === "1"}
            setCreating={(c) => setQ({ create: c ? "1" : undefined })}
          />
        ) : null}
        {tab === "enforcement" ? <AgentEnforcements id={id} /> : null}
      </div>
      <Suspend
        open={suspendOpen}
        agentId={id}
        onClose={() => setSuspendOpen(false)}
        onDone={() => {
          setSuspendOpen(false)
          agent.reload()
        }}
      />
    </>
  )
}

function Suspend({
  open,
  agentId,
  onClose,
  onDone,
}: {
  open: boolean
  agentId: string
  onClose: () => void
  onDone: () => void
}) {
  const [reason, setReason] = useState("")
  const suspend = useAction(() => api.enforcement.create.mutate({ type: "suspension", agentId, reason }))
  return (
    <Dialog
      open={open}
      onClose={onClose}
      title="Suspend this agent"
      footer={
        <DialogActions
          label="Suspend agent"
          variant="danger"
          onCancel={onClose}
          busy={suspend.pending}
          onAction={async () => {
            if (await suspend.call()) onDone()
          }}
        />
      }
    >
      <p className="muted">Every guard call of a suspended agent is denied until it is reinstated.</p>
      <TextInput
        label="Reason"
        value={reason}
        onChange={(e) => setReason(e.target.value)}
        error={suspend.error?.field === "reason" ? suspend.error.message : undefined}
      />
      {suspend.error?.field !== "reason" ? <InlineError error={suspend.error} /> : null}
    </Dialog>
  )
}

function Trust({ id }: { id: string }) {
  const score = useQuery(() => api.trust.score.query({ agentId: id }), [id])
  const rep = useQuery(() => api.trust.reputation.query({ id, limit: 100 }), [id])
  if (score.error) return <ErrorState error={score.error} retry={score.reload} />
  if (!score.data) return <Loading />
  const history = [...(rep.data?.history ?? [])].sort((a, b) => Date.parse(a.at) - Date.parse(b.at))
  return (
    <div className="grid grid-2">
      <Card title="Score history">
        {rep.error ? (
          <ErrorState error={rep.error} retry={rep.reload} />
        ) : !rep.data ? (
          <Loading />
        ) : history.length < 2 ? (
          <Empty title="Not enough history yet">The score is recomputed as the agent acts.</Empty>
        ) : (
          <TimeChart
            label="Trust score over time"
            summary={`From ${history[0]!.score} to ${history.at(-1)!.score} over ${history.length} points.`}
            x={history.map((h) => Date.parse(h.at) / 1000)}
            series={[{ label: "Score", values: history.map((h) => h.score), color: "--accent" }]}
          />
        )}
      </Card>
      <Card
        title={
          <span className="row">
            Score {score.data.score} <Pill tone="accent">{score.data.tier}</Pill>
          </span>
        }
      >
        <ul className="bars" aria-label="Score components">
          {score.data.components.map((c) => (
            <li key={c.name} className="bar-row">
              <span title={c.name}>{c.name.replaceAll("_", " ")}</span>
              <div className="bar-track" aria-hidden="true">
                <div className="bar-fill" style={{ width: `${Math.max(0, Math.min(100, c.score / 10))}%` }} />
              </div>
              <span className="num" title={`weight ${c.weight}`}>
                {Math.round(c.score)}
              </span>
            </li>
          ))}
        </ul>
        <p className="muted">
          Computed <Time iso={score.data.computedAt} /> · policy {score.data.policyVersion}
        </p>
      </Card>
    </div>
  )
}

function Badge({ id }: { id: string }) {
  const status = useQuery(() => api.trust.badgeStatus.query({ agentId: id }), [id])
  const url = `${location.origin}/api/v1/badge/${id}`
  const snippet = `<a href="${url}/verify"><img src="${url}" alt="agentgov trust badge"></a>`
  return (
    <Card title="Trust badge">
      <div className="stack">
        <div className="badge-preview">
          <img src={`/api/v1/badge/${id}`} alt="The agent's trust badge" height={20} />
          {status.data ? (
            status.data.valid ? (
              <Pill tone="success">valid · {status.data.tier}</Pill>
            ) : (
              <Pill>{status.data.reason?.replaceAll("_", " ") ?? "not verified"}</Pill>
            )
          ) : null}
        </div>
        <p className="muted">A badge exists from the bronze tier up, for an active agent. Embed it:</p>
        <Code>{snippet}</Code>
      </div>
    </Card>
  )
}

function Versions({ id }: { id: string }) {
  const paged = usePaged((p) => api.agents.versions.list.query({ id, ...p }), [id])
  const [version, setVersion] = useState("")
  const add = useAction(() => api.agents.versions.create.mutate({ id, version }))
  return (
    <div className="stack">
      <div className="row">
        <TextInput
          label="New version"
          value={version}
          onChange={(e) => setVersion(e.target.value)}
          placeholder="1.4.0"
          error={add.error?.field === "version" ? add.error.message : undefined}
        />
        <Button
          busy={add.pending}
          needs="agents:write"
          onClick={async () => {
            if (await add.call()) {
              setVersion("")
              paged.reload()
            }
          }}
        >
          Record version
        </Button>
      </div>
      <PagedTable
        caption="Versions"
        paged={paged}
        empty={<Empty title="No versions recorded">Record a version when you deploy a new build of the agent.</Empty>}
        columns={[
          { header: "Version", cell: (v) => <code>{v.version}</code> },
          { header: "Description", cell: (v) => v.description ?? <span className="muted">—</span> },
          { header: "Recorded", cell: (v) => <Time iso={v.createdAt} /> },
        ]}
      />
    </div>
  )
}

function AgentKeys({
  id,
  creating,
  setCreating,
}: {
  id: string
  creating: boolean
  setCreating: (c: boolean) => void
}) {
  const paged = usePaged((p) => api.apiKeys.list.query({ ...p, agentId: id }), [id])
  return (
    <div className="stack">
      <div className="row">
        <Button variant="primary" needs="apikeys:write" onClick={() => setCreating(true)}>
          Create a key for this agent
        </Button>
      </div>
      <KeyTable paged={paged} onCreate={() => setCreating(true)} />
      <CreateKey
        open={creating}
        agentId={id}
        onClose={() => {
          setCreating(false)
          paged.reload()
        }}
      />
    </div>
  )
}

function AgentEnforcements({ id }: { id: string }) {
  const paged = usePaged((p) => api.enforcement.list.query({ ...p, agentId: id, status: ["all"] }), [id])
  return (
    <PagedTable
      caption="Enforcements"
      paged={paged}
      empty={<Empty title="No enforcement">This agent has never been warned, throttled or suspended.</Empty>}
      columns={[
        { header: "Type", cell: (e) => <Status value={e.type} /> },
        { header: "Status", cell: (e) => <Status value={e.status} /> },
        { header: "Reason", cell: (e) => e.reason },
        { header: "Since", cell: (e) => <Time iso={e.createdAt} /> },
        { header: "Until", cell: (e) => (e.expiresAt ? <Time iso={e.expiresAt} /> : <span className="muted">—</span>) },
      ]}
    />
  )
}
