import { Effect } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import { firstIdAt, type IdPrefix } from "./ids.ts"
import { DAY_MS, isoOf } from "./time.ts"

/** The tables capped, with the prefix of their ids. */
const PREFIXES = { invitations: "inv", content_takedowns: "tkd" } as const satisfies Record<string, IdPrefix>

/**
 * A workspace's cap on what it makes in a day that reaches someone outside it (an invitation's e-mail, a takedown
 * notice). Inside the caller's transaction: takes the workspace's lock for `kind` until that transaction ends, so that
 * concurrent requests cannot pass the cap together, then counts the workspace's rows of `table` made in the day before
 * `now`, all of them (withdrawn or failed ones too: else make-and-withdraw would not be held). Succeeds with
 * `undefined` under the cap, or, at the cap, with the seconds until the window's oldest row leaves it (at least 1).
 *
 * The rows are read through their ids, minted from the same `now` as `created_at` (or a moment later, never
 * earlier): `id >= firstIdAt(now - DAY_MS)` keeps every row the day holds and bounds the index range to the day,
 * so the count reads the day's rows, not the workspace's whole history.
 */
export const dailyCapReached = (
  sql: SqlClient.SqlClient,
  options: {
    readonly table: keyof typeof PREFIXES
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
      WHERE workspace_id = ${workspaceId} AND id >= ${firstIdAt(PREFIXES[table], now - DAY_MS)}
        AND created_at > ${isoOf(now - DAY_MS)}::timestamptz`
    return made!.n < limit ? undefined : Math.max(1, Math.ceil((Number(made!.oldest) + DAY_MS - now) / 1000))
  })
