import { jsonb } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { suspensionHolds, suspensionLapsedAt } from "../enforcement/EnforcementRepo.ts"
import type { Agent, AgentVersion } from "./Agent.ts"

interface AgentRow {
  readonly id: string
  readonly workspace_id: string
  readonly name: string
  readonly description: string | null
  readonly labels: ReadonlyArray<string>
  readonly metadata: Record<string, unknown>
  readonly status: Agent["status"]
  readonly current_version: string | null
  readonly trust_score: number
  readonly created_at: Date
  readonly updated_at: Date
  readonly deregistered_at: Date | null
}

interface VersionRow {
  readonly id: string
  readonly agent_id: string
  readonly version: string
  readonly description: string | null
  readonly metadata: Record<string, unknown>
  readonly created_at: Date
}

const toAgent = (r: AgentRow): Agent => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  description: r.description,
  labels: r.labels,
  metadata: r.metadata,
  status: r.status,
  currentVersion: r.current_version,
  trustScore: r.trust_score,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  deregisteredAt: r.deregistered_at?.toISOString() ?? null,
})

const toVersion = (r: VersionRow): AgentVersion => ({
  id: r.id,
  agentId: r.agent_id,
  version: r.version,
  description: r.description,
  metadata: r.metadata,
  createdAt: r.created_at.toISOString(),
})

export interface AgentFilter {
  readonly status?: Agent["status"] | undefined
  readonly label?: string | undefined
  readonly namePrefix?: string | undefined
  /** Agent keys see only their own agent. */
  readonly onlyId?: string | undefined
  readonly before?: string | undefined
  readonly limit: number
  /** The instant the agents are shown as of (see `find`). */
  readonly asOf: string
}

/** Where the agents trigger (migration 0006) announces a change at commit; the payload is the agent id. */
export const AGENTS_CHANNEL = "agentgov_agents"

/** SQL for agents and their versions; every statement is scoped by workspace. */
export class AgentRepo extends Context.Service<
  AgentRepo,
  {
    /** Fails with the SqlError of a unique violation (name taken); other errors are defects. */
    readonly insert: (a: Agent) => Effect.Effect<void, SqlError>
    /**
     * The agent as stored; with `asOf`, as it stands at that instant: a suspended agent none of whose
     * suspensions or revocations is still in force shows as `active`, updated when the last one lapsed,
     * as the expiry sweep will record it (EnforcementService.expireDue).
     */
    readonly find: (workspaceId: string, id: string, asOf?: string) => Effect.Effect<Agent | undefined>
    /** Locks the row for the rest of the transaction; the agent as stored. */
    readonly findForUpdate: (workspaceId: string, id: string) => Effect.Effect<Agent | undefined>
    /** Filtered by the status shown as of `filter.asOf`, and shown so (see `find`). */
    readonly list: (workspaceId: string, filter: AgentFilter) => Effect.Effect<ReadonlyArray<Agent>>
    readonly update: (a: Agent) => Effect.Effect<void, SqlError>
    /**
     * Deregisters every registered agent of the workspace at `at` (its deletion); returns them, oldest first. The
     * agents trigger announces each at commit, and this instance's listeners hear of each at once, as for `update`.
     */
    readonly deregisterAll: (
      workspaceId: string,
      at: string,
    ) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly name: string }>>
    /**
     * The name of a registered agent other than `except` whose name equals `name` but for ASCII letter case, if
     * there is one.
     * Takes a transaction-scoped lock on that folded name first: registrations and renames to one name wait
     * for each other until commit, so two cannot both find it free. Call inside the write's transaction.
     */
    readonly nameTakenIgnoringCase: (
      workspaceId: string,
      name: string,
      except?: string,
    ) => Effect.Effect<string | undefined>
    /**
     * Called with the agent's id right after an update statement of this
     * instance (before its commit); other instances hear of it through the
     * `agentgov_agents` trigger (migration 0006) at commit. For caches.
     */
    readonly onUpdate: (listener: (agentId: string) => void) => void
    readonly insertVersion: (workspaceId: string, v: AgentVersion) => Effect.Effect<void, SqlError>
    readonly listVersions: (
      workspaceId: string,
      agentId: string,
      opts: { before?: string | undefined; limit: number },
    ) => Effect.Effect<ReadonlyArray<AgentVersion>>
  }
>()("@agentgov/domain/agents/AgentRepo") {
  static readonly layer = Layer.effect(
    AgentRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const listeners = new Set<(agentId: string) => void>()
      /** The columns of `agents`, with `status` and `updated_at` as they stand at `asOf` (see `find`). */
      const shownAsOf = (asOf: string) => {
        const lapsed = sql`(status = 'suspended' AND NOT ${suspensionHolds(sql, asOf)})`
        return sql`id, workspace_id, name, description, labels, metadata, current_version, trust_score, created_at,
          deregistered_at,
          CASE WHEN ${lapsed} THEN 'active' ELSE status END AS status,
          CASE WHEN ${lapsed} THEN GREATEST(updated_at, ${suspensionLapsedAt(sql, asOf)}) ELSE updated_at END
            AS updated_at`
      }
      /** The stored statuses that can show as `status`: only a suspended agent's shows otherwise. */
      const storedStatusMayShow = (status: Agent["status"] | undefined) =>
        status === undefined
          ? sql`AND status <> 'deregistered'`
          : status === "active"
            ? sql`AND status IN ('active', 'suspended')`
            : sql`AND status = ${status}`
      const one = (rows: ReadonlyArray<AgentRow>) => (rows[0] ? toAgent(rows[0]) : undefined)
      const find = (workspaceId: string, id: string, asOf?: string) =>
        sql<AgentRow>`SELECT ${asOf === undefined ? sql`*` : shownAsOf(asOf)} FROM agents
            WHERE workspace_id = ${workspaceId} AND id = ${id}`.pipe(Effect.map(one), Effect.orDie)
      return AgentRepo.of({
        insert: (a) =>
          sql`INSERT INTO agents (id, workspace_id, name, description, labels, metadata, status, current_version,
                trust_score, created_at, updated_at)
              VALUES (${a.id}, ${a.workspaceId}, ${a.name}, ${a.description}, ${jsonb(sql, a.labels)},
                ${jsonb(sql, a.metadata)}, ${a.status}, ${a.currentVersion}, ${a.trustScore},
                ${a.createdAt}::timestamptz, ${a.updatedAt}::timestamptz)`.pipe(Effect.asVoid),
        find,
        findForUpdate: (workspaceId, id) =>
          sql<AgentRow>`SELECT * FROM agents WHERE workspace_id = ${workspaceId} AND id = ${id} FOR UPDATE`.pipe(
            Effect.map(one),
            Effect.orDie,
          ),
        list: (workspaceId, f) =>
          sql<AgentRow>`SELECT * FROM (SELECT ${shownAsOf(f.asOf)} FROM agents WHERE workspace_id = ${workspaceId}
              ${f.onlyId ? sql`AND id = ${f.onlyId}` : sql``}
              ${storedStatusMayShow(f.status)}
              ${f.label ? sql`AND labels ? ${f.label}` : sql``}
              ${f.namePrefix ? sql`AND starts_with(name, ${f.namePrefix})` : sql``}
              ${f.before ? sql`AND id < ${f.before}` : sql``}) shown
              ${f.status ? sql`WHERE status = ${f.status}` : sql``}
              ORDER BY id DESC LIMIT ${f.limit}`.pipe(
            Effect.map((rows) => rows.map(toAgent)),
            Effect.orDie,
          ),
        update: (a) =>
          sql`UPDATE agents SET name = ${a.name}, description = ${a.description}, labels = ${jsonb(sql, a.labels)},
                metadata = ${jsonb(sql, a.metadata)}, status = ${a.status}, current_version = ${a.currentVersion},
                trust_score = ${a.trustScore}, updated_at = ${a.updatedAt}::timestamptz,
                deregistered_at = ${a.deregisteredAt}::timestamptz
              WHERE workspace_id = ${a.workspaceId} AND id = ${a.id}`.pipe(
            Effect.tap(() =>
              Effect.sync(() => {
                for (const listener of listeners) listener(a.id)
              }),
            ),
            Effect.asVoid,
          ),
        deregisterAll: (workspaceId, at) =>
          sql<{ id: string; name: string }>`UPDATE agents SET status = 'deregistered', updated_at = ${at}::timestamptz,
                deregistered_at = ${at}::timestamptz
              WHERE workspace_id = ${workspaceId} AND status <> 'deregistered' RETURNING id, name`.pipe(
            Effect.tap((rows) =>
              Effect.sync(() => {
                for (const { id } of rows) for (const listener of listeners) listener(id)
              }),
            ),
            Effect.map((rows) => [...rows].sort((a, b) => (a.id < b.id ? -1 : 1))),
            Effect.orDie,
          ),
        nameTakenIgnoringCase: (workspaceId, name, except) => {
          // ASCII only, and the same on both sides: lower() under the "C" collation folds A-Z alone, whatever
          // the database's locale (the embedded store has none; a server may have any).
          const folded = name.replace(/[A-Z]/g, (c) => c.toLowerCase())
          return Effect.gen(function* () {
            yield* sql`SELECT pg_advisory_xact_lock(hashtextextended(${`agent-name:${workspaceId}:${folded}`}, 0))`
            const rows = yield* sql<{ name: string }>`SELECT name FROM agents WHERE workspace_id = ${workspaceId}
                AND status <> 'deregistered' AND lower(name COLLATE "C") = ${folded}
                ${except ? sql`AND id <> ${except}` : sql``} LIMIT 1`
            return rows[0]?.name
          }).pipe(Effect.orDie)
        },
        onUpdate: (listener) => {
          listeners.add(listener)
        },
        insertVersion: (workspaceId, v) =>
          sql`INSERT INTO agent_versions (id, workspace_id, agent_id, version, description, metadata, created_at)
              VALUES (${v.id}, ${workspaceId}, ${v.agentId}, ${v.version}, ${v.description}, ${jsonb(sql, v.metadata)},
                ${v.createdAt}::timestamptz)`.pipe(Effect.asVoid),
        listVersions: (workspaceId, agentId, { before, limit }) =>
          sql<VersionRow>`SELECT * FROM agent_versions WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId}
              ${before ? sql`AND id < ${before}` : sql``}
              ORDER BY id DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) => rows.map(toVersion)),
            Effect.orDie,
          ),
      })
    }),
  )
}
