import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer, unique } from "./helpers.ts"

/**
 * `GET /overview` (issue 33): the dashboard's overview, counted workspace-wide from indexed reads — agents by
 * tier, decisions per hour, pending approvals, the chain as stored — in a workspace of its own, so that the
 * counts are exactly what this file did.
 */
let t: TestServer
let ws: { id: string; key: string }
const agents: Array<string> = []

const call = (method: string, path: string, body?: unknown, key = ws.key) =>
  t.call(method, path, { ...(body === undefined ? {} : { body }), key })

const ok = async (res: Promise<{ status: number; body: any }>, status = 200) => {
  const r = await res
  expect(r.status, JSON.stringify(r.body)).toBe(status)
  return r.body.data
}

beforeAll(async () => {
  t = await startTestServer()
  const made = await ok(
    t.call("POST", "/api/v1/workspaces", { body: { name: unique("overview"), environment: "test" } }),
    201,
  )
  ws = { id: made.workspace.id, key: made.apiKey.apiKey }
  // Four agents, one of them deregistered; the other three's scores set in three tiers.
  for (let i = 0; i < 4; i++) agents.push((await ok(call("POST", "/api/v1/agents", { name: unique("agent") }), 201)).id)
  await ok(call("DELETE", `/api/v1/agents/${agents[3]}`))
  for (const [id, score] of [
    [agents[0], 120],
    [agents[1], 640],
    [agents[2], 960],
  ] as const)
    await t.query((sql) => sql`UPDATE agents SET trust_score = ${score} WHERE id = ${id}`)
  await ok(
    call("POST", "/api/v1/policies", {
      name: "rules",
      rules: [
        { id: "reads", effect: "allow", actions: ["read.*"] },
        { id: "no-deletes", effect: "deny", actions: ["delete.*"] },
        { id: "human", effect: "require_approval", actions: ["deploy.*"] },
      ],
    }),
    201,
  )
  for (const action of ["read.a", "read.b", "read.c", "delete.a", "delete.b", "deploy.prod"])
    await ok(call("POST", "/api/v1/guard", { action, context: {}, agentId: agents[0] }))
  await ok(call("GET", "/api/v1/events/checkpoint"))
  await ok(call("POST", "/api/v1/events/verify"))
})
afterAll(() => t?.close())

describe("GET /overview", () => {
  it("counts the workspace's agents by tier, its decisions per hour, its pending approvals and its chain", async () => {
    const before = await t.chainLength(ws.id)
    const hourOf = () => Math.floor(Date.now() / 3_600_000) * 3_600_000
    const hourBefore = hourOf()
    const o = await ok(call("GET", "/api/v1/overview"))
    const hourAfter = hourOf()
    expect(o.agents.total).toBe(3)
    expect(o.agents.byTier).toEqual([
      { tier: "untrusted", count: 1 },
      { tier: "probation", count: 0 },
      { tier: "bronze", count: 1 },
      { tier: "silver", count: 0 },
      { tier: "gold", count: 0 },
      { tier: "platinum", count: 1 },
    ])
    const hours = o.decisions.hours as Array<{ hour: string; allowed: number; denied: number }>
    expect(hours).toHaveLength(24)
    // Oldest first, one hour apart, the current hour last.
    for (let i = 1; i < hours.length; i++)
      expect(Date.parse(hours[i]!.hour) - Date.parse(hours[i - 1]!.hour)).toBe(3_600_000)
    expect([hourBefore, hourAfter]).toContain(Date.parse(hours.at(-1)!.hour))
    // Allowed reads; denied deletes and the deploy held for approval.
    expect(hours.reduce((n, h) => n + h.allowed, 0)).toBe(3)
    expect(hours.reduce((n, h) => n + h.denied, 0)).toBe(3)
    expect(o.approvals.pending).toBe(1)
    expect(o.approvals.latest).toHaveLength(1)
    expect(o.approvals.latest[0]).toMatchObject({ action: "deploy.prod", agentId: agents[0] })
    // The chain as stored: reading the overview signs and records nothing.
    expect(o.chain.events).toBe(before)
    expect(await t.chainLength(ws.id)).toBe(before)
    expect(o.chain.checkpoint.treeSize).toBeGreaterThan(0)
    expect(o.chain.checkpoint.treeSize).toBeLessThanOrEqual(before)
    expect(o.chain.lastVerification).toMatchObject({ valid: true, firstBadSequence: null, reason: null })
    // Another workspace's overview counts none of it.
    const mine = await ok(t.call("GET", "/api/v1/overview"))
    expect(mine.approvals.latest.map((a: { agentId: string }) => a.agentId)).not.toContain(agents[0])
  })

  it("leaves out what the credential may not read, and needs events:read", async () => {
    const narrow = await ok(
      call("POST", "/api/v1/api-keys", { name: unique("narrow"), type: "workspace", scopes: ["events:read"] }),
      201,
    )
    const o = await ok(call("GET", "/api/v1/overview", undefined, narrow.apiKey))
    expect(o.agents).toBeNull()
    expect(o.approvals).toBeNull()
    expect(o.decisions.hours.reduce((n: number, h: { allowed: number }) => n + h.allowed, 0)).toBe(3)
    const none = await ok(
      call("POST", "/api/v1/api-keys", { name: unique("none"), type: "workspace", scopes: ["agents:read"] }),
      201,
    )
    expectError(await call("GET", "/api/v1/overview", undefined, none.apiKey), 403, "FORBIDDEN", "scope")
  })

  it("is not for agent-bound credentials", async () => {
    const bound = await ok(
      call("POST", "/api/v1/api-keys", {
        name: unique("bound"),
        type: "agent",
        agentId: agents[0],
        scopes: ["events:read", "agents:read"],
      }),
      201,
    )
    expectError(await call("GET", "/api/v1/overview", undefined, bound.apiKey), 403, "FORBIDDEN", "credential")
  })
})
