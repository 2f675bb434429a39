import { afterAll, beforeAll, expect, it } from "vitest"
import type { AgentGov, DroppedEvents } from "../src/index.ts"
import { clientFor, type ProxiedRequest, startProxy, startTestServer, type TestServer } from "./helpers.ts"

/**
 * Batches by size as well as by count: against a server with the default body limit (1 MiB), and
 * behind a proxy that plays an operator's lower limit (413).
 */

let t: TestServer
let admin: AgentGov

beforeAll(async () => {
  t = await startTestServer({ maxBodyBytes: 1024 * 1024 }) // AGENTGOV_MAX_BODY_BYTES's default
  admin = clientFor(t.url, t.key)
})
afterAll(() => t.close())

let types = 0
const freshType = () => `sdk.size.t${Date.now().toString(36)}${++types}`

const ingests = (requests: ReadonlyArray<ProxiedRequest>) =>
  requests.filter((r) => r.method === "POST" && r.path === "/api/v1/events/ingest")

const storedIs = async (type: string) =>
  (await admin.events.list({ type, limit: 100 }).toArray()).sort((a, b) => a.sequence - b.sequence).map((e) => e.data.i)

const blob = (kib: number) => "x".repeat(kib * 1024)

it("ends a batch below the service's 1 MiB body limit: 100 events of 20 KiB are all stored", async () => {
  const proxy = await startProxy(t.url)
  const dropped: Array<DroppedEvents> = []
  const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000, onDrop: (d) => dropped.push(d) })
  const type = freshType()
  for (let i = 0; i < 100; i++) expect(agent.track({ type, data: { i, blob: blob(20) } })).toBe(true)
  await agent.flush()
  const calls = ingests(proxy.requests)
  expect(calls.every((r) => r.status === 201)).toBe(true)
  expect(calls.every((r) => Buffer.byteLength(r.body) < 1024 * 1024)).toBe(true)
  expect(calls.length).toBeGreaterThan(1)
  expect(calls.map((r) => JSON.parse(r.body).events.length).reduce((a, b) => a + b, 0)).toBe(100)
  expect(dropped).toEqual([])
  expect(agent.stats).toMatchObject({ sent: 100, dropped: 0, batches: calls.length })
  expect(await storedIs(type)).toEqual(Array.from({ length: 100 }, (_, i) => i))
  await agent.shutdown()
  await proxy.close()
})

it("splits a batch refused as too large (413) under new keys, drops only an event too large alone, and learns", async () => {
  // An operator's lower limit, in front of the service: 20,000 bytes.
  const limit = 20_000
  const proxy = await startProxy(t.url, (r) =>
    r.path === "/api/v1/events/ingest" && Buffer.byteLength(r.body) > limit
      ? {
          status: 413,
          body: JSON.stringify({
            ok: false,
            error: { code: "PAYLOAD_TOO_LARGE", message: `body exceeds ${limit} bytes` },
          }),
        }
      : "pass",
  )
  const dropped: Array<DroppedEvents> = []
  const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000, onDrop: (d) => dropped.push(d) })
  const type = freshType()
  // Ten events of 8 KiB, the sixth of 25 KiB: too large for this limit even alone.
  for (let i = 0; i < 10; i++) agent.track({ type, data: { i, blob: blob(i === 5 ? 25 : 8) } })
  await agent.flush()

  const calls = ingests(proxy.requests)
  const refused = calls.filter((r) => r.status === 413)
  expect(refused.length).toBeGreaterThan(1)
  expect(calls.every((r) => r.status === 201 || r.status === 413)).toBe(true)
  // Every request has a key of its own: a refused body is never retried, its halves are new requests.
  expect(new Set(calls.map((r) => r.idempotencyKey)).size).toBe(calls.length)
  expect(dropped).toHaveLength(1)
  expect(dropped[0]).toMatchObject({ reason: "rejected", events: [{ data: { i: 5 } }] })
  expect(dropped[0]!.error).toMatchObject({ status: 413, code: "PAYLOAD_TOO_LARGE" })
  expect(await storedIs(type)).toEqual([0, 1, 2, 3, 4, 6, 7, 8, 9])
  expect(agent.stats).toMatchObject({ sent: 9, dropped: 1 })

  // Later batches are built below the limit that was refused: no more 413s.
  const before = calls.length
  for (let i = 10; i < 14; i++) agent.track({ type, data: { i, blob: blob(8) } })
  await agent.flush()
  const later = ingests(proxy.requests).slice(before)
  expect(later.map((r) => r.status).every((s) => s === 201)).toBe(true)
  expect(await storedIs(type)).toEqual([0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13])
  await agent.shutdown()
  await proxy.close()
})
