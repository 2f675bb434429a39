import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { governTools } from "../src/ai.ts"
import { ActionDenied, type AgentGov, AgentGovError, type AgentRuntime } from "../src/index.ts"
import { clientFor, closedPort, startProxy, startTestServer, type TestServer, unique } from "./helpers.ts"

/**
 * The agent runtime against a real server: guard decisions, approvals (stream and polling),
 * governed functions, token handling, and the fallback when the service is unreachable.
 */

let t: TestServer
let admin: AgentGov

/** Scopes an agent key may hold (the spec's "workspace, agent" ones plus approvals:read). */
const AGENT_SCOPES = [
  "agents:read",
  "policies:read",
  "guard:evaluate",
  "events:read",
  "events:write",
  "enforcement:read",
  "approvals:read",
]

beforeAll(async () => {
  t = await startTestServer()
  admin = clientFor(t.url, t.key)
})
afterAll(() => t.close())

const actionName = (prefix: string) => `${prefix}.${unique("a").replace(/[^a-z0-9]/g, "_")}`

/** A new agent and a runtime bound to it through an agent key. */
const newAgent = async (scopes = AGENT_SCOPES, options: Parameters<AgentGov["agent"]>[0] = {}) => {
  const agent = await admin.agents.create({ name: unique("runtime") })
  const key = await admin.apiKeys.create({ name: "agent", type: "agent", agentId: agent.id, scopes })
  const client = clientFor(t.url, key.apiKey)
  return { agent, client, runtime: client.agent(options) }
}

const policy = (rules: Parameters<AgentGov["policies"]["create"]>[0]["rules"]) =>
  admin.policies.create({ name: unique("policy"), rules })

/** Decides the first pending approval of `agentId` as soon as it appears, like an operator would. */
const operator = async (agentId: string, decision: "approved" | "denied") => {
  for (;;) {
    const [pending] = await admin.approvals.list({ agentId }).toArray(1)
    if (pending) return admin.approvals.decide(pending.id, { decision, reason: "operator" })
    await new Promise((r) => setTimeout(r, 50))
  }
}

const toolEvents = async (agentId: string) =>
  (await admin.events.list({ type: "tool.called", agentId }).toArray()).map((e) => e.data)

describe("guard", () => {
  it("returns the service's decisions, the agent implied by an agent key", async () => {
    const { agent, runtime } = await newAgent()
    const denied = actionName("files")
    await policy([{ id: "no", effect: "deny", actions: [denied], reason: "never" }])

    const allow = await runtime.guard(actionName("files"), { path: "/tmp/x" })
    expect(allow).toMatchObject({ decision: "allow", allowed: true, reasons: [{ code: "NO_MATCHING_POLICY" }] })
    expect(allow.eventId).toMatch(/^evt_/)

    const deny = await runtime.guard(denied, { path: "/etc" })
    expect(deny).toMatchObject({
      decision: "deny",
      allowed: false,
      reasons: [{ code: "POLICY_DENIED", message: "never" }],
    })
    const evaluated = await admin.events.list({ type: "policy.evaluated", agentId: agent.id }).toArray()
    expect(evaluated.map((e) => e.id).sort()).toEqual([allow.eventId, deny.eventId].sort())
  })

  it("sends agentId from the options with a workspace key, and rejects (not falls back) without one", async () => {
    const bot = await admin.agents.create({ name: unique("ws-agent") })
    const withId = admin.agent({ agentId: bot.id })
    expect((await withId.guard(actionName("x"))).allowed).toBe(true)

    const withoutId = admin.agent()
    const error = await withoutId.guard(actionName("x")).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AgentGovError)
    expect(error).toMatchObject({ status: 422, code: "VALIDATION_ERROR", details: { field: "agentId" } })
  })

  it("exchanges one token for many concurrent first calls, and re-exchanges once after a 401", async () => {
    const key = (await admin.apiKeys.create({ name: "k", type: "workspace", scopes: ["guard:evaluate"] })).apiKey
    const bot = await admin.agents.create({ name: unique("concurrent") })
    let refused = false
    const proxy = await startProxy(t.url, (r) => {
      if (r.path === "/v1/guard" && !refused) {
        refused = true
        return { status: 401, body: JSON.stringify({ ok: false, error: { code: "UNAUTHORIZED", message: "x" } }) }
      }
      return "pass"
    })
    const via = clientFor(proxy.url, key)
    const runtime = via.agent({ agentId: bot.id })
    const decisions = await Promise.all(Array.from({ length: 20 }, () => runtime.guard(actionName("c"))))
    expect(decisions.every((d) => d.allowed)).toBe(true)
    const tokenCalls = proxy.requests.filter((r) => r.path === "/api/v1/tokens")
    expect(tokenCalls).toHaveLength(2) // the first, and one after the refused token
    expect(via.tokenExchanges).toBe(2)
    const guards = proxy.requests.filter((r) => r.path === "/v1/guard")
    expect(guards).toHaveLength(21)
    expect(guards.filter((r) => r.status === 401)).toHaveLength(1)
    expect(guards.every((r) => r.authorization !== `Bearer ${key}`)).toBe(true)
    await proxy.close()
  })
})

describe("unavailable service", () => {
  it("fails closed by default and records nothing on the service", async () => {
    const port = await closedPort()
    const runtime = clientFor(`http://127.0.0.1:${port}`, t.key).agent({ agentId: "agt_x", onDrop: () => {} })
    const decision = await runtime.guard("files.delete", { path: "/" })
    expect(decision).toMatchObject({
      decision: "deny",
      allowed: false,
      matched: [],
      eventId: null,
      reasons: [{ code: "SERVICE_UNAVAILABLE" }],
    })
    expect("error" in decision && decision.error.code).toBe("NETWORK_ERROR")
    await runtime.shutdown({ timeoutMs: 10 })
  })

  it("fails open when told to, also per action", async () => {
    const port = await closedPort()
    const client = clientFor(`http://127.0.0.1:${port}`, t.key)
    const open = client.agent({ agentId: "agt_x", onUnavailable: "allow", onDrop: () => {} })
    expect(await open.guard("files.read")).toMatchObject({ decision: "allow", allowed: true, eventId: null })
    const chooser = client.agent({
      agentId: "agt_x",
      onUnavailable: ({ action }) => (action.endsWith(".read") ? "allow" : "deny"),
      onDrop: () => {},
    })
    expect((await chooser.guard("files.read")).allowed).toBe(true)
    expect((await chooser.guard("files.delete")).allowed).toBe(false)
    await Promise.all([open.shutdown({ timeoutMs: 10 }), chooser.shutdown({ timeoutMs: 10 })])
  })

  it("falls back on a time-out and on 5xx after retries, and records the fallback once the service is back", async () => {
    const bot = await admin.agents.create({ name: unique("fallback") })
    // The first guard call's two attempts get no answer; the second call's two get 503.
    let guards = 0
    const proxy = await startProxy(t.url, (r) =>
      r.path === "/v1/guard" ? (++guards <= 2 ? "hang" : { status: 503 }) : "pass",
    )
    // A second per attempt: the first call's time also covers its token's exchange with the real server, which a
    // loaded machine can take past 200 ms (the hanging answers then fell on the second call).
    const runtime = clientFor(proxy.url, t.key).agent({
      agentId: bot.id,
      onUnavailable: "allow",
      guardTimeoutMs: 1_000,
      guardMaxRetries: 1,
    })
    const decisions = [await runtime.guard("x.one"), await runtime.guard("x.two")]
    expect(decisions.map((d) => d.eventId)).toEqual([null, null])
    expect(decisions.map((d) => ("error" in d ? d.error.code : ""))).toEqual(["TIMEOUT", "SERVICE_UNAVAILABLE"])
    expect(guards).toBe(4)
    await runtime.shutdown()
    const fallbacks = await admin.events.list({ type: "guard.fallback", agentId: bot.id }).toArray()
    expect(fallbacks.map((e) => e.data.action).sort()).toEqual(["x.one", "x.two"])
    expect(fallbacks.every((e) => e.data.decision === "allow")).toBe(true)
    await proxy.close()
  })

  it("keeps to its own time-out while the token it needs is still being exchanged", async () => {
    const bot = await admin.agents.create({ name: unique("slow-token") })
    // The token exchange gets no answer (the client's own time-out is 30 s); the guard allows 200 ms.
    const proxy = await startProxy(t.url, (r) => (r.path === "/api/v1/tokens" ? "hang" : "pass"))
    const runtime = clientFor(proxy.url, t.key).agent({
      agentId: bot.id,
      onUnavailable: "deny",
      guardTimeoutMs: 200,
      guardMaxRetries: 0,
      onDrop: () => {},
    })
    // Waiting on the exchange's own limits (30 s, then retries) would outlast this test's 10 s.
    const decision = await runtime.guard("x.slow")
    expect(decision).toMatchObject({ decision: "deny", allowed: false, eventId: null })
    expect("error" in decision && decision.error.code).toBe("TIMEOUT")
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  }, 10_000)

  it("retries a failed token exchange by the guard's own rules; the exchange itself makes one attempt", async () => {
    const bot = await admin.agents.create({ name: unique("token-503") })
    const proxy = await startProxy(t.url, (r) => (r.path === "/api/v1/tokens" ? { status: 503 } : "pass"))
    const runtime = clientFor(proxy.url, t.key).agent({
      agentId: bot.id,
      guardMaxRetries: 1,
      flushIntervalMs: 60_000,
      onDrop: () => {},
    })
    const decision = await runtime.guard("x.token")
    expect(decision).toMatchObject({ decision: "deny", allowed: false, eventId: null })
    expect("error" in decision && decision.error.code).toBe("SERVICE_UNAVAILABLE")
    // One exchange per guard attempt (1 + guardMaxRetries), none retried behind the guard's back.
    expect(proxy.requests.filter((r) => r.path === "/api/v1/tokens")).toHaveLength(2)
    expect(proxy.requests.filter((r) => r.path === "/v1/guard")).toHaveLength(0)
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("does not turn refusals into decisions: a revoked key rejects", async () => {
    const key = await admin.apiKeys.create({ name: "short", type: "workspace", scopes: ["guard:evaluate"] })
    await admin.apiKeys.revoke(key.id)
    const runtime = clientFor(t.url, key.apiKey).agent({ agentId: "agt_x", onUnavailable: "allow" })
    await expect(runtime.guard("x.y")).rejects.toMatchObject({ status: 401, code: "UNAUTHORIZED" })
  })
})

describe("approvals", () => {
  it("waits for a decision on the stream, then the approval lets one call through", async () => {
    const { agent } = await newAgent()
    const key = await admin.apiKeys.create({ name: "streamed", type: "agent", agentId: agent.id, scopes: AGENT_SCOPES })
    const proxy = await startProxy(t.url)
    const runtime = clientFor(proxy.url, key.apiKey).agent()
    const action = actionName("payment")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    const context = { amount: 5000 }
    const first = await runtime.guard(action, context)
    expect(first).toMatchObject({ decision: "require_approval", allowed: false })
    const streaming = () => proxy.requests.some((r) => r.path.startsWith("/api/v1/events/stream"))
    const [approval] = await Promise.all([
      runtime.waitForApproval(first.approvalId!),
      // Decide only once the runtime listens, so that the stream (not the first GET) must report it.
      expect
        .poll(streaming, { timeout: 10_000 })
        .toBe(true)
        .then(() => operator(agent.id, "approved")),
    ])
    expect(approval).toMatchObject({ id: first.approvalId, status: "approved", decisionReason: "operator" })
    const reads = proxy.requests.filter((r) => r.path === `/api/v1/approvals/${first.approvalId}`)
    expect(reads).toHaveLength(2) // before listening, and after the approval.decided event
    const stream = proxy.requests.find((r) => r.path.startsWith("/api/v1/events/stream"))!
    expect(stream.path).toBe("/api/v1/events/stream?types=approval.decided")
    const allowed = await runtime.guard(action, context, { approvalId: approval.id })
    expect(allowed).toMatchObject({ decision: "allow", approvalId: approval.id })
    const again = await runtime.guard(action, context, { approvalId: approval.id })
    expect(again.allowed).toBe(false)
    await proxy.close()
  })

  it("returns at once when the approval was decided before the wait began", async () => {
    const { agent, runtime } = await newAgent()
    const action = actionName("early")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    const asked = await runtime.guard(action)
    await operator(agent.id, "denied")
    expect((await runtime.waitForApproval(asked.approvalId!)).status).toBe("denied")
  })

  it("polls when the credential cannot stream events", async () => {
    const scopes = AGENT_SCOPES.filter((s) => s !== "events:read")
    const { agent, runtime } = await newAgent(scopes, { approvalPollIntervalMs: 50 })
    const action = actionName("polled")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    const asked = await runtime.guard(action)
    const [approval] = await Promise.all([runtime.waitForApproval(asked.approvalId!), operator(agent.id, "approved")])
    expect(approval.status).toBe("approved")
  })

  it("shares one stream among every wait of a runtime: 25 waits stay within the key's 20 streams", async () => {
    const { agent } = await newAgent()
    const key = await admin.apiKeys.create({ name: "many", type: "agent", agentId: agent.id, scopes: AGENT_SCOPES })
    const proxy = await startProxy(t.url)
    const runtime = clientFor(proxy.url, key.apiKey).agent({ approvalPollIntervalMs: 60_000 })
    const action = actionName("many")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    const asked = await Promise.all(Array.from({ length: 25 }, (_, n) => runtime.guard(action, { n })))
    const ids = asked.map((d) => d.approvalId!)
    expect(new Set(ids).size).toBe(25)
    const waits = Promise.all(ids.map((id) => runtime.waitForApproval(id)))
    // Every wait has read its approval once (then listens) before any is decided.
    const reads = () => proxy.requests.filter((r) => r.path.startsWith("/api/v1/approvals/apr_")).length
    await expect.poll(reads, { timeout: 10_000 }).toBeGreaterThanOrEqual(25)
    for (const id of ids) await admin.approvals.decide(id, { decision: "approved", reason: "batch" })
    expect((await waits).map((a) => a.status)).toEqual(Array(25).fill("approved"))
    const streams = proxy.requests.filter((r) => r.path.startsWith("/api/v1/events/stream"))
    expect(streams.map((r) => r.status)).toEqual([200])
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  }, 30_000)

  it("rejects with the 401 when the key is revoked while it waits, without reconnecting in a loop", async () => {
    const { agent } = await newAgent()
    const key = await admin.apiKeys.create({ name: "revoked", type: "agent", agentId: agent.id, scopes: AGENT_SCOPES })
    const proxy = await startProxy(t.url)
    const runtime = clientFor(proxy.url, key.apiKey).agent({ approvalPollIntervalMs: 60_000, onDrop: () => {} })
    const action = actionName("revoked")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    const asked = await runtime.guard(action)
    const streaming = () => proxy.requests.some((r) => r.path.startsWith("/api/v1/events/stream"))
    const waited = runtime.waitForApproval(asked.approvalId!).then(
      () => undefined,
      (error: unknown) => error,
    )
    await expect.poll(streaming, { timeout: 10_000 }).toBe(true)
    await admin.apiKeys.revoke(key.id)
    expect(await waited).toMatchObject({ status: 401 })
    // The stream ended by the revocation connected again at most once (to learn that the key is gone).
    expect(proxy.requests.filter((r) => r.path.startsWith("/api/v1/events/stream")).length).toBeLessThanOrEqual(2)
    await runtime.shutdown({ timeoutMs: 10 })
    await proxy.close()
  })

  it("waits with a timeoutMs beyond a timer's range (Infinity, 40 days) instead of giving up at once", async () => {
    const { agent, runtime } = await newAgent()
    const action = actionName("long")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    const asked = await runtime.guard(action)
    for (const timeoutMs of [Number.POSITIVE_INFINITY, 40 * 86_400_000]) {
      const waited = runtime.waitForApproval(asked.approvalId!, { timeoutMs }).then(
        (a) => a.status,
        (error: unknown) => error,
      )
      // Still waiting well after a timer of 1 ms (what Node makes of a delay past 2^31 − 1) would have fired.
      const early = await Promise.race([waited, new Promise((r) => setTimeout(() => r("waiting"), 300))])
      expect(early).toBe("waiting")
      if (timeoutMs === Number.POSITIVE_INFINITY) continue
      await operator(agent.id, "approved")
      expect(await waited).toBe("approved")
    }
    await runtime.shutdown()
  })

  it("gives up after timeoutMs with APPROVAL_WAIT_TIMEOUT, and stops on abort", async () => {
    const { runtime } = await newAgent()
    const action = actionName("slow")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    const asked = await runtime.guard(action)
    await expect(runtime.waitForApproval(asked.approvalId!, { timeoutMs: 300 })).rejects.toMatchObject({
      code: "APPROVAL_WAIT_TIMEOUT",
    })
    const controller = new AbortController()
    const waiting = runtime.waitForApproval(asked.approvalId!, { signal: controller.signal })
    controller.abort(new Error("no longer needed"))
    await expect(waiting).rejects.toThrow("no longer needed")
  })
})

describe("governed", () => {
  const runs: Array<string> = []
  const sendPayment = (runtime: AgentRuntime, action: string) =>
    runtime.governed(
      "sendPayment",
      async (payment: { to: string; amount: number }) => {
        runs.push(payment.to)
        if (payment.to === "broken") throw new Error("bank down")
        return `sent ${payment.amount} to ${payment.to}`
      },
      { action },
    )

  it("refuses an eventType track() would refuse when wrapping, not after the function ran", async () => {
    // A TypeError after the work was done would hide its result, and a caller retrying would do it twice.
    const { runtime } = await newAgent()
    const ran: Array<string> = []
    for (const eventType of ["ToolCalled", "approval.tool_called", "x"]) {
      expect(() => runtime.governed("tool", async () => ran.push(eventType), { eventType })).toThrow(TypeError)
    }
    expect(() => governTools({ t: { execute: async () => ran.push("ai") } }, runtime, { eventType: "Bad" })).toThrow(
      TypeError,
    )
    expect(ran).toEqual([])
    // false and valid custom types are still taken.
    runtime.governed("tool", async () => 1, { eventType: false })
    runtime.governed("tool", async () => 1, { eventType: "billing.tool_called" })
    await runtime.shutdown()
  })

  it("runs an allowed call and tracks it; throws ActionDenied without running a denied one", async () => {
    const { agent, runtime } = await newAgent()
    const action = actionName("pay")
    await policy([
      { id: "no-big", effect: "deny", actions: [action], when: { field: "context.amount", op: "gt", value: 100 } },
    ])
    const pay = sendPayment(runtime, action)
    expect(await pay({ to: "alice", amount: 10 })).toBe("sent 10 to alice")
    const denied = await pay({ to: "mallory", amount: 1000 }).catch((e: unknown) => e)
    expect(denied).toBeInstanceOf(ActionDenied)
    expect(denied).toMatchObject({ action, decision: { decision: "deny", reasons: [{ code: "POLICY_DENIED" }] } })
    await expect(pay({ to: "broken", amount: 1 })).rejects.toThrow("bank down")
    expect(runs).toEqual(["alice", "broken"])

    await runtime.flush()
    const tracked = await toolEvents(agent.id)
    expect(tracked.map((d) => [d.tool, d.action, d.outcome])).toEqual([
      ["sendPayment", action, "error"],
      ["sendPayment", action, "ok"],
    ])
    expect(tracked[0]!.error).toMatchObject({ name: "Error", message: "bank down" })
    expect(typeof tracked[1]!.durationMs).toBe("number")
    expect(tracked[1]!.eventId).toMatch(/^evt_/)
  })

  it("waits for an approval, guards again with it, then runs once", async () => {
    const { agent, runtime } = await newAgent()
    const action = actionName("approve")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    runs.length = 0
    const pay = sendPayment(runtime, action)
    const [result] = await Promise.all([pay({ to: "bob", amount: 7 }), operator(agent.id, "approved")])
    expect(result).toBe("sent 7 to bob")
    expect(runs).toEqual(["bob"])
    await runtime.flush()
    const [tracked] = await toolEvents(agent.id)
    expect(tracked).toMatchObject({ outcome: "ok", approvalId: expect.stringMatching(/^apr_/) })
  })

  it("throws ActionDenied carrying the denied approval", async () => {
    const { agent, runtime } = await newAgent()
    const action = actionName("refuse")
    await policy([{ id: "ask", effect: "require_approval", actions: [action] }])
    runs.length = 0
    const pay = sendPayment(runtime, action)
    const [error] = await Promise.all([
      pay({ to: "eve", amount: 7 }).catch((e: unknown) => e),
      operator(agent.id, "denied"),
    ])
    expect(error).toBeInstanceOf(ActionDenied)
    expect((error as ActionDenied).approval?.status).toBe("denied")
    expect(runs).toEqual([])

    const noWait = runtime.governed("x", async () => "ran", { action, waitForApproval: false })
    await expect(noWait()).rejects.toBeInstanceOf(ActionDenied)
  })
})
