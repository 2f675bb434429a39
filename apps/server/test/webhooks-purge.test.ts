import { DeliveryQueue, PURGE_LOCK } from "@agentgov/domain"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer, unique } from "./helpers.ts"
import { eventually, type Receiver, startReceiver } from "./webhooks-support.ts"

/**
 * The history purge runs on one instance at a time (a transaction-scoped advisory try-lock): a purge while another's
 * is in its transaction deletes nothing and answers at once, where both used to delete the same rows (the second
 * waiting on the first's row locks). Deleting a webhook holds its workspace's chain head only for the webhook row and
 * its event: the history (200,000 deliveries took 6.5 s under the head, every append of the workspace waiting) is
 * removed afterwards by the workers' purge.
 */

let t: TestServer
let r: Receiver
beforeAll(async () => {
  t = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
  r = await startReceiver()
})
afterAll(async () => {
  await t?.close()
  await r?.close()
})

/** A webhook with `n` delivered events, returned with its id. */
const delivered = async (tag: string, n: number) => {
  const made = await t.call("POST", "/api/v1/webhooks", { body: { url: `${r.url}?w=${tag}`, events: [`${tag}.*`] } })
  expect(made.status, JSON.stringify(made.body)).toBe(201)
  const id = made.body.data.id as string
  const ingested = await t.call("POST", "/api/v1/events/ingest", {
    body: { events: Array.from({ length: n }, (_, i) => ({ type: `${tag}.tick`, data: { i } })) },
  })
  expect(ingested.status, JSON.stringify(ingested.body)).toBe(201)
  await eventually(
    async () => {
      const rows = await t.query<{ n: number }>(
        (sql) => sql`SELECT count(*)::int AS n FROM webhook_attempts WHERE webhook_id = ${id} AND status = 'success'`,
      )
      return rows[0]!.n === n ? true : undefined
    },
    20_000,
    "the deliveries' attempts",
  )
  return id
}

const history = async (id: string) =>
  (
    await t.query<{ deliveries: number; attempts: number }>(
      (sql) => sql`SELECT (SELECT count(*)::int FROM webhook_deliveries WHERE webhook_id = ${id}) AS deliveries,
        (SELECT count(*)::int FROM webhook_attempts WHERE webhook_id = ${id}) AS attempts`,
    )
  )[0]!

describe("two purges at once", () => {
  it("one purges; the other, while the first is in its transaction, deletes nothing and does not wait", async () => {
    const id = await delivered(unique("purge2").replaceAll("-", ""), 3)
    await t.query(
      (sql) => sql`UPDATE webhook_deliveries SET created_at = now() - interval '31 days' WHERE webhook_id = ${id}`,
    )
    const before = new Date(Date.now() - 30 * 86_400_000).toISOString()
    const rt = t.server.runtime
    const [first, second] = await rt.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const queue = yield* DeliveryQueue
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            // The first purge joins this transaction: its lock and its deleted rows stay held until it ends.
            const first = yield* queue.purgeFinished(before)
            // The second, as another instance's, on a connection of its own.
            const second = yield* Effect.promise(() => rt.runPromise(DeliveryQueue.use((q) => q.purgeFinished(before))))
            return [first, second] as const
          }),
        )
      }),
    )
    expect(first).toBe(3)
    expect(second).toBeUndefined()
    expect(await history(id)).toEqual({ deliveries: 0, attempts: 0 })
  })
})

describe("deleting a webhook with a history", () => {
  it("holds the chain head without touching the history, which the workers then remove", async () => {
    const id = await delivered(unique("delhist").replaceAll("-", ""), 5)
    expect(await history(id)).toEqual({ deliveries: 5, attempts: 5 })
    const rt = t.server.runtime
    // The history's rows are held elsewhere (as a long cascade would hold them) while the webhook is deleted and an
    // event is ingested: neither waits for them.
    const [deleted, ingested, events] = await rt.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT id FROM webhook_deliveries WHERE webhook_id = ${id} FOR UPDATE`
            const deleted = yield* Effect.promise(() => t.call("DELETE", `/api/v1/webhooks/${id}`))
            const ingested = yield* Effect.promise(() =>
              t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "after.delete", data: {} }] } }),
            )
            const events = yield* Effect.promise(() => t.call("GET", "/api/v1/events?type=webhook.deleted&limit=100"))
            return [deleted, ingested, events] as const
          }),
        )
      }),
    )
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200)
    // The answer carries the history's counts as they were.
    expect(deleted.body.data.stats).toMatchObject({ total: 5, successful: 5 })
    expect(ingested.status, JSON.stringify(ingested.body)).toBe(201)
    expect(events.body.data.some((e: any) => e.data.webhookId === id)).toBe(true)
    expect((await t.call("GET", `/api/v1/webhooks/${id}`)).status).toBe(404)
    expect((await t.call("GET", `/api/v1/webhooks/${id}/deliveries`)).status).toBe(404)
    // Woken by the deletion, a worker's purge removes the history, and then forgets the webhook.
    await eventually(
      async () => {
        const left = await history(id)
        const kept = await t.query((sql) => sql`SELECT 1 FROM webhooks_removed WHERE id = ${id}`)
        return left.deliveries === 0 && left.attempts === 0 && kept.length === 0 ? true : undefined
      },
      20_000,
      "the deleted webhook's history to be removed",
    )
  })
})

describe("a deleted webhook's pending deliveries", () => {
  it("are not due, nor queued, while they wait for the purge", async () => {
    // A server of its own: nothing else pending in its store.
    const token = "m".repeat(48)
    const own = await startTestServer({
      webhookAllowlist: ["127.0.0.1"],
      metrics: { token, port: undefined, host: "127.0.0.1" },
    })
    try {
      const made = await own.call("POST", "/api/v1/webhooks", { body: { url: `${r.url}?w=gone`, events: ["gone.*"] } })
      expect(made.status, JSON.stringify(made.body)).toBe(201)
      const id = made.body.data.id as string
      const rt = own.server.runtime
      const [next, depth] = await rt.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          // The purge lock held meanwhile: the deleted webhook's rows stay until this ends (as when the purge that
          // the deletion woke lost the try-lock to another instance's, and the rows wait for the hourly one).
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`SELECT pg_advisory_xact_lock(${PURGE_LOCK})`
              yield* Effect.promise(() =>
                own.query(
                  (q) => q`INSERT INTO webhook_deliveries (id, workspace_id, webhook_id, event_sequence, event_id,
                      event_type, status, next_attempt_at, created_at, updated_at)
                    SELECT 'dlv_gone' || g, ${own.workspaceId}, ${id}, g, 'evt_gone' || g, 'gone.tick', 'pending',
                      now() - interval '1 minute', now(), now()
                    FROM generate_series(1, 3) g`,
                ),
              )
              const deleted = yield* Effect.promise(() => own.call("DELETE", `/api/v1/webhooks/${id}`))
              expect(deleted.status, JSON.stringify(deleted.body)).toBe(200)
              // On connections of their own, as a worker and the metrics read them.
              const next = yield* Effect.promise(() => rt.runPromise(DeliveryQueue.use((q) => q.untilNextDue())))
              const depth = yield* Effect.promise(() =>
                fetch(`${own.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
                  .then((m) => m.text())
                  .then((text) => /^agentgov_webhook_queue_depth (\S+)$/m.exec(text)?.[1]),
              )
              return [next, depth] as const
            }),
          )
        }),
      )
      // They counted as due now: a worker with attempts in flight claimed again 10 ms after each one ended.
      expect(next.due).toBeUndefined()
      expect(depth).toBe("0")
    } finally {
      await own.close()
    }
  })
})
