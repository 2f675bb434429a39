import { DEFAULT_RATE_LIMITS, type RateLimitConfig } from "@agentgov/domain"
import { makeTestStore } from "@agentgov/testing"
import { afterAll, describe, expect, it } from "vitest"
import { type ChildServer, spawnServer, stopChildren } from "./childServer.ts"
import { expectError, startTestServer, type TestServer, unique } from "./helpers.ts"

/**
 * Decision D10 over HTTP: the headers on every response, the 429, the
 * all-or-nothing check of key, workspace and agent limits, a truthful
 * Retry-After, and counters shared by two server processes through Redis.
 */

const limits = (overrides: Partial<RateLimitConfig>): RateLimitConfig => ({ ...DEFAULT_RATE_LIMITS, ...overrides })
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const servers: Array<TestServer> = []
const start = async (rateLimits: RateLimitConfig) => {
  const t = await startTestServer({ rateLimits })
  servers.push(t)
  return t
}
afterAll(async () => {
  await Promise.all(servers.map((t) => t.close()))
  await stopChildren()
})

const headersOf = (res: { headers: Headers }) => ({
  limit: Number(res.headers.get("x-ratelimit-limit")),
  remaining: Number(res.headers.get("x-ratelimit-remaining")),
  reset: Number(res.headers.get("x-ratelimit-reset")),
})

describe("the headers", () => {
  it("are on every response: success, 401, 404, 405, 422 and the stream's refusals", async () => {
    const t = await start(limits({ plans: { free: 1_000, pro: 1_000, enterprise: 1_000 }, anonymous: 50 }))
    const responses = [
      await t.call("GET", "/api/v1/agents"),
      await t.call("GET", "/v1/agents"),
      await t.call("GET", "/api/v1/agents", { key: null }),
      await t.call("GET", "/api/v1/no-such-thing"),
      await t.call("PUT", "/api/v1/agents"),
      await t.call("POST", "/api/v1/agents", { body: { name: "" } }),
      await t.call("GET", "/api/v1/events/stream", { key: null }),
    ]
    expect(responses.map((r) => r.status)).toEqual([200, 200, 401, 404, 405, 422, 401])
    const now = Math.floor(Date.now() / 1000)
    for (const res of responses) {
      const h = headersOf(res)
      expect(h.limit).toBeGreaterThan(0)
      expect(h.remaining).toBeGreaterThanOrEqual(0)
      expect(h.remaining).toBeLessThan(h.limit)
      expect(h.reset).toBeGreaterThanOrEqual(now)
      expect(h.reset).toBeLessThanOrEqual(now + 121)
    }
    // An authenticated request counts against the workspace's plan; one without a credential, against the address.
    expect(headersOf(responses[0]!).limit).toBe(1_000)
    expect(headersOf(responses[2]!).limit).toBe(50)
    // Each request of the key is one less remaining.
    expect(headersOf(responses[1]!).remaining).toBe(headersOf(responses[0]!).remaining - 1)
  })
})

describe("limits", () => {
  it("refuse with 429 RATE_LIMITED and Retry-After once a key, its workspace or its agent is over", async () => {
    const t = await start(limits({ plans: { free: 8, pro: 8, enterprise: 8 }, agent: 3 }))
    // 1, 2: an agent and a key bound to it.
    const agent = (await t.call("POST", "/api/v1/agents", { body: { name: unique("limited") } })).body.data
    const agentKey = await t.createKey({ type: "agent", agentId: agent.id, scopes: ["agents:read"] })
    const asAgent = () => t.call("GET", `/api/v1/agents/${agent.id}`, { key: agentKey })
    // The agent's 3 per window is the most restrictive limit its key meets.
    const seen = []
    for (let i = 0; i < 3; i++) {
      const res = await asAgent()
      expect(res.status).toBe(200)
      seen.push(headersOf(res))
    }
    expect(seen.map((h) => [h.limit, h.remaining])).toEqual([
      [3, 2],
      [3, 1],
      [3, 0],
    ])
    const refused = await asAgent()
    expectError(refused, 429, "RATE_LIMITED")
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 120).toBe(true)
    expect(headersOf(refused)).toMatchObject({ limit: 3, remaining: 0 })

    // All-or-nothing: the refused request moved no counter, so the workspace has used 5 of 8.
    const ws = await t.call("GET", "/api/v1/agents")
    expect(ws.status).toBe(200)
    expect(headersOf(ws)).toMatchObject({ limit: 8, remaining: 2 })
    expect((await t.call("GET", "/api/v1/agents")).status).toBe(200)
    expect((await t.call("GET", "/api/v1/agents")).status).toBe(200)
    // The workspace is now full: every credential of it is refused, the agent's too.
    expectError(await t.call("GET", "/api/v1/agents"), 429, "RATE_LIMITED")
    expectError(await asAgent(), 429, "RATE_LIMITED")
  })

  it("limit requests without a valid credential by address, so keys cannot be guessed at speed", async () => {
    const t = await start(limits({ anonymous: 4 }))
    for (let i = 0; i < 4; i++)
      expectError(await t.call("GET", "/api/v1/agents", { key: "svc_ws_live_guess" }), 401, "UNAUTHORIZED")
    const refused = await t.call("GET", "/api/v1/agents", { key: null })
    expectError(refused, 429, "RATE_LIMITED")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    // A valid key is counted against its own workspace, not the address.
    expect((await t.call("GET", "/api/v1/agents")).status).toBe(200)
  })

  it("limit the JWKS per address too: each read is a store query anyone may ask for (outside review, keys)", async () => {
    const t = await start(limits({ anonymous: 4 }))
    for (let i = 0; i < 4; i++) {
      const res = await t.call("GET", "/.well-known/jwks.json", { key: null })
      expect(res.status).toBe(200)
      expect(headersOf(res).limit).toBe(4)
    }
    const refused = await t.call("GET", "/api/v1/.well-known/jwks.json", { key: null })
    expectError(refused, 429, "RATE_LIMITED")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  })

  it("limit /auth and /oauth per address too, and a refused first-run link is not used up", async () => {
    const t = await start(limits({ windowMs: 3_000, anonymous: 4 }))
    const link = new URL(t.server.bootstrapped!.signInLink!)
    const raw = (method: string, path: string, body?: string) =>
      fetch(`${t.url}${path}`, {
        method,
        redirect: "manual",
        headers: body === undefined ? {} : { "content-type": "application/x-www-form-urlencoded" },
        body,
      })
    const counted = [
      await raw("GET", "/auth/providers"),
      await raw("GET", "/auth/signin/none"),
      await raw("POST", "/oauth/token", "grant_type=authorization_code&code=x"),
      await raw("GET", "/oauth/authorize?client_id=oac_x&response_type=code"),
    ]
    for (const res of counted) expect(headersOf(res).limit).toBe(4)
    // The first-run link's button (the POST that spends it) is among the refused.
    const useLink = `token=${link.searchParams.get("token")}`
    for (const [method, path, body] of [
      ["POST", "/auth/first-run", useLink],
      ["POST", "/oauth/revoke", "token=x"],
      ["GET", "/auth/callback/none?state=x&code=y", undefined],
    ] as const) {
      const refused = await raw(method, path, body)
      expect(refused.status, path).toBe(429)
      expect(((await refused.json()) as any).error.code).toBe("RATE_LIMITED")
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    }
    // The refused first-run request changed nothing: once the window allows, the link still signs in, once.
    let used = await raw("POST", "/auth/first-run", useLink)
    for (let i = 0; i < 5 && used.status === 429; i++) {
      await sleep(Number(used.headers.get("retry-after")) * 1000)
      used = await raw("POST", "/auth/first-run", useLink)
    }
    expect(used.status).toBe(302)
  })

  it("tell the truth in Retry-After: a request after it succeeds", async () => {
    const t = await start(limits({ windowMs: 2_000, plans: { free: 3, pro: 3, enterprise: 3 } }))
    let refused = await t.call("GET", "/api/v1/agents")
    while (refused.status === 200) refused = await t.call("GET", "/api/v1/agents")
    expectError(refused, 429, "RATE_LIMITED")
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(4)
    await sleep(retryAfter * 1000)
    expect((await t.call("GET", "/api/v1/agents")).status).toBe(200)
  })

  it("can be switched off by the operator: no headers, no refusals", async () => {
    const t = await start(limits({ enabled: false, plans: { free: 1, pro: 1, enterprise: 1 } }))
    for (let i = 0; i < 3; i++) {
      const res = await t.call("GET", "/api/v1/agents")
      expect(res.status).toBe(200)
      expect(res.headers.get("x-ratelimit-limit")).toBeNull()
    }
  })
})

describe.runIf(process.env.DATABASE_URL && process.env.REDIS_URL)("two server processes sharing one Redis", () => {
  it("limit requests spread over both as one, and Retry-After holds on either", async () => {
    const store = await makeTestStore()
    try {
      const env = {
        DATABASE_URL: store.url!,
        REDIS_URL: process.env.REDIS_URL!,
        AGENTGOV_RATE_LIMITS: "true",
        AGENTGOV_RATE_LIMIT_FREE: "6",
        AGENTGOV_RATE_LIMIT_WINDOW_MS: "5000",
      }
      const first: ChildServer = await spawnServer(env)
      const key = await first.waitForKey()
      const second: ChildServer = await spawnServer(env)
      const get = (server: ChildServer) =>
        fetch(`${server.url}/api/v1/agents`, { headers: { authorization: `Bearer ${key}` } })

      // Both answer once first (a fresh server's first request is slow), on a route not counted: the limit slides, so
      // a counted request in the window before would count in this one too.
      for (const server of [first, second]) await (await fetch(`${server.url}/healthz`)).arrayBuffer()
      // Start at the beginning of a window, so that the six fit in one (5 s: room for a loaded machine).
      await sleep(5_000 - (Date.now() % 5_000))
      const statuses: Array<number> = []
      const remaining: Array<number> = []
      for (let i = 0; i < 8; i++) {
        const res = await get(i % 2 === 0 ? first : second)
        await res.arrayBuffer()
        statuses.push(res.status)
        remaining.push(Number(res.headers.get("x-ratelimit-remaining")))
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429, 429])
      expect(remaining).toEqual([5, 4, 3, 2, 1, 0, 0, 0])

      const refused = await get(second)
      expect(refused.status).toBe(429)
      const retryAfter = Number(refused.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      await sleep(retryAfter * 1000)
      expect((await get(first)).status).toBe(200)
    } finally {
      await stopChildren()
      await store.cleanup()
    }
  })
})
