import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Actor, OAuthService, PeopleService, WorkspaceService } from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

// A consent whose code the app never exchanged leaves a grant that can never act: once its code expired it is no
// longer listed, and the sweep deletes it (with its code) an hour later; grants in use, and fresh ones, stay.

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const CALLBACK = "https://app.example/callback"
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
    const { workspace } = await t.run(WorkspaceService.use((s) => s.create(null, { name: "grants", plan: "free" })))
    const owner = await t.run(PeopleService.use((s) => s.ensureBootstrapOwner(workspace.id)))
    const actor = (await t.run(
      PeopleService.use((s) => s.actorOf(owner.id, workspace.id, { type: "user", id: owner.id })),
    )) as Actor
    const oauth = <A, E>(f: (s: OAuthService["Service"]) => Effect.Effect<A, E>) => OAuthService.use(f)
    const created = await t.run(
      oauth((s) => s.createClient(actor, { name: "App", redirectUris: [CALLBACK], scopes: ["agents:read"] })),
    )
    const auth = { clientId: created.client.id, clientSecret: created.clientSecret }
    const consent = (ms: number) =>
      t.run(
        at(
          ms,
          oauth((s) =>
            s.approve(
              {
                responseType: "code",
                clientId: created.client.id,
                redirectUri: CALLBACK,
                scope: "agents:read",
                state: "st",
                codeChallenge: undefined,
                codeChallengeMethod: undefined,
              },
              owner.id,
              false,
            ),
          ),
        ),
      )
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
          (sql) => sql<{ id: string }>`SELECT id FROM oauth_grants WHERE client_id = ${created.client.id} ORDER BY id`,
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
            WHERE client_id = ${created.client.id} ORDER BY id`,
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
})
