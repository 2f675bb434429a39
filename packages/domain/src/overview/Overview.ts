import { Clock, Context, Effect, Layer, Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Actor } from "../auth/Actor.ts"
import { PermissionDenied } from "../shared/errors.ts"
import { Timestamp } from "../shared/schemas.ts"
import { TIERS, tierOf } from "../trust/Tier.ts"
import { TrustTier } from "../trust/Trust.ts"

/** Hourly buckets of the decisions chart: the current hour and the 23 before it. */
export const OVERVIEW_HOURS = 24
/** Pending approvals listed beside their count. */
export const OVERVIEW_PENDING = 5

const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

export const Overview = Schema.Struct({
  agents: Schema.NullOr(
    Schema.Struct({
      total: Count.annotate({ description: "registered agents (active or suspended)" }),
      byTier: Schema.Array(Schema.Struct({ tier: TrustTier, count: Count })).annotate({
        description: "every tier, lowest first, by each agent's published trust score",
      }),
    }),
  ).annotate({ description: "null without `agents:read`" }),
  decisions: Schema.Struct({
    hours: Schema.Array(
      Schema.Struct({
        hour: Timestamp.annotate({ description: "the hour's start (UTC)" }),
        allowed: Count,
        denied: Count.annotate({ description: "denied or held for approval" }),
      }),
    ).annotate({ description: `the last ${OVERVIEW_HOURS} hours, oldest first, the current one last` }),
  }),
  approvals: Schema.NullOr(
    Schema.Struct({
      pending: Count.annotate({ description: "pending and not yet expired" }),
      latest: Schema.Array(
        Schema.Struct({ id: Schema.String, action: Schema.String, agentId: Schema.String, createdAt: Timestamp }),
      ).annotate({ description: `the newest ${OVERVIEW_PENDING} pending` }),
    }),
  ).annotate({ description: "null without `approvals:read`" }),
  chain: Schema.Struct({
    events: Count.annotate({ description: "events in the workspace's chain (its head's sequence)" }),
    checkpoint: Schema.NullOr(
      Schema.Struct({ treeSize: Count, rootHash: Schema.String, kid: Schema.String, timestamp: Timestamp }),
    ).annotate({ description: "the newest signed checkpoint, as stored (none is signed by this read)" }),
    lastVerification: Schema.NullOr(
      Schema.Struct({
        valid: Schema.Boolean,
        checked: Count,
        firstBadSequence: Schema.NullOr(Schema.Int),
        reason: Schema.NullOr(Schema.String),
        verifiedAt: Timestamp,
      }),
    ),
  }),
}).annotate({ identifier: "Overview" })
export type Overview = typeof Overview.Type

const iso = (d: Date) => d.toISOString()

/**
 * The dashboard's overview of a workspace (issue 33), workspace-wide and in one round of small indexed reads:
 * agents counted by tier, decisions per hour from the partial index of `policy.evaluated` events by time
 * (`events_decisions`), the pending approvals, and the chain's head, newest checkpoint and verification as stored.
 */
export class OverviewService extends Context.Service<
  OverviewService,
  { readonly get: (actor: Actor) => Effect.Effect<Overview, PermissionDenied> }
>()("@agentgov/domain/overview/OverviewService") {
  static readonly layer = Layer.effect(
    OverviewService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const get = Effect.fn("OverviewService.get")(function* (actor: Actor) {
        if (actor.keyType === "agent")
          return yield* new PermissionDenied({
            message: "the overview is the workspace's: not for agent-bound credentials",
            field: "credential",
            issue: "bound to an agent",
          })
        const ws = actor.workspaceId
        const now = yield* Clock.currentTimeMillis
        const hourMs = 3_600_000
        const first = Math.floor(now / hourMs) * hourMs - (OVERVIEW_HOURS - 1) * hourMs
        const since = new Date(first)
        const readAgents = actor.scopes.has("agents:read")
        const readApprovals = actor.scopes.has("approvals:read")
        // Independent reads: run concurrently on the pool.
        const [tiers, decisions, pending, latest, chain] = yield* Effect.all(
          [
            readAgents
              ? // At most 1,001 groups (scores are 0..1000), each folded into its tier by tierOf.
                sql<{ score: number; n: number }>`SELECT trust_score AS score, count(*)::int AS n
                  FROM agents WHERE workspace_id = ${ws} AND status <> 'deregistered' GROUP BY trust_score`
              : Effect.succeed([]),
            // Two counts per hour, each from its partial index (0020_overview.sql): every decision, and the refused.
            // Hours of UTC, named: date_trunc alone cuts at the session's zone's hours (the server's `timezone`),
            // half an hour off UTC in some, where no bucket would match the hours below.
            sql<{
              hour: Date
              all: number
              refused: number
            }>`SELECT hour, sum(n_all)::int AS all, sum(n_refused)::int AS refused
              FROM (SELECT date_trunc('hour', ts, 'UTC') AS hour, count(*) AS n_all, 0 AS n_refused FROM events
                  WHERE workspace_id = ${ws} AND type = 'policy.evaluated' AND ts >= ${iso(since)}::timestamptz GROUP BY 1
                UNION ALL
                SELECT date_trunc('hour', ts, 'UTC'), 0, count(*) FROM events
                  WHERE workspace_id = ${ws} AND type = 'policy.evaluated' AND (data->>'decision') <> 'allow'
                    AND ts >= ${iso(since)}::timestamptz GROUP BY 1) counted
              GROUP BY hour`,
            readApprovals
              ? sql<{ n: number }>`SELECT count(*)::int AS n FROM approvals
                  WHERE workspace_id = ${ws} AND status = 'pending' AND expires_at > ${iso(new Date(now))}::timestamptz`
              : Effect.succeed([]),
            readApprovals
              ? sql<{
                  id: string
                  action: string
                  agent_id: string
                  created_at: Date
                }>`SELECT id, action, agent_id, created_at
                  FROM approvals WHERE workspace_id = ${ws} AND status = 'pending'
                    AND expires_at > ${iso(new Date(now))}::timestamptz
                  ORDER BY id DESC LIMIT ${OVERVIEW_PENDING}`
              : Effect.succeed([]),
            sql<{
              events: number | null
              tree_size: number | null
              root_hash: string | null
              kid: string | null
              signed_at: Date | null
              valid: boolean | null
              checked: number | null
              first_bad_sequence: number | null
              reason: string | null
              verified_at: Date | null
            }>`SELECT (SELECT sequence FROM chain_heads WHERE workspace_id = ${ws})::float8 AS events,
                c.tree_size::float8 AS tree_size, c.root_hash, c.kid, c.signed_at,
                v.valid, v.checked::float8 AS checked, v.first_bad_sequence::float8 AS first_bad_sequence, v.reason, v.verified_at
              FROM (SELECT 1) one
              LEFT JOIN LATERAL (SELECT tree_size, root_hash, kid, signed_at FROM checkpoints
                WHERE workspace_id = ${ws} ORDER BY tree_size DESC LIMIT 1) c ON true
              LEFT JOIN LATERAL (SELECT valid, checked, first_bad_sequence, reason, verified_at FROM chain_verifications
                WHERE workspace_id = ${ws} ORDER BY verified_at DESC LIMIT 1) v ON true`,
          ],
          { concurrency: "unbounded" },
        ).pipe(Effect.orDie)

        const counted = new Map(decisions.map((d) => [new Date(d.hour).getTime(), d]))
        const hours = Array.from({ length: OVERVIEW_HOURS }, (_, i) => {
          const at = first + i * hourMs
          const d = counted.get(at)
          return { hour: iso(new Date(at)), allowed: (d?.all ?? 0) - (d?.refused ?? 0), denied: d?.refused ?? 0 }
        })
        const c = chain[0]
        const byTier = new Map(TIERS.map((tier) => [tier, 0]))
        for (const { score, n } of tiers) byTier.set(tierOf(score), byTier.get(tierOf(score))! + n)
        return {
          agents: readAgents
            ? {
                total: tiers.reduce((sum, { n }) => sum + n, 0),
                byTier: TIERS.map((tier) => ({ tier, count: byTier.get(tier)! })),
              }
            : null,
          decisions: { hours },
          approvals: readApprovals
            ? {
                pending: pending[0]?.n ?? 0,
                latest: latest.map((a) => ({
                  id: a.id,
                  action: a.action,
                  agentId: a.agent_id,
                  createdAt: iso(a.created_at),
                })),
              }
            : null,
          chain: {
            events: c?.events ?? 0,
            checkpoint:
              c?.tree_size != null && c.root_hash && c.kid && c.signed_at
                ? { treeSize: c.tree_size, rootHash: c.root_hash, kid: c.kid, timestamp: iso(c.signed_at) }
                : null,
            lastVerification:
              c?.valid != null && c.verified_at
                ? {
                    valid: c.valid,
                    checked: c.checked ?? 0,
                    firstBadSequence: c.first_bad_sequence,
                    reason: c.reason,
                    verifiedAt: iso(c.verified_at),
                  }
                : null,
          },
        } satisfies Overview
      })

      return OverviewService.of({ get })
    }),
  )
}
