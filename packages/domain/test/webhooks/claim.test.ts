import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AuditLog, DeliveryQueue, SCOPES, systemActor, WebhookService, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

/** Entries this transaction's scans returned from webhook_deliveries' indexes so far, whatever the plan. */
const indexEntriesRead = (sql: SqlClient.SqlClient) =>
  sql<{ n: number }>`SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)::int AS n FROM pg_index
      WHERE indrelid = 'webhook_deliveries'::regclass`.pipe(Effect.map(([r]) => r!.n))

describe("claiming deliveries", () => {
  it("reads each claimed row by its key, whatever the statistics say of the queue", async () => {
    const { claimed, read, first } = await env.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const admin = systemActor("ws_none", "live", new Set(SCOPES))
        const ws = yield* WorkspaceService.use((s) => s.create(admin, { name: "claims" }))
        const actor = systemActor(ws.workspace.id, "live", new Set(SCOPES))
        yield* WebhookService.use((s) => s.create(actor, { url: "http://93.184.216.34/", events: ["bench.*"] }))
        const append = (n: number) =>
          sql.withTransaction(
            AuditLog.use((a) =>
              a.append(
                actor,
                Array.from({ length: n }, (_, i) => ({ type: "bench.event", data: { i } })),
              ),
            ),
          )
        // Statistics taken in a quiet spell, every delivery made (as autovacuum takes them then), and then a backlog
        // of 20,000 that comes faster than autovacuum analyses again: the planner still holds a pending row rare.
        yield* append(200)
        yield* sql`UPDATE webhook_deliveries SET status = 'success' WHERE workspace_id = ${ws.workspace.id}`
        yield* sql`VACUUM ANALYZE webhook_deliveries`
        const backlog: Array<{ readonly id: string }> = []
        for (let i = 0; i < 10; i++) backlog.push(...(yield* append(2_000)))
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const before = yield* indexEntriesRead(sql)
            const claimed = yield* DeliveryQueue.use((q) => q.claim(100))
            const read = (yield* indexEntriesRead(sql)) - before
            return { claimed, read, first: backlog.slice(0, 100).map((e) => e.id) }
          }),
        )
      }).pipe(Effect.orDie),
    )
    // The backlog's first 100, in order, each once.
    expect(claimed.map((d) => d.eventId)).toEqual(first)
    expect(new Set(claimed.map((d) => d.id)).size).toBe(100)
    // 100 candidates from the pending index, 100 key lookups to lock them and 100 to update them, and the walk over
    // workspaces: 303. Through the (webhook_id, status) index the webhook's whole backlog was read and sorted for
    // each claim (20,203 here, before migration 0034); the pending index walked for each candidate, 100 times that.
    expect(read).toBeLessThan(1_000)
  })
})
