import { Database, jsonb } from "@agentgov/db"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { NewEvent } from "../audit/AuditEvent.ts"
import { AuditLog, EVENTS_CHANNEL } from "../audit/AuditLog.ts"
import { SYSTEM_NAMESPACES } from "../audit/eventCatalog.ts"
import { systemActor } from "../auth/Actor.ts"
import { SCOPES } from "../auth/scopes.ts"
import { ComplianceRepo } from "../compliance/ComplianceRepo.ts"
import { DAY_MS, isoOf } from "../shared/time.ts"
import { type BadgeTier, badgeOf, type Tier, tierOf, tierRank } from "./Tier.ts"
import {
  applyEvaluations,
  applyEvent,
  cloneEvidence,
  computeScore,
  DAILY_ALLOWED_CAP,
  EVIDENCE_RULES,
  EVIDENCE_TYPES,
  type Evidence,
  emptyEvidence,
  type Facts,
  markActive,
  NO_FACTS,
} from "./TrustModel.ts"

/** The scoring model's version, reported as `policyVersion` (D12); docs/trust.md describes it. */
export const MODEL_VERSION = "trust-model/1"
/** A change smaller than this is not announced (D12), unless the tier changes. */
export const ANNOUNCE_DELTA = 10
/** Events read per transaction. */
const BATCH = 1_000
/** At most this many events of the trail a pass covers (the guard's decisions among them counted in SQL). */
const WINDOW = 20_000

/** The first segments of the system's event names, for SQL: the types the worker reads one by one. */
const namespaces = [...SYSTEM_NAMESPACES]

/** Events the worker reads but that say nothing about an agent: its own output. */
const OWN_OUTPUT = new Set([
  "trust.score.changed",
  "trust.tier.upgraded",
  "trust.tier.downgraded",
  "badge.earned",
  "badge.revoked",
])

interface AgentRow {
  readonly id: string
  readonly name: string
  readonly status: string
  readonly created_at: Date
  readonly trust_score: number
}

interface ScoreRow {
  readonly agent_id: string
  readonly evidence: Evidence
  readonly published_score: number
  readonly badge_tier: BadgeTier | null
}

/** An event of the trail read one by one (the system's own, but for the guard's record). */
interface ReadRow {
  readonly sequence: string | number
  readonly type: string
  readonly agent_id: string | null
  readonly actor_type: string
  readonly actor_id: string | null
  readonly data: string
  readonly ts: Date
}

/** The guard's decisions and the agent's own software's events, counted per agent and day in SQL. */
interface DailyRow {
  readonly agent_id: string
  readonly day: string | number
  readonly evaluated: boolean
  readonly n: string | number
  readonly allowed: string | number
  readonly allowed_at: ReadonlyArray<string | number> | null
  readonly first_at: string | number
}

/** An event read one by one, about an agent, with what the model needs to know of it. */
interface Relevant {
  readonly agentId: string
  readonly type: string
  readonly data: Record<string, unknown>
  readonly at: number
  readonly selfDecided: boolean
}

/** At most this many agents' evidence is folded again from the trail in one pass (the rest in later ones). */
const REBUILDS_PER_PASS = 50

/** What a credential is known by on the trail: its type and id (null: the system). */
export interface CredentialRef {
  readonly type: string
  readonly id: string | null
}

/**
 * Who acts through a credential, for telling an approval's requester from its decider (docs/decisions.md, "Trust fixes, second pass"): the agent
 * for an agent-bound key or token; else the person behind it (signed in, an OAuth grant's user, or the member who
 * minted the key); else the workspace's operator (keys made at first start, by the CLI or with a workspace), as one
 * party. `keys` and `grants` map the credentials' ids to what the database says of them.
 */
export const partyOf = (
  credential: CredentialRef,
  keys: ReadonlyMap<string, { readonly agentId: string | null; readonly createdByUser: string | null }>,
  grants: ReadonlyMap<string, string>,
): string => {
  const { type, id } = credential
  if (id === null || type === "system") return "system"
  if (type === "user") return `user:${id}`
  if (type === "oauth") {
    const user = grants.get(id)
    return user === undefined ? `oauth:${id}` : `user:${user}`
  }
  if (type === "api_key" || type === "sdk_token") {
    const key = keys.get(id)
    if (key === undefined) return `key:${id}`
    if (key.agentId !== null) return `agent:${key.agentId}`
    return key.createdByUser !== null ? `user:${key.createdByUser}` : "operator"
  }
  return `${type}:${id}`
}

/** Each agent's identity facts (D12's key hygiene), read from its keys and versions at `now`. */
export const factsOf = (sql: SqlClient.SqlClient, workspaceId: string, agentIds: ReadonlyArray<string>, now: number) =>
  Effect.gen(function* () {
    const facts = new Map<string, Facts>(agentIds.map((id) => [id, NO_FACTS]))
    if (agentIds.length === 0) return facts
    const rows = yield* sql<{
      id: string
      has_version: boolean
      active_keys: number
      without_expiry: number
      newest: Date | null
    }>`SELECT a.id, a.current_version IS NOT NULL AS has_version,
          count(k.id)::int AS active_keys,
          count(k.id) FILTER (WHERE k.expires_at IS NULL)::int AS without_expiry,
          max(k.created_at) AS newest
        FROM agents a
        LEFT JOIN api_keys k ON k.workspace_id = a.workspace_id AND k.agent_id = a.id AND k.status = 'active'
          AND (k.expires_at IS NULL OR k.expires_at > ${isoOf(now)}::timestamptz)
        WHERE a.workspace_id = ${workspaceId} AND a.id IN ${sql.in(agentIds)}
        GROUP BY a.id, a.current_version`
    for (const r of rows)
      facts.set(r.id, {
        hasVersion: r.has_version,
        activeAgentKeys: r.active_keys,
        keysWithoutExpiry: r.without_expiry,
        newestKeyAgeDays: r.newest === null ? null : Math.max(0, (now - r.newest.getTime()) / DAY_MS),
      })
    return facts
  }).pipe(Effect.orDie)

/** What one pass did: events read, events emitted, and whether more wait. */
export interface PassResult {
  readonly skipped: boolean
  readonly read: number
  readonly emitted: number
  readonly more: boolean
}

/** What moved an agent's score in a pass, for the `reason` of trust.score.changed. */
type Causes = Map<string, number>

const partsOf = (causes: Causes | undefined) =>
  [...(causes ?? new Map())].map(([type, n]) => (n > 1 ? `${type} ×${n}` : type))

/**
 * The evidence read, else the other records of the agent read (an agent key created or revoked, a version: the
 * identity facts), else time alone: a key's creation must not read as decay.
 */
const reasonOf = (causes: Causes | undefined, adjustments: ReadonlyArray<string>, records?: Causes): string => {
  const parts = partsOf(causes)
  if (adjustments.length > 0) parts.unshift(...adjustments)
  if (parts.length === 0) parts.push(...partsOf(records))
  return parts.length > 0 ? `evidence: ${parts.join(", ")}`.slice(0, 500) : "time: old evidence decayed, tenure grew"
}

/**
 * Keeps trust scores current (D12) off the request path. Per workspace a durable cursor names the
 * last event of the audit trail whose evidence is folded into `trust_scores`; a pass, in one
 * transaction under the cursor's row lock, reads the events after it, updates the evidence and
 * scores of the agents they name, appends the trust and badge events, and moves the cursor. A
 * crash rolls all of it back and the next pass reads the same events again: no update is lost and
 * none is announced twice. Other instances skip a workspace whose cursor is locked.
 */
export class TrustRecompute extends Context.Service<
  TrustRecompute,
  {
    /** One pass over the events after the workspace's cursor (at most BATCH). */
    readonly catchUp: (workspaceId: string) => Effect.Effect<PassResult>
    /** Recomputes every agent of the workspace at now (decay, tenure, keys); `read` is 0. */
    readonly sweep: (workspaceId: string) => Effect.Effect<PassResult>
    /** Workspaces whose chain has events the worker has not read. */
    readonly behind: Effect.Effect<ReadonlyArray<string>>
    /** Workspaces whose last sweep is older than `olderThanMs`. */
    readonly sweepDue: (olderThanMs: number) => Effect.Effect<ReadonlyArray<string>>
    /** Calls `onWake(workspaceId)` when events were appended (on any instance); `onWake()` when some may have been missed. */
    readonly wakeups: (onWake: (workspaceId?: string) => void) => Effect.Effect<() => Promise<void>>
  }
>()("@agentgov/domain/trust/TrustRecompute") {
  static readonly layer = Layer.effect(
    TrustRecompute,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const db = yield* Database
      const audit = yield* AuditLog
      const certifications = yield* ComplianceRepo

      /** Locks the workspace's cursor (creating it), or undefined when another pass holds it. */
      const lockCursor = (workspaceId: string, now: number) =>
        Effect.gen(function* () {
          yield* sql`INSERT INTO trust_cursors (workspace_id, sequence, updated_at)
              SELECT ${workspaceId}, 0, ${isoOf(now)}::timestamptz WHERE EXISTS (SELECT 1 FROM workspaces WHERE id = ${workspaceId})
              ON CONFLICT (workspace_id) DO NOTHING`
          const rows = yield* sql<{
            sequence: string | number
            environment: "live" | "test"
          }>`SELECT c.sequence, w.environment
              FROM trust_cursors c JOIN workspaces w ON w.id = c.workspace_id
              WHERE c.workspace_id = ${workspaceId} FOR UPDATE OF c SKIP LOCKED`
          const row = rows[0]
          return row === undefined ? undefined : { sequence: Number(row.sequence), environment: row.environment }
        })

      const loadAgents = (workspaceId: string, ids: ReadonlyArray<string>) =>
        ids.length === 0
          ? Effect.succeed([] as ReadonlyArray<AgentRow>)
          : sql<AgentRow>`SELECT id, name, status, created_at, trust_score FROM agents
              WHERE workspace_id = ${workspaceId} AND id IN ${sql.in(ids)}`

      const loadScores = (workspaceId: string, ids: ReadonlyArray<string>) =>
        ids.length === 0
          ? Effect.succeed([] as ReadonlyArray<ScoreRow>)
          : sql<ScoreRow>`SELECT agent_id, evidence, published_score, badge_tier FROM trust_scores
              WHERE workspace_id = ${workspaceId} AND agent_id IN ${sql.in(ids)}`

      /**
       * Scores the agents at `now` from their (updated) evidence, writes them, and returns the events
       * that announce what changed: D12's score and tier events, D13's badge events.
       */
      const settle = (
        workspaceId: string,
        agents: ReadonlyArray<AgentRow>,
        evidence: Map<string, Evidence>,
        rows: Map<string, ScoreRow>,
        causes: Map<string, Causes>,
        adjustments: Map<string, Array<string>>,
        now: number,
        records: Map<string, Causes> = new Map(),
      ) =>
        Effect.gen(function* () {
          const facts = yield* factsOf(
            sql,
            workspaceId,
            agents.map((a) => a.id),
            now,
          )
          const events: Array<NewEvent> = []
          const at = isoOf(now)
          for (const agent of agents) {
            const ev = evidence.get(agent.id)!
            const row = rows.get(agent.id)
            const computed = computeScore(ev, facts.get(agent.id) ?? NO_FACTS, now)
            const previous = row?.published_score ?? agent.trust_score
            const before = tierOf(previous)
            // A deregistered agent's record is history: its score stays as it was, only its badge goes.
            const frozen = agent.status === "deregistered"
            const announce =
              !frozen && (Math.abs(computed.score - previous) >= ANNOUNCE_DELTA || computed.tier !== before)
            const published = announce ? computed.score : previous
            const tier: Tier = tierOf(published)
            const base = { agentId: agent.id, agentName: agent.name }
            if (announce) {
              events.push({
                type: "trust.score.changed",
                agentId: agent.id,
                data: {
                  ...base,
                  previousScore: previous,
                  newScore: published,
                  delta: published - previous,
                  reason: reasonOf(causes.get(agent.id), adjustments.get(agent.id) ?? [], records.get(agent.id)),
                  newTier: tier,
                },
              })
              if (tier !== before)
                events.push({
                  type: tierRank(tier) > tierRank(before) ? "trust.tier.upgraded" : "trust.tier.downgraded",
                  agentId: agent.id,
                  data: { ...base, previousTier: before, newTier: tier, score: published },
                })
            }
            // D14: a fall below bronze ends the agent's certifications, in the transaction that announces it.
            if (announce && tierRank(tier) < tierRank("bronze"))
              events.push(
                ...(yield* certifications.revokeCertifications(workspaceId, agent.id, "trust_below_bronze", at)),
              )
            const held = row?.badge_tier ?? undefined
            const holds = badgeOf(tier, agent.status)
            if (held !== undefined && holds === undefined)
              events.push({
                type: "badge.revoked",
                agentId: agent.id,
                data: {
                  ...base,
                  tier: held,
                  reason:
                    agent.status === "suspended"
                      ? "agent_suspended"
                      : agent.status === "deregistered"
                        ? "agent_deregistered"
                        : "tier_below_bronze",
                },
              })
            else if (held === undefined && holds !== undefined)
              events.push({
                type: "badge.earned",
                agentId: agent.id,
                data: { ...base, tier: holds, score: published },
              })
            yield* sql`INSERT INTO trust_scores (agent_id, workspace_id, evidence, score, components, computed_at,
                  published_score, badge_tier)
                VALUES (${agent.id}, ${workspaceId}, ${jsonb(sql, ev)}, ${computed.score}, ${jsonb(sql, computed.components)},
                  ${at}::timestamptz, ${published}, ${holds ?? null})
                ON CONFLICT (agent_id) DO UPDATE SET evidence = EXCLUDED.evidence, score = EXCLUDED.score,
                  components = EXCLUDED.components, computed_at = EXCLUDED.computed_at,
                  published_score = EXCLUDED.published_score, badge_tier = EXCLUDED.badge_tier`
            if (announce || row === undefined)
              yield* sql`INSERT INTO trust_history (workspace_id, agent_id, at, score, tier)
                  VALUES (${workspaceId}, ${agent.id}, ${at}::timestamptz, ${published}, ${tier})`
            // The guard reads agents.trust_score from its cache, which this update invalidates (migration 0006's
            // trigger): only announced changes, so the guard's copy stays warm between them.
            if (announce && published !== agent.trust_score)
              yield* sql`UPDATE agents SET trust_score = ${published} WHERE id = ${agent.id} AND workspace_id = ${workspaceId}`
          }
          return events
        })

      /**
       * The events of (after, upper] read one by one, in order, at most BATCH (the caller's window ends at the last
       * then): the system's own, but for the guard's record. An event of the agent's own software is not among
       * them, whatever its data says: it is the agent's in its `agentId` column alone, and is counted per day below
       * (`daily`). With `only`, the events of those agents alone.
       */
      const readEvents = (workspaceId: string, after: number, upper: number, only?: ReadonlyArray<string>) =>
        sql<ReadRow>`SELECT sequence, type, agent_id, actor_type, actor_id, data::text AS data, ts FROM events
            WHERE workspace_id = ${workspaceId} AND sequence > ${after} AND sequence <= ${upper}
              AND type <> 'policy.evaluated' AND split_part(type, '.', 1) IN ${sql.in(namespaces)}
              ${
                only === undefined
                  ? sql``
                  : sql`AND (agent_id IN ${sql.in(only)} OR (agent_id IS NULL AND data->>'agentId' IN ${sql.in(only)}))`
              }
            ORDER BY sequence LIMIT ${BATCH}`

      /**
       * Per agent and day of (after, upper]: the guard's decisions (the model reads only their number, the allowed
       * ones', and the times of a day's first DAILY_ALLOWED_CAP allows: applyEvaluations), and the first event of the
       * agent's own software (a day of activity: markActive). With `only`, those agents' alone.
       */
      const dailyEvents = (workspaceId: string, after: number, upper: number, only?: ReadonlyArray<string>) =>
        // Each row's values computed once, below the OFFSET 0 that keeps PostgreSQL from pulling them up into the
        // aggregates: there the decision's JSON was parsed twice a row and the time converted three times, two thirds
        // of the query's time (25.6 ms for 6,000 guard events, 17 ms this way; EXPLAIN ANALYZE, PostgreSQL 15).
        sql<DailyRow>`SELECT agent_id, day, evaluated, count(*) AS n, count(*) FILTER (WHERE allowed) AS allowed,
              (array_agg(ms ORDER BY sequence) FILTER (WHERE allowed))[1:${DAILY_ALLOWED_CAP}] AS allowed_at,
              min(ms) AS first_at
            FROM (SELECT agent_id, sequence, floor(extract(epoch FROM ts) / 86400)::int8 AS day,
                type = 'policy.evaluated' AS evaluated,
                type = 'policy.evaluated' AND data->>'decision' = 'allow' AS allowed,
                (extract(epoch FROM ts) * 1000)::int8 AS ms
              FROM events
              WHERE workspace_id = ${workspaceId} AND sequence > ${after} AND sequence <= ${upper}
                AND ${only === undefined ? sql`agent_id IS NOT NULL` : sql`agent_id IN ${sql.in(only)}`}
                AND (type = 'policy.evaluated' OR split_part(type, '.', 1) NOT IN ${sql.in(namespaces)})
              OFFSET 0) e
            GROUP BY agent_id, day, evaluated ORDER BY day, agent_id`

      /**
       * The events read, about an agent, each with whether it is an approval decided by the party that asked for it
       * (partyOf): the requester is the actor of its `approval.requested`, the decider the actor of the decision.
       */
      const relevantOf = (workspaceId: string, read: ReadonlyArray<ReadRow>) =>
        Effect.gen(function* () {
          const parsed = read.flatMap((r) => {
            if (OWN_OUTPUT.has(r.type)) return []
            const data = JSON.parse(r.data) as Record<string, unknown>
            const agentId = r.agent_id ?? (typeof data.agentId === "string" ? data.agentId : undefined)
            return agentId === undefined ? [] : [{ row: r, agentId, data }]
          })
          const decided = parsed.filter(
            (p) =>
              p.row.type === "approval.decided" && p.data.expired !== true && typeof p.data.approvalId === "string",
          )
          const self = new Set<string>()
          if (decided.length > 0) {
            const approvalIds = [...new Set(decided.map((p) => p.data.approvalId as string))]
            // Each request precedes its decision: read backwards from the newest decision, the newest request first.
            const before = Math.max(...decided.map((p) => Number(p.row.sequence)))
            const requests = yield* sql<{
              approval_id: string
              actor_type: string
              actor_id: string | null
            }>`SELECT d.id AS approval_id, r.actor_type, r.actor_id FROM unnest(${approvalIds}::text[]) AS d(id)
                CROSS JOIN LATERAL (SELECT actor_type, actor_id FROM events
                  WHERE workspace_id = ${workspaceId} AND type = 'approval.requested' AND data->>'approvalId' = d.id
                    AND sequence < ${before}
                  ORDER BY sequence DESC LIMIT 1) r`
            const requester = new Map(requests.map((r) => [r.approval_id, { type: r.actor_type, id: r.actor_id }]))
            const credentials = [
              ...requests.map((r) => ({ type: r.actor_type, id: r.actor_id })),
              ...decided.map((p) => ({ type: p.row.actor_type, id: p.row.actor_id })),
            ]
            const keyIds = [
              ...new Set(
                credentials
                  .filter((c) => c.type === "api_key" || c.type === "sdk_token")
                  .flatMap((c) => (c.id === null ? [] : [c.id])),
              ),
            ]
            const grantIds = [
              ...new Set(credentials.filter((c) => c.type === "oauth").flatMap((c) => (c.id === null ? [] : [c.id]))),
            ]
            const keys = new Map(
              (keyIds.length === 0
                ? []
                : yield* sql<{
                    id: string
                    agent_id: string | null
                    created_by_user: string | null
                  }>`SELECT id, agent_id, created_by_user FROM api_keys WHERE workspace_id = ${workspaceId} AND id IN ${sql.in(keyIds)}`
              ).map((k) => [k.id, { agentId: k.agent_id, createdByUser: k.created_by_user }]),
            )
            const grants = new Map(
              (grantIds.length === 0
                ? []
                : yield* sql<{
                    id: string
                    user_id: string
                  }>`SELECT id, user_id FROM oauth_grants WHERE workspace_id = ${workspaceId} AND id IN ${sql.in(grantIds)}`
              ).map((g) => [g.id, g.user_id]),
            )
            for (const p of decided) {
              const asked = requester.get(p.data.approvalId as string)
              if (asked === undefined) continue
              const decider = partyOf({ type: p.row.actor_type, id: p.row.actor_id }, keys, grants)
              if (decider === partyOf(asked, keys, grants)) self.add(String(p.row.sequence))
            }
          }
          return parsed.map(
            (p): Relevant => ({
              agentId: p.agentId,
              type: p.row.type,
              data: p.data,
              at: p.row.ts.getTime(),
              selfDecided: self.has(String(p.row.sequence)),
            }),
          )
        })

      /** Folds the per-day groups into the agents' evidence, in day order (a day is active once). */
      const foldDaily = (
        daily: ReadonlyArray<DailyRow>,
        evidence: Map<string, Evidence>,
        causes?: Map<string, Causes>,
      ) => {
        for (const g of daily) {
          const ev = evidence.get(g.agent_id)
          if (ev === undefined) continue
          if (!g.evaluated) {
            markActive(ev, Number(g.first_at))
            continue
          }
          const n = Number(g.n)
          applyEvaluations(ev, n, Number(g.allowed), (g.allowed_at ?? []).map(Number))
          if (causes === undefined) continue
          const c = causes.get(g.agent_id) ?? new Map<string, number>()
          c.set("policy.evaluated", (c.get("policy.evaluated") ?? 0) + n)
          causes.set(g.agent_id, c)
        }
      }

      /**
       * The evidence of `agents` folded afresh from every event of the trail up to `upTo` under the current rules
       * (EVIDENCE_RULES): for evidence folded under earlier ones. The events one by one in batches, the per-day
       * groups in one query (folding the two in either order gives the same evidence: only the groups mark days).
       */
      const rebuild = (workspaceId: string, agents: ReadonlyArray<AgentRow>, upTo: number) =>
        Effect.gen(function* () {
          const evidence = new Map(agents.map((a) => [a.id, emptyEvidence(a.created_at.getTime())]))
          const ids = agents.map((a) => a.id)
          if (ids.length === 0 || upTo <= 0) return evidence
          foldDaily(yield* dailyEvents(workspaceId, 0, upTo, ids), evidence)
          let after = 0
          for (;;) {
            const read = yield* readEvents(workspaceId, after, upTo, ids)
            for (const e of yield* relevantOf(workspaceId, read)) {
              const ev = evidence.get(e.agentId)
              if (ev !== undefined) applyEvent(ev, e.type, e.data, e.at, { selfDecided: e.selfDecided })
            }
            if (read.length < BATCH) return evidence
            after = Number(read[read.length - 1]!.sequence)
          }
        })

      /**
       * The agents' stored evidence (a copy), or none for an agent not read before; evidence folded under earlier
       * rules is folded again from the trail up to `upTo` (at most REBUILDS_PER_PASS agents a pass: the others keep
       * theirs until a later pass). `rebuilt` names the agents folded again.
       */
      const evidenceOf = (
        workspaceId: string,
        agents: ReadonlyArray<AgentRow>,
        rows: Map<string, ScoreRow>,
        upTo: number,
      ) =>
        Effect.gen(function* () {
          const evidence = new Map<string, Evidence>()
          const stale = agents
            .filter((a) => {
              const row = rows.get(a.id)
              return row !== undefined && (row.evidence.rules ?? 1) < EVIDENCE_RULES
            })
            .slice(0, REBUILDS_PER_PASS)
          for (const a of agents) {
            const row = rows.get(a.id)
            evidence.set(a.id, row ? cloneEvidence(row.evidence) : emptyEvidence(a.created_at.getTime()))
          }
          for (const [id, ev] of yield* rebuild(workspaceId, stale, upTo)) evidence.set(id, ev)
          return { evidence, rebuilt: new Set(stale.map((a) => a.id)) }
        })

      /** The rebuilt agents' cause, named in the reason of what they announce. */
      const REBUILT = "recomputed from the audit trail under the current rules"
      /** The causes of the agents whose evidence was folded again: REBUILT, once each. */
      const rebuiltCauses = (rebuilt: ReadonlySet<string>) =>
        new Map<string, Causes>([...rebuilt].map((id) => [id, new Map([[REBUILT, 1]])]))

      const catchUp = Effect.fn("TrustRecompute.catchUp")(function* (workspaceId: string) {
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const cursor = yield* lockCursor(workspaceId, now)
            if (cursor === undefined) return { skipped: true, read: 0, emitted: 0, more: false }
            // The window of the trail this pass covers: at most WINDOW events after the cursor.
            const [bounds] = yield* sql<{ upper: string | number | null }>`SELECT max(sequence) AS upper FROM events
                WHERE workspace_id = ${workspaceId} AND sequence > ${cursor.sequence}
                  AND sequence <= ${cursor.sequence + WINDOW}`
            if (bounds?.upper == null) return { skipped: false, read: 0, emitted: 0, more: false }
            let upper = Number(bounds.upper)
            let full = upper === cursor.sequence + WINDOW
            // The events read in full and in order (at most BATCH: the window ends there). The rest, most of the
            // trail, is counted per agent and day in PostgreSQL below, or is about no agent; reading each back cost
            // the guard a fifth of its throughput and ingest as much of the server's CPU.
            const read = yield* readEvents(workspaceId, cursor.sequence, upper)
            if (read.length === BATCH) {
              upper = Number(read[read.length - 1]!.sequence)
              full = true
            }
            const daily = yield* dailyEvents(workspaceId, cursor.sequence, upper)
            const covered = upper - cursor.sequence
            const last = upper

            const relevant = yield* relevantOf(workspaceId, read)
            const ids = [...new Set([...relevant.map((e) => e.agentId), ...daily.map((g) => g.agent_id)])]
            const agents = yield* loadAgents(workspaceId, ids)
            const rows = new Map((yield* loadScores(workspaceId, ids)).map((r) => [r.agent_id, r]))
            const known = new Set(agents.map((a) => a.id))
            const { evidence, rebuilt } = yield* evidenceOf(workspaceId, agents, rows, cursor.sequence)
            const causes = rebuiltCauses(rebuilt)
            /** The agent's other records read (not evidence): named in the reason when no evidence moved it. */
            const records = new Map<string, Causes>()
            const adjustments = new Map<string, Array<string>>()
            // In day order, the guard's groups and the others' alike: a day is active once, and a pass over several
            // days must not meet a day again after a later one (folded first, the guard's days counted the others'
            // days a second time). The events read one by one mark no day (an ingested one is never among them).
            foldDaily(daily, evidence, causes)
            for (const e of relevant) {
              if (!known.has(e.agentId)) continue
              applyEvent(evidence.get(e.agentId)!, e.type, e.data, e.at, { selfDecided: e.selfDecided })
              if (e.type === "trust.score.adjusted") {
                const list = adjustments.get(e.agentId) ?? []
                const d = Number(e.data.delta)
                list.push(`operator adjustment ${d > 0 ? "+" : ""}${d}: ${String(e.data.reason)}`)
                adjustments.set(e.agentId, list)
              } else {
                const into = EVIDENCE_TYPES.has(e.type) ? causes : records
                const c = into.get(e.agentId) ?? new Map<string, number>()
                c.set(e.type, (c.get(e.type) ?? 0) + 1)
                into.set(e.agentId, c)
              }
            }
            const events = yield* settle(workspaceId, agents, evidence, rows, causes, adjustments, now, records)
            if (events.length > 0)
              yield* audit.append(systemActor(workspaceId, cursor.environment, new Set(SCOPES)), events)
            yield* sql`UPDATE trust_cursors SET sequence = ${last}, updated_at = ${isoOf(now)}::timestamptz
                WHERE workspace_id = ${workspaceId}`
            return { skipped: false, read: covered, emitted: events.length, more: full }
          }),
        )
      }, Effect.orDie)

      const sweep = Effect.fn("TrustRecompute.sweep")(function* (workspaceId: string) {
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const cursor = yield* lockCursor(workspaceId, now)
            if (cursor === undefined) return { skipped: true, read: 0, emitted: 0, more: false }
            const rows = yield* sql<ScoreRow>`SELECT t.agent_id, t.evidence, t.published_score, t.badge_tier
                FROM trust_scores t JOIN agents a ON a.id = t.agent_id
                WHERE t.workspace_id = ${workspaceId} AND (a.status <> 'deregistered' OR t.badge_tier IS NOT NULL)`
            const ids = rows.map((r) => r.agent_id)
            const agents = yield* loadAgents(workspaceId, ids)
            const byAgent = new Map(rows.map((r) => [r.agent_id, r]))
            const { evidence, rebuilt } = yield* evidenceOf(workspaceId, agents, byAgent, cursor.sequence)
            const events = yield* settle(workspaceId, agents, evidence, byAgent, rebuiltCauses(rebuilt), new Map(), now)
            if (events.length > 0)
              yield* audit.append(systemActor(workspaceId, cursor.environment, new Set(SCOPES)), events)
            yield* sql`UPDATE trust_cursors SET swept_at = ${isoOf(now)}::timestamptz WHERE workspace_id = ${workspaceId}`
            return { skipped: false, read: 0, emitted: events.length, more: false }
          }),
        )
      }, Effect.orDie)

      const behind = sql<{ workspace_id: string }>`SELECT h.workspace_id FROM chain_heads h
          LEFT JOIN trust_cursors c ON c.workspace_id = h.workspace_id
          WHERE h.sequence > coalesce(c.sequence, 0)`.pipe(
        Effect.map((rows) => rows.map((r) => r.workspace_id)),
        Effect.orDie,
      )

      const sweepDue = (olderThanMs: number) =>
        Effect.gen(function* () {
          const before = isoOf((yield* Clock.currentTimeMillis) - olderThanMs)
          const rows = yield* sql<{ workspace_id: string }>`SELECT workspace_id FROM trust_cursors
              WHERE swept_at IS NULL OR swept_at < ${before}::timestamptz`
          return rows.map((r) => r.workspace_id)
        }).pipe(Effect.orDie)

      const wakeups = (onWake: (workspaceId?: string) => void) =>
        Effect.promise(() =>
          db.listen(
            EVENTS_CHANNEL,
            (payload) => onWake(payload.slice(0, payload.lastIndexOf(":"))),
            () => onWake(),
          ),
        )

      return TrustRecompute.of({ catchUp, sweep, behind, sweepDue, wakeups })
    }),
  )
}
