import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { OAuthService } from "../../src/index.ts"
import { at, type DomainTestRuntime, holdInTransaction, makeDomainRuntime } from "../runtime.ts"
import { appOf, CALLBACK } from "./app.ts"

// A consent whose code the app never exchanged leaves a grant that can never act: once its code expired it is no
// longer listed, and the sweep deletes it (with its code) an hour later; grants in use, and fresh ones, stay.

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const MINUTE = 60_000
const HOUR = 3_600_000

const rowsOf = (grantIds: ReadonlyArray<string>) =>
  t.run(
    SqlClient.SqlClient.use((sql) =>
      Effect.all({
        grants: sql<{ id: string }>`SELECT id FROM oauth_grants WHERE id IN ${sql.in(grantIds)} ORDER BY id`,
        codes: sql<{ grant_id: string }>`SELECT grant_id FROM oauth_codes WHERE grant_id IN ${sql.in(grantIds)}
            ORDER BY grant_id`,
      }),
    ).pipe(Effect.orDie),
  )

describe("OAuth grants whose code was never exchanged", () => {
  it("are listed until the code expires, deleted by the sweep an hour later; exchanged and fresh ones stay", async () => {
    const { actor, client, auth, consent } = await appOf(t, "grants")
    const oauth = <A, E>(f: (s: OAuthService["Service"]) => Effect.Effect<A, E>) => OAuthService.use(f)
    const listed = (ms: number) =>
      t
        .run(
          at(
            ms,
            oauth((s) => s.listGrants(actor, { limit: 100 })),
          ),
        )
        .then((p) => p.data.map((g) => g.id).sort())
    // the client's grants, oldest first (a grant's id orders by its time)
    const grantIds = () =>
      t.run(
        SqlClient.SqlClient.use(
          (sql) => sql<{ id: string }>`SELECT id FROM oauth_grants WHERE client_id = ${client.id} ORDER BY id`,
        ).pipe(Effect.orDie),
      )

    const t0 = Date.now()
    const used = await consent(t0)
    await t.run(
      at(
        t0 + 1_000,
        oauth((s) => s.exchangeCode(auth, { code: used.code, redirectUri: CALLBACK })),
      ),
    )
    await consent(t0 + 2_000) // abandoned: the app never comes back for its code
    const [exchanged, abandoned] = (await grantIds()).map((g) => g.id)
    // The exchange marked its grant, at its time: the sweep reads only the grants never exchanged (migration 0037).
    const marked = await t.run(
      SqlClient.SqlClient.use(
        (sql) => sql<{ id: string; exchanged_at: Date | null }>`SELECT id, exchanged_at FROM oauth_grants
            WHERE client_id = ${client.id} ORDER BY id`,
      ).pipe(Effect.orDie),
    )
    expect(marked.map((g) => [g.id, g.exchanged_at?.getTime() ?? null])).toEqual([
      [exchanged, t0 + 1_000],
      [abandoned, null],
    ])

    // while its code can still be exchanged, the consent is listed
    expect(await listed(t0 + 30_000)).toEqual([exchanged, abandoned].sort())
    // from the code's expiry it is not
    expect(await listed(t0 + 2_000 + MINUTE)).toEqual([exchanged])

    const purge = (ms: number) =>
      t.run(
        at(
          ms,
          oauth((s) => s.purgeAbandonedGrants),
        ),
      )
    // kept for an hour after its code expired
    expect(await purge(t0 + 2_000 + MINUTE + HOUR - 1_000)).toBe(0)
    const late = t0 + 2 * HOUR
    await consent(late) // a consent made just now is left alone
    const fresh = (await grantIds()).at(-1)!.id
    expect(await purge(late)).toBe(1)
    expect(await rowsOf([exchanged!, abandoned!, fresh])).toEqual({
      grants: [{ id: exchanged }, { id: fresh }],
      codes: [{ grant_id: exchanged }, { grant_id: fresh }],
    })
    expect(await purge(late)).toBe(0)
    expect(await listed(late)).toEqual([exchanged, fresh].sort())
  })

  it("are left for the next run while an exchange holds their spent code, where the sweep waited and deadlocked", async () => {
    const { client, auth, consent } = await appOf(t, "replay")
    const t0 = Date.now()
    const { code } = await consent(t0)
    // Spent on a refused exchange (another redirect_uri): never exchanged, abandoned an hour after its code expired.
    await t.failure(
      at(
        t0 + 1_000,
        OAuthService.use((s) => s.exchangeCode(auth, { code, redirectUri: "https://app.example/other" })),
      ),
    )
    const [grant] = await t.run(
      SqlClient.SqlClient.use(
        (sql) => sql<{ id: string }>`SELECT id FROM oauth_grants WHERE client_id = ${client.id}`,
      ).pipe(Effect.orDie),
    )
    const sweepAt = (ms: number) =>
      t.run(
        SqlClient.SqlClient.use((sql) =>
          sql.withTransaction(
            Effect.gen(function* () {
              // Without the change the sweep waited here for the code, until this time-out.
              yield* sql`SET LOCAL lock_timeout = '5s'`
              return yield* at(
                ms,
                OAuthService.use((s) => s.purgeAbandonedGrants),
              )
            }),
          ),
        ).pipe(Effect.orDie),
      )

    // A replay of the spent code, as the exchange runs it: the code's row locked, then (it was used) the grant revoked.
    const replay = holdInTransaction(
      t.run,
      (sql) =>
        Effect.andThen(
          sql`SET LOCAL lock_timeout = '5s'`,
          sql`SELECT 1 FROM oauth_codes WHERE grant_id = ${grant!.id} FOR UPDATE`,
        ),
      (sql) =>
        sql<{ id: string }>`UPDATE oauth_grants SET revoked_at = now(), revoked_reason = 'code_reused'
            WHERE id = ${grant!.id} AND revoked_at IS NULL RETURNING id`,
    )
    await replay.held
    const late = t0 + 2 * HOUR
    // The sweep takes the grant but not its code, and leaves both; the replay's revocation then goes through.
    expect(await sweepAt(late)).toBe(0)
    expect(await replay.release()).toEqual([{ id: grant!.id }])
    expect(await rowsOf([grant!.id])).toEqual({ grants: [{ id: grant!.id }], codes: [{ grant_id: grant!.id }] })
    // The next run deletes it, with its code.
    expect(await sweepAt(late)).toBe(1)
    expect(await rowsOf([grant!.id])).toEqual({ grants: [], codes: [] })
  })
})
