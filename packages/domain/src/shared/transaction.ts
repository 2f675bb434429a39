import { Effect } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"

/**
 * Runs an effect in one transaction (a savepoint when nested). A database
 * failure inside is a defect: no caller can act on it. Writes whose failure a
 * caller can act on (a unique violation) map it to a domain error first.
 */
export const transactional =
  (sql: SqlClient.SqlClient) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    sql.withTransaction(effect).pipe(Effect.catchTag("SqlError", Effect.die))
