import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { KEYS_CHANNEL } from "../apikeys/ApiKeyRepo.ts"
import { type Actor, systemActor } from "../auth/Actor.ts"
import { POLICIES_CHANNEL } from "../policies/PolicyRepo.ts"
import type { Workspace } from "./Workspace.ts"

interface Row {
  readonly id: string
  readonly name: string
  readonly environment: Workspace["environment"]
  readonly plan: Workspace["plan"]
  readonly guard_default: Workspace["guardDefault"]
  readonly created_at: Date
  readonly updated_at: Date
}

const toWorkspace = (r: Row): Workspace => ({
  id: r.id,
  name: r.name,
  environment: r.environment,
  plan: r.plan,
  guardDefault: r.guard_default,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
})

/** SQL for workspaces. Deleted workspaces are invisible to every read. */
export class WorkspaceRepo extends Context.Service<
  WorkspaceRepo,
  {
    readonly insert: (w: Workspace) => Effect.Effect<void>
    readonly find: (id: string) => Effect.Effect<Workspace | undefined>
    readonly list: (opts: {
      ids?: ReadonlyArray<string>
      before?: string
      limit: number
    }) => Effect.Effect<ReadonlyArray<Workspace>>
    readonly update: (w: Workspace) => Effect.Effect<void>
    readonly markDeleted: (id: string, at: string) => Effect.Effect<void>
    readonly isEmpty: Effect.Effect<boolean>
  }
>()("@agentgov/domain/workspaces/WorkspaceRepo") {
  static readonly layer = Layer.effect(
    WorkspaceRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return WorkspaceRepo.of({
        insert: (w) =>
          sql`INSERT INTO workspaces (id, name, environment, plan, guard_default, created_at, updated_at)
              VALUES (${w.id}, ${w.name}, ${w.environment}, ${w.plan}, ${w.guardDefault}, ${w.createdAt}::timestamptz, ${w.updatedAt}::timestamptz)`.pipe(
            Effect.asVoid,
            Effect.orDie,
          ),
        find: (id) =>
          sql<Row>`SELECT * FROM workspaces WHERE id = ${id} AND deleted_at IS NULL`.pipe(
            Effect.map((rows) => (rows[0] ? toWorkspace(rows[0]) : undefined)),
            Effect.orDie,
          ),
        list: ({ ids, before, limit }) =>
          sql<Row>`SELECT * FROM workspaces WHERE deleted_at IS NULL
              ${ids ? sql`AND id IN ${sql.in(ids)}` : sql``}
              ${before ? sql`AND id < ${before}` : sql``}
              ORDER BY id DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) => rows.map(toWorkspace)),
            Effect.orDie,
          ),
        update: (w) =>
          // guardDefault is part of the guard's compiled state: announce the change like a policy's (PolicySets).
          sql`WITH u AS (UPDATE workspaces SET name = ${w.name}, plan = ${w.plan}, guard_default = ${w.guardDefault},
              updated_at = ${w.updatedAt}::timestamptz WHERE id = ${w.id} RETURNING id)
              SELECT pg_notify(${POLICIES_CHANNEL}, u.id) FROM u`.pipe(Effect.asVoid, Effect.orDie),
        markDeleted: (id, at) =>
          Effect.gen(function* () {
            // Announced on the keys channel by the workspace's id: event streams its people opened end.
            yield* sql`WITH r AS (UPDATE workspaces SET deleted_at = ${at}::timestamptz WHERE id = ${id} RETURNING id)
                SELECT pg_notify(${KEYS_CHANNEL}, r.id) FROM r`
            // The workspace's OAuth grants end with it: announced like a key's revocation (OAuthService's cache).
            yield* sql`SELECT pg_notify(${KEYS_CHANNEL}, id) FROM oauth_grants
                WHERE workspace_id = ${id} AND revoked_at IS NULL`
          }).pipe(Effect.orDie),
        isEmpty: sql<{ n: number }>`SELECT count(*)::int AS n FROM workspaces`.pipe(
          Effect.map((r) => r[0]!.n === 0),
          Effect.orDie,
        ),
      })
    }),
  )
}

/** The system (a sweep, a worker) acting in a workspace with no scopes of its own; its events are recorded as the system's. */
export const systemActorIn = (repo: WorkspaceRepo["Service"], workspaceId: string): Effect.Effect<Actor> =>
  Effect.map(repo.find(workspaceId), (w) => systemActor(workspaceId, w?.environment ?? "live", new Set()))
