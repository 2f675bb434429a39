import { useEffect, useState } from "react"
import { api } from "../api.ts"
import { useAction, useQuery } from "../hooks.ts"
import { Link, useTitle } from "../router.tsx"
import { TIERS, tierOf } from "../tiers.ts"
import { TimeChart } from "../ui/Chart.tsx"
import { Button, Card, Empty, ErrorState, InlineError, Loading, PageHeader, Pill, Time } from "../ui/index.tsx"

const HOUR = 3600

/** The workspace at a glance: agents by tier, decisions and denials over time, pending approvals, the chain. */
export default function Overview() {
  useTitle("Overview")
  const agents = useQuery(() => api.agents.list.query({ limit: 100 }), [])
  const decisions = useQuery(() => api.events.list.query({ type: ["policy.evaluated"], limit: 100 }), [])
  const approvals = useQuery(() => api.approvals.list.query({ status: ["pending"], limit: 5 }), [])
  const checkpoint = useQuery(() => api.events.checkpoint.query(), [])
  // Performance marks for the first-paint benchmark (tooling/bench/src/dashboardPaint.ts), once per document:
  // the first card with data rendered, then every card's data (or error) rendered.
  const queries = [agents, decisions, approvals, checkpoint]
  const anyData = queries.some((q) => q.data !== undefined)
  const allSettled = queries.every((q) => !q.loading)
  useEffect(() => {
    if (anyData) markOnce("overview-first-data")
  }, [anyData])
  useEffect(() => {
    if (allSettled) markOnce("overview-data")
  }, [allSettled])

  const tiers = TIERS.map(
    (t) => [t, (agents.data?.data ?? []).filter((a) => tierOf(a.trustScore) === t).length] as const,
  )
  const maxTier = Math.max(1, ...tiers.map(([, n]) => n))

  // Decisions per hour over the last 24 hours, from the latest 100 evaluations.
  const now = Math.floor(Date.now() / 1000 / HOUR) * HOUR
  const hours = Array.from({ length: 24 }, (_, i) => now - (23 - i) * HOUR)
  const allowed = hours.map(() => 0)
  const denied = hours.map(() => 0)
  for (const e of decisions.data?.data ?? []) {
    const i = hours.indexOf(Math.floor(Date.parse(e.timestamp) / 1000 / HOUR) * HOUR)
    if (i < 0) continue
    if (e.data.decision === "allow") allowed[i]!++
    else denied[i]!++
  }
  const totalDecisions = allowed.reduce((a, b) => a + b, 0) + denied.reduce((a, b) => a + b, 0)

  return (
    <>
      <PageHeader title="Overview" description="Your agents, their decisions and the state of the audit trail." />
      <div className="grid grid-4">
        <Card>
          <div className="stat">
            <span className="stat-label">Agents</span>
            <span className="stat-value" data-testid="stat-agents">
              {agents.data ? `${agents.data.data.length}${agents.data.meta.hasMore ? "+" : ""}` : "—"}
            </span>
          </div>
        </Card>
        <Card>
          <div className="stat">
            <span className="stat-label">Decisions (24 h, latest 100)</span>
            <span className="stat-value">{decisions.data ? totalDecisions : "—"}</span>
          </div>
        </Card>
        <Card>
          <div className="stat">
            <span className="stat-label">Pending approvals</span>
            <span className="stat-value">
              {approvals.data ? `${approvals.data.data.length}${approvals.data.meta.hasMore ? "+" : ""}` : "—"}
            </span>
          </div>
        </Card>
        <Card>
          <div className="stat">
            <span className="stat-label">Audit events</span>
            <span className="stat-value">{checkpoint.data ? checkpoint.data.treeSize.toLocaleString() : "—"}</span>
          </div>
        </Card>
      </div>
      <div className="grid grid-2">
        <Card title="Decisions and denials, last 24 hours">
          {decisions.error ? (
            <ErrorState error={decisions.error} retry={decisions.reload} />
          ) : decisions.loading ? (
            <Loading rows={6} />
          ) : totalDecisions === 0 ? (
            <Empty title="No decisions yet">Guard calls appear here as agents act.</Empty>
          ) : (
            <TimeChart
              label="Decisions per hour"
              summary={`${totalDecisions} decisions in the last 24 hours: ${denied.reduce((a, b) => a + b, 0)} denied or held for approval.`}
              x={hours}
              bars
              series={[
                { label: "Allowed", values: allowed, color: "--accent" },
                { label: "Denied or held", values: denied, color: "--danger" },
              ]}
            />
          )}
        </Card>
        <Card title="Agents by trust tier" actions={<Link to="/agents">All agents</Link>}>
          {agents.error ? (
            <ErrorState error={agents.error} retry={agents.reload} />
          ) : agents.loading ? (
            <Loading rows={6} />
          ) : agents.data?.data.length === 0 ? (
            <Empty title="No agents yet" action={<Link to="/agents?create=1">Register an agent</Link>}>
              Register an agent to start governing what it does.
            </Empty>
          ) : (
            <ul className="bars" aria-label="Agents by tier">
              {tiers.map(([t, n]) => (
                <li className="bar-row" key={t}>
                  <span>{t}</span>
                  <div className="bar-track" aria-hidden="true">
                    <div className={`bar-fill tier-${t}`} style={{ width: `${(n / maxTier) * 100}%` }} />
                  </div>
                  <span className="num">{n}</span>
                </li>
              ))}
            </ul>
          )}
        </Card>
      </div>
      <div className="grid grid-2">
        <Card title="Pending approvals" actions={<Link to="/approvals">Open the queue</Link>}>
          {approvals.error ? (
            <ErrorState error={approvals.error} retry={approvals.reload} />
          ) : approvals.loading ? (
            <Loading rows={3} />
          ) : approvals.data?.data.length === 0 ? (
            <Empty title="Nothing waits for a decision" />
          ) : (
            <ul className="feed" aria-label="Pending approvals">
              {approvals.data?.data.map((a) => (
                <li key={a.id} className="feed-item">
                  <code>{a.action}</code>
                  <span className="muted">{a.agentId}</span>
                  <Time iso={a.createdAt} />
                </li>
              ))}
            </ul>
          )}
        </Card>
        <Card title="Audit chain">
          {checkpoint.error ? (
            <ErrorState error={checkpoint.error} retry={checkpoint.reload} />
          ) : checkpoint.loading ? (
            <Loading rows={3} />
          ) : (
            <div className="stack">
              <p>
                Signed checkpoint at <strong>{checkpoint.data?.treeSize.toLocaleString()}</strong> events,{" "}
                <Time iso={checkpoint.data?.timestamp} />.
              </p>
              <p className="muted">
                Root <code>{checkpoint.data?.rootHash.slice(0, 16)}…</code> · key <code>{checkpoint.data?.kid}</code>
              </p>
              <ChainVerify />
            </div>
          )}
        </Card>
      </div>
    </>
  )
}

const markOnce = (name: string) => {
  if (performance.getEntriesByName(name, "mark").length === 0) performance.mark(name)
}

export function ChainVerify() {
  const verify = useAction(() => api.events.verify.mutate())
  const last = useLastVerification()
  return (
    <div className="row">
      <Button
        busy={verify.pending}
        onClick={async () => {
          const r = await verify.call()
          if (r) last.set(r)
        }}
      >
        Verify the chain
      </Button>
      {last.value ? (
        last.value.valid ? (
          <Pill tone="success">Valid · {last.value.checked.toLocaleString()} events checked</Pill>
        ) : (
          <Pill tone="danger">
            Broken at {last.value.firstBadSequence}: {last.value.reason}
          </Pill>
        )
      ) : null}
      <InlineError error={verify.error} />
    </div>
  )
}

type Verification = Awaited<ReturnType<typeof api.events.verify.mutate>>
const useLastVerification = () => {
  const [value, set] = useState<Verification | undefined>()
  return { value, set }
}
