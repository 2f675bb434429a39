import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AgentGov, DroppedEvents } from "../src/index.ts"
import { clientFor, closedPort, type ProxiedRequest, startProxy, startTestServer, type TestServer } from "./helpers.ts"

/**
 * `track()` against a real server, also through a proxy that fails requests before and after
 * forwarding them: every event is stored exactly once, in order, in ceil(N/100) batches.
 */

let t: TestServer
let admin: AgentGov

beforeAll(async () => {
  t = await startTestServer()
  admin = clientFor(t.url, t.key)
})
afterAll(() => t.close())

let types = 0
/** An event type no other test uses. */
const freshType = () => `sdk.track.t${Date.now().toString(36)}${++types}`

/** The stored events of `type`, oldest first. */
const stored = async (type: string) => {
  const events = await admin.events.list({ type, limit: 100 }).toArray()
  return events.sort((a, b) => a.sequence - b.sequence)
}

const track = (agent: ReturnType<AgentGov["agent"]>, type: string, n: number, from = 0) => {
  for (let i = from; i < from + n; i++) expect(agent.track({ type, data: { i } })).toBe(true)
}

/** Ingest requests as the proxy saw them. */
const ingests = (requests: ReadonlyArray<ProxiedRequest>) =>
  requests.filter((r) => r.method === "POST" && r.path === "/api/v1/events/ingest")

/** Asserts `type` holds events i = 0..n-1 exactly once, in chain order. */
const expectExactlyOnceInOrder = async (type: string, n: number) => {
  const events = await stored(type)
  expect(events.map((e) => e.data.i)).toEqual(Array.from({ length: n }, (_, i) => i))
}

describe("batching", () => {
  it("sends N events in ceil(N/100) calls, in order, each once", async () => {
    const proxy = await startProxy(t.url)
    const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000 })
    const type = freshType()
    track(agent, type, 250)
    await agent.flush()
    const calls = ingests(proxy.requests)
    expect(calls.map((r) => JSON.parse(r.body).events.length)).toEqual([100, 100, 50])
    expect(new Set(calls.map((r) => r.idempotencyKey)).size).toBe(3)
    // The runtime authenticates with an SDK token, not the API key.
    expect(calls.every((r) => r.authorization !== `Bearer ${t.key}`)).toBe(true)
    await expectExactlyOnceInOrder(type, 250)
    expect(agent.stats).toMatchObject({ queued: 0, inFlight: 0, sent: 250, dropped: 0, batches: 3 })
    await agent.shutdown()
    await proxy.close()
  })

  it("sends a partial batch after flushIntervalMs without a flush()", async () => {
    const agent = clientFor(t.url, t.key).agent({ flushIntervalMs: 50 })
    const type = freshType()
    track(agent, type, 3)
    await expect.poll(() => agent.stats.sent, { timeout: 10_000 }).toBe(3)
    expect(agent.stats.batches).toBe(1)
    await expectExactlyOnceInOrder(type, 3)
    await agent.shutdown()
  })

  it("stamps occurredAt when track() is called, and keeps it", async () => {
    const agent = clientFor(t.url, t.key).agent({ flushIntervalMs: 60_000 })
    const type = freshType()
    const before = Date.now()
    agent.track({ type, data: { i: 0 } })
    const after = Date.now()
    agent.track({ type, data: { i: 1 }, occurredAt: "2026-01-02T03:04:05.678Z" })
    await agent.shutdown()
    const [first, second] = await stored(type)
    const at = Date.parse(first!.occurredAt!)
    expect(at).toBeGreaterThanOrEqual(before)
    expect(at).toBeLessThanOrEqual(after)
    expect(second!.occurredAt).toBe("2026-01-02T03:04:05.678Z")
  })

  it("fills in the runtime's agentId", async () => {
    const bot = await admin.agents.create({ name: `track-${Date.now()}` })
    const agent = clientFor(t.url, t.key).agent({ agentId: bot.id })
    const type = freshType()
    agent.track({ type, data: {} })
    await agent.shutdown()
    expect((await stored(type)).map((e) => e.agentId)).toEqual([bot.id])
  })

  it("throws a TypeError for a malformed event, at the call", () => {
    const agent = clientFor(t.url, t.key).agent()
    expect(() => agent.track({ type: "NotDotted", data: {} })).toThrow(TypeError)
    expect(() => agent.track({ type: "a.b", data: [] as never })).toThrow(TypeError)
    expect(agent.stats.queued).toBe(0)
  })
})

describe("failures", () => {
  it("stores each event exactly once when calls fail before and after reaching the server", async () => {
    // Per batch: a 500 before forwarding, a 500 after the server stored it, a 429 with Retry-After.
    const script = new Map<number, "before" | "after" | "429">([
      [1, "before"],
      [3, "after"],
      [5, "429"],
      [7, "after"],
    ])
    let n = 0
    const proxy = await startProxy(t.url, (r) => {
      if (r.method !== "POST" || r.path !== "/api/v1/events/ingest") return "pass"
      const fault = script.get(++n)
      if (fault === "before") return { status: 500 }
      if (fault === "after") return { afterForward: 500 }
      if (fault === "429") return { status: 429, headers: { "retry-after": "1" } }
      return "pass"
    })
    const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000 })
    const type = freshType()
    track(agent, type, 350)
    await agent.flush()

    const calls = ingests(proxy.requests)
    const keys = [...new Set(calls.map((r) => r.idempotencyKey))]
    expect(keys).toHaveLength(4) // ceil(350/100) batches, whatever the retries
    // Every attempt of a batch carries the same key and the same body.
    for (const key of keys) {
      const attempts = calls.filter((r) => r.idempotencyKey === key)
      expect(new Set(attempts.map((r) => r.body)).size).toBe(1)
    }
    expect(calls.map((r) => r.status)).toEqual([500, 201, 500, 201, 429, 201, 500, 201])
    // The batches that the server stored but the client saw fail were replayed, not stored again.
    await expectExactlyOnceInOrder(type, 350)
    expect(agent.stats).toMatchObject({ sent: 350, dropped: 0, batches: 4 })
    await agent.shutdown()
    await proxy.close()
  })

  it("keeps retrying one batch with its key beyond the transport's retries", async () => {
    // Five failures in a row outlast one request's 3 attempts; the queue tries again with the same key.
    let failures = 5
    const proxy = await startProxy(t.url, (r) =>
      r.path === "/api/v1/events/ingest" && failures-- > 0 ? { afterForward: 503 } : "pass",
    )
    const errors: Array<string> = []
    const agent = clientFor(proxy.url, t.key).agent({ onError: (e) => errors.push(e.code) })
    const type = freshType()
    track(agent, type, 10)
    await agent.flush()
    const calls = ingests(proxy.requests)
    expect(calls).toHaveLength(6)
    expect(new Set(calls.map((r) => r.idempotencyKey)).size).toBe(1)
    expect(errors.length).toBeGreaterThanOrEqual(1)
    await expectExactlyOnceInOrder(type, 10)
    await agent.shutdown()
    await proxy.close()
  })

  it("drops an event the server refuses, sends the rest, and says so", async () => {
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(t.url, t.key).agent({ onDrop: (d) => dropped.push(d) })
    const type = freshType()
    agent.track({ type, data: { i: 0 } })
    agent.track({ type: "agent.registered", data: { i: 99 } }) // a system name: clients cannot ingest it
    agent.track({ type, data: { i: 1 } })
    await agent.flush()
    await expectExactlyOnceInOrder(type, 2)
    expect(dropped).toHaveLength(1)
    expect(dropped[0]).toMatchObject({ reason: "rejected", events: [{ type: "agent.registered" }] })
    expect(dropped[0]!.error).toMatchObject({ status: 422, details: { field: "events[1].type" } })
    expect(agent.stats).toMatchObject({ sent: 2, dropped: 1 })
    await agent.shutdown()
  })
})

describe("shutdown and bounds", () => {
  it("loses nothing across shutdown(): sends what waits, then refuses new events", async () => {
    const proxy = await startProxy(t.url)
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000, onDrop: (d) => dropped.push(d) })
    const type = freshType()
    track(agent, type, 150)
    const stats = await agent.shutdown()
    expect(stats).toMatchObject({ queued: 0, inFlight: 0, sent: 150, dropped: 0, batches: 2 })
    expect(ingests(proxy.requests)).toHaveLength(2)
    await expectExactlyOnceInOrder(type, 150)

    expect(agent.track({ type, data: { i: 150 } })).toBe(false)
    expect(dropped).toEqual([{ reason: "closed", events: [expect.objectContaining({ type })] }])
    await proxy.close()
  })

  it("holds at most maxQueueSize events (drop-newest) and drops the rest when shutdown() times out", async () => {
    const port = await closedPort()
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(`http://127.0.0.1:${port}`, t.key).agent({
      maxQueueSize: 10,
      onDrop: (d) => dropped.push(d),
    })
    const type = freshType()
    const accepted = Array.from({ length: 15 }, (_, i) => agent.track({ type, data: { i } }))
    expect(accepted).toEqual([...Array(10).fill(true), ...Array(5).fill(false)])
    expect(dropped.map((d) => [d.reason, d.events[0]!.data.i])).toEqual([
      ["queue_full", 10],
      ["queue_full", 11],
      ["queue_full", 12],
      ["queue_full", 13],
      ["queue_full", 14],
    ])
    const stats = await agent.shutdown({ timeoutMs: 300 })
    expect(stats).toMatchObject({ queued: 0, inFlight: 0, sent: 0, dropped: 15 })
    const atShutdown = dropped.filter((d) => d.reason === "shutdown").flatMap((d) => d.events.map((e) => e.data.i))
    expect(atShutdown.sort((a, b) => Number(a) - Number(b))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  })
})
