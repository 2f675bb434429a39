import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PeopleService, Sessions, WorkspaceService } from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

// One-time sign-in links (the first run's, the CLI's `signin-link`) that were used, replaced by a newer one, or
// expired are deleted by the sweep: each is refused exactly as an unknown link. The live one stays and still works.

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const HOUR = 3_600_000

describe("Sessions.purgeSignInLinks", () => {
  it("deletes used, replaced and expired sign-in links, and keeps the live one", async () => {
    const { workspace } = await t.run(WorkspaceService.use((s) => s.create(null, { name: "links", plan: "free" })))
    const user = await t.run(PeopleService.use((s) => s.ensureBootstrapOwner(workspace.id)))
    const sessions = <A, E>(f: (s: Sessions["Service"]) => Effect.Effect<A, E>) => Sessions.use(f)
    const create = (ms: number) =>
      t.run(
        at(
          ms,
          sessions((s) => s.createSignInLink(user.id, HOUR)),
        ),
      )
    const stored = () =>
      t
        .run(
          SqlClient.SqlClient.use(
            (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM signin_links WHERE user_id = ${user.id}`,
          ).pipe(Effect.orDie),
        )
        .then((r) => r[0]!.n)
    const purge = (ms: number) =>
      t.run(
        at(
          ms,
          sessions((s) => s.purgeSignInLinks),
        ),
      )

    const t0 = Date.now()
    const used = await create(t0)
    expect(
      await t.run(
        at(
          t0 + 500,
          sessions((s) => s.consumeSignInLink(used)),
        ),
      ),
    ).toBe(user.id)
    await create(t0 + 1_000) // replaced by the next one: expired at once
    const live = await create(t0 + 2_000)
    expect(await stored()).toBe(3)

    expect(await purge(t0 + 10 * 60_000)).toBe(2)
    expect(await stored()).toBe(1)
    expect(await purge(t0 + 10 * 60_000)).toBe(0)
    // the live link still shows whom it signs in, and signs them in once
    expect(
      await t.run(
        at(
          t0 + 20 * 60_000,
          sessions((s) => s.peekSignInLink(live)),
        ),
      ),
    ).toBeDefined()
    // past its end it goes too
    expect(await purge(t0 + 2_000 + HOUR)).toBe(1)
    expect(await stored()).toBe(0)
    expect(
      await t.run(
        at(
          t0 + 2_000 + HOUR,
          sessions((s) => s.consumeSignInLink(live)),
        ),
      ),
    ).toBeUndefined()
  })
})
