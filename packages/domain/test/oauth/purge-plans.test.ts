import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { OAuthService } from "../../src/index.ts"
import { at, type DomainTestRuntime, holdStatistics, makeDomainRuntime, rowsRead } from "../runtime.ts"
import { appOf } from "./app.ts"

// The sweep of abandoned grants deletes each with its code. Without an index on oauth_codes (grant_id), every grant
// deleted had PostgreSQL's foreign-key check scan all the codes of every grant (one full scan per grant deleted).
// It used to read every grant older than an hour on every run, and every token and live code once (hashed): linear in
// the grants ever made. Since migration 0037 it reads only the grants never exchanged (`exchanged_at`, indexed where
// null), and probes each one's tokens and codes. The sweep of expired tokens read every token held, joined to its
// grant; since migration 0038 it reads those expired, by index.

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const HOUR = 3_600_000

/**
 * One run of a sweep (by default of abandoned grants) at `now`, in a transaction of its own: how many it deleted, and
 * the rows it read by table.
 */
const sweepAt = (
  sql: SqlClient.SqlClient,
  now: number,
  sweep: "purgeAbandonedGrants" | "purgeExpiredTokens" = "purgeAbandonedGrants",
) =>
  sql.withTransaction(
    Effect.gen(function* () {
      const tables = ["oauth_grants", "oauth_tokens", "oauth_codes"]
      const before = yield* Effect.forEach(tables, (table) => rowsRead(sql, table))
      const purged = yield* at(
        now,
        OAuthService.use((s) => s[sweep]),
      )
      const after = yield* Effect.forEach(tables, (table) => rowsRead(sql, table))
      const [grants, tokens, codes] = after.map((n, i) => n - before[i]!)
      return { purged, grants: grants!, tokens: tokens!, codes: codes! }
    }),
  )

describe("the sweep of abandoned OAuth grants", () => {
  it("reads the codes of the grants it deletes, not every code once for each", async () => {
    const { workspace, owner, client } = await appOf(t, "grant-plans")
    const now = Date.now()
    const result = await t.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const grants = (tag: string, n: number, createdMs: number, codeExpiresMs: number) =>
          sql`WITH g AS (
                INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at)
                SELECT 'grt_' || ${tag} || i, ${client.id}, ${owner.id}, ${workspace.id}, '["agents:read"]'::jsonb,
                  ${new Date(createdMs).toISOString()}::timestamptz
                FROM generate_series(1, ${n}) AS i RETURNING id)
              INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, expires_at)
              SELECT 'code_' || id, id, 'https://app.example/cb', ${new Date(codeExpiresMs).toISOString()}::timestamptz
              FROM g`
        // 2,000 consents made just now, their codes still to be exchanged; 50 abandoned three hours ago.
        yield* grants("live", 2_000, now, now + 60_000)
        yield* grants("gone", 50, now - 3 * HOUR, now - 3 * HOUR + 60_000)
        yield* holdStatistics(sql, ["oauth_grants", "oauth_codes"])
        return yield* sweepAt(sql, now)
      }).pipe(Effect.orDie),
    )
    expect(result.purged).toBe(50)
    // Each abandoned grant's code probed (the sweep's "has an unexpired code"), deleted and checked through the codes'
    // grant index: 150. Without the index the foreign-key check of each grant deleted scanned all 2,050 codes
    // (104,100), with "IN (SELECT …)" the codes' delete read them once more (4,150 with the index), and while the
    // test was "NOT (tokens OR live code)" the planner hashed the live codes, reading all 2,000 once a run (2,150).
    expect(result.codes).toBeLessThan(500)
  })

  it("reads the grants never exchanged, not every grant ever made", async () => {
    const { workspace, owner, client } = await appOf(t, "grant-reads")
    const now = Date.now()
    const result = await t.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const old = new Date(now - 3 * HOUR).toISOString()
        // 3,000 grants in use for three hours, each exchanged then (as the exchange and migration 0037 mark them)
        // and holding its token; 50 consents abandoned as long ago, their codes expired.
        yield* sql`WITH g AS (
              INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at, exchanged_at)
              SELECT 'grt_used' || i, ${client.id}, ${owner.id}, ${workspace.id}, '["agents:read"]'::jsonb,
                ${old}::timestamptz, ${old}::timestamptz
              FROM generate_series(1, 3000) AS i RETURNING id)
            INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at, created_at)
            SELECT 'tok_' || id, id, 'refresh', ${new Date(now + 30 * 24 * HOUR).toISOString()}::timestamptz,
              ${old}::timestamptz
            FROM g`
        yield* sql`WITH g AS (
              INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at)
              SELECT 'grt_left' || i, ${client.id}, ${owner.id}, ${workspace.id}, '["agents:read"]'::jsonb,
                ${old}::timestamptz
              FROM generate_series(1, 50) AS i RETURNING id)
            INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, expires_at)
            SELECT 'code_' || id, id, 'https://app.example/cb', ${new Date(now - 3 * HOUR + 60_000).toISOString()}::timestamptz
            FROM g`
        yield* holdStatistics(sql, ["oauth_grants", "oauth_codes", "oauth_tokens"])
        return yield* sweepAt(sql, now)
      }).pipe(Effect.orDie),
    )
    expect(result.purged).toBe(50)
    // The candidates through the index of grants never exchanged, and the deletes: 250 grant entries and rows read,
    // no token. Before migration 0037 every grant older than an hour was read and the tokens hashed (here 5,200 grant
    // entries and rows, with the other test's, and 3,000 tokens).
    expect(result.grants).toBeLessThan(500)
    expect(result.tokens).toBeLessThan(500)
  })

  it("marks the grants exchanged before migration 0037, a batch a run, keeps them, and reads them no more", async () => {
    const { workspace, owner, client } = await appOf(t, "grant-marks")
    const now = Date.now()
    const result = await t.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const old = (hours: number) => new Date(now - hours * HOUR).toISOString()
        // 200 grants holding a token and left unmarked, as the migration leaves those exchanged before it (and an
        // instance of the release before it leaves those it exchanges), made 5 to 205 hours ago; 20 abandoned.
        yield* sql`WITH g AS (
              INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at)
              SELECT 'grt_before' || i, ${client.id}, ${owner.id}, ${workspace.id}, '["agents:read"]'::jsonb,
                ${old(5)}::timestamptz - make_interval(hours => i)
              FROM generate_series(1, 200) AS i RETURNING id)
            INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at, created_at)
            SELECT 'tok_' || id, id, 'refresh', ${old(-720)}::timestamptz, ${old(5)}::timestamptz FROM g`
        yield* sql`INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at)
            SELECT 'grt_dropped' || i, ${client.id}, ${owner.id}, ${workspace.id}, '["agents:read"]'::jsonb,
              ${old(3)}::timestamptz
            FROM generate_series(1, 20) AS i`
        yield* holdStatistics(sql, ["oauth_grants", "oauth_tokens"])
        const first = yield* sweepAt(sql, now)
        const marks = yield* sql<{ id: string; created_at: Date; exchanged_at: Date | null }>`
            SELECT id, created_at, exchanged_at FROM oauth_grants WHERE id LIKE 'grt_before%'`
        // Until vacuumed, the index still holds the marked grants' old versions, which a bitmap scan (this data's
        // plan) reads again on every run; a plain index scan marks them dead once. Autovacuum removes them.
        yield* holdStatistics(sql, ["oauth_grants"], { vacuum: true })
        const second = yield* sweepAt(sql, now)
        return { first, marks, second }
      }).pipe(Effect.orDie),
    )
    // The first run reads the unmarked grants older than an hour (the 220 and their index entries; every grant of
    // the store without the index's filter), deletes the abandoned and marks the exchanged, at their creation.
    expect(result.first.purged).toBe(20)
    expect(result.first.grants).toBeLessThan(1_000)
    expect(result.marks).toHaveLength(200)
    expect(result.marks.every((g) => g.exchanged_at?.getTime() === g.created_at.getTime())).toBe(true)
    // The next run has nothing to look at: a probe of the index, empty below the cut (without the marks it read the
    // 200 again, and the probes of their tokens).
    expect(result.second.purged).toBe(0)
    expect(result.second.grants).toBeLessThan(20)
  })
})

describe("the sweep of expired OAuth tokens", () => {
  it("reads the spent tokens that expired over a day ago, not every token held", async () => {
    const { workspace, owner, client } = await appOf(t, "token-reads")
    const now = Date.now()
    const result = await t.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const ago = (hours: number) => new Date(now - hours * HOUR).toISOString()
        /**
         * `n` grants made and exchanged 40 days ago (`marked` or not), with `each` refresh tokens expiring
         * `expiresAgo`, `used` (rotated) or not (the grant's current one).
         */
        const grants = (tag: string, n: number, marked: boolean, each: number, expiresAgo: number, used = true) =>
          sql`WITH g AS (
                INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at, exchanged_at)
                SELECT 'grt_' || ${tag} || i, ${client.id}, ${owner.id}, ${workspace.id}, '["agents:read"]'::jsonb,
                  ${ago(960)}::timestamptz, ${marked ? ago(960) : null}::timestamptz
                FROM generate_series(1, ${n}) AS i RETURNING id)
              INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at, created_at, used_at)
              SELECT 'tok_' || id || '_' || j, id, 'refresh', ${ago(expiresAgo)}::timestamptz, ${ago(960)}::timestamptz,
                ${used ? ago(960) : null}::timestamptz
              FROM g, generate_series(1, ${each}) AS j`
        // 2,000 apps refreshing, each holding 2 used refresh tokens not yet expired (reuse detection keeps them 30
        // days); 50 tokens expired two days ago; 20 as old, of grants exchanged before migration 0037 (not marked);
        // 1,000 apps that stopped, each holding its current refresh token, expired as long ago and kept.
        yield* grants("held", 2_000, true, 2, -200)
        yield* grants("stopped", 1_000, true, 1, 48, false)
        yield* grants("expired", 50, true, 1, 48)
        yield* grants("unmarked", 20, false, 1, 48)
        yield* holdStatistics(sql, ["oauth_grants", "oauth_tokens"])
        const first = yield* sweepAt(sql, now, "purgeExpiredTokens")
        yield* holdStatistics(sql, ["oauth_tokens"], { vacuum: true })
        const second = yield* sweepAt(sql, now, "purgeExpiredTokens")
        return { first, second }
      }).pipe(Effect.orDie),
    )
    // The 70 spent and expired through the index, and the deletes of 50 by key: under 500 token entries and rows.
    // Before migration 0038 every token was read, joined to its grant (5,070 here, with 4,000 live), on every run.
    // The 1,000 current refresh tokens are not in the index (in an index of every token, 1,120 entries and rows
    // read), nor taken by the query (without its spent-token test, 1,050 deleted).
    expect(result.first.purged).toBe(50)
    expect(result.first.tokens).toBeLessThan(500)
    // and a probe of each one's grant (written as a join, the planner hashed every grant of the store: 3,070 and
    // more)
    expect(result.first.grants).toBeLessThan(500)
    // Then only the unmarked grants' 20, kept until the sweep of abandoned consents marks their grants.
    expect(result.second.purged).toBe(0)
    expect(result.second.tokens).toBeLessThan(100)
  })
})
