import { jsonb } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import { AGENT_DEREGISTERED_REASON, type Approval, type ApprovalStatus } from "./Approval.ts"

interface Row {
  readonly id: string
  readonly workspace_id: string
  readonly agent_id: string
  readonly action: string
  readonly context: Record<string, unknown>
  readonly binding_hash: string
  readonly status: ApprovalStatus
  readonly reason: string | null
  readonly policy_id: string | null
  readonly rule_id: string | null
  readonly approvers: ReadonlyArray<string>
  readonly decided_by: string | null
  readonly decision_reason: string | null
  readonly decided_at: Date | null
  readonly expires_at: Date
  readonly used_at: Date | null
  readonly created_at: Date
}

const iso = (d: Date | null) => d?.toISOString() ?? null

const toApproval = (r: Row): Approval => ({
  id: r.id,
  workspaceId: r.workspace_id,
  agentId: r.agent_id,
  action: r.action,
  context: r.context,
  status: r.status,
  reason: r.reason,
  policyId: r.policy_id,
  ruleId: r.rule_id,
  approvers: r.approvers,
  bindingHash: r.binding_hash,
  decidedBy: r.decided_by,
  decisionReason: r.decision_reason,
  decidedAt: iso(r.decided_at),
  expiresAt: r.expires_at.toISOString(),
  usedAt: iso(r.used_at),
  createdAt: r.created_at.toISOString(),
})

export interface ApprovalFilter {
  /** The statuses as the API shows them at `now` (a pending approval past its expiry is `expired`). */
  readonly statuses: ReadonlyArray<ApprovalStatus>
  readonly agentId?: string | undefined
  readonly action?: string | undefined
  readonly before?: string | undefined
  readonly limit: number
  readonly now: string
}

/** Approvals in the order their expiries are recorded: by `expiresAt`, then by id. */
const inExpiryOrder = (rows: ReadonlyArray<Row>): ReadonlyArray<Approval> =>
  rows.map(toApproval).sort((x, y) => x.expiresAt.localeCompare(y.expiresAt) || x.id.localeCompare(y.id))

/** How many approvals one sweep transaction expires per workspace; the rest wait for the next sweep. */
const EXPIRE_BATCH = 1000

/** SQL for approvals; every statement is scoped by workspace. */
export class ApprovalRepo extends Context.Service<
  ApprovalRepo,
  {
    readonly insert: (a: Approval) => Effect.Effect<void>
    readonly find: (workspaceId: string, id: string) => Effect.Effect<Approval | undefined>
    readonly list: (workspaceId: string, filter: ApprovalFilter) => Effect.Effect<ReadonlyArray<Approval>>
    /** Decides a pending approval that has not expired at `now`; undefined when there is none. */
    readonly decide: (
      workspaceId: string,
      id: string,
      decision: {
        readonly status: "approved" | "denied"
        readonly decidedBy: string
        readonly reason: string | null
        readonly now: string
      },
    ) => Effect.Effect<Approval | undefined>
    /**
     * Marks an approved, unexpired, unused approval of this agent with this binding hash as used, in one
     * statement (so two guard calls can never both use it); undefined when no such approval exists.
     */
    readonly consume: (
      workspaceId: string,
      id: string,
      agentId: string,
      bindingHash: string,
      /** When not empty, only an approval one of these credentials decided is used. */
      approvers: ReadonlyArray<string>,
      now: string,
    ) => Effect.Effect<Approval | undefined>
    /**
     * The approvers named (credential ids) with every key that replaced one of them by rotation (`rotated_to`,
     * followed up to 32 steps): a rotation gives the approver's key a new id, and the approvals and rules naming
     * the old one must still let its holder decide.
     */
    readonly approversWithSuccessors: (
      workspaceId: string,
      approvers: ReadonlyArray<string>,
    ) => Effect.Effect<ReadonlyArray<string>>
    /**
     * What answers a guard call of this binding that needs an approval, before a new one is requested: the newest
     * approval of the agent with this binding hash and exactly these approvers that is pending and unexpired at
     * `now` (the request still awaits a decision), else the newest denied by an approver less than its own time-out
     * (`expires_at - created_at`) before `now`. Undefined when there is neither.
     */
    readonly standing: (
      workspaceId: string,
      agentId: string,
      bindingHash: string,
      approvers: ReadonlyArray<string>,
      now: string,
    ) => Effect.Effect<Approval | undefined>
    /** How many approvals of the agent await a decision at `now`, counted up to `max`. */
    readonly countPending: (workspaceId: string, agentId: string, now: string, max: number) => Effect.Effect<number>
    /** Workspaces that have pending approvals past their expiry at `now`, and whether each is deleted. */
    readonly workspacesWithExpired: (
      now: string,
    ) => Effect.Effect<ReadonlyArray<{ readonly workspaceId: string; readonly deleted: boolean }>>
    /** Records the expiry of a workspace's pending approvals past `now` (up to a batch); returns them. */
    readonly expire: (workspaceId: string, now: string) => Effect.Effect<ReadonlyArray<Approval>>
    /**
     * Expires every pending approval of the agent at `at` (its deregistration): `expiresAt` and `decidedAt` become
     * `at`, `decisionReason` {@link AGENT_DEREGISTERED_REASON}; one already past its expiry is recorded as the sweep
     * would (`decidedAt` = `expiresAt`, no reason). Returns them, as `expire` does. A row being decided meanwhile is
     * waited for and left to its decision (the `status = 'pending'` condition is checked again after the wait).
     */
    readonly expireForAgent: (
      workspaceId: string,
      agentId: string,
      at: string,
    ) => Effect.Effect<ReadonlyArray<Approval>>
    /**
     * Deregistered agents that still have pending approvals, and whether each one's workspace is deleted: left by
     * deregistrations made before they expired their agent's pending approvals (2026-11-29, fourth pass).
     */
    readonly deregisteredWithPending: Effect.Effect<
      ReadonlyArray<{ readonly workspaceId: string; readonly agentId: string; readonly deleted: boolean }>
    >
  }
>()("@agentgov/domain/approvals/ApprovalRepo") {
  static readonly layer = Layer.effect(
    ApprovalRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const one = (rows: ReadonlyArray<Row>) => (rows[0] ? toApproval(rows[0]) : undefined)

      // The status as shown at `now`: a pending approval past its expiry reads as expired (decision D7).
      const statusIs = (status: ApprovalStatus, now: string): Statement.Fragment => {
        switch (status) {
          case "pending":
            return sql`(status = 'pending' AND expires_at > ${now}::timestamptz)`
          case "expired":
            return sql`(status = 'expired' OR (status = 'pending' AND expires_at <= ${now}::timestamptz))`
          default:
            return sql`status = ${status}`
        }
      }

      return ApprovalRepo.of({
        insert: (a) =>
          sql`INSERT INTO approvals (id, workspace_id, agent_id, action, context, binding_hash, status, reason,
                policy_id, rule_id, approvers, expires_at, created_at)
              VALUES (${a.id}, ${a.workspaceId}, ${a.agentId}, ${a.action}, ${jsonb(sql, a.context)}, ${a.bindingHash},
                ${a.status}, ${a.reason}, ${a.policyId}, ${a.ruleId}, ${jsonb(sql, a.approvers)},
                ${a.expiresAt}::timestamptz, ${a.createdAt}::timestamptz)`.pipe(Effect.asVoid, Effect.orDie),
        find: (workspaceId, id) =>
          sql<Row>`SELECT * FROM approvals WHERE workspace_id = ${workspaceId} AND id = ${id}`.pipe(
            Effect.map(one),
            Effect.orDie,
          ),
        list: (workspaceId, f) =>
          sql<Row>`SELECT * FROM approvals WHERE workspace_id = ${workspaceId}
              AND ${sql.or(f.statuses.map((s) => statusIs(s, f.now)))}
              ${f.agentId !== undefined ? sql`AND agent_id = ${f.agentId}` : sql``}
              ${f.action !== undefined ? sql`AND action = ${f.action}` : sql``}
              ${f.before !== undefined ? sql`AND id < ${f.before}` : sql``}
              ORDER BY id DESC LIMIT ${f.limit}`.pipe(
            Effect.map((rows) => rows.map(toApproval)),
            Effect.orDie,
          ),
        decide: (workspaceId, id, d) =>
          sql<Row>`UPDATE approvals SET status = ${d.status}, decided_by = ${d.decidedBy},
                decision_reason = ${d.reason}, decided_at = ${d.now}::timestamptz
              WHERE workspace_id = ${workspaceId} AND id = ${id} AND status = 'pending'
                AND expires_at > ${d.now}::timestamptz
              RETURNING *`.pipe(Effect.map(one), Effect.orDie),
        consume: (workspaceId, id, agentId, bindingHash, approvers, now) =>
          sql<Row>`UPDATE approvals SET used_at = ${now}::timestamptz
              WHERE workspace_id = ${workspaceId} AND id = ${id} AND agent_id = ${agentId}
                AND binding_hash = ${bindingHash} AND status = 'approved' AND used_at IS NULL
                AND expires_at > ${now}::timestamptz
                AND (${approvers.length}::int4 = 0 OR ${jsonb(sql, approvers)} ? decided_by)
              RETURNING *`.pipe(Effect.map(one), Effect.orDie),
        approversWithSuccessors: (workspaceId, approvers) =>
          approvers.length === 0
            ? Effect.succeed([])
            : sql<{ id: string }>`WITH RECURSIVE chain(id, depth) AS (
                  SELECT k.rotated_to, 1 FROM api_keys k
                    WHERE k.workspace_id = ${workspaceId} AND k.id IN ${sql.in(approvers)} AND k.rotated_to IS NOT NULL
                  UNION ALL
                  SELECT k.rotated_to, c.depth + 1 FROM chain c
                    JOIN api_keys k ON k.workspace_id = ${workspaceId} AND k.id = c.id
                    WHERE k.rotated_to IS NOT NULL AND c.depth < 32
                ) SELECT DISTINCT id FROM chain`.pipe(
                Effect.map((rows) => [...new Set([...approvers, ...rows.map((r) => r.id)])]),
                Effect.orDie,
              ),
        standing: (workspaceId, agentId, bindingHash, approvers, now) =>
          sql<Row>`SELECT * FROM approvals
              WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId} AND binding_hash = ${bindingHash}
                AND approvers @> ${jsonb(sql, approvers)} AND approvers <@ ${jsonb(sql, approvers)}
                AND ((status = 'pending' AND expires_at > ${now}::timestamptz)
                  OR (status = 'denied' AND decided_at + (expires_at - created_at) > ${now}::timestamptz))
              ORDER BY status = 'pending' DESC, id DESC LIMIT 1`.pipe(Effect.map(one), Effect.orDie),
        // By the agent (the workspace checked on the agent's row), so that the only index that starts with it, its
        // pending approvals by expiry (migration 0035), is the path whatever the statistics say: with the workspace
        // named, a stale estimate could send it through every pending approval of the workspace.
        countPending: (workspaceId, agentId, now, max) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM (
                SELECT 1 FROM approvals
                WHERE agent_id = ${agentId} AND status = 'pending' AND expires_at > ${now}::timestamptz
                LIMIT ${max}
              ) p
              WHERE EXISTS (SELECT 1 FROM agents WHERE id = ${agentId} AND workspace_id = ${workspaceId})`.pipe(
            Effect.map((rows) => rows[0]?.n ?? 0),
            Effect.orDie,
          ),
        workspacesWithExpired: (now) =>
          sql<{ workspace_id: string; deleted: boolean }>`SELECT d.workspace_id, w.deleted_at IS NOT NULL AS deleted
              FROM (SELECT DISTINCT workspace_id FROM approvals
                WHERE status = 'pending' AND expires_at <= ${now}::timestamptz) d
              JOIN workspaces w ON w.id = d.workspace_id`.pipe(
            Effect.map((rows) => rows.map((r) => ({ workspaceId: r.workspace_id, deleted: r.deleted }))),
            Effect.orDie,
          ),
        // SKIP LOCKED: an approval being decided right now is left to its decision (which then finds it
        // expired and refuses) or to the next sweep; two instances sweeping never wait on each other.
        expire: (workspaceId, now) =>
          sql<Row>`WITH due AS (
                SELECT id FROM approvals
                WHERE workspace_id = ${workspaceId} AND status = 'pending' AND expires_at <= ${now}::timestamptz
                ORDER BY expires_at, id LIMIT ${EXPIRE_BATCH} FOR UPDATE SKIP LOCKED
              )
              -- The due ids as one array (an init plan): a primary-key probe each. Joined to the CTE, or with its status
              -- named here, the update read every pending approval through a pending index that statistics of a quiet
              -- spell call empty. The rows are pending: due locked them, and FOR UPDATE checks them again when it does.
              UPDATE approvals a SET status = 'expired', decided_at = a.expires_at
              WHERE a.id = ANY (ARRAY(SELECT id FROM due))
              RETURNING a.*`.pipe(Effect.map(inExpiryOrder), Effect.orDie),
        expireForAgent: (workspaceId, agentId, at) =>
          sql<Row>`UPDATE approvals SET status = 'expired',
                decided_at = LEAST(expires_at, ${at}::timestamptz), expires_at = LEAST(expires_at, ${at}::timestamptz),
                decision_reason = CASE WHEN expires_at > ${at}::timestamptz THEN ${AGENT_DEREGISTERED_REASON} END
              WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId} AND status = 'pending'
              RETURNING *`.pipe(Effect.map(inExpiryOrder), Effect.orDie),
        // The agents with pending approvals as one array (an init plan), each then looked up by its key: every pending
        // approval read once, and the agents probed, not scanned. The join this was scanned the agents once for each
        // pending approval under statistics of a quiet spell (90,000 agent rows for 3,000 approvals of 30 agents), and
        // an array of the deregistered agents instead grows with every agent ever deregistered.
        deregisteredWithPending: sql<{ workspace_id: string; agent_id: string; deleted: boolean }>`SELECT
                g.workspace_id, g.id AS agent_id, w.deleted_at IS NOT NULL AS deleted
              FROM agents g JOIN workspaces w ON w.id = g.workspace_id
              WHERE g.id = ANY (ARRAY(SELECT DISTINCT agent_id FROM approvals WHERE status = 'pending'))
                AND g.status = 'deregistered'
              ORDER BY g.workspace_id, g.id`.pipe(
          Effect.map((rows) =>
            rows.map((r) => ({ workspaceId: r.workspace_id, agentId: r.agent_id, deleted: r.deleted })),
          ),
          Effect.orDie,
        ),
      })
    }),
  )
}
