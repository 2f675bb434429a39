import { useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, usePaged } from "../hooks.ts"
import { Link, useQueryState, useTitle } from "../router.tsx"
import {
  Button,
  Dialog,
  Empty,
  InlineError,
  PagedTable,
  PageHeader,
  QueryFilters,
  Status,
  TextArea,
  Time,
} from "../ui/index.tsx"

type Enforcement = Outputs["enforcement"]["get"]
type EStatus = "active" | "expired" | "all" | "appealed" | "resolved"
type EType = Enforcement["type"]

/** Warnings, throttles, suspensions and revocations, and the appeals against them. */
export default function EnforcementPage() {
  useTitle("Enforcement")
  const [q] = useQueryState()
  const status = (q.get("status") ?? "active") as EStatus
  const type = (q.get("type") ?? "") as EType | ""
  const agentId = q.get("agentId") ?? ""
  const paged = usePaged(
    (p) =>
      api.enforcement.list.query({
        ...p,
        status: [status],
        ...(type ? { type: [type] } : {}),
        ...(agentId ? { agentId } : {}),
      }),
    [status, type, agentId],
  )
  const [resolving, setResolving] = useState<Enforcement | undefined>()
  return (
    <>
      <PageHeader
        title="Enforcement and appeals"
        description="What agents are held to, why, and the appeals they made."
      />
      <QueryFilters
        filters={[
          {
            key: "status",
            label: "Status",
            fallback: "active",
            options: [
              ["active", "In force"],
              ["appealed", "Appealed"],
              ["resolved", "Resolved"],
              ["expired", "Expired"],
              ["all", "All"],
            ],
          },
          {
            key: "type",
            label: "Type",
            options: [
              ["", "Any type"],
              ["warning", "Warning"],
              ["throttle", "Throttle"],
              ["suspension", "Suspension"],
              ["revocation", "Revocation"],
            ],
          },
          { key: "agentId", label: "Agent", placeholder: "agt_…" },
        ]}
      />
      <PagedTable
        caption="Enforcements"
        paged={paged}
        empty={<Empty title="Nothing here">No enforcement matches these filters.</Empty>}
        columns={[
          { header: "Type", cell: (e) => <Status value={e.type} /> },
          { header: "Agent", cell: (e) => <Link to={`/agents/${e.agentId}`}>{e.agentId}</Link> },
          { header: "Reason", cell: (e) => e.reason },
          { header: "Status", cell: (e) => <Status value={e.status} /> },
          { header: "Appeal", cell: (e) => e.appealReason ?? <span className="muted">—</span> },
          { header: "Since", cell: (e) => <Time iso={e.createdAt} /> },
          {
            header: "",
            cell: (e) =>
              e.status === "active" || e.status === "appealed" ? (
                <Button size="sm" needs="enforcement:write" onClick={() => setResolving(e)}>
                  Resolve
                </Button>
              ) : e.resolution ? (
                <span className="muted">{e.resolution}</span>
              ) : null,
          },
        ]}
      />
      {resolving ? (
        <Resolve
          e={resolving}
          onClose={() => setResolving(undefined)}
          onDone={() => {
            setResolving(undefined)
            paged.reload()
          }}
        />
      ) : null}
    </>
  )
}

function Resolve({ e, onClose, onDone }: { e: Enforcement; onClose: () => void; onDone: () => void }) {
  const [note, setNote] = useState("")
  const resolve = useAction((resolution: "upheld" | "overturned") =>
    api.enforcement.update.mutate({ id: e.id, resolution, ...(note ? { note } : {}) }),
  )
  return (
    <Dialog
      open
      onClose={onClose}
      title={`Resolve the ${e.type}`}
      footer={
        <>
          <Button onClick={onClose}>Cancel</Button>
          <Button busy={resolve.pending} onClick={async () => (await resolve.call("upheld")) && onDone()}>
            Uphold
          </Button>
          <Button
            variant="primary"
            busy={resolve.pending}
            onClick={async () => (await resolve.call("overturned")) && onDone()}
          >
            Overturn
          </Button>
        </>
      }
    >
      <p>{e.reason}</p>
      {e.appealReason ? (
        <p>
          Appeal: <em>{e.appealReason}</em>
        </p>
      ) : null}
      <TextArea label="Note" rows={3} value={note} onChange={(ev) => setNote(ev.target.value)} />
      <InlineError error={resolve.error} />
    </Dialog>
  )
}
