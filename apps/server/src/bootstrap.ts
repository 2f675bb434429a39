import { WorkspaceService } from "@agentgov/domain"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"

const BOOTSTRAP_LOCK = 72_410_002

export interface BootstrapResult {
  readonly workspaceId: string
  readonly apiKey: string
}

/**
 * First start against an empty store (decision D4): workspace `default` and one
 * workspace key with every scope, `workspaces:admin` included: the operator's key. Returns the key so that it is printed once;
 * on every later start, returns undefined.
 */
export const bootstrap = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const workspaces = yield* WorkspaceService
  // Instances starting together on one empty database: only the first creates.
  return yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK})`
      if (!(yield* workspaces.isEmpty)) return undefined
      const { workspace, apiKey } = yield* workspaces.create(
        null,
        { name: "default", environment: "live" },
        "bootstrap key",
        { adminKey: true },
      )
      return { workspaceId: workspace.id, apiKey: apiKey.apiKey } satisfies BootstrapResult
    }),
  )
}).pipe(Effect.orDie)
