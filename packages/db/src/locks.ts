import { Effect } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"

/**
 * Lifts the pool's `lock_timeout` (PostgresOptions.lockTimeoutMs) for the rest of the current transaction: for a
 * background wait that may rightly be long, on a lock another instance of the service holds for seconds (a migration
 * under way, a first start, a checkpoint hashing a long chain). A request's wait stays bounded.
 */
export const waitForLocks = (sql: SqlClient.SqlClient) => sql`SET LOCAL lock_timeout = 0`.pipe(Effect.asVoid)
