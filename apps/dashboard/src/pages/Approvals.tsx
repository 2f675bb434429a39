import { useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, usePaged, useThrottled } from "../hooks.ts"
import { useEventStream } from "../live.ts"
import { useQueryState, useTitle } from "../router.tsx"
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
  TextArea,
  Time,
} from "../ui/index.tsx"

type Approval = Outputs["approvals"]["get"]

/** The least time between two reloads of the queue on live events (its first reload is at once). */
const LIVE_RELOAD_MS = 5_000

/** The approval queue: live (a new request or a decision elsewhere reloads it), decided with a reason. */
export default function Approvals() {
  useTitle("Approvals")
  const [q] = useQueryState()
  const status = (q.get("status") ?? "pending") as Approval["status"] | "all"
  const agentId = q.get("agentId") ?? ""
  const paged = usePaged(
    (p) => api.approvals.list.query({ ...p, status: [status], ...(agentId ? { agentId } : {}) }),
    [status, agentId],
  )
  // A new request or a decision elsewhere reloads the queue: at once, then at most every LIVE_RELOAD_MS in a flood.
  const reload = useThrottled(paged.reload, LIVE_RELOAD_MS)
  const live = useEventStream(["approval.*"], reload)
  const [deciding, setDeciding] = useState<{ a: Approval; decision: "approved" | "denied" } | undefined>()
  return (
    <>
      <PageHeader
        title="Approvals"
        description="Actions your policies hold for a human decision."
        actions={
          <Pill tone={live === "live" ? "success" : "neutral"}>
            <span className="live-dot" aria-hidden="true" /> {live === "live" ? "Live" : live}
          </Pill>
        }
      />
      <QueryFilters
        filters={[
          {
            key: "status",
            label: "Status",
            fallback: "pending",
            options: [
              ["pending", "Pending"],
              ["approved", "Approved"],
              ["denied", "Denied"],
              ["expired", "Expired"],
              ["all", "All"],
            ],
          },
          { key: "agentId", label: "Agent", placeholder: "agt_…" },
        ]}
      />
      <PagedTable
        caption="Approvals"
        paged={paged}
        empty={
          <Empty title={status === "pending" ? "The queue is empty" : "No approvals here"}>
            Requests appear here as soon as a policy holds an action.
          </Empty>
        }
        columns={[
          {
            header: "Action",
            cell: (a) => (
              <div>
                <code>{a.action}</code>
                {a.reason ? <div className="muted">{a.reason}</div> : null}
              </div>
            ),
          },
          { header: "Agent", cell: (a) => <code>{a.agentId}</code> },
          { header: "Status", cell: (a) => <Status value={a.status} /> },
          { header: "Requested", cell: (a) => <Time iso={a.createdAt} /> },
          { header: "Expires", cell: (a) => <Time iso={a.expiresAt} /> },
          {
            header: "Decision",
            cell: (a) =>
              a.status === "pending" ? (
                <span className="row">
                  <Button
                    size="sm"
                    variant="primary"
                    aria-label={`Approve ${a.action}`}
                    needs="approvals:manage"
                    onClick={() => setDeciding({ a, decision: "approved" })}
                  >
                    Approve
                  </Button>
                  <Button
                    size="sm"
                    variant="danger"
                    aria-label={`Deny ${a.action}`}
                    needs="approvals:manage"
                    onClick={() => setDeciding({ a, decision: "denied" })}
                  >
                    Deny
                  </Button>
                </span>
              ) : (
                <span className="muted">{a.decisionReason ?? "—"}</span>
              ),
          },
        ]}
      />
      {deciding ? (
        <Decide
          approval={deciding.a}
          decision={deciding.decision}
          onClose={() => setDeciding(undefined)}
          onDone={() => {
            setDeciding(undefined)
            paged.reload()
          }}
        />
      ) : null}
    </>
  )
}

function Decide({
  approval,
  decision,
  onClose,
  onDone,
}: {
  approval: Approval
  decision: "approved" | "denied"
  onClose: () => void
  onDone: () => void
}) {
  const [reason, setReason] = useState("")
  const decide = useAction(() =>
    api.approvals.decide.mutate({ id: approval.id, decision, ...(reason ? { reason } : {}) }),
  )
  return (
    <Dialog
      open
      onClose={onClose}
      title={decision === "approved" ? "Approve this action" : "Deny this action"}
      footer={
        <DialogActions
          label={decision === "approved" ? "Approve" : "Deny"}
          variant={decision === "approved" ? "primary" : "danger"}
          onCancel={onClose}
          busy={decide.pending}
          onAction={async () => {
            if (await decide.call()) onDone()
          }}
        />
      }
    >
      <p>
        <code>{approval.action}</code> by <code>{approval.agentId}</code>
      </p>
      <pre className="json">{JSON.stringify(approval.context, null, 2)}</pre>
      <TextArea
        label="Reason"
        hint="Recorded in the audit trail with your decision."
        value={reason}
        rows={3}
        onChange={(e) => setReason(e.target.value)}
        error={decide.error?.field === "reason" ? decide.error.message : undefined}
      />
      {decide.error?.field !== "reason" ? <InlineError error={decide.error} /> : null}
    </Dialog>
  )
}
