import { jsonb } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import type { Role } from "../people/roles.ts"
import type { ApiKey } from "./ApiKey.ts"

interface Row {
  readonly id: string
  readonly workspace_id: string
  readonly name: string
  readonly type: ApiKey["type"]
  readonly agent_id: string | null
  readonly environment: ApiKey["environment"]
  readonly scopes: ReadonlyArray<string>
  readonly prefix: string
  readonly key_hash: string
  readonly status: ApiKey["status"]
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
  readonly revoked_reason: ApiKey["revokedReason"]
  readonly rotated_to: string | null
  readonly last_used_at: Date | null
  readonly created_at: Date
  readonly created_by_user: string | null
}

export interface StoredKey extends ApiKey {
  readonly workspaceId: string
  readonly hash: string
  /**
   * The person behind the key: the member whose session (or app) minted it, or whose key did, transitively; null
   * for the operator's keys (first start, CLI, workspace creation) and keys minted from them. Removing that
   * member from the workspace revokes the key; while they stay, the key acts with no more than their role holds.
   */
  readonly createdByUser: string | null
}

/** A key as authentication reads it: with whether its workspace is deleted and its maker's role there now. */
export interface KeyForAuth extends StoredKey {
  readonly workspaceDeleted: boolean
  /** The current role of `createdByUser` in the key's workspace; null when the key has no maker or they left. */
  readonly creatorRole: Role | null
}

const iso = (d: Date | null) => d?.toISOString() ?? null

const toKey = (r: Row): StoredKey => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  type: r.type,
  agentId: r.agent_id,
  environment: r.environment,
  scopes: r.scopes,
  prefix: r.prefix,
  hash: r.key_hash,
  status: r.status,
  expiresAt: iso(r.expires_at),
  revokedAt: iso(r.revoked_at),
  revokedReason: r.revoked_reason,
  rotatedTo: r.rotated_to,
  lastUsedAt: iso(r.last_used_at),
  createdAt: r.created_at.toISOString(),
  createdByUser: r.created_by_user,
})

/** Strips what must never leave the service: the hash, the internal workspace id and the creator. */
export const publicKey = ({ hash: _hash, workspaceId: _ws, createdByUser: _by, ...key }: StoredKey): ApiKey => key

/**
 * Announces (at commit) the id of every key whose validity changed: revoked,
 * or given an expiry by rotation. Instances drop what they cached about it,
 * so its SDK tokens stop working everywhere at once.
 */
export const KEYS_CHANNEL = "agentgov_keys"

export type RevokeReason = NonNullable<ApiKey["revokedReason"]>

/** SQL for API keys. Keys are found by the SHA-256 of their full value, never by the value. */
export class ApiKeyRepo extends Context.Service<
  ApiKeyRepo,
  {
    readonly insert: (k: StoredKey) => Effect.Effect<void>
    readonly find: (workspaceId: string, id: string) => Effect.Effect<StoredKey | undefined>
    readonly findForUpdate: (workspaceId: string, id: string) => Effect.Effect<StoredKey | undefined>
    readonly findByHash: (hash: string) => Effect.Effect<KeyForAuth | undefined>
    /** By id in any workspace: what an SDK token's `sub` names. */
    readonly findById: (id: string) => Effect.Effect<KeyForAuth | undefined>
    readonly list: (
      workspaceId: string,
      opts: {
        before?: string | undefined
        limit: number
        agentId?: string | undefined
        status?: string | undefined
        /** Keys past their expiry count as revoked from this instant. */
        now: string
      },
    ) => Effect.Effect<ReadonlyArray<StoredKey>>
    readonly revoke: (
      workspaceId: string,
      id: string,
      reason: RevokeReason,
      at: string,
    ) => Effect.Effect<StoredKey | undefined>
    /** Revokes every active key of an agent (or of the workspace); returns the revoked ones. */
    readonly revokeAll: (
      workspaceId: string,
      agentId: string | null,
      reason: RevokeReason,
      at: string,
    ) => Effect.Effect<ReadonlyArray<StoredKey>>
    readonly markRotated: (workspaceId: string, id: string, rotatedTo: string, expiresAt: string) => Effect.Effect<void>
    /** Revokes keys whose expiry has passed; the reason is `rotated` for replaced keys, else `expired`. */
    readonly revokeExpired: (at: string) => Effect.Effect<ReadonlyArray<StoredKey>>
    /** Revokes every active key of `userId` in the workspace (reason `member_removed`); returns the revoked ones. */
    readonly revokeOfMember: (
      workspaceId: string,
      userId: string,
      at: string,
    ) => Effect.Effect<ReadonlyArray<StoredKey>>
    /**
     * Revokes every active key whose person is no longer a member of its workspace (reason `member_removed`): keys
     * made before creators were recorded, by people removed before removal revoked keys.
     */
    readonly revokeOrphaned: (at: string) => Effect.Effect<ReadonlyArray<StoredKey>>
    /**
     * Whether `userId` is a member of the workspace, holding their membership (FOR SHARE) until the transaction
     * ends: a key minted for them cannot commit after their removal has revoked their keys.
     */
    readonly holdMembership: (workspaceId: string, userId: string) => Effect.Effect<boolean>
    readonly touch: (id: string, at: string) => Effect.Effect<void>
  }
>()("@agentgov/domain/apikeys/ApiKeyRepo") {
  static readonly layer = Layer.effect(
    ApiKeyRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const one = (rows: ReadonlyArray<Row>) => (rows[0] ? toKey(rows[0]) : undefined)
      const find = (lock: boolean) => (workspaceId: string, id: string) =>
        sql<Row>`SELECT * FROM api_keys WHERE workspace_id = ${workspaceId} AND id = ${id}
            ${lock ? sql`FOR UPDATE` : sql``}`.pipe(Effect.map(one), Effect.orDie)
      /**
       * One key in any workspace, with whether its workspace is deleted and its maker's role there now: what
       * authentication needs (a key acts with no more than its maker's role holds today).
       */
      const findWithWorkspace = (where: Statement.Fragment) =>
        sql<Row & { workspace_deleted: boolean; creator_role: Role | null }>`SELECT k.*,
              (w.deleted_at IS NOT NULL) AS workspace_deleted, m.role AS creator_role
            FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
            LEFT JOIN memberships m ON m.workspace_id = k.workspace_id AND m.user_id = k.created_by_user
            WHERE ${where}`.pipe(
          Effect.map((rows) =>
            rows[0]
              ? { ...toKey(rows[0]), workspaceDeleted: rows[0].workspace_deleted, creatorRole: rows[0].creator_role }
              : undefined,
          ),
          Effect.orDie,
        )
      return ApiKeyRepo.of({
        insert: (k) =>
          sql`INSERT INTO api_keys (id, workspace_id, name, type, agent_id, environment, scopes, prefix, key_hash,
                status, expires_at, created_at, created_by_user)
              VALUES (${k.id}, ${k.workspaceId}, ${k.name}, ${k.type}, ${k.agentId}, ${k.environment},
                ${jsonb(sql, k.scopes)}, ${k.prefix}, ${k.hash}, 'active', ${k.expiresAt}::timestamptz,
                ${k.createdAt}::timestamptz, ${k.createdByUser})`.pipe(Effect.asVoid, Effect.orDie),
        find: find(false),
        findForUpdate: find(true),
        findByHash: (hash) => findWithWorkspace(sql`k.key_hash = ${hash}`),
        findById: (id) => findWithWorkspace(sql`k.id = ${id}`),
        list: (workspaceId, { before, limit, agentId, status, now }) =>
          sql<Row>`SELECT * FROM api_keys WHERE workspace_id = ${workspaceId}
              ${agentId ? sql`AND agent_id = ${agentId}` : sql``}
              ${
                status === "active"
                  ? sql`AND status = 'active' AND (expires_at IS NULL OR expires_at > ${now}::timestamptz)`
                  : status === "revoked"
                    ? sql`AND (status = 'revoked' OR expires_at <= ${now}::timestamptz)`
                    : sql``
              }
              ${before ? sql`AND id < ${before}` : sql``}
              ORDER BY id DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) => rows.map(toKey)),
            Effect.orDie,
          ),
        revoke: (workspaceId, id, reason, at) =>
          sql<Row>`WITH r AS (UPDATE api_keys SET status = 'revoked', revoked_at = ${at}::timestamptz, revoked_reason = ${reason}
              WHERE workspace_id = ${workspaceId} AND id = ${id} AND status = 'active' RETURNING *)
              SELECT r.*, pg_notify(${KEYS_CHANNEL}, r.id) FROM r`.pipe(Effect.map(one), Effect.orDie),
        revokeAll: (workspaceId, agentId, reason, at) =>
          sql<Row>`WITH r AS (UPDATE api_keys SET status = 'revoked', revoked_at = ${at}::timestamptz, revoked_reason = ${reason}
              WHERE workspace_id = ${workspaceId} AND status = 'active'
              ${agentId ? sql`AND agent_id = ${agentId}` : sql``} RETURNING *)
              SELECT r.*, pg_notify(${KEYS_CHANNEL}, r.id) FROM r`.pipe(
            Effect.map((rows) => rows.map(toKey)),
            Effect.orDie,
          ),
        markRotated: (workspaceId, id, rotatedTo, expiresAt) =>
          sql`WITH r AS (UPDATE api_keys SET rotated_to = ${rotatedTo}, expires_at = ${expiresAt}::timestamptz
              WHERE workspace_id = ${workspaceId} AND id = ${id} RETURNING id)
              SELECT pg_notify(${KEYS_CHANNEL}, r.id) FROM r`.pipe(Effect.asVoid, Effect.orDie),
        revokeExpired: (at) =>
          sql<Row>`UPDATE api_keys SET status = 'revoked', revoked_at = expires_at,
                revoked_reason = CASE WHEN rotated_to IS NULL THEN 'expired' ELSE 'rotated' END
              WHERE status = 'active' AND expires_at <= ${at}::timestamptz RETURNING *`.pipe(
            Effect.map((rows) => rows.map(toKey)),
            Effect.orDie,
          ),
        revokeOfMember: (workspaceId, userId, at) =>
          sql<Row>`WITH r AS (UPDATE api_keys SET status = 'revoked', revoked_at = ${at}::timestamptz,
                revoked_reason = 'member_removed'
              WHERE workspace_id = ${workspaceId} AND created_by_user = ${userId} AND status = 'active' RETURNING *)
              SELECT r.*, pg_notify(${KEYS_CHANNEL}, r.id) FROM r`.pipe(
            Effect.map((rows) => rows.map(toKey)),
            Effect.orDie,
          ),
        revokeOrphaned: (at) =>
          sql<Row>`WITH r AS (UPDATE api_keys k SET status = 'revoked', revoked_at = ${at}::timestamptz,
                revoked_reason = 'member_removed'
              WHERE k.status = 'active' AND k.created_by_user IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM memberships m WHERE m.workspace_id = k.workspace_id AND m.user_id = k.created_by_user)
              RETURNING k.*)
              SELECT r.*, pg_notify(${KEYS_CHANNEL}, r.id) FROM r`.pipe(
            Effect.map((rows) => rows.map(toKey)),
            Effect.orDie,
          ),
        holdMembership: (workspaceId, userId) =>
          sql`SELECT 1 FROM memberships WHERE workspace_id = ${workspaceId} AND user_id = ${userId} FOR SHARE`.pipe(
            Effect.map((rows) => rows.length === 1),
            Effect.orDie,
          ),
        touch: (id, at) =>
          sql`UPDATE api_keys SET last_used_at = ${at}::timestamptz WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie),
      })
    }),
  )
}
