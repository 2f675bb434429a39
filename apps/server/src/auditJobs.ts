import { Checkpoints, EventService, SCOPES, systemActor } from "@agentgov/domain"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"

/** The advisory lock a sweep of every chain holds (a session's), so that one instance at a time does it. */
export const VERIFY_LOCK = 72_410_003

/**
 * Verifies every workspace's chain (D8, every 6 hours). Several instances may run this on one database; an
 * advisory try-lock lets one do the work and the others skip. It is a session's lock, held on a connection kept
 * for the sweep, not a transaction's: each verification reads its chain on a connection of its own
 * (`Database.forEachRow`), so a transaction held for the sweep would sit idle in it for as long as one chain takes
 * to verify, and PostgreSQL ends a session idle in a transaction for 60 s (`idle_in_transaction_session_timeout`;
 * about 12 million events at this machine's speed). Each verification's record commits on its own. Returns the
 * workspaces whose chain failed.
 */
export const verifyAllChains = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const events = yield* EventService
  return yield* Effect.scoped(
    Effect.gen(function* () {
      const session = yield* sql.reserve
      const [lock] = yield* session.execute("SELECT pg_try_advisory_lock($1::int8) AS locked", [VERIFY_LOCK], undefined)
      if (lock?.locked !== true)
        return {
          skipped: true,
          checked: 0,
          failed: [] as Array<{ workspaceId: string; firstBadSequence?: number; reason?: string }>,
        }
      // Before the connection goes back to the pool (finalizers run last added first). Should the statement fail,
      // the connection is broken and its session, lock and all, ends with it.
      yield* Effect.addFinalizer(() =>
        session.execute("SELECT pg_advisory_unlock($1::int8)", [VERIFY_LOCK], undefined).pipe(Effect.ignore),
      )
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
      return { skipped: false, checked: workspaces.length, failed }
    }),
  )
}).pipe(Effect.orDie)

/**
 * Signs a checkpoint for every workspace whose chain grew since its last one
 * (every minute by default), and checks the ones whose chain is shorter than
 * what was signed. Instances may overlap: checkpointing a workspace is
 * serialised by an advisory lock, and the later one finds nothing to do. A
 * chain that no longer extends its last checkpoint is not signed over: the
 * conflict is recorded and raised (ChainAlarm) and the others go on. Returns
 * how many checkpoints were signed.
 */
export const checkpointAll = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const checkpoints = yield* Checkpoints
  const stale = yield* sql<{ id: string; environment: "live" | "test" }>`SELECT w.id, w.environment
      FROM workspaces w JOIN chain_heads h ON h.workspace_id = w.id
      WHERE h.sequence <> coalesce((SELECT max(tree_size) FROM checkpoints c WHERE c.workspace_id = w.id), 0)`
  let signed = 0
  for (const w of stale) {
    const made = yield* checkpoints.latest(systemActor(w.id, w.environment, new Set(SCOPES))).pipe(
      Effect.as(true),
      Effect.catchTag("ChainInconsistent", () => Effect.succeed(false)),
    )
    if (made) signed += 1
  }
  return signed
}).pipe(Effect.orDie)
