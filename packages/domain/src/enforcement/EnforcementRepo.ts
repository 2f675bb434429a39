import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import type { EnforcementStatus, EnforcementType, Resolution, StoredEnforcement } from "./Enforcement.ts"

// The columns below are unqualified: inside the agents' subqueries they name the innermost `enforcements e`.

/** In force by status, regardless of time: active, appealed, or resolved as upheld. */
const inForceStatus = (sql: SqlClient.SqlClient): Statement.Fragment =>
  sql`(status IN ('active', 'appealed') OR (status = 'resolved' AND resolution = 'upheld'))`
const notPast = (sql: SqlClient.SqlClient, now: string): Statement.Fragment =>
  sql`(expires_at IS NULL OR expires_at > ${now}::timestamptz)`
const inForceAt = (sql: SqlClient.SqlClient, now: string): Statement.Fragment =>
  sql`(${inForceStatus(sql)} AND ${notPast(sql, now)})`
/** In force by status but past its expiry at `now`: expired, whether or not the sweep recorded it yet. */
const lapsedBy = (sql: SqlClient.SqlClient, now: string): Statement.Fragment =>
  sql`(${inForceStatus(sql)} AND expires_at <= ${now}::timestamptz)`

/** SQL: the suspensions and revocations of the outer query's agent (`agents`). */
const suspendingOfAgent = (sql: SqlClient.SqlClient): Statement.Fragment =>
  sql`FROM enforcements e WHERE e.workspace_id = agents.workspace_id AND e.agent_id = agents.id
    AND e.type IN ('suspension', 'revocation')`

/**
 * SQL: whether a suspension or revocation of the outer query's agent is in force at `now` (what
 * `countSuspending` counts). The agents' reads use it to show a lapsed suspension as lifted before the
 * sweep records it.
 */
export const suspensionHolds = (sql: SqlClient.SqlClient, now: string): Statement.Fragment =>
  sql`EXISTS (SELECT 1 ${suspendingOfAgent(sql)} AND ${inForceAt(sql, now)})`

/** SQL: when the last of those that lapsed by `now` (what the sweep will expire) lapsed; null if none did. */
export const suspensionLapsedAt = (sql: SqlClient.SqlClient, now: string): Statement.Fragment =>
  sql`(SELECT max(e.expires_at) ${suspendingOfAgent(sql)} AND ${lapsedBy(sql, now)})`

interface Row {
  readonly id: string
  readonly workspace_id: string
  readonly agent_id: string
  readonly type: EnforcementType
  readonly status: EnforcementStatus
  readonly reason: string
  readonly policy_id: string | null
  readonly rule_id: string | null
  readonly limit_per_minute: number | null
  readonly expires_at: Date | null
  readonly appeal_reason: string | null
  readonly appealed_at: Date | null
  readonly resolution: Resolution | null
  readonly resolution_note: string | null
  readonly resolved_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

const iso = (d: Date | null) => d?.toISOString() ?? null

const toEnforcement = (r: Row): StoredEnforcement => ({
  id: r.id,
  workspaceId: r.workspace_id,
  agentId: r.agent_id,
  type: r.type,
  status: r.status,
  reason: r.reason,
  policyId: r.policy_id,
  ruleId: r.rule_id,
  limitPerMinute: r.limit_per_minute,
  expiresAt: iso(r.expires_at),
  appealReason: r.appeal_reason,
  appealedAt: iso(r.appealed_at),
  resolution: r.resolution,
  resolutionNote: r.resolution_note,
  resolvedAt: iso(r.resolved_at),
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
})

export interface EnforcementFilter {
  /** The statuses as shown at `now`; undefined: the enforcements in force at `now`. */
  readonly statuses: ReadonlyArray<EnforcementStatus> | undefined
  readonly types?: ReadonlyArray<EnforcementType> | undefined
  readonly agentId?: string | undefined
  readonly before?: string | undefined
  readonly limit: number
  readonly now: string
}

/** How many expiries one sweep transaction records per workspace; the rest wait for the next sweep. */
const EXPIRE_BATCH = 500

/** SQL for enforcements; every statement is scoped by workspace. */
export class EnforcementRepo extends Context.Service<
  EnforcementRepo,
  {
    readonly insert: (e: StoredEnforcement) => Effect.Effect<void>
    readonly find: (workspaceId: string, id: string) => Effect.Effect<StoredEnforcement | undefined>
    /** Locks the row for the rest of the transaction. */
    readonly findForUpdate: (workspaceId: string, id: string) => Effect.Effect<StoredEnforcement | undefined>
    readonly list: (workspaceId: string, filter: EnforcementFilter) => Effect.Effect<ReadonlyArray<StoredEnforcement>>
    readonly update: (e: StoredEnforcement) => Effect.Effect<void>
    /** Suspensions and revocations of the agent in force at `now`, other than `exceptId`. */
    readonly countSuspending: (
      workspaceId: string,
      agentId: string,
      exceptIds: ReadonlyArray<string>,
      now: string,
    ) => Effect.Effect<number>
    /** Whether a revocation of the agent is in force at `now` (it bars new keys for the agent). */
    readonly revocationInForce: (workspaceId: string, agentId: string, now: string) => Effect.Effect<boolean>
    /** The lowest `limitPerMinute` of the agent's throttles in force at `now`. */
    readonly lowestThrottle: (workspaceId: string, agentId: string, now: string) => Effect.Effect<number | undefined>
    /** The agent's latest enforcement issued by a policy rule (any status). */
    readonly latestByRule: (
      workspaceId: string,
      agentId: string,
      policyId: string,
      ruleId: string,
    ) => Effect.Effect<StoredEnforcement | undefined>
    /**
     * How often the rule denied the agent since `since` (exclusive): its `policy.denied` events that name
     * it among `matched` (partial index `events_denials`, migration 0010). The needle travels as text: a
     * parameter typed jsonb would be encoded once more by postgres.js.
     */
    readonly countDenials: (
      workspaceId: string,
      agentId: string,
      policyId: string,
      ruleId: string,
      since: string,
    ) => Effect.Effect<number>
    /** Workspaces holding enforcements in force whose expiry has passed at `now`, and whether each is deleted. */
    readonly workspacesWithExpired: (
      now: string,
    ) => Effect.Effect<ReadonlyArray<{ readonly workspaceId: string; readonly deleted: boolean }>>
    /**
     * Locks a workspace's enforcements in force whose expiry has passed (up to a batch), skipping rows
     * another transaction holds, and marks them `expired` as of their expiry; returns them as they were.
     */
    readonly expire: (
      workspaceId: string,
      now: string,
      /** Only this agent's. */
      agentId?: string,
    ) => Effect.Effect<ReadonlyArray<StoredEnforcement>>
  }
>()("@agentgov/domain/enforcement/EnforcementRepo") {
  static readonly layer = Layer.effect(
    EnforcementRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const one = (rows: ReadonlyArray<Row>) => (rows[0] ? toEnforcement(rows[0]) : undefined)

      const inForce = (now: string) => inForceAt(sql, now)

      // The status as shown at `now`: an enforcement in force past its expiry reads as expired.
      const statusIs = (status: EnforcementStatus, now: string): Statement.Fragment => {
        switch (status) {
          case "active":
          case "appealed":
            return sql`(status = ${status} AND ${notPast(sql, now)})`
          case "resolved":
            return sql`(status = 'resolved' AND (resolution = 'overturned' OR ${notPast(sql, now)}))`
          case "expired":
            return sql`(status = 'expired' OR ${lapsedBy(sql, now)})`
        }
      }

      const find = (lock: boolean) => (workspaceId: string, id: string) =>
        sql<Row>`SELECT * FROM enforcements WHERE workspace_id = ${workspaceId} AND id = ${id}
            ${lock ? sql`FOR UPDATE` : sql``}`.pipe(Effect.map(one), Effect.orDie)

      return EnforcementRepo.of({
        insert: (e) =>
          sql`INSERT INTO enforcements (id, workspace_id, agent_id, type, status, reason, policy_id, rule_id,
                limit_per_minute, expires_at, created_at, updated_at)
              VALUES (${e.id}, ${e.workspaceId}, ${e.agentId}, ${e.type}, ${e.status}, ${e.reason}, ${e.policyId},
                ${e.ruleId}, ${e.limitPerMinute}, ${e.expiresAt}::timestamptz, ${e.createdAt}::timestamptz,
                ${e.updatedAt}::timestamptz)`.pipe(Effect.asVoid, Effect.orDie),
        find: find(false),
        findForUpdate: find(true),
        latestByRule: (workspaceId, agentId, policyId, ruleId) =>
          sql<Row>`SELECT * FROM enforcements WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId}
              AND policy_id = ${policyId} AND rule_id = ${ruleId} ORDER BY id DESC LIMIT 1`.pipe(
            Effect.map(one),
            Effect.orDie,
          ),
        countDenials: (workspaceId, agentId, policyId, ruleId, since) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM events
              WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId} AND type = 'policy.denied'
                AND ts > ${since}::timestamptz
                AND (data::jsonb) -> 'matched' @> ${JSON.stringify([{ policyId, ruleId }])}::text::jsonb`.pipe(
            Effect.map((rows) => rows[0]?.n ?? 0),
            Effect.orDie,
          ),
        list: (workspaceId, f) =>
          sql<Row>`SELECT * FROM enforcements WHERE workspace_id = ${workspaceId}
              AND ${f.statuses === undefined ? inForce(f.now) : sql.or(f.statuses.map((s) => statusIs(s, f.now)))}
              ${f.types !== undefined ? sql`AND type IN ${sql.in(f.types)}` : sql``}
              ${f.agentId !== undefined ? sql`AND agent_id = ${f.agentId}` : sql``}
              ${f.before !== undefined ? sql`AND id < ${f.before}` : sql``}
              ORDER BY id DESC LIMIT ${f.limit}`.pipe(
            Effect.map((rows) => rows.map(toEnforcement)),
            Effect.orDie,
          ),
        update: (e) =>
          sql`UPDATE enforcements SET status = ${e.status}, reason = ${e.reason},
                limit_per_minute = ${e.limitPerMinute}, expires_at = ${e.expiresAt}::timestamptz,
                appeal_reason = ${e.appealReason}, appealed_at = ${e.appealedAt}::timestamptz,
                resolution = ${e.resolution}, resolution_note = ${e.resolutionNote},
                resolved_at = ${e.resolvedAt}::timestamptz, updated_at = ${e.updatedAt}::timestamptz
              WHERE workspace_id = ${e.workspaceId} AND id = ${e.id}`.pipe(Effect.asVoid, Effect.orDie),
        countSuspending: (workspaceId, agentId, exceptIds, now) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM enforcements
              WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId}
                AND type IN ('suspension', 'revocation') AND ${inForce(now)}
                ${exceptIds.length > 0 ? sql`AND id NOT IN ${sql.in(exceptIds)}` : sql``}`.pipe(
            Effect.map((rows) => rows[0]?.n ?? 0),
            Effect.orDie,
          ),
        revocationInForce: (workspaceId, agentId, now) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM enforcements
              WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId} AND type = 'revocation'
                AND ${inForce(now)}`.pipe(
            Effect.map((rows) => (rows[0]?.n ?? 0) > 0),
            Effect.orDie,
          ),
        lowestThrottle: (workspaceId, agentId, now) =>
          sql<{ n: number | null }>`SELECT min(limit_per_minute)::int AS n FROM enforcements
              WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId} AND type = 'throttle'
                AND ${inForce(now)}`.pipe(
            Effect.map((rows) => rows[0]?.n ?? undefined),
            Effect.orDie,
          ),
        workspacesWithExpired: (now) =>
          sql<{ workspace_id: string; deleted: boolean }>`SELECT d.workspace_id, w.deleted_at IS NOT NULL AS deleted
              FROM (SELECT DISTINCT workspace_id FROM enforcements WHERE ${lapsedBy(sql, now)}) d
              JOIN workspaces w ON w.id = d.workspace_id`.pipe(
            Effect.map((rows) => rows.map((r) => ({ workspaceId: r.workspace_id, deleted: r.deleted }))),
            Effect.orDie,
          ),
        expire: (workspaceId, now, agentId) =>
          Effect.gen(function* () {
            const due = yield* sql<Row>`SELECT * FROM enforcements
                WHERE workspace_id = ${workspaceId} AND ${lapsedBy(sql, now)}
                ${agentId !== undefined ? sql`AND agent_id = ${agentId}` : sql``}
                ORDER BY expires_at, id LIMIT ${EXPIRE_BATCH} FOR UPDATE SKIP LOCKED`
            if (due.length === 0) return []
            yield* sql`UPDATE enforcements SET status = 'expired', updated_at = expires_at
                WHERE workspace_id = ${workspaceId} AND id IN ${sql.in(due.map((r) => r.id))}`
            return due.map(toEnforcement)
          }).pipe(Effect.orDie),
      })
    }),
  )
}
