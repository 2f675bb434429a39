import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { IDEMPOTENCY_WINDOW_MS, Idempotency } from "../../src/index.ts"
import {
  at,
  type DomainTestRuntime,
  holdInTransaction,
  holdStatistics,
  makeDomainRuntime,
  rowsRead,
} from "../runtime.ts"

// The periodic purge of Idempotency-Key records older than the replay window (the server's 30-second sweep).

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const MINUTE = 60_000
const HOUR = 3_600_000

/** `n` keys of `workspaceId`, named `<tag><i>`, created evenly over [fromMs, fromMs + spanMs). */
const keys = (workspaceId: string, tag: string, n: number, fromMs: number, spanMs: number) =>
  SqlClient.SqlClient.use(
    (sql) => sql`INSERT INTO idempotency_keys
        (workspace_id, key, operation, request_hash, status_code, response_body, created_at)
      SELECT ${workspaceId}, ${tag} || i, 'guard.evaluate', md5(i::text), 200, '{}',
        ${new Date(fromMs).toISOString()}::timestamptz + (i * ${spanMs / n} || ' milliseconds')::interval
      FROM generate_series(0, ${n - 1}) AS i`,
  ).pipe(Effect.orDie)

const keysOf = (workspaceId: string) =>
  t.run(
    SqlClient.SqlClient.use(
      (sql) => sql<{ key: string }>`SELECT key FROM idempotency_keys WHERE workspace_id = ${workspaceId} ORDER BY key`,
    ).pipe(
      Effect.map((rows) => rows.map((r) => r.key)),
      Effect.orDie,
    ),
  )

/** The purge at `ms`, in a transaction that fails after 5 s waiting for a lock; what it read of the table. */
const purgeAt = (ms: number) =>
  t.run(
    SqlClient.SqlClient.use((sql) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SET LOCAL lock_timeout = '5s'`
          const start = yield* rowsRead(sql, "idempotency_keys")
          yield* at(
            ms,
            Idempotency.use((i) => i.purgeExpired),
          )
          return (yield* rowsRead(sql, "idempotency_keys")) - start
        }),
      ),
    ).pipe(Effect.orDie),
  )

describe("the purge of expired Idempotency-Keys", () => {
  it("deletes the records older than the replay window and keeps the others", async () => {
    const now = Date.now()
    await t.run(
      Effect.all([
        keys("ws_purge_a", "old", 3, now - IDEMPOTENCY_WINDOW_MS - HOUR, MINUTE),
        keys("ws_purge_a", "new", 2, now - IDEMPOTENCY_WINDOW_MS + HOUR, MINUTE),
      ]),
    )
    await purgeAt(now)
    expect(await keysOf("ws_purge_a")).toEqual(["new0", "new1"])
  })

  it("skips a key a claim holds rather than waiting for it, and takes it at the next run", async () => {
    const now = Date.now()
    await t.run(keys("ws_purge_b", "old", 3, now - IDEMPOTENCY_WINDOW_MS - HOUR, MINUTE))
    // A claim of an expired key deletes it before taking it again: its row is locked until the claim commits.
    const claim = holdInTransaction(
      t.run,
      (sql) => sql`SELECT 1 FROM idempotency_keys WHERE workspace_id = 'ws_purge_b' AND key = 'old1' FOR UPDATE`,
    )
    await claim.held
    try {
      // Without SKIP LOCKED the purge waits here for the claim, until its 5 s lock time-out.
      await purgeAt(now)
      expect(await keysOf("ws_purge_b")).toEqual(["old1"])
    } finally {
      await claim.release()
    }
    await purgeAt(now)
    expect(await keysOf("ws_purge_b")).toEqual([])
  })

  it("reads the expired keys through the age index, not the table, with statistics of the day before", async () => {
    const now = Date.now()
    const cut = now - IDEMPOTENCY_WINDOW_MS
    await t.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        // Yesterday's keys, when the statistics were taken: every one of them older than today's cut.
        yield* keys("ws_purge_c", "y", 20_000, cut - IDEMPOTENCY_WINDOW_MS, IDEMPOTENCY_WINDOW_MS)
        // This file's own database: autovacuum must not analyse the table again before the purge.
        yield* holdStatistics(sql, ["idempotency_keys"])
        // Since then today's keys came, the runs deleted all of yesterday's but the last ten minutes, and a vacuum
        // cleared what they deleted; the statistics are still yesterday's.
        yield* keys("ws_purge_c", "t", 20_000, cut + MINUTE, IDEMPOTENCY_WINDOW_MS - 2 * MINUTE)
        yield* sql`DELETE FROM idempotency_keys WHERE workspace_id = 'ws_purge_c'
            AND created_at < ${new Date(cut - 10 * MINUTE).toISOString()}::timestamptz`
        yield* sql`VACUUM idempotency_keys`
      }),
    )
    const expired = 20_000 / 144 // ten minutes of a day's 20,000
    const read = await purgeAt(now)
    // Each expired key's index entry, read to pick it, and the next entry that ends the range; a sequential scan
    // (the plain DELETE's plan under these statistics) reads all 20,000 of today's keys beside them.
    expect(read).toBeLessThan(2 * expired + 10)
    expect((await keysOf("ws_purge_c")).filter((k) => k.startsWith("y"))).toEqual([])
    expect((await keysOf("ws_purge_c")).length).toBe(20_000)
  })

  it("works through a backlog larger than one statement's batch in one run", async () => {
    const now = Date.now()
    // 25,000 expired keys (a server down for a while): three statements of at most 10,000.
    await t.run(keys("ws_purge_d", "old", 25_000, now - IDEMPOTENCY_WINDOW_MS - 2 * HOUR, HOUR))
    await t.run(keys("ws_purge_d", "new", 3, now - HOUR, MINUTE))
    // In one transaction, as under an older snapshot, the deleted rows' index entries stay: each batch starts where
    // the last ended, so they are read once (25,146 here). Each batch from the oldest read them again: 45,009.
    const read = await purgeAt(now)
    expect(await keysOf("ws_purge_d")).toEqual(["new0", "new1", "new2"])
    expect(read).toBeLessThan(26_000)
  })
})
