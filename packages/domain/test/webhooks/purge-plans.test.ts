import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DeliveryQueue, SCOPES, systemActor, WebhookService, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, holdStatistics, makeDomainRuntime, type R, rowsRead } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const DAY_MS = 86_400_000

/**
 * A workspace with `hooks` webhooks, each with `perHook` finished deliveries made over the last 20 days, and, when
 * `oldPerHook` is set, that many more each made 40 days ago. Statistics are taken then (no webhook deleted yet, as
 * autovacuum takes them in a quiet spell); `after` runs next (a webhook deleted, a previous purge...); then one
 * purge of the history older than 30 days, in a transaction that counts what it read of webhook_deliveries.
 */
const purgeAfter = (shape: {
  tag: string
  hooks: number
  perHook: number
  oldPerHook?: number
  after: (
    sql: SqlClient.SqlClient,
    hooks: ReadonlyArray<string>,
    actor: ReturnType<typeof systemActor>,
  ) => Effect.Effect<unknown, unknown, R>
}) =>
  env.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const root = systemActor("ws_none", "live", new Set(SCOPES))
      const { workspace } = yield* WorkspaceService.use((s) => s.create(root, { name: `purge-${shape.tag}` }))
      const actor = systemActor(workspace.id, "live", new Set(SCOPES))
      const hooks: Array<string> = []
      for (let h = 0; h < shape.hooks; h++) {
        const made = yield* WebhookService.use((s) =>
          s.create(actor, { url: "http://93.184.216.34/", events: ["bench.*"] }),
        )
        if ("id" in made) hooks.push(made.id)
      }
      const now = Date.now()
      const insert = (perHook: number, tag: string, fromMs: number, spanMs: number) =>
        sql`INSERT INTO webhook_deliveries (id, workspace_id, webhook_id, event_sequence, event_id, event_type, status,
              attempts, created_at, updated_at)
            SELECT 'dlv_' || ${shape.tag} || ${tag} || h.n || '_' || i, ${workspace.id}, h.id, i, 'evt_' || ${tag} || i,
              'bench.event', CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'success' END, 1,
              ${new Date(fromMs).toISOString()}::timestamptz + (i * ${spanMs / perHook} || ' milliseconds')::interval, now()
            FROM unnest(${hooks}::text[]) WITH ORDINALITY AS h(id, n), generate_series(1, ${perHook}) AS i`
      yield* insert(shape.perHook, "r", now - 20 * DAY_MS, 19 * DAY_MS)
      if (shape.oldPerHook) yield* insert(shape.oldPerHook, "o", now - 40 * DAY_MS, DAY_MS)
      yield* holdStatistics(sql, ["webhook_deliveries"], { vacuum: true })
      yield* holdStatistics(sql, ["webhooks_removed"], { vacuum: true })
      yield* shape.after(sql, hooks, actor)
      const before = new Date(now - 30 * DAY_MS).toISOString()
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          const start = yield* rowsRead(sql, "webhook_deliveries")
          const purged = yield* DeliveryQueue.use((q) => q.purgeFinished(before))
          return { purged, read: (yield* rowsRead(sql, "webhook_deliveries")) - start }
        }),
      )
    }).pipe(Effect.orDie),
  )

describe("the webhook history purge, after statistics of a quiet spell", () => {
  it("reads a deleted webhook's history, not the table", async () => {
    const { purged, read } = await purgeAfter({
      tag: "rm",
      hooks: 10,
      perHook: 2_000,
      // One webhook is deleted after the statistics were taken, with 2,000 deliveries to purge.
      after: (_sql, hooks, actor) => WebhookService.use((s) => s.remove(actor, hooks[0]!)),
    })
    expect(purged).toBe(2_000)
    // Its 2,000 entries of the (webhook_id, created_at) index, 2,000 primary-key probes to delete them, the same 2,000
    // entries again to see that none is left, and a descent for each remaining webhook: 6,000. With `id IN (subquery)`
    // the planner hashed the ids and read the whole table (20,000 rows) beside them: 24,005.
    expect(read).toBeLessThan(8_000)
  })

  it("reads the old history it deletes, not the table", async () => {
    const { purged, read } = await purgeAfter({
      tag: "old",
      hooks: 10,
      perHook: 2_000,
      oldPerHook: 800,
      // A previous purge deleted most of the old history after the statistics were taken: 80 rows a webhook are left.
      after: (sql) => sql`DELETE FROM webhook_deliveries WHERE id LIKE 'dlv_oldo%' AND event_sequence > 80`,
    })
    expect(purged).toBe(800)
    // The old range of each webhook's (webhook_id, created_at) index, 8,000 entries until a vacuum (7,200 of them the
    // previous purge's), and 800 primary-key probes: 8,800. With `id IN (subquery)` the planner, told 8,000 old rows
    // remain, hashed the ids and read the whole table (20,800 rows) beside them: 46,805.
    expect(read).toBeLessThan(12_000)
  })
})
