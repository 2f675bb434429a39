import { afterAll, beforeAll, expect, it } from "vitest"
import { decodeClaims } from "../src/core/TokenManager.ts"
import { clientFor, startProxy, startTestServer, type TestServer } from "./helpers.ts"

/**
 * SDK tokens that live 2 seconds (the server's `tokenTtlSeconds`): guard calls spanning several
 * lifetimes never send an expired token, never see a 401, and the runtime exchanges again
 * ahead of expiry.
 */

let t: TestServer

beforeAll(async () => {
  t = await startTestServer({ tokenTtlSeconds: 2 })
})
afterAll(() => t.close())

it("refreshes ahead of expiry across several token lifetimes, never sending an expired token", async () => {
  const proxy = await startProxy(t.url)
  const client = clientFor(proxy.url, t.key)
  const bot = await client.agents.create({ name: `refresh-${Date.now()}` })
  const agent = client.agent({ agentId: bot.id })

  // Four concurrent callers until the runtime has exchanged eight tokens (several 2 s lifetimes).
  let calls = 0
  const caller = async () => {
    while (client.tokenExchanges < 8) {
      const decision = await agent.guard("report.read", { n: calls++ })
      expect(decision.allowed).toBe(true)
      expect(decision.eventId).toMatch(/^evt_/)
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  await Promise.all([caller(), caller(), caller(), caller()])
  agent.track({ type: "report.done", data: { calls } })
  await agent.shutdown()

  const tokenAuthenticated = proxy.requests.filter((r) => r.path === "/v1/guard" || r.path === "/api/v1/events/ingest")
  expect(tokenAuthenticated.length).toBe(calls + 1)
  expect(tokenAuthenticated.filter((r) => r.status === 401)).toEqual([])
  for (const request of tokenAuthenticated) {
    const claims = decodeClaims(request.authorization!.slice("Bearer ".length))
    // Sent before the token's own expiry, by the same clock the server signs with.
    expect(claims.exp! * 1000).toBeGreaterThan(request.receivedAt)
  }
  const exchanges = proxy.requests.filter((r) => r.path === "/api/v1/tokens")
  expect(exchanges.length).toBeGreaterThan(1)
  expect(exchanges.length).toBe(client.tokenExchanges)
  const issued = [...new Set(tokenAuthenticated.map((r) => r.authorization!))].map(
    (h) => decodeClaims(h.slice("Bearer ".length)).iat!,
  )
  expect(issued.length).toBeGreaterThanOrEqual(7)
  // The calls spanned more than two whole lifetimes of the first token.
  expect(Math.max(...issued) - Math.min(...issued)).toBeGreaterThanOrEqual(4)
  await proxy.close()
})

it("keeps waiting for an approval on the stream across token lifetimes: an expired token's stream resumes", async () => {
  const proxy = await startProxy(t.url)
  const client = clientFor(proxy.url, t.key)
  const bot = await client.agents.create({ name: `approval-wait-${Date.now()}` })
  const action = `payment.send_${Date.now().toString(36)}`
  await client.policies.create({
    name: `ask-${Date.now()}`,
    rules: [{ id: "ask", effect: "require_approval", actions: [action] }],
  })
  // Polling as slow as it gets within the test: only the stream can bring the decision in time.
  const agent = client.agent({ agentId: bot.id, approvalPollIntervalMs: 60_000 })
  const asked = await agent.guard(action, { amount: 5000 })
  expect(asked.decision).toBe("require_approval")
  const streams = () => proxy.requests.filter((r) => r.path.startsWith("/api/v1/events/stream"))
  const waited = agent.waitForApproval(asked.approvalId!)
  // The service ends a stream when its SDK token expires (2 s here); the wait connects again with a fresh one.
  await expect.poll(() => streams().length, { timeout: 10_000, interval: 100 }).toBeGreaterThanOrEqual(2)
  await client.approvals.decide(asked.approvalId!, { decision: "approved", reason: "operator" })
  expect((await waited).status).toBe("approved")
  const tokens = new Set(streams().map((r) => r.authorization))
  expect(tokens.size).toBeGreaterThanOrEqual(2)
  expect(streams()[1]!.path).toContain("types=approval.decided")
  await agent.shutdown()
  await proxy.close()
}, 20_000)
