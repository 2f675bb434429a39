import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ActionDenied, type AgentGov, AgentGovError, type DroppedEvents } from "../src/index.ts"
import { clientFor, startProxy, startTestServer, type TestServer, unique } from "./helpers.ts"

/**
 * A 2xx that is not the API's answer — a proxy's HTML page, a truncated body, an envelope without the
 * fields the SDK relies on — is the service being unavailable: the guard retries it and then decides by
 * `onUnavailable`, an event batch is retried under its key until the service acknowledges it, and a
 * plain REST call rejects with `INVALID_RESPONSE`. A node:http proxy in front of the real server answers
 * those bodies.
 */

let t: TestServer
let admin: AgentGov

beforeAll(async () => {
  t = await startTestServer()
  admin = clientFor(t.url, t.key)
})
afterAll(() => t.close())

const HTML = { status: 200, headers: { "content-type": "text/html" }, body: "<html><body>Bad gateway</body></html>" }
const TRUNCATED = { status: 200, body: '{"ok":true,"data":{"decision":"al' }
const NO_DECISION = { status: 200, body: JSON.stringify({ ok: true, data: { reasons: [], matched: [] } }) }

describe("an answer that is not the API's", () => {
  it("makes the guard retry under its key, then decide by onUnavailable, and records the fallback", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-guard") })
    const faults = [HTML, TRUNCATED, NO_DECISION]
    let guards = 0
    const proxy = await startProxy(t.url, (r) => (r.path === "/v1/guard" ? faults[guards++]! : "pass"))
    const runtime = clientFor(proxy.url, t.key).agent({ agentId: bot.id, onUnavailable: "allow" })
    const decision = await runtime.guard("x.garbled")
    expect(decision).toMatchObject({ decision: "allow", allowed: true, eventId: null, matched: [] })
    expect(decision.reasons[0]?.code).toBe("SERVICE_UNAVAILABLE")
    expect("error" in decision && decision.error).toBeInstanceOf(AgentGovError)
    expect("error" in decision && decision.error.code).toBe("INVALID_RESPONSE")
    // Retried as a 5xx is (1 + guardMaxRetries attempts), all under one Idempotency-Key.
    const attempts = proxy.requests.filter((r) => r.path === "/v1/guard")
    expect(attempts).toHaveLength(3)
    expect(new Set(attempts.map((r) => r.idempotencyKey)).size).toBe(1)
    await runtime.shutdown()
    const fallbacks = await admin.events.list({ type: "guard.fallback", agentId: bot.id }).toArray()
    expect(fallbacks.map((e) => [e.data.action, e.data.decision])).toEqual([["x.garbled", "allow"]])
    await proxy.close()
  })

  it("fails closed by default: a governed function does not run", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-deny") })
    const proxy = await startProxy(t.url, (r) => (r.path === "/v1/guard" ? NO_DECISION : "pass"))
    const runtime = clientFor(proxy.url, t.key).agent({ agentId: bot.id, guardMaxRetries: 0, onDrop: () => {} })
    let ran = false
    const act = runtime.governed("x.act", async () => {
      ran = true
    })
    const refused = await act().catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(ActionDenied)
    expect((refused as ActionDenied).decision.reasons[0]?.code).toBe("SERVICE_UNAVAILABLE")
    expect(ran).toBe(false)
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("takes a guard answer that contradicts itself for none", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-contradiction") })
    const contradiction = {
      status: 200,
      body: JSON.stringify({
        ok: true,
        data: { decision: "deny", allowed: true, reasons: [], matched: [], eventId: "evt_1" },
      }),
    }
    const proxy = await startProxy(t.url, (r) => (r.path === "/v1/guard" ? contradiction : "pass"))
    const runtime = clientFor(proxy.url, t.key).agent({ agentId: bot.id, guardMaxRetries: 0, onDrop: () => {} })
    const decision = await runtime.guard("x.contradiction")
    expect(decision).toMatchObject({ decision: "deny", allowed: false, eventId: null })
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("replays a guard the service decided when its answer came back garbled", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-replay") })
    let guards = 0
    const proxy = await startProxy(t.url, (r) =>
      r.path === "/v1/guard" && ++guards === 1 ? { afterForward: 200, body: HTML.body } : "pass",
    )
    const runtime = clientFor(proxy.url, t.key).agent({ agentId: bot.id, onUnavailable: "deny" })
    const decision = await runtime.guard("x.replayed")
    // The service's own decision (no policy: allowed by the workspace's default or not), not a fallback.
    expect(typeof decision.eventId).toBe("string")
    expect(decision.reasons[0]?.code).not.toBe("SERVICE_UNAVAILABLE")
    const attempts = proxy.requests.filter((r) => r.path === "/v1/guard")
    expect(attempts).toHaveLength(2)
    expect(attempts[1]!.idempotencyKey).toBe(attempts[0]!.idempotencyKey)
    const evaluated = await admin.events.list({ type: "policy.evaluated", agentId: bot.id }).toArray()
    expect(evaluated).toHaveLength(1)
    await runtime.shutdown()
    await proxy.close()
  })

  it("falls back when the token exchange is answered with a page", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-token") })
    const proxy = await startProxy(t.url, (r) => (r.path === "/api/v1/tokens" ? HTML : "pass"))
    const runtime = clientFor(proxy.url, t.key).agent({ agentId: bot.id, guardMaxRetries: 1, onDrop: () => {} })
    const decision = await runtime.guard("x.token")
    expect(decision).toMatchObject({ decision: "deny", allowed: false, eventId: null })
    expect("error" in decision && decision.error.code).toBe("INVALID_RESPONSE")
    expect(proxy.requests.filter((r) => r.path === "/api/v1/tokens")).toHaveLength(2)
    expect(proxy.requests.some((r) => r.path === "/v1/guard")).toBe(false)
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("makes a REST call reject with INVALID_RESPONSE, not a parse error", async () => {
    const proxy = await startProxy(t.url, (r) => (r.path === "/v1/guard" ? NO_DECISION : TRUNCATED))
    const client = clientFor(proxy.url, t.key, { maxRetries: 0 })
    const failed = await client.agents.get("agt_x").catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(AgentGovError)
    expect(failed).toMatchObject({ status: 200, code: "INVALID_RESPONSE" })
    const guard = await client.guard.evaluate({ action: "x.rest", agentId: "agt_x" }).catch((e: unknown) => e)
    expect(guard).toBeInstanceOf(AgentGovError)
    expect(guard).toMatchObject({ code: "INVALID_RESPONSE" })
    await proxy.close()
  })

  it("makes waitForApproval retry an approval answer that is not this approval's, never taking it for a decision", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-approval") })
    const asked = await admin.approvals.create({ agentId: bot.id, action: "x.approve" })
    const path = `/api/v1/approvals/${asked.id}`
    // A cache answering another approval's decision, then an envelope without one: before, the wait returned the
    // first (a decision) at once.
    const another = { ...asked, id: "apr_another", status: "denied" }
    const faults = [
      { status: 200, body: JSON.stringify({ ok: true, data: another }) },
      { status: 200, body: JSON.stringify({ ok: true, data: { id: asked.id } }) },
    ]
    let reads = 0
    const proxy = await startProxy(t.url, (r) => (r.path === path ? (faults[reads++] ?? "pass") : "pass"))
    const runtime = clientFor(proxy.url, t.key).agent({ agentId: bot.id, approvalPollIntervalMs: 50, onDrop: () => {} })
    const waiting = runtime.waitForApproval(asked.id)
    waiting.catch(() => {}) // awaited below; a rejection while the test polls must fail the test, not the run
    await expect.poll(() => reads, { timeout: 10_000 }).toBeGreaterThanOrEqual(3)
    await admin.approvals.decide(asked.id, { decision: "approved" })
    expect(await waiting).toMatchObject({ id: asked.id, status: "approved" })
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("makes waitForApproval reject with INVALID_RESPONSE when no answer is the approval's, after its retries", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-approval-all") })
    const asked = await admin.approvals.create({ agentId: bot.id, action: "x.approve" })
    const path = `/api/v1/approvals/${asked.id}`
    const garbled = { status: 200, body: JSON.stringify({ ok: true, data: { id: asked.id, status: "approved" } }) }
    const proxy = await startProxy(t.url, (r) => (r.path === path ? garbled : "pass"))
    const runtime = clientFor(proxy.url, t.key, { maxRetries: 1 }).agent({ agentId: bot.id, onDrop: () => {} })
    const failed = await runtime.waitForApproval(asked.id).catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(AgentGovError)
    expect(failed).toMatchObject({ code: "INVALID_RESPONSE" })
    expect((failed as AgentGovError).message).toContain("no expiresAt")
    expect(proxy.requests.filter((r) => r.path === path)).toHaveLength(2)
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("keeps an event batch until the service acknowledges it, under one key, stored once", async () => {
    const bot = await admin.agents.create({ name: unique("garbled-batch") })
    let ingests = 0
    const proxy = await startProxy(t.url, (r) => {
      if (r.path !== "/api/v1/events/ingest") return "pass"
      switch (++ingests) {
        case 1:
          // Stored by the service; the agent sees a proxy's page.
          return { afterForward: 200, headers: { "content-type": "text/html" }, body: HTML.body }
        case 2:
          return TRUNCATED
        case 3:
          // An envelope that acknowledges nothing.
          return { status: 200, body: JSON.stringify({ ok: true, data: {} }) }
        case 4:
          // One event of the two acknowledged.
          return { status: 200, body: JSON.stringify({ ok: true, data: { events: [{ id: "evt_1" }] } }) }
        default:
          return "pass"
      }
    })
    const drops: Array<DroppedEvents> = []
    const errors: Array<string> = []
    const runtime = clientFor(proxy.url, t.key).agent({
      agentId: bot.id,
      onDrop: (d) => drops.push(d),
      onError: (e) => errors.push(e.code),
    })
    const type = `job.${unique("b").replace(/[^a-z0-9]/g, "_")}`
    runtime.track({ type, data: { n: 1 } })
    runtime.track({ type, data: { n: 2 } })
    await runtime.flush()
    expect(drops).toEqual([])
    expect(errors).toEqual(["INVALID_RESPONSE", "INVALID_RESPONSE", "INVALID_RESPONSE", "INVALID_RESPONSE"])
    expect(runtime.stats).toMatchObject({ sent: 2, dropped: 0, batches: 1, failedAttempts: 4, queued: 0 })
    const attempts = proxy.requests.filter((r) => r.path === "/api/v1/events/ingest")
    expect(attempts).toHaveLength(5)
    expect(new Set(attempts.map((r) => r.idempotencyKey)).size).toBe(1)
    const stored = await admin.events.list({ type, agentId: bot.id }).toArray()
    expect(stored.map((e) => e.data.n).sort()).toEqual([1, 2])
    await runtime.shutdown()
    await proxy.close()
  }, 30_000)
})
