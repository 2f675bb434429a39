import { type ReactNode, useEffect, useState } from "react"
import { api, takeOverview } from "../api.ts"
import { useAction, useQuery } from "../hooks.ts"
import { Link, useTitle } from "../router.tsx"
import { useSession } from "../session.tsx"
import { TIERS } from "../tiers.ts"
import { TimeChart } from "../ui/Chart.tsx"
import { Button, Card, Empty, ErrorState, InlineError, Loading, PageHeader, Pill, Time } from "../ui/index.tsx"

/** The workspace at a glance, counted workspace-wide: agents by tier, decisions and denials over time, pending approvals, the chain. */
export default function Overview() {
  useTitle("Overview")
  const { workspaceId } = useSession()
  // One call (`overview.get`), usually already under way: main.tsx asks for it as the app loads, beside the
  // session read, for the workspace remembered from the last visit.
  const overview = useQuery(() => takeOverview(workspaceId) ?? api.overview.get.query(), [])
  // Performance marks for the first-paint benchmark (tooling/bench/src/dashboardPaint.ts), once per document:
  // every card's data (or error) rendered; the cards share one answer, so the first card's is the same moment.
  useEffect(() => {
    if (!overview.loading) {
      markOnce("overview-first-data")
      markOnce("overview-data")
    }
  }, [overview.loading])

  const data = overview.data
  const agents = data?.agents
  const tiers = TIERS.map((t) => [t, agents?.byTier.find((b) => b.tier === t)?.count ?? 0] as const)
  const maxTier = Math.max(1, ...tiers.map(([, n]) => n))
  const hours = (data?.decisions.hours ?? []).map((h) => Date.parse(h.hour) / 1000)
  const allowed = (data?.decisions.hours ?? []).map((h) => h.allowed)
  const denied = (data?.decisions.hours ?? []).map((h) => h.denied)
  const totalDenied = denied.reduce((a, b) => a + b, 0)
  const totalDecisions = allowed.reduce((a, b) => a + b, 0) + totalDenied
  const approvals = data?.approvals
  const chain = data?.chain
  const state = (rows: number, card: () => ReactNode) =>
    overview.error ? (
      <ErrorState error={overview.error} retry={overview.reload} />
    ) : overview.loading ? (
      <Loading rows={rows} />
    ) : (
      card()
    )
  const stat = (n: number | undefined) => (n === undefined ? "—" : n.toLocaleString())

  return (
    <>
      <PageHeader title="Overview" description="Your agents, their decisions and the state of the audit trail." />
      <div className="grid grid-4">
        <Card>
          <div className="stat">
            <span className="stat-label">Agents</span>
            <span className="stat-value" data-testid="stat-agents">
              {stat(agents?.total)}
            </span>
          </div>
        </Card>
        <Card>
          <div className="stat">
            <span className="stat-label">Decisions (24 h)</span>
            <span className="stat-value">{stat(data ? totalDecisions : undefined)}</span>
          </div>
        </Card>
        <Card>
          <div className="stat">
            <span className="stat-label">Pending approvals</span>
            <span className="stat-value">{stat(approvals?.pending)}</span>
          </div>
        </Card>
        <Card>
          <div className="stat">
            <span className="stat-label">Audit events</span>
            <span className="stat-value">{stat(chain?.events)}</span>
          </div>
        </Card>
      </div>
      <div className="grid grid-2">
        <Card title="Decisions and denials, last 24 hours">
          {state(6, () =>
            totalDecisions === 0 ? (
              <Empty title="No decisions yet">Guard calls appear here as agents act.</Empty>
            ) : (
              <TimeChart
                label="Decisions per hour"
                summary={`${totalDecisions.toLocaleString()} decisions in the last 24 hours: ${totalDenied.toLocaleString()} denied or held for approval.`}
                x={hours}
                bars
                series={[
                  { label: "Allowed", values: allowed, color: "--accent" },
                  { label: "Denied or held", values: denied, color: "--danger" },
                ]}
              />
            ),
          )}
        </Card>
        <Card title="Agents by trust tier" actions={<Link to="/agents">All agents</Link>}>
          {state(6, () =>
            !agents ? (
              <Empty title="Agents are not in your role's view" />
            ) : agents.total === 0 ? (
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
                    <span className="num">{n.toLocaleString()}</span>
                  </li>
                ))}
              </ul>
            ),
          )}
        </Card>
      </div>
      <div className="grid grid-2">
        <Card title="Pending approvals" actions={<Link to="/approvals">Open the queue</Link>}>
          {state(3, () =>
            !approvals ? (
              <Empty title="Approvals are not in your role's view" />
            ) : approvals.latest.length === 0 ? (
              <Empty title="Nothing waits for a decision" />
            ) : (
              <ul className="feed" aria-label="Pending approvals">
                {approvals.latest.map((a) => (
                  <li key={a.id} className="feed-item">
                    <code>{a.action}</code>
                    <span className="muted">{a.agentId}</span>
                    <Time iso={a.createdAt} />
                  </li>
                ))}
              </ul>
            ),
          )}
        </Card>
        <Card title="Audit chain">
          {state(3, () => (
            <div className="stack">
              {chain?.checkpoint ? (
                <>
                  <p>
                    Signed checkpoint at <strong>{chain.checkpoint.treeSize.toLocaleString()}</strong> of{" "}
                    {chain.events.toLocaleString()} events, <Time iso={chain.checkpoint.timestamp} />.
                  </p>
                  <p className="muted">
                    Root <code>{chain.checkpoint.rootHash.slice(0, 16)}…</code> · key{" "}
                    <code>{chain.checkpoint.kid}</code>
                  </p>
                </>
              ) : (
                <p>No checkpoint signed yet ({stat(chain?.events)} events).</p>
              )}
              <ChainVerify initial={chain?.lastVerification ?? undefined} />
            </div>
          ))}
        </Card>
      </div>
    </>
  )
}

const markOnce = (name: string) => {
  if (performance.getEntriesByName(name, "mark").length === 0) performance.mark(name)
}

type LastVerification = Pick<Verification, "valid" | "checked" | "verifiedAt"> & {
  readonly firstBadSequence?: number | null | undefined
  readonly reason?: string | null | undefined
}

/** Verifies the chain on demand; shows the last verification, the one recorded before (`initial`) until then. */
export function ChainVerify({ initial }: { initial?: LastVerification | undefined } = {}) {
  const verify = useAction(() => api.events.verify.mutate())
  const last = useLastVerification(initial)
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
const useLastVerification = (initial?: LastVerification) => {
  const [value, set] = useState<LastVerification | undefined>(initial)
  return { value, set }
}
