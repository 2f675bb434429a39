import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AuditLog, DeliveryQueue, SCOPES, systemActor, WebhookService, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, holdStatistics, makeDomainRuntime, rowsRead } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const indexEntriesRead = (sql: SqlClient.SqlClient) => rowsRead(sql, "webhook_deliveries")

/**
 * A queue whose statistics were taken in a quiet spell, every delivery made (as autovacuum takes them then), and then
 * a backlog of `backlogEvents` events to each of the first workspace's webhooks that comes faster than autovacuum
 * analyses again: the planner still holds a pending row rare. What a claim of 100 and the next due time read then.
 */
const queueAfterQuietSpell = (shape: {
  workspaces: number
  webhooks: number
  history: number
  backlogEvents: number
}) =>
  env.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const admin = systemActor("ws_none", "live", new Set(SCOPES))
      const actors: Array<ReturnType<typeof systemActor>> = []
      for (let w = 0; w < shape.workspaces; w++) {
        const ws = yield* WorkspaceService.use((s) => s.create(admin, { name: `claims-${w}` }))
        const actor = systemActor(ws.workspace.id, "live", new Set(SCOPES))
        for (let h = 0; h < shape.webhooks; h++)
          yield* WebhookService.use((s) => s.create(actor, { url: "http://93.184.216.34/", events: ["bench.*"] }))
        actors.push(actor)
      }
      const append = (actor: (typeof actors)[number], n: number) =>
        sql.withTransaction(
          AuditLog.use((a) =>
            a.append(
              actor,
              Array.from({ length: n }, (_, i) => ({ type: "bench.event", data: { i } })),
            ),
          ),
        )
      for (const actor of actors) yield* append(actor, shape.history)
      yield* sql`UPDATE webhook_deliveries SET status = 'success'`
      // This file's own database: autovacuum must not analyse the backlog before the claim. A CI run on a loaded
      // machine once read 29,623 entries here, as a plan made from statistics that count the backlog would.
      yield* holdStatistics(sql, ["webhook_deliveries"], { vacuum: true })
      const backlog: Array<{ readonly id: string }> = []
      for (let left = shape.backlogEvents; left > 0; left -= 2_000)
        backlog.push(...(yield* append(actors[0]!, Math.min(left, 2_000))))
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          const before = yield* indexEntriesRead(sql)
          const claimed = yield* DeliveryQueue.use((q) => q.claim(100))
          const claimRead = (yield* indexEntriesRead(sql)) - before
          const next = yield* DeliveryQueue.use((q) => q.untilNextDue())
          const nextRead = (yield* indexEntriesRead(sql)) - before - claimRead
          return { claimed, claimRead, next, nextRead, backlog: backlog.map((e) => e.id) }
        }),
      )
    }).pipe(Effect.orDie),
  )

describe("claiming deliveries after statistics of a quiet spell", () => {
  it("one webhook: reads the claimed rows, not its backlog", async () => {
    const { claimed, claimRead, next, nextRead, backlog } = await queueAfterQuietSpell({
      workspaces: 1,
      webhooks: 1,
      history: 200,
      backlogEvents: 20_000,
    })
    // The backlog's first 100, in order, each once.
    expect(claimed.map((d) => d.eventId)).toEqual(backlog.slice(0, 100))
    expect(new Set(claimed.map((d) => d.id)).size).toBe(100)
    // 100 candidates from the pending index, 100 key lookups to lock them and 100 to update them, and the walk over
    // workspaces: 303. Through the (webhook_id, status) index the webhook's whole backlog was read and sorted for
    // each claim (20,203 here, before migration 0034); the pending index walked for each candidate, 100 times that.
    expect(claimRead).toBeLessThan(1_000)
    // The next due time: a descent per webhook, past the entries the claimed rows left at their earlier due time (the
    // claim moved them on): 303. Walking the workspace's pending rows instead reads its backlog.
    expect(next.due).toBeLessThanOrEqual(0)
    expect(nextRead).toBeLessThan(500)
  })

  it("a history over several workspaces' webhooks, a backlog over three: reads each webhook's first rows only", async () => {
    const { claimed, claimRead, next, nextRead, backlog } = await queueAfterQuietSpell({
      workspaces: 3,
      webhooks: 3,
      history: 1_000,
      backlogEvents: 6_000,
    })
    // Each of the three webhooks' earliest: the first 34 events' deliveries (three each), 100 of them, each once.
    expect(new Set(claimed.map((d) => d.id)).size).toBe(100)
    const firstEvents = new Set(backlog.slice(0, 34))
    expect(claimed.every((d) => firstEvents.has(d.eventId))).toBe(true)
    expect(new Set(claimed.map((d) => d.webhookId)).size).toBe(3)
    // Up to 100 candidates of each webhook, 100 key lookups and updates, the walk over workspaces.
    expect(claimRead).toBeLessThan(1_500)
    // Before migration 0034 the pending index of one was walked whole for each webhook: 54,500 entries here.
    expect(next.due).toBeLessThanOrEqual(0)
    expect(nextRead).toBeLessThan(500)
  })
})

describe("resuming a disabled webhook", () => {
  it("reads its paused deliveries, not its history", async () => {
    const read = await env.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const admin = systemActor("ws_none", "live", new Set(SCOPES))
        const ws = yield* WorkspaceService.use((s) => s.create(admin, { name: "resume" }))
        const actor = systemActor(ws.workspace.id, "live", new Set(SCOPES))
        const hook = (yield* WebhookService.use((s) =>
          s.create(actor, { url: "http://93.184.216.34/", events: ["bench.*"] }),
        )) as { id: string }
        const append = (n: number) =>
          sql.withTransaction(
            AuditLog.use((a) =>
              a.append(
                actor,
                Array.from({ length: n }, (_, i) => ({ type: "bench.event", data: { i } })),
              ),
            ),
          )
        // A history of 3,000 delivered, then 100 waiting when the webhook is disabled (paused with it).
        yield* append(3_000)
        yield* sql`UPDATE webhook_deliveries SET status = 'success' WHERE webhook_id = ${hook.id}`
        yield* append(100)
        yield* holdStatistics(sql, ["webhook_deliveries"], { vacuum: true })
        yield* WebhookService.use((s) => s.update(actor, hook.id, { enabled: false }))
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const before = yield* indexEntriesRead(sql)
            yield* WebhookService.use((s) => s.update(actor, hook.id, { enabled: true }))
            const [paused] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries
                WHERE webhook_id = ${hook.id} AND status = 'paused'`
            expect(paused!.n).toBe(0)
            return (yield* indexEntriesRead(sql)) - before
          }),
        )
      }).pipe(Effect.orDie),
    )
    // Its 100 paused deliveries (and the pending index's entries for them); without an index of its own, the resume
    // read the webhook's history whole (6,430 rows here).
    expect(read).toBeLessThan(1_000)
  })
})
