import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import type { AgentGov, DroppedEvents } from "../src/index.ts"
import {
  clientFor,
  closedPort,
  type ProxiedRequest,
  recordingFetch,
  startProxy,
  startTestServer,
  type TestServer,
} from "./helpers.ts"

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

  it("throws a TypeError for data that does not encode as JSON, or encodes over 32 KiB, at the call", async () => {
    const agent = clientFor(t.url, t.key).agent({ flushIntervalMs: 60_000 })
    const type = freshType()
    const cycle: Record<string, unknown> = { i: 0 }
    cycle.self = cycle
    expect(() => agent.track({ type, data: { rowId: 12345678901234567890n } })).toThrow(TypeError)
    expect(() => agent.track({ type, data: cycle })).toThrow(TypeError)
    // 32 KiB encoded is the limit, counted in UTF-8 bytes: `{"s":"…"}` is 8 bytes more than its string.
    expect(() => agent.track({ type, data: { s: "x".repeat(32 * 1024 - 7) } })).toThrow(TypeError)
    expect(() => agent.track({ type, data: { s: "é".repeat(16 * 1024) } })).toThrow(TypeError)
    expect(agent.stats.queued).toBe(0)
    // Right at the limit it is accepted, and the service takes it.
    expect(agent.track({ type, data: { i: 0, s: "x".repeat(32 * 1024 - 14) } })).toBe(true)
    expect(agent.track({ type, data: { i: 1 } })).toBe(true)
    await agent.shutdown()
    expect(agent.stats).toMatchObject({ sent: 2, dropped: 0 })
    await expectExactlyOnceInOrder(type, 2)
  })

  it("throws a TypeError for a type in the system's namespaces, not for the events an agent reports", async () => {
    const agent = clientFor(t.url, t.key).agent({ onDrop: () => {} })
    for (const type of ["agent.heartbeat", "approval.reminder_sent", "policy.evaluated", "mcp.custom.thing"]) {
      expect(() => agent.track({ type, data: {} }), type).toThrow(TypeError)
    }
    expect(agent.stats.queued).toBe(0)
    // The MCP gateway's events are reported under an agent key: track() leaves those to the service.
    expect(agent.track({ type: "mcp.tool.called", data: {} })).toBe(true)
    expect(agent.track({ type: "agents.custom", data: {} })).toBe(true)
    await agent.shutdown({ timeoutMs: 5_000 })
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
    // Four failures in a row outlast one request's 3 attempts; the queue tries again with the same key.
    let failures = 4
    const proxy = await startProxy(t.url, (r) =>
      r.path === "/api/v1/events/ingest" && failures-- > 0
        ? { afterForward: 503, headers: { "retry-after": "0" } }
        : "pass",
    )
    const errors: Array<string> = []
    const agent = clientFor(proxy.url, t.key).agent({ onError: (e) => errors.push(e.code) })
    const type = freshType()
    track(agent, type, 10)
    await agent.flush()
    const calls = ingests(proxy.requests)
    expect(calls).toHaveLength(5)
    expect(new Set(calls.map((r) => r.idempotencyKey)).size).toBe(1)
    expect(errors).toEqual(Array(4).fill("SERVICE_UNAVAILABLE"))
    await expectExactlyOnceInOrder(type, 10)
    await agent.shutdown()
    await proxy.close()
  })

  it("tells onError and stats.failedAttempts about every failed attempt: the queue owns the retries", async () => {
    let failures = 2
    const proxy = await startProxy(t.url, (r) =>
      r.path === "/api/v1/events/ingest" && failures-- > 0 ? { status: 503, headers: { "retry-after": "0" } } : "pass",
    )
    const errors: Array<string> = []
    const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000, onError: (e) => errors.push(e.code) })
    const type = freshType()
    track(agent, type, 3)
    await agent.flush()
    const calls = ingests(proxy.requests)
    expect(calls.map((r) => r.status)).toEqual([503, 503, 201])
    expect(new Set(calls.map((r) => r.idempotencyKey)).size).toBe(1)
    expect(errors).toEqual(["SERVICE_UNAVAILABLE", "SERVICE_UNAVAILABLE"])
    expect(agent.stats).toMatchObject({ sent: 3, dropped: 0, batches: 1, failedAttempts: 2 })
    await expectExactlyOnceInOrder(type, 3)
    await agent.shutdown()
    await proxy.close()
  })

  it("splits a batch over the service's own body limit (413) until the parts fit, losing nothing", async () => {
    // This server takes bodies up to 64 KiB (the tests' setting; an operator's AGENTGOV_MAX_BODY_BYTES),
    // and answers a larger one while it is still being sent: no proxy in between.
    const recorded = recordingFetch()
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(t.url, t.key, { fetch: recorded.fetch }).agent({
      flushIntervalMs: 60_000,
      onDrop: (d) => dropped.push(d),
    })
    const type = freshType()
    for (let i = 0; i < 10; i++) agent.track({ type, data: { i, blob: "x".repeat(20 * 1024) } })
    await agent.flush()
    const calls = recorded.calls.filter((c) => c.path === "/api/v1/events/ingest")
    expect(calls[0]!.status).toBe(413)
    expect(calls.filter((c) => c.status === 201).length).toBeGreaterThan(1)
    expect(dropped).toEqual([])
    await expectExactlyOnceInOrder(type, 10)
    await agent.shutdown()
  })

  it("records data as it was at track(): later changes (a new value, a BigInt, a cycle) neither alter nor drop it", async () => {
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(t.url, t.key).agent({ flushIntervalMs: 60_000, onDrop: (d) => dropped.push(d) })
    const type = freshType()
    const data: Record<string, unknown> = { i: 0, step: 1 }
    agent.track({ type, data })
    data.step = 2 // the caller reuses its object: the first event keeps step 1
    agent.track({ type, data: { ...data, i: 1 } })
    data.rowId = 1n // no longer encodes: must not cost the event, nor the others of its batch
    data.self = data
    agent.track({ type, data: { i: 2, step: 3 } })
    await agent.flush()
    expect(dropped).toEqual([])
    expect((await stored(type)).map((e) => [e.data.i, e.data.step])).toEqual([
      [0, 1],
      [1, 2],
      [2, 3],
    ])
    expect(agent.stats).toMatchObject({ sent: 3, dropped: 0, failedAttempts: 0 })
    await agent.shutdown()
  })

  it("waits out a Retry-After beyond a timer's range instead of retrying at once", async () => {
    const proxy = await startProxy(t.url, (r) =>
      r.path === "/api/v1/events/ingest" ? { status: 503, headers: { "retry-after": "99999999" } } : "pass",
    )
    const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000, onDrop: () => {} })
    track(agent, freshType(), 1)
    void agent.flush()
    // Its first try comes (a token exchange first: a loaded machine takes its time), and then no other.
    await expect.poll(() => ingests(proxy.requests).length, { timeout: 10_000 }).toBe(1)
    await new Promise((r) => setTimeout(r, 1_000))
    expect(ingests(proxy.requests)).toHaveLength(1)
    await agent.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("does not hammer a service answering Retry-After: 0 (or a date already past): it backs off", async () => {
    let failing = true
    const proxy = await startProxy(t.url, (r) =>
      r.path === "/api/v1/events/ingest" && failing ? { status: 429, headers: { "retry-after": "0" } } : "pass",
    )
    const agent = clientFor(proxy.url, t.key).agent({ flushIntervalMs: 60_000, onDrop: () => {} })
    const type = freshType()
    track(agent, type, 1)
    const flushed = agent.flush()
    await new Promise((r) => setTimeout(r, 1_500))
    // Backoff (0.5 s doubling, full jitter) allows a handful of attempts in 1.5 s; no backoff allows hundreds.
    expect(ingests(proxy.requests).length).toBeLessThan(12)
    failing = false
    await flushed
    await expectExactlyOnceInOrder(type, 1)
    await agent.shutdown()
    await proxy.close()
  })

  it("drops only the event a 403 names (another agent's id under an agent key), and sends the rest", async () => {
    const [mine, other] = await Promise.all([
      admin.agents.create({ name: `track-own-${Date.now()}` }),
      admin.agents.create({ name: `track-other-${Date.now()}` }),
    ])
    const key = await admin.apiKeys.create({ name: "agent", type: "agent", agentId: mine.id, scopes: ["events:write"] })
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(t.url, key.apiKey).agent({ flushIntervalMs: 60_000, onDrop: (d) => dropped.push(d) })
    const type = freshType()
    track(agent, type, 4)
    agent.track({ type, data: { i: 99 }, agentId: other.id })
    track(agent, type, 4, 4)
    await agent.flush()
    await expectExactlyOnceInOrder(type, 8)
    expect(dropped).toHaveLength(1)
    expect(dropped[0]).toMatchObject({ reason: "rejected", events: [{ data: { i: 99 }, agentId: other.id }] })
    expect(dropped[0]!.error).toMatchObject({ status: 403, details: { field: "events[4].agentId" } })
    expect(agent.stats).toMatchObject({ sent: 8, dropped: 1 })
    await agent.shutdown()
  })

  it("drops an event the server refuses, sends the rest, and says so", async () => {
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(t.url, t.key).agent({ onDrop: (d) => dropped.push(d) })
    const type = freshType()
    agent.track({ type, data: { i: 0 } })
    agent.track({ type, data: { i: 99 }, occurredAt: "yesterday" }) // not a timestamp: only the service checks it
    agent.track({ type, data: { i: 1 } })
    await agent.flush()
    await expectExactlyOnceInOrder(type, 2)
    expect(dropped).toHaveLength(1)
    expect(dropped[0]).toMatchObject({ reason: "rejected", events: [{ occurredAt: "yesterday" }] })
    expect(dropped[0]!.error).toMatchObject({ status: 422, details: { field: "events[1].occurredAt" } })
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

  it("shutdown({ timeoutMs: Infinity }) (or past a timer's range) waits for every event instead of dropping them", async () => {
    for (const timeoutMs of [Number.POSITIVE_INFINITY, 3_000_000_000]) {
      const dropped: Array<DroppedEvents> = []
      const agent = clientFor(t.url, t.key).agent({ flushIntervalMs: 60_000, onDrop: (d) => dropped.push(d) })
      const type = freshType()
      track(agent, type, 5)
      expect(await agent.shutdown({ timeoutMs })).toMatchObject({ sent: 5, dropped: 0 })
      expect(dropped).toEqual([])
      await expectExactlyOnceInOrder(type, 5)
    }
  })

  it("a runtime started right after another's shutdown aborted a token exchange gets a token of its own", async () => {
    // The first exchange hangs; the first runtime gives up on it at shutdown (nothing else uses the client).
    let exchanges = 0
    const proxy = await startProxy(t.url, (r) => (r.path === "/api/v1/tokens" && exchanges++ === 0 ? "hang" : "pass"))
    const client = clientFor(proxy.url, t.key)
    const first = client.agent({ flushIntervalMs: 60_000, onDrop: () => {} })
    track(first, freshType(), 1)
    void first.flush()
    await expect.poll(() => exchanges, { timeout: 10_000 }).toBe(1)
    await first.shutdown({ timeoutMs: 50 })
    const dropped: Array<DroppedEvents> = []
    const second = client.agent({ flushIntervalMs: 60_000, onDrop: (d) => dropped.push(d) })
    const type = freshType()
    track(second, type, 3)
    await second.flush()
    expect(dropped).toEqual([])
    await expectExactlyOnceInOrder(type, 3)
    await second.shutdown()
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

  it("holds at most maxQueueBytes of encoded events while the service is down, dropping the newest beyond", async () => {
    const port = await closedPort()
    const dropped: Array<DroppedEvents> = []
    const agent = clientFor(`http://127.0.0.1:${port}`, t.key).agent({
      maxQueueBytes: 64 * 1024,
      flushIntervalMs: 60_000,
      onDrop: (d) => dropped.push(d),
    })
    const type = freshType()
    // Ten events of 20 KiB: far below maxQueueSize (10,000), but only three fit in 64 KiB.
    const accepted = Array.from({ length: 10 }, (_, i) =>
      agent.track({ type, data: { i, blob: "x".repeat(20 * 1024) } }),
    )
    expect(accepted).toEqual([...Array(3).fill(true), ...Array(7).fill(false)])
    expect(dropped.map((d) => [d.reason, d.events[0]!.data.i])).toEqual(
      [3, 4, 5, 6, 7, 8, 9].map((i) => ["queue_full", i]),
    )
    expect(agent.stats).toMatchObject({ queued: 3, dropped: 7 })
    // A small event still fits beside them.
    expect(agent.track({ type, data: { i: 10 } })).toBe(true)
    await agent.shutdown({ timeoutMs: 100 })
  })

  it("aborts an SDK-token exchange still in flight when shutdown() gives up, so nothing outlives it", async () => {
    // The service takes connections and never answers the exchange.
    const proxy = await startProxy(t.url, (r) => (r.path === "/api/v1/tokens" ? "hang" : "pass"))
    const exchanges: Array<AbortSignal> = []
    const client = clientFor(proxy.url, t.key, {
      fetch: (input, init) => {
        if (new URL(String(input)).pathname === "/api/v1/tokens") exchanges.push(init!.signal!)
        return fetch(input, init)
      },
    })
    const dropped: Array<DroppedEvents> = []
    const agent = client.agent({ onDrop: (d) => dropped.push(d) })
    agent.track({ type: freshType(), data: { i: 0 } })
    const stats = await agent.shutdown({ timeoutMs: 200 })
    expect(stats).toMatchObject({ queued: 0, inFlight: 0, sent: 0, dropped: 1 })
    expect(dropped.map((d) => d.reason)).toEqual(["shutdown"])
    // One attempt, and it is aborted by the time shutdown() resolves: no socket or timer of it is left.
    expect(exchanges).toHaveLength(1)
    expect(exchanges[0]!.aborted).toBe(true)
    expect(proxy.requests.filter((r) => r.path === "/api/v1/tokens")).toHaveLength(1)
    await proxy.close()
  })

  it("the default drop warning counts every drop: what it held back is told at shutdown()", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {})
    try {
      const agent = clientFor(t.url, t.key).agent({ maxQueueSize: 1, flushIntervalMs: 60_000 })
      const type = freshType()
      expect([0, 1, 2].map((i) => agent.track({ type, data: { i } }))).toEqual([true, false, false])
      const stats = await agent.shutdown()
      expect(stats).toMatchObject({ sent: 1, dropped: 2 })
      const lines = warn.mock.calls.map((c) => String(c[0])).filter((l) => l.startsWith("@agentgov/sdk: dropped"))
      const told = lines.map((l) => Number(/dropped (\d+)/.exec(l)![1])).reduce((a, b) => a + b, 0)
      expect(told).toBe(2)
    } finally {
      warn.mockRestore()
    }
  })
})
