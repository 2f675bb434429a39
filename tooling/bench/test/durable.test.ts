import { createHash } from "node:crypto"
import { makeTestStore, pgConnect, type TestStore } from "@agentgov/testing"
import type postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type DurableServer, startDurable } from "../src/durable.ts"

/**
 * The minimal durable design is the yardstick of the guard and ingest benchmarks: it must do the
 * durable work it claims (one audit-width row per decision, one per ingested event, each with its
 * SHA-256, nothing for a refused request), or the ratios against it mean nothing.
 */

let store: TestStore
let sql: postgres.Sql
let durable: DurableServer
beforeAll(async () => {
  store = await makeTestStore()
  sql = pgConnect(store.url)
  durable = await startDurable(sql, store.url, "durable_t")
}, 60_000)
afterAll(async () => {
  durable?.stop()
  await sql?.end()
  await store?.cleanup()
})

const rows = () =>
  sql<Array<{ sequence: string; id: string; type: string; data: unknown; ts: Date; prev_hash: string; hash: string }>>`
    SELECT sequence, id, type, data::text AS data, ts, prev_hash, hash FROM durable_t ORDER BY sequence`
/** The answer's status and JSON body. */
const post = async (path: string, body: string, key = durable.key) => {
  const res = await fetch(`${durable.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  })
  return { status: res.status, body: (await res.json()) as any }
}

describe("the minimal durable server", () => {
  it("refuses a wrong token and a body that is not JSON, and writes nothing for either", async () => {
    const wrong = await post("/v1/guard", JSON.stringify({ action: "a.read" }), "not-the-key")
    expect(wrong.status).toBe(401)
    const garbled = await post("/v1/guard", "{not json")
    expect(garbled.status).toBe(400)
    expect(garbled.body.ok).toBe(false)
    expect(await rows()).toHaveLength(0)
  })

  it("commits one audit-width row per guard decision, concurrent ones included, before answering", async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        post("/v1/guard", JSON.stringify({ action: i % 2 === 0 ? "files.read" : "files.delete", context: { i } })),
      ),
    )
    const bodies = answers.map((a) => a.body)
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200))
    expect(bodies.filter((b) => b.data.decision === "deny")).toHaveLength(10)
    const stored = await rows()
    expect(stored.map((r) => r.id).sort()).toEqual(bodies.map((b) => b.data.eventId).sort())
    for (const r of stored) {
      // The widths of a chained event: evt_ + 26 characters, two 64-hex hashes.
      expect(r.id).toHaveLength(30)
      expect(r.prev_hash).toMatch(/^[0-9a-f]{64}$/)
      const expected = createHash("sha256")
        .update(String(r.sequence))
        .update(r.type)
        .update(r.data as string)
        .update(r.ts.toISOString())
        .digest("hex")
      expect(r.hash).toBe(expected)
    }
  })

  it("ingests a batch as one row per event and answers each event's id and position", async () => {
    const before = (await rows()).length
    const res = await post(
      "/v1/events/ingest",
      JSON.stringify({ events: [1, 2, 3].map((n) => ({ type: "bench.t", data: { n } })) }),
    )
    expect(res.status).toBe(201)
    const { data } = res.body
    expect(data.events).toHaveLength(3)
    const stored = (await rows()).slice(before)
    expect(stored.map((r) => r.id)).toEqual(data.events.map((e: { id: string }) => e.id))
    expect(stored.map((r) => Number(r.sequence))).toEqual(data.events.map((e: { sequence: number }) => e.sequence))
  })
})
