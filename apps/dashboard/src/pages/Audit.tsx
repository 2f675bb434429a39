import { useState } from "react"
import { api, download, type Outputs } from "../api.ts"
import { useAction, usePaged, useQuery } from "../hooks.ts"
import { type LiveEvent, useEventStream } from "../live.ts"
import { useQueryState, useTitle } from "../router.tsx"
import {
  Button,
  Card,
  Dialog,
  Empty,
  ErrorState,
  InlineError,
  KeyValue,
  Loading,
  PagedTable,
  PageHeader,
  Pill,
  QueryFilters,
  Time,
} from "../ui/index.tsx"
import { ChainVerify } from "./Overview.tsx"

type Event = Outputs["events"]["list"]["data"][number]

const summary = (e: { type: string; data: Readonly<Record<string, unknown>> }) => {
  const d = e.data
  if (typeof d.action === "string") return `${d.action}${typeof d.decision === "string" ? ` → ${d.decision}` : ""}`
  if (typeof d.agentName === "string") return d.agentName
  if (typeof d.name === "string") return d.name
  return ""
}

/** The audit trail: a live tail, the history with filters, each event with its inclusion proof, verify, export. */
export default function Audit() {
  useTitle("Audit trail")
  const [q] = useQueryState()
  const type = q.get("type") ?? ""
  const agentId = q.get("agentId") ?? ""
  const since = q.get("since") ?? ""
  const paged = usePaged(
    (p) =>
      api.events.list.query({
        ...p,
        ...(type ? { type: type.split(",").map((t) => t.trim()) } : {}),
        ...(agentId ? { agentId } : {}),
        // A `since` that is no time (a link edited by hand) goes as it is: the service's refusal names the field.
        ...(since ? { since: Number.isNaN(Date.parse(since)) ? since : new Date(since).toISOString() } : {}),
      }),
    [type, agentId, since],
  )
  const [tail, setTail] = useState<ReadonlyArray<LiveEvent>>([])
  const [paused, setPaused] = useState(false)
  const live = useEventStream(
    type ? type.split(",").map((t) => t.trim()) : [],
    (e) => {
      if (agentId && e.agentId !== agentId) return
      setTail((t) => [e, ...t].slice(0, 50))
    },
    !paused,
  )
  const [open, setOpen] = useState<string | undefined>()
  const exporting = useAction(async () => {
    const bundle = await api.events.export.query()
    download(
      `audit-bundle-${new Date().toISOString().slice(0, 19)}.json`,
      JSON.stringify(bundle, null, 2),
      "application/json",
    )
  })
  return (
    <>
      <PageHeader
        title="Audit trail"
        description="Every decision and change, hash-chained and signed. Verify it here or offline with agentgov-verify."
        actions={
          <Button busy={exporting.pending} onClick={() => exporting.call()}>
            Export bundle
          </Button>
        }
      />
      <InlineError error={exporting.error} />
      <Card title="Chain">
        <ChainVerify />
      </Card>
      <QueryFilters
        filters={[
          {
            key: "type",
            label: "Event types",
            placeholder: "policy.*",
            hint: "Comma-separated; prefix.* matches a namespace.",
          },
          { key: "agentId", label: "Agent", placeholder: "agt_…" },
          { key: "since", label: "Since", type: "datetime-local" },
        ]}
      />
      <Card
        title={
          <span className="row">
            Live tail{" "}
            <Pill tone={live === "live" && !paused ? "success" : "neutral"}>
              <span className="live-dot" aria-hidden="true" /> {paused ? "paused" : live}
            </Pill>
          </span>
        }
        actions={
          <Button size="sm" onClick={() => setPaused((p) => !p)}>
            {paused ? "Resume" : "Pause"}
          </Button>
        }
      >
        {tail.length === 0 ? (
          <p className="muted">New events appear here as they are written.</p>
        ) : (
          <ul className="feed" aria-label="Live events" aria-live="polite" data-testid="live-tail">
            {tail.map((e) => (
              <li key={e.id} className="feed-item">
                <span>
                  <code>{e.type}</code> {/\.(denied|violated)$/.test(e.type) ? <Pill tone="danger">denied</Pill> : null}
                </span>
                <span>{summary(e)}</span>
                <Button
                  size="sm"
                  variant="ghost"
                  onClick={() => setOpen(e.id)}
                  aria-label={`Open event #${e.sequence}`}
                >
                  #{e.sequence}
                </Button>
              </li>
            ))}
          </ul>
        )}
      </Card>
      <PagedTable<Event>
        caption="Events"
        paged={paged}
        empty={<Empty title="No events match">Change the filters, or wait for your agents to act.</Empty>}
        columns={[
          { header: "#", cell: (e) => <span className="mono">{e.sequence}</span>, className: "num" },
          { header: "Type", cell: (e) => <code>{e.type}</code> },
          { header: "Summary", cell: (e) => summary(e) || <span className="muted">—</span> },
          { header: "Agent", cell: (e) => (e.agentId ? <code>{e.agentId}</code> : <span className="muted">—</span>) },
          { header: "Actor", cell: (e) => <span className="muted">{e.actor.type}</span> },
          { header: "When", cell: (e) => <Time iso={e.timestamp} /> },
          {
            header: "",
            cell: (e) => (
              <Button
                size="sm"
                variant="ghost"
                onClick={() => setOpen(e.id)}
                aria-label={`Details of event ${e.sequence}`}
              >
                Details
              </Button>
            ),
          },
        ]}
      />
      {open ? <EventDetail id={open} onClose={() => setOpen(undefined)} /> : null}
    </>
  )
}

function EventDetail({ id, onClose }: { id: string; onClose: () => void }) {
  const event = useQuery(() => api.events.get.query({ id, proof: true }), [id])
  const e = event.data
  const proof = e && "proof" in e ? e.proof : undefined
  return (
    <Dialog open onClose={onClose} title="Event">
      {event.error ? <ErrorState error={event.error} retry={event.reload} /> : null}
      {!e ? (
        !event.error ? (
          <Loading />
        ) : null
      ) : (
        <>
          <KeyValue
            items={[
              ["Type", <code key="t">{e.type}</code>],
              ["Sequence", e.sequence],
              ["When", <Time key="w" iso={e.timestamp} />],
              ["Actor", `${e.actor.type}${e.actor.id ? ` ${e.actor.id}` : ""}`],
            ]}
          />
          <pre className="json">{JSON.stringify(e.data, null, 2)}</pre>
          <h3>Hashes</h3>
          <KeyValue
            items={[
              ["Hash", <code key="h">{e.hash}</code>],
              ["Previous", <code key="p">{e.prevHash}</code>],
            ]}
          />
          {proof ? (
            <>
              <h3>
                Inclusion proof <Pill tone="success">in the signed tree of {proof.treeSize}</Pill>
              </h3>
              <pre className="json">{JSON.stringify(proof, null, 2)}</pre>
            </>
          ) : null}
        </>
      )}
    </Dialog>
  )
}
