import { Effect } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import { DAY_MS, isoOf } from "./time.ts"

/**
 * A workspace's cap on what it makes in a day that reaches someone outside it (an invitation's e-mail, a takedown
 * notice). Inside the caller's transaction: takes the workspace's lock for `kind` until that transaction ends, so that
 * concurrent requests cannot pass the cap together, then counts the workspace's rows of `table` made in the day before
 * `now`, all of them (withdrawn or failed ones too: else make-and-withdraw would not be held). Succeeds with
 * `undefined` under the cap, or, at the cap, with the seconds until the window's oldest row leaves it (at least 1).
 */
export const dailyCapReached = (
  sql: SqlClient.SqlClient,
  options: {
    readonly table: "invitations" | "content_takedowns"
    readonly kind: string
    readonly workspaceId: string
    readonly limit: number
    readonly now: number
  },
) =>
  Effect.gen(function* () {
    const { table, kind, workspaceId, limit, now } = options
    yield* sql`SELECT pg_advisory_xact_lock(hashtextextended(${`${kind}:${workspaceId}`}, 0))`
    const [made] = yield* sql<{ n: number; oldest: number | null }>`SELECT count(*)::int AS n,
        (extract(epoch FROM min(created_at)) * 1000)::float8 AS oldest FROM ${sql(table)}
      WHERE workspace_id = ${workspaceId} AND created_at > ${isoOf(now - DAY_MS)}::timestamptz`
    return made!.n < limit ? undefined : Math.max(1, Math.ceil((Number(made!.oldest) + DAY_MS - now) / 1000))
  })
