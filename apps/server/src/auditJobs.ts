import { EventService, SCOPES, systemActor } from "@agentgov/domain"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"

const VERIFY_LOCK = 72_410_003

/**
 * Verifies every workspace's chain (D8, every 6 hours). Several instances may
 * run this on one database; a transaction-scoped advisory try-lock lets one
 * do the work and the others skip. Returns the workspaces whose chain failed.
 */
export const verifyAllChains = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const events = yield* EventService
  return yield* sql.withTransaction(
    Effect.gen(function* () {
      const [lock] = yield* sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(${VERIFY_LOCK}) AS locked`
      if (!lock?.locked)
        return {
          skipped: true,
          failed: [] as Array<{ workspaceId: string; firstBadSequence?: number; reason?: string }>,
        }
      const workspaces = yield* sql<{
        id: string
        environment: "live" | "test"
      }>`SELECT id, environment FROM workspaces`
      const failed: Array<{ workspaceId: string; firstBadSequence?: number; reason?: string }> = []
      for (const w of workspaces) {
        const result = yield* events.verify(systemActor(w.id, w.environment, new Set(SCOPES)), "scheduled")
        if (!result.valid)
          failed.push({ workspaceId: w.id, firstBadSequence: result.firstBadSequence, reason: result.reason })
      }
      return { skipped: false, failed }
    }),
  )
}).pipe(Effect.orDie)
