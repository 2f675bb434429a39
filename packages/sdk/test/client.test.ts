import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { TrustRecompute } from "@agentgov/domain"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AgentGov, AgentGovError } from "../src/index.ts"
import { Webhook, WebhookVerificationError } from "../src/webhooks.ts"
import {
  clientFor,
  closedPort,
  type FaultProxy,
  startProxy,
  startTestServer,
  type TestServer,
  unique,
} from "./helpers.ts"

/**
 * The REST client against a real server: typed errors with the server's code and request id,
 * pagination, retries (what is and is not retried, Retry-After, idempotency), and one call of
 * every resource.
 */

let t: TestServer
let client: AgentGov

beforeAll(async () => {
  t = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
  client = clientFor(t.url, t.key)
})
afterAll(() => t.close())

const rejection = async (promise: Promise<unknown>): Promise<AgentGovError> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(AgentGovError)
  return error as AgentGovError
}

describe("errors", () => {
  it("carries the server's code, status and request id on a 404", async () => {
    const error = await rejection(client.agents.get("agt_doesnotexist"))
    expect(error).toMatchObject({ status: 404, code: "AGENT_NOT_FOUND", name: "AgentGovError" })
    expect(error.requestId).toMatch(/^req_/)
    expect(error.message).toContain("agt_doesnotexist")
  })

  it("carries details.field on a 422 and the conflicting field on a 409", async () => {
    const invalid = await rejection(client.agents.create({ name: "x", labels: ["Not Lowercase"] }))
    expect(invalid).toMatchObject({ status: 422, code: "VALIDATION_ERROR" })
    expect(invalid.details?.field).toMatch(/^labels/)
    expect(invalid.requestId).toMatch(/^req_/)

    const name = unique("dup")
    await client.agents.create({ name })
    const conflict = await rejection(client.agents.create({ name }))
    expect(conflict).toMatchObject({ status: 409, code: "CONFLICT", details: { field: "name" } })
  })

  it("answers 401 for a bad key and 403 naming the missing scope", async () => {
    const bad = clientFor(t.url, `${t.key.slice(0, -1)}${t.key.endsWith("A") ? "B" : "A"}`)
    expect(await rejection(bad.agents.list().page())).toMatchObject({ status: 401, code: "UNAUTHORIZED" })
    const readOnly = clientFor(t.url, await t.createKey({ type: "workspace", scopes: ["agents:read"] }))
    const forbidden = await rejection(readOnly.agents.create({ name: unique("nope") }))
    expect(forbidden).toMatchObject({ status: 403, code: "FORBIDDEN", details: { field: "scope" } })
  })

  it("reports an unreachable service as NETWORK_ERROR with status 0", async () => {
    const port = await closedPort()
    const down = clientFor(`http://127.0.0.1:${port}`, t.key, { maxRetries: 0 })
    expect(await rejection(down.agents.list().page())).toMatchObject({ status: 0, code: "NETWORK_ERROR" })
  })

  it("refuses a missing key or a relative base URL at construction", () => {
    expect(() => clientFor(t.url, "")).toThrow(TypeError)
    expect(() => clientFor("/api/v1", t.key)).toThrow(TypeError)
  })
})

describe("pagination", () => {
  it("iterates every item across pages, newest first, and exposes single pages", async () => {
    const label = unique("page").toLowerCase()
    const created: Array<string> = []
    for (let i = 0; i < 7; i++)
      created.push((await client.agents.create({ name: unique("paged"), labels: [label] })).id)

    const seen: Array<string> = []
    for await (const agent of client.agents.list({ label, limit: 3 })) seen.push(agent.id)
    expect(seen).toEqual([...created].reverse())

    const first = await client.agents.list({ label, limit: 3 }).page()
    expect(first.data).toHaveLength(3)
    expect(first.hasMore).toBe(true)
    const second = await first.nextPage()
    expect(second!.data.map((a) => a.id)).toEqual(seen.slice(3, 6))
    const third = await second!.nextPage()
    expect(third!.hasMore).toBe(false)
    expect(await third!.nextPage()).toBeNull()

    // A cursor continues the same list, also from a fresh iterator (another process).
    const resumed = await client.agents.list({ label, limit: 3, cursor: first.cursor! }).toArray()
    expect(resumed.map((a) => a.id)).toEqual(seen.slice(3))
    const pages = []
    for await (const page of client.agents.list({ label, limit: 3 }).pages()) pages.push(page.data.length)
    expect(pages).toEqual([3, 3, 1])
  })

  it("sends an empty list filter as no filter (the API refuses an empty query value)", async () => {
    const all = await client.events.list({ limit: 2 }).page()
    const unfiltered = await client.events.list({ type: [], limit: 2 }).page()
    expect(unfiltered.data.map((e) => e.id)).toEqual(all.data.map((e) => e.id))
  })
})

describe("retries", () => {
  let proxy: FaultProxy | undefined
  afterAll(() => proxy?.close())

  it("honours Retry-After on 429: waits, then retries the same request until it passes", async () => {
    let failures = 2
    proxy = await startProxy(t.url, (r) =>
      r.path.startsWith("/api/v1/agents") && failures-- > 0 ? { status: 429, headers: { "retry-after": "1" } } : "pass",
    )
    const via = clientFor(proxy.url, t.key)
    const page = await via.agents.list({ limit: 1 }).page()
    expect(page.data).toHaveLength(1)
    expect(proxy.requests.map((r) => [r.method, r.path, r.status])).toEqual([
      ["GET", "/api/v1/agents?limit=1", 429],
      ["GET", "/api/v1/agents?limit=1", 429],
      ["GET", "/api/v1/agents?limit=1", 200],
    ])
    await proxy.close()
    proxy = undefined
  })

  it("gives up after maxRetries with the last error, its retryAfter and request id", async () => {
    proxy = await startProxy(t.url, () => ({ status: 429, headers: { "retry-after": "1" } }))
    const via = clientFor(proxy.url, t.key, { maxRetries: 1 })
    const error = await rejection(via.agents.list().page())
    expect(error).toMatchObject({ status: 429, code: "RATE_LIMITED", retryAfter: 1, requestId: "req_proxy_2" })
    expect(proxy.requests).toHaveLength(2)
    await proxy.close()
    proxy = undefined
  })

  it("does not wait for a Retry-After longer than maxRetryAfterMs: rejects at once", async () => {
    proxy = await startProxy(t.url, () => ({ status: 503, headers: { "retry-after": "3600" } }))
    const via = clientFor(proxy.url, t.key)
    const error = await rejection(via.agents.list().page())
    expect(error).toMatchObject({ status: 503, retryAfter: 3600 })
    expect(proxy.requests).toHaveLength(1)
    await proxy.close()
    proxy = undefined
  })

  it("never retries a 4xx other than 408/429", async () => {
    proxy = await startProxy(t.url)
    const via = clientFor(proxy.url, t.key)
    await rejection(via.agents.get("agt_missing"))
    await rejection(via.agents.create({ name: "" }))
    expect(proxy.requests.map((r) => r.status)).toEqual([404, 422])
    await proxy.close()
    proxy = undefined
  })

  it("retries a POST whose answer was lost with the same Idempotency-Key: the work is done once", async () => {
    let failed = false
    proxy = await startProxy(t.url, (r) => {
      if (r.method === "POST" && r.path === "/api/v1/agents" && !failed) {
        failed = true
        return { afterForward: 502 }
      }
      return "pass"
    })
    const via = clientFor(proxy.url, t.key)
    const name = unique("once")
    const agent = await via.agents.create({ name })
    const posts = proxy.requests.filter((r) => r.method === "POST")
    expect(posts).toHaveLength(2)
    expect(posts.map((r) => r.forwarded)).toEqual([true, true])
    expect(posts[0]!.idempotencyKey).toBeDefined()
    expect(posts[1]!.idempotencyKey).toBe(posts[0]!.idempotencyKey)
    const named = await client.agents.list({ namePrefix: name }).toArray()
    expect(named.map((a) => a.id)).toEqual([agent.id])
    await proxy.close()
    proxy = undefined
  })

  it("does not retry a PATCH after a 5xx (it has no key to make a repeat safe)", async () => {
    const agent = await client.agents.create({ name: unique("patched") })
    proxy = await startProxy(t.url, (r) => (r.method === "PATCH" ? { status: 500 } : "pass"))
    const via = clientFor(proxy.url, t.key)
    expect(await rejection(via.agents.update(agent.id, { description: "x" }))).toMatchObject({ status: 500 })
    expect(proxy.requests).toHaveLength(1)
    await proxy.close()
    proxy = undefined
  })

  it("uses the caller's Idempotency-Key: a repeat replays the first answer", async () => {
    const idempotencyKey = unique("key")
    const name = unique("replayed")
    const first = await client.agents.create({ name }, { idempotencyKey })
    const again = await client.agents.create({ name }, { idempotencyKey })
    expect(again).toEqual(first)
    const reused = await rejection(client.agents.create({ name: unique("other") }, { idempotencyKey }))
    expect(reused).toMatchObject({ status: 409, code: "IDEMPOTENCY_KEY_REUSED" })
  })

  it("stops at once when the caller aborts", async () => {
    const controller = new AbortController()
    controller.abort(new Error("stop"))
    await expect(client.agents.list().page()).resolves.toBeDefined()
    await expect(client.agents.get("agt_x", { signal: controller.signal })).rejects.toThrow("stop")
  })
})

describe("every resource", () => {
  it("workspaces, agents and versions", async () => {
    const created = await client.workspaces.create({ name: unique("ws"), environment: "test" })
    expect(created.workspace.environment).toBe("test")
    expect(created.apiKey.apiKey).toMatch(/^svc_ws_test_/)
    expect((await client.workspaces.get(created.workspace.id)).name).toBe(created.workspace.name)
    expect((await client.workspaces.update(created.workspace.id, { guardDefault: "deny" })).guardDefault).toBe("deny")
    const all = await client.workspaces.list({ limit: 100 }).toArray()
    expect(all.map((w) => w.id)).toContain(created.workspace.id)
    expect((await client.workspaces.delete(created.workspace.id)).id).toBe(created.workspace.id)

    const agent = await client.agents.create({ name: unique("versioned") })
    const v = await client.agents.versions.create(agent.id, { version: "1.0.0" })
    expect(v.agentId).toBe(agent.id)
    expect((await client.agents.get(agent.id)).currentVersion).toBe("1.0.0")
    expect((await client.agents.versions.list(agent.id).toArray()).map((x) => x.version)).toEqual(["1.0.0"])
    expect((await client.agents.delete(agent.id)).status).toBe("deregistered")
  })

  it("api keys, rotation and tokens", async () => {
    const key = await client.apiKeys.create({ name: unique("key"), type: "workspace", scopes: ["agents:read"] })
    expect(key.apiKey).toMatch(/^svc_ws_/)
    expect((await client.apiKeys.get(key.id)).status).toBe("active")
    const rotated = await client.apiKeys.rotate(key.id, { overlapSeconds: 0 })
    expect(rotated.apiKey).not.toBe(key.apiKey)
    expect((await client.apiKeys.get(key.id)).status).toBe("revoked")
    expect((await client.apiKeys.revoke(rotated.id)).status).toBe("revoked")
    expect((await client.apiKeys.list({ status: "revoked", limit: 100 }).toArray()).map((k) => k.id)).toContain(key.id)
    const token = await client.tokens.create()
    expect(token.token.split(".")).toHaveLength(3)
    expect(Date.parse(token.expiresAt)).toBeGreaterThan(Date.now())
    // The client-library form states the lifetime too (spec: 900 s unless the operator set otherwise).
    expect(token.expiresIn).toBe(900)
    expect(Object.keys(token).sort()).toEqual(["expiresAt", "expiresIn", "token"])
  })

  it("events: ingest, list, get with proof, verify, checkpoint, proofs, export", async () => {
    const type = `sdk.${unique("res").replace(/[^a-z0-9]/g, "_")}`
    const ingested = await client.events.ingest([
      { type, data: { n: 1 } },
      { type, data: { n: 2 }, occurredAt: "2026-01-01T00:00:00.000Z" },
    ])
    expect(ingested.events).toHaveLength(2)
    const listed = await client.events.list({ type }).toArray()
    expect(listed.map((e) => e.data.n)).toEqual([2, 1])
    expect(listed[0]!.occurredAt).toBe("2026-01-01T00:00:00.000Z")
    const withProof = await client.events.get(ingested.events[0]!.id, { proof: true })
    expect(withProof.proof?.sequence).toBe(ingested.events[0]!.sequence)
    expect((await client.events.verify()).valid).toBe(true)
    const checkpoint = await client.events.checkpoint()
    expect(checkpoint.treeSize).toBeGreaterThanOrEqual(ingested.events[1]!.sequence)
    const inclusion = await client.events.inclusionProof({ sequence: ingested.events[1]!.sequence })
    expect(inclusion.checkpoint.rootHash).toMatch(/^[0-9a-f]{64}$/)
    const consistency = await client.events.consistencyProof({ fromSize: 1 })
    expect(consistency.toSize).toBeGreaterThanOrEqual(checkpoint.treeSize)
    const bundle = await client.events.export({ fromSequence: ingested.events[0]!.sequence })
    expect(bundle.format).toBe("agentgov.audit-bundle/v2")
    expect(bundle.events.map((e) => e.id)).toContain(ingested.events[1]!.id)
  })

  it("policies, the guard, approvals and enforcement", async () => {
    const agent = await client.agents.create({ name: unique("governed") })
    const action = `sdk.${unique("act").replace(/[^a-z0-9]/g, "_")}`
    const policy = await client.policies.create({
      name: unique("policy"),
      rules: [{ id: "ask", effect: "require_approval", actions: [action] }],
    })
    expect((await client.policies.get(policy.id)).version).toBe(1)
    expect((await client.policies.update(policy.id, { description: "asks" })).version).toBe(2)
    expect((await client.policies.list({ limit: 100 }).toArray()).map((p) => p.id)).toContain(policy.id)

    const asked = await client.guard.evaluate({ action, agentId: agent.id, context: { n: 1 } })
    expect(asked).toMatchObject({ decision: "require_approval", allowed: false })
    expect(asked.eventId).toMatch(/^evt_/)
    const pending = await client.approvals.list({ agentId: agent.id }).toArray()
    expect(pending.map((a) => a.id)).toEqual([asked.approvalId])
    const decided = await client.approvals.decide(asked.approvalId!, { decision: "approved" })
    expect(decided.status).toBe("approved")
    const used = await client.policies.evaluate({
      action,
      agentId: agent.id,
      context: { n: 1 },
      approvalId: asked.approvalId!,
    })
    expect(used).toMatchObject({ decision: "allow", allowed: true, approvalId: asked.approvalId })
    expect((await client.approvals.get(asked.approvalId!)).usedAt).not.toBeNull()
    const explicit = await client.approvals.create({ agentId: agent.id, action: "db.drop" })
    expect(explicit.status).toBe("pending")
    expect((await client.policies.delete(policy.id)).id).toBe(policy.id)

    const enforcement = await client.enforcement.create({ agentId: agent.id, type: "warning", reason: "noisy" })
    expect((await client.enforcement.get(enforcement.id)).inForce).toBe(true)
    expect((await client.enforcement.appeal(enforcement.id, { reason: "it was a test" })).status).toBe("appealed")
    const resolved = await client.enforcement.update(enforcement.id, { resolution: "overturned" })
    expect(resolved).toMatchObject({ status: "resolved", resolution: "overturned" })
    expect((await client.enforcement.list({ status: "all", agentId: agent.id }).toArray()).map((e) => e.id)).toEqual([
      enforcement.id,
    ])
  })

  it("trust: score, reputation, adjust, badge, badgeData, badgeStatus, verifyBadge", async () => {
    const agent = await client.agents.create({ name: unique("sdk-trust") })
    const score = await client.trust.score(agent.id)
    expect(score).toMatchObject({ agentId: agent.id, score: 400, tier: "probation" })
    expect((await client.trust.reputation(agent.id, { limit: 10 })).agentId).toBe(agent.id)
    expect(await client.trust.adjust(agent.id, { delta: 150, reason: "sdk" })).toMatchObject({ delta: 150 })
    // This suite's server runs no trust worker: one pass, as the worker would.
    await t.server.runtime.runPromise(TrustRecompute.use((r) => r.catchUp(t.workspaceId)))
    const badge = await client.trust.badge(agent.id)
    expect(badge).toMatchObject({ agentId: agent.id, tier: "bronze", score: 550 })
    expect(await client.trust.badgeData(agent.id)).toEqual(badge)
    expect(await client.trust.badgeStatus(agent.id)).toMatchObject({ valid: true, current: true })
    expect(await client.trust.verifyBadge(agent.id, badge)).toMatchObject({ valid: true, tier: "bronze" })
    expect(await client.trust.verifyBadge(agent.id, { ...badge, score: 999 })).toMatchObject({
      valid: false,
      reason: "bad_signature",
    })
    const missing = await rejection(client.trust.badge("agt_none"))
    expect(missing).toMatchObject({ status: 404, code: "BADGE_NOT_FOUND" })
  })

  it("webhooks: create, get, update, test, rotate, redeliver, delete", async () => {
    const hook = await client.webhooks.create({ url: `${t.url}/healthz`, events: ["approval.*"] })
    expect(hook.secret.length).toBeGreaterThanOrEqual(16)
    expect((await client.webhooks.get(hook.id, { includeDeliveries: true })).deliveries).toEqual([])
    expect((await client.webhooks.update(hook.id, { description: "sdk" })).description).toBe("sdk")
    const tested = await client.webhooks.test(hook.id, { eventType: "approval.requested" })
    expect(tested.delivery.eventType).toBe("approval.requested")
    const rotated = await client.webhooks.rotate(hook.id, { overlapSeconds: 0 })
    expect(rotated.secret).not.toBe(hook.secret)
    const redelivered = await client.webhooks.redeliver(hook.id, { since: "2026-01-01T00:00:00.000Z" })
    expect(redelivered).toMatchObject({ queued: [], hasMore: false })
    expect((await client.webhooks.list({ limit: 100 }).toArray()).map((w) => w.id)).toContain(hook.id)
    expect((await client.webhooks.delete(hook.id)).id).toBe(hook.id)
  })
})

describe("webhook verification (@agentgov/sdk/webhooks)", () => {
  it("verifies a real signed delivery and refuses a tampered one", async () => {
    const received: Array<{ body: string; headers: Record<string, string | string[] | undefined> }> = []
    const receiver = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        received.push({ body: Buffer.concat(chunks).toString("utf8"), headers: req.headers })
        res.writeHead(200).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    const { port } = receiver.address() as AddressInfo
    try {
      const hook = await client.webhooks.create({ url: `http://127.0.0.1:${port}/hook`, events: ["approval.*"] })
      const tested = await client.webhooks.test(hook.id, { eventType: "approval.decided" })
      expect(tested.delivered).toBe(true)
      const [delivery] = received
      const event = new Webhook({ secret: hook.secret }).verify(delivery!.body, delivery!.headers)
      expect(event.type).toBe("approval.decided")
      expect(event.metadata.webhookId).toBe(hook.id)

      const forged = delivery!.body.replace("approval.decided", "approval.requested")
      let error: unknown
      try {
        new Webhook({ secret: hook.secret }).verify(forged, delivery!.headers)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(WebhookVerificationError)
      expect(error).toMatchObject({ code: "BAD_SIGNATURE", status: 401 })
      await client.webhooks.delete(hook.id)
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })
})
