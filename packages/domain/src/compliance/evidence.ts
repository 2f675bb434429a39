/**
 * What a report reads from the store: the counts over the period (streamed by SQL, never loading the
 * trail) and the state of the records the controls judge.
 */
import { type Counted, CountedBuilder, EVENT_METRICS, type EventMetric, type Metrics } from "@agentgov/verifier"
import { Effect } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import { MAX_EXPORT_EVENTS } from "../audit/Checkpoints.ts"
import { SCOPES } from "../auth/scopes.ts"
import type { Facts } from "./controls/Control.ts"

export interface ReportScope {
  readonly workspaceId: string
  readonly agentId: string | null
  readonly from: string
  readonly to: string
  /** The checkpoint's tree size: nothing beyond it is counted. */
  readonly treeSize: number
}

/** Every scope a workspace key can hold (`workspaces:admin` is the operator's, across workspaces). */
const WORKSPACE_SCOPES = SCOPES.filter((s) => s !== "workspaces:admin")

/** Sequences read per round trip while listing the counted events (at most this many rows). */
const PAGE = 10_000
/** Buckets of the activity chart. */
const BUCKETS = 30

const literal = (s: string) => `'${s.replaceAll("'", "''")}'`

/** The SQL condition of a metric, field by field as `metricMatches` judges it (types included). */
const conditionOf = (m: EventMetric): string => {
  const parts: string[] = []
  if (m.types !== undefined) parts.push(`type IN (${m.types.map(literal).join(", ")})`)
  for (const [field, c] of Object.entries(m.where ?? {})) {
    const value = `data->${literal(field)}`
    if (c === null) parts.push(`(${value} IS NULL OR json_typeof(${value}) = 'null')`)
    else if (typeof c === "object") parts.push(`(${value} IS NOT NULL AND json_typeof(${value}) <> 'null')`)
    else
      parts.push(
        `(json_typeof(${value}) = ${literal(typeof c === "boolean" ? "boolean" : "string")} AND data->>${literal(field)} = ${literal(String(c))})`,
      )
  }
  return parts.length === 0 ? "true" : parts.join(" AND ")
}

/** One pass over the period: every metric as a FILTER of one aggregate (the metric rules are constants). */
const METRICS_SELECT = EVENT_METRICS.map((m, i) => `count(*) FILTER (WHERE ${conditionOf(m)})::int AS m${i}`).join(
  ",\n  ",
)

/** The condition of a report's events: the workspace's (the agent's and workspace-wide ones) in the period. */
const periodOf = (sql: SqlClient.SqlClient, scope: Omit<ReportScope, "treeSize">) =>
  sql`workspace_id = ${scope.workspaceId} AND ts >= ${scope.from}::timestamptz AND ts < ${scope.to}::timestamptz
      ${scope.agentId === null ? sql`` : sql`AND (agent_id = ${scope.agentId} OR agent_id IS NULL)`}`

/** Whether any event of sequence `after + 1..upto` falls in the report's scope. */
export const anyInScope = (
  sql: SqlClient.SqlClient,
  scope: Omit<ReportScope, "treeSize"> & { readonly after: number; readonly upto: number },
) =>
  sql<{ n: number }>`SELECT count(*)::int AS n FROM (SELECT 1 FROM events WHERE ${periodOf(sql, scope)}
      AND sequence > ${scope.after} AND sequence <= ${scope.upto} LIMIT 1) x`.pipe(
    Effect.map((rows) => Number(rows[0]?.n ?? 0) > 0),
    Effect.orDie,
  )

export const readEvidence = (sql: SqlClient.SqlClient, scope: ReportScope, now: number) =>
  Effect.gen(function* () {
    const { workspaceId, agentId, from, to, treeSize } = scope
    const inScope = sql`${periodOf(sql, scope)} AND sequence <= ${treeSize}`

    const [row] = yield* sql<Record<string, number | null>>`SELECT ${sql.literal(METRICS_SELECT)},
        min(sequence) AS first, max(sequence) AS last FROM events WHERE ${inScope}`
    const metrics = Object.fromEntries(EVENT_METRICS.map((m, i) => [m.name, Number(row?.[`m${i}`] ?? 0)])) as Metrics

    // The counted events, PAGE sequences at a time between the first and the last counted: only their
    // sequences' ranges and a digest of their ids are kept. Pages are ranges of sequences, not LIMITs: a
    // LIMIT page lets the planner (say, before events is analysed after a bulk ingest) read every remaining
    // row of the period and sort it for each page, quadratic in the period's events.
    const counted = new CountedBuilder(MAX_EXPORT_EVENTS)
    if (row?.first != null && row.last != null) {
      const last = Number(row.last)
      for (let after = Number(row.first) - 1; after < last; after += PAGE) {
        const page = yield* sql<{ sequence: number; id: string }>`SELECT sequence, id FROM events
            WHERE ${inScope} AND sequence > ${after} AND sequence <= ${Math.min(after + PAGE, last)}
            ORDER BY sequence`
        for (const e of page) counted.push(Number(e.sequence), e.id)
      }
    }

    const fromMs = Date.parse(from)
    const bucketMs = Math.max(1, Math.ceil((Date.parse(to) - fromMs) / BUCKETS))
    const buckets = yield* sql<{ b: number; evaluations: number; denials: number; enforcements: number }>`SELECT
          floor(extract(epoch FROM ts - ${from}::timestamptz) * 1000 / ${bucketMs})::int AS b,
          count(*) FILTER (WHERE type = 'policy.evaluated')::int AS evaluations,
          count(*) FILTER (WHERE type = 'policy.denied')::int AS denials,
          count(*) FILTER (WHERE type = 'enforcement.created')::int AS enforcements
        FROM events WHERE ${inScope} GROUP BY 1`
    const byBucket = new Map(buckets.map((b) => [Number(b.b), b]))
    const count = Math.ceil((Date.parse(to) - fromMs) / bucketMs)
    const activity = Array.from({ length: count }, (_, i) => {
      const b = byBucket.get(i)
      return {
        at: new Date(fromMs + i * bucketMs).toISOString(),
        evaluations: Number(b?.evaluations ?? 0),
        denials: Number(b?.denials ?? 0),
        enforcements: Number(b?.enforcements ?? 0),
      }
    })

    const nowIso = new Date(now).toISOString()
    const keys = yield* sql<{
      id: string
      scopes: ReadonlyArray<string>
      expires_at: Date | null
      agent_status: string | null
    }>`
        SELECT k.id, k.scopes, k.expires_at, a.status AS agent_status
        FROM api_keys k LEFT JOIN agents a ON a.id = k.agent_id
        WHERE k.workspace_id = ${workspaceId} AND k.status = 'active'
          AND (k.expires_at IS NULL OR k.expires_at > ${nowIso}::timestamptz)
          ${agentId === null ? sql`` : sql`AND k.agent_id = ${agentId}`}
        ORDER BY k.id`
    const enforcements = yield* sql<{
      id: string
      type: string
      status: string
      resolved_at: Date | null
      expires_at: Date | null
      created_at: Date
    }>`SELECT id, type, status, resolved_at, expires_at, created_at FROM enforcements
        WHERE workspace_id = ${workspaceId} AND created_at >= ${from}::timestamptz AND created_at < ${to}::timestamptz
          ${agentId === null ? sql`` : sql`AND agent_id = ${agentId}`}
        ORDER BY id`
    const closedAt = (e: (typeof enforcements)[number]) =>
      e.resolved_at?.getTime() ??
      (e.expires_at !== null && e.expires_at.getTime() <= now ? e.expires_at.getTime() : undefined)
    const closedHours = enforcements
      .map((e) => {
        const c = closedAt(e)
        return c === undefined ? undefined : (c - e.created_at.getTime()) / 3_600_000
      })
      .filter((h): h is number => h !== undefined)
      .sort((a, b) => a - b)
    const median =
      closedHours.length === 0
        ? null
        : Math.round(
            (closedHours.length % 2 === 1
              ? closedHours[(closedHours.length - 1) / 2]!
              : (closedHours[closedHours.length / 2 - 1]! + closedHours[closedHours.length / 2]!) / 2) * 100,
          ) / 100
    const incidents = enforcements.filter((e) => e.type === "suspension" || e.type === "revocation")

    const [workspace] = yield* sql<{ guard_default: "allow" | "deny" }>`SELECT guard_default FROM workspaces
        WHERE id = ${workspaceId}`
    const [policies] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM policies
        WHERE workspace_id = ${workspaceId} AND deleted_at IS NULL
          AND coalesce((document->>'enabled')::boolean, true) AND coalesce(document->>'mode', 'enforce') = 'enforce'`

    const records: Omit<Facts, "scope" | "metrics" | "chain" | "checkpoint"> = {
      keys: {
        active: keys.length,
        withoutExpiry: keys.filter((k) => k.expires_at === null).map((k) => k.id),
        allScopes: keys.filter((k) => WORKSPACE_SCOPES.every((s) => k.scopes.includes(s))).map((k) => k.id),
        ofInactiveAgents: keys.filter((k) => k.agent_status === "deregistered").map((k) => k.id),
      },
      enforcements: {
        incidents: incidents.length,
        incidentsClosedWithin72h: incidents.filter((e) => {
          const c = closedAt(e)
          return c !== undefined && c - e.created_at.getTime() <= 72 * 3_600_000
        }).length,
        openOver7d: enforcements
          .filter((e) => closedAt(e) === undefined && now - e.created_at.getTime() > 7 * 86_400_000)
          .map((e) => e.id),
        medianHoursToClose: median,
      },
      guardDefault: workspace?.guard_default ?? "allow",
      enforcingPolicies: Number(policies?.n ?? 0),
    }
    return { metrics, counted: counted.done() as Counted, activity, records }
  }).pipe(Effect.orDie)
