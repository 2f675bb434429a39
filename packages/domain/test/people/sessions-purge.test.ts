import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEFAULT_SESSION_SETTINGS, PeopleService, Sessions, WorkspaceService } from "../../src/index.ts"
import { ENDED_SESSIONS_KEPT_MS } from "../../src/people/Sessions.ts"
import { at, type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

// Sessions that ended (idle, past their end, signed out) are deleted by the sweep a day later; live ones, and
// those that ended within the day, stay.

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const HOUR = 3_600_000
const { idleMs, absoluteMs } = DEFAULT_SESSION_SETTINGS

describe("Sessions.purgeEnded", () => {
  it("deletes the sessions that ended over a day ago, and keeps the live ones and those that ended since", async () => {
    const { workspace } = await t.run(WorkspaceService.use((s) => s.create(null, { name: "sessions", plan: "free" })))
    const user = await t.run(PeopleService.use((s) => s.ensureBootstrapOwner(workspace.id)))
    const sessions = <A, E>(f: (s: Sessions["Service"]) => Effect.Effect<A, E>) => Sessions.use(f)
    const start = (ms: number) =>
      t.run(
        at(
          ms,
          sessions((s) => s.start(user.id, "link", false)),
        ),
      )
    const ids = () =>
      t
        .run(
          SqlClient.SqlClient.use(
            (sql) => sql<{ id: string }>`SELECT id FROM sessions WHERE user_id = ${user.id} ORDER BY id`,
          ).pipe(Effect.orDie),
        )
        .then((r) => r.map((x) => x.id))

    const t0 = Date.now()
    const sweepAt = t0 + absoluteMs + ENDED_SESSIONS_KEPT_MS + HOUR
    const idled = await start(t0) // idle from t0 + 2 h
    const signedOut = await start(t0 + 1_000)
    await t.run(
      at(
        t0 + 2_000,
        sessions((s) => s.end(signedOut.secret)),
      ),
    )
    // used every hour until its absolute end (t0 + 12 h)
    const lasted = await start(t0 + 3_000)
    for (let h = 1; h * HOUR < absoluteMs; h++)
      expect(
        await t.run(
          at(
            t0 + 3_000 + h * HOUR,
            sessions((s) => s.resolve(lasted.secret)),
          ),
        ),
      ).toBeDefined()
    const recentlyEnded = await start(sweepAt - idleMs - HOUR) // idle an hour before the sweep
    const live = await start(sweepAt - HOUR)
    const all = [idled, signedOut, lasted, recentlyEnded, live].map((s) => s.session.id)
    expect(await ids()).toEqual([...all].sort())

    expect(
      await t.run(
        at(
          sweepAt,
          sessions((s) => s.purgeEnded),
        ),
      ),
    ).toBe(3)
    expect(await ids()).toEqual([recentlyEnded.session.id, live.session.id].sort())
    expect(
      await t.run(
        at(
          sweepAt,
          sessions((s) => s.purgeEnded),
        ),
      ),
    ).toBe(0)
    // the live one still acts; the one that ended within the day still reads as expired, not signed out
    expect(
      (
        await t.run(
          at(
            sweepAt,
            sessions((s) => s.resolve(live.secret)),
          ),
        )
      )?.id,
    ).toBe(live.session.id)
    expect(
      await t.run(
        at(
          sweepAt,
          sessions((s) => s.standing(recentlyEnded.secret)),
        ),
      ),
    ).toBe("expired")
    expect(
      await t.run(
        at(
          sweepAt,
          sessions((s) => s.standing(idled.secret)),
        ),
      ),
    ).toBe("signed_out")
  })
})
