import type { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MATCH_RETENTION_DAYS } from "../../src/content/ContentService.ts"
import { type Actor, Authenticator, ContentService, WorkspaceService } from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"
import { ARTICLE } from "./corpus.ts"

/**
 * Recorded matches are purged by the housekeeping sweep once older than the retention (three years by default), unless
 * a takedown cites them (review "content", fifth pass): the table only grew, a row per match of every scan.
 */

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())
const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => env.run(effect)
const content = <A, E>(f: (s: ContentService["Service"]) => Effect.Effect<A, E, R>) => ContentService.use(f)
const DAY = 86_400_000

const make = async (name: string): Promise<Actor> => {
  const { apiKey } = await run(WorkspaceService.use((s) => s.create(null, { name, environment: "live" })))
  return run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
}

describe("match retention", () => {
  it("purges the matches past the retention that no takedown cites, and keeps the cited and the recent", async () => {
    expect(MATCH_RETENTION_DAYS).toBe(1_095)
    const actor = await make("retention")
    // Times after every id this process minted: a match's id carries the time it was found (ids.ts), which the
    // purge reads it by.
    const t0 = Date.now() + DAY
    const item = await run(
      at(
        t0,
        content((s) => s.register(actor, { kind: "text", title: "article", text: ARTICLE })),
      ),
    )
    const scanAt = async (ms: number) => {
      const { matches } = await run(
        at(
          ms,
          content((s) => s.scan(actor, { text: `Quoted: ${ARTICLE}` })),
        ),
      )
      expect(matches.map((m) => m.contentId)).toEqual([item.id])
      return matches[0]!.id!
    }
    const old = await scanAt(t0 + DAY)
    const cited = await scanAt(t0 + 2 * DAY)
    const takedown = await run(
      at(
        t0 + 3 * DAY,
        content((s) =>
          s.createTakedown(actor, item.id, {
            matchId: cited,
            targetUrl: "https://copies.example/a",
            recipient: "abuse@copies.example",
          }),
        ),
      ),
    )
    // Recorded a day before the purge below: within the retention.
    const recent = await scanAt(t0 + (MATCH_RETENTION_DAYS + 1) * DAY)

    // The sweep at the retention past the two oldest: the uncited one goes, once.
    const now = t0 + (MATCH_RETENTION_DAYS + 2) * DAY + 1
    expect(
      await run(
        at(
          now,
          content((s) => s.purgeMatches),
        ),
      ),
    ).toBe(1)
    expect(
      await run(
        at(
          now,
          content((s) => s.purgeMatches),
        ),
      ),
    ).toBe(0)
    const { matches } = await run(content((s) => s.get(actor, item.id)))
    expect(matches!.map((m) => m.id)).toEqual([recent, cited])
    // The takedown keeps its evidence, and still names it.
    const [listed] = (await run(content((s) => s.listTakedowns(actor, item.id, {})))).data
    expect(listed).toMatchObject({ id: takedown.id, matchId: cited })
    // A takedown citing the purged match is refused as citing no match of the item.
    const refused = await env.failure(
      content((s) =>
        s.createTakedown(actor, item.id, {
          matchId: old,
          targetUrl: "https://copies.example/b",
          recipient: "abuse@copies.example",
        }),
      ),
    )
    expect(refused).toMatchObject({ _tag: "InvalidInput", field: "matchId" })
    // The trail still records every match found, the purged one too.
    const events = (
      await run(
        SqlClient.SqlClient.use(
          (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM events
          WHERE workspace_id = ${actor.workspaceId} AND type = 'content.match.detected'`,
        ) as Effect.Effect<Array<{ n: number }>, never, R>,
      )
    )[0]!.n
    expect(events).toBe(3)
    // Every purge still matches nothing more.
    expect(
      await run(
        at(
          now + 400 * DAY,
          content((s) => s.purgeMatches),
        ),
      ),
    ).toBe(0)
  })
})
