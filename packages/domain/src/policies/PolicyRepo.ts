import { jsonb } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { PolicyDocument } from "./engine/index.ts"
import type { Policy, PolicyVersion } from "./Policy.ts"

/** Where a change is announced: the payload is the workspace id (PolicySets recompiles it). */
export const POLICIES_CHANNEL = "agentgov_policies"

interface PolicyRow {
  readonly id: string
  readonly workspace_id: string
  readonly version: number
  readonly document: PolicyDocument
  readonly created_at: Date
  readonly updated_at: Date
}

const toPolicy = (r: PolicyRow): Policy => ({
  id: r.id,
  workspaceId: r.workspace_id,
  version: r.version,
  ...r.document,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
})

/** Policies and their versions; every query is scoped by workspace. Writes announce themselves at commit. */
export class PolicyRepo extends Context.Service<
  PolicyRepo,
  {
    /** Fails with SqlError on a unique violation (name taken), for the service to map. */
    readonly insert: (p: Policy, document: PolicyDocument) => Effect.Effect<void, SqlError>
    readonly update: (p: Policy, document: PolicyDocument) => Effect.Effect<void, SqlError>
    readonly markDeleted: (workspaceId: string, id: string, at: string) => Effect.Effect<void>
    readonly find: (workspaceId: string, id: string, lock?: boolean) => Effect.Effect<Policy | undefined>
    readonly list: (
      workspaceId: string,
      opts: { readonly before?: string | undefined; readonly limit: number; readonly enabled?: boolean | undefined },
    ) => Effect.Effect<ReadonlyArray<Policy>>
    /** A policy's stored versions, newest first, below version `before` when given. */
    readonly versions: (
      workspaceId: string,
      policyId: string,
      opts: { readonly before?: number | undefined; readonly limit: number },
    ) => Effect.Effect<ReadonlyArray<PolicyVersion>>
    /**
     * Serialises the workspace's policy saves until the transaction ends (an advisory lock on the workspace): a save
     * checks the set it reads against the budget, so two saves must not each read the set without the other. Taken
     * first in the save's transaction, before any policy row's lock.
     */
    readonly lockSet: (workspaceId: string) => Effect.Effect<void>
    /** Every live policy of a workspace, oldest first: the order the guard evaluates them in. */
    readonly all: (workspaceId: string) => Effect.Effect<ReadonlyArray<Policy & { readonly document: PolicyDocument }>>
  }
>()("@agentgov/domain/policies/PolicyRepo") {
  static readonly layer = Layer.effect(
    PolicyRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const announce = (workspaceId: string) => sql`SELECT pg_notify(${POLICIES_CHANNEL}, ${workspaceId})`
      const writeVersion = (p: Policy, document: PolicyDocument) =>
        sql`INSERT INTO policy_versions (policy_id, version, workspace_id, document, created_at)
            VALUES (${p.id}, ${p.version}, ${p.workspaceId}, ${jsonb(sql, document)}, ${p.updatedAt}::timestamptz)`
      return PolicyRepo.of({
        insert: (p, document) =>
          Effect.gen(function* () {
            yield* sql`INSERT INTO policies (id, workspace_id, name, version, document, created_at, updated_at)
                VALUES (${p.id}, ${p.workspaceId}, ${p.name}, ${p.version}, ${jsonb(sql, document)},
                        ${p.createdAt}::timestamptz, ${p.updatedAt}::timestamptz)`
            yield* writeVersion(p, document)
            yield* announce(p.workspaceId)
          }),
        update: (p, document) =>
          Effect.gen(function* () {
            yield* sql`UPDATE policies SET name = ${p.name}, version = ${p.version}, document = ${jsonb(sql, document)},
                updated_at = ${p.updatedAt}::timestamptz WHERE workspace_id = ${p.workspaceId} AND id = ${p.id}`
            yield* writeVersion(p, document)
            yield* announce(p.workspaceId)
          }),
        markDeleted: (workspaceId, id, at) =>
          Effect.gen(function* () {
            yield* sql`UPDATE policies SET deleted_at = ${at}::timestamptz WHERE workspace_id = ${workspaceId} AND id = ${id}`
            yield* announce(workspaceId)
          }).pipe(Effect.orDie),
        versions: (workspaceId, policyId, { before, limit }) =>
          sql<{ version: number; document: PolicyDocument; created_at: Date }>`SELECT version, document, created_at
              FROM policy_versions WHERE policy_id = ${policyId} AND workspace_id = ${workspaceId}
                ${before === undefined ? sql`` : sql`AND version < ${before}`}
              ORDER BY version DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) =>
              rows.map((r) => ({
                policyId,
                version: r.version,
                ...r.document,
                createdAt: r.created_at.toISOString(),
              })),
            ),
            Effect.orDie,
          ),
        find: (workspaceId, id, lock = false) =>
          sql<PolicyRow>`SELECT * FROM policies WHERE workspace_id = ${workspaceId} AND id = ${id} AND deleted_at IS NULL
              ${lock ? sql`FOR UPDATE` : sql``}`.pipe(
            Effect.map((rows) => (rows[0] ? toPolicy(rows[0]) : undefined)),
            Effect.orDie,
          ),
        list: (workspaceId, { before, limit, enabled }) =>
          sql<PolicyRow>`SELECT * FROM policies WHERE workspace_id = ${workspaceId} AND deleted_at IS NULL
              ${enabled === undefined ? sql`` : sql`AND (document->>'enabled')::boolean = ${enabled}`}
              ${before ? sql`AND id < ${before}` : sql``}
              ORDER BY id DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) => rows.map(toPolicy)),
            Effect.orDie,
          ),
        lockSet: (workspaceId) =>
          sql`SELECT pg_advisory_xact_lock(hashtextextended(${`policies:${workspaceId}`}, 0))`.pipe(
            Effect.asVoid,
            Effect.orDie,
          ),
        all: (workspaceId) =>
          sql<PolicyRow>`SELECT * FROM policies WHERE workspace_id = ${workspaceId} AND deleted_at IS NULL
              ORDER BY id`.pipe(
            Effect.map((rows) => rows.map((r) => ({ ...toPolicy(r), document: r.document }))),
            Effect.orDie,
          ),
      })
    }),
  )
}
