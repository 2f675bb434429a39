import { EnforcementService, SYSTEM_EVENTS } from "@agentgov/domain"
import { Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type CredentialFixtures,
  credentialFixtures,
  expectError,
  ISO_MS,
  startTestServer,
  type TestServer,
  unique,
} from "./helpers.ts"

let t: TestServer
let creds: CredentialFixtures
/** A second workspace with its all-scope key and an agent of its own. */
let other: { id: string; key: string; agent: string }

const run = <A>(effect: unknown): Promise<A> => t.server.runtime.runPromise(effect as any) as Promise<A>

interface EventRow {
  readonly type: string
  readonly agent_id: string | null
  readonly actor_type: string
  readonly actor_id: string | null
  readonly data: any
}

/** The events recorded after sequence `after`, in order; each decodes strictly with its catalog schema. */
const eventsAfter = async (after: number): Promise<ReadonlyArray<EventRow>> => {
  const rows = await run<ReadonlyArray<EventRow>>(
    SqlClient.SqlClient.use(
      (sql) => sql`SELECT type, agent_id, actor_type, actor_id, data FROM events
        WHERE workspace_id = ${t.workspaceId} AND sequence > ${after} ORDER BY sequence`,
    ),
  )
  for (const row of rows) {
    const schema = (SYSTEM_EVENTS as Record<string, { data: Schema.Codec<any, any> }>)[row.type]?.data
    expect(schema, row.type).toBeDefined()
    Schema.decodeUnknownSync(schema!)(row.data, { onExcessProperty: "error" })
  }
  return rows
}

const register = async (key?: string) => {
  const res = await t.call("POST", "/api/v1/agents", { body: { name: unique("agent") }, key })
  expect(res.status).toBe(201)
  return res.body.data as { id: string; name: string }
}

/** An agent with an agent key that reads its enforcements and itself. */
const agentWithKey = async () => {
  const agent = await register()
  const res = await t.call("POST", "/api/v1/api-keys", {
    body: { name: "agent key", type: "agent", agentId: agent.id, scopes: ["enforcement:read", "agents:read"] },
  })
  expect(res.status).toBe(201)
  return { ...agent, key: res.body.data.apiKey as string, keyId: res.body.data.id as string }
}

const issue = async (body: Record<string, unknown>, key?: string) => {
  const res = await t.call("POST", "/api/v1/enforcement", { body: { reason: "policy breach", ...body }, key })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data
}

const patch = (id: string, body: Record<string, unknown>, key?: string) =>
  t.call("PATCH", `/api/v1/enforcement/${id}`, { body, key })
const appeal = (id: string, body: Record<string, unknown>, key?: string) =>
  t.call("POST", `/api/v1/enforcement/${id}/appeal`, { body, key })
const agentStatus = async (id: string) => (await t.call("GET", `/api/v1/agents/${id}`)).body.data.status

const waitPast = async (iso: string) => {
  const wait = Date.parse(iso) + 25 - Date.now()
  if (wait > 0) await new Promise((r) => setTimeout(r, wait))
}

beforeAll(async () => {
  t = await startTestServer()
  creds = await credentialFixtures(t)
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("enforcement-other") } })
  expect(ws.status).toBe(201)
  const key = ws.body.data.apiKey.apiKey as string
  other = { id: ws.body.data.workspace.id, key, agent: (await register(key)).id }
})
afterAll(async () => t?.close())

describe("POST /enforcement", () => {
  it("issues a warning: recorded, in force, the agent untouched", async () => {
    const agent = await register()
    const before = await t.chainLength()
    const res = await t.call("POST", "/api/v1/enforcement", {
      body: { agentId: agent.id, type: "warning", reason: "rude to a customer" },
    })
    expect(res.status).toBe(201)
    const e = res.body.data
    expect(e).toEqual({
      id: expect.stringMatching(/^enf_[0-9a-z]{26}$/),
      workspaceId: t.workspaceId,
      agentId: agent.id,
      type: "warning",
      status: "active",
      inForce: true,
      reason: "rude to a customer",
      policyId: null,
      ruleId: null,
      limitPerMinute: null,
      expiresAt: null,
      appealReason: null,
      appealedAt: null,
      resolution: null,
      resolutionNote: null,
      resolvedAt: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: e.createdAt,
    })
    expect((await t.call("GET", `/api/v1/enforcement/${e.id}`)).body.data).toEqual(e)
    expect(await agentStatus(agent.id)).toBe("active")
    const events = await eventsAfter(before)
    expect(events.map((x) => [x.type, x.agent_id])).toEqual([["enforcement.created", agent.id]])
    expect(events[0]!.data).toEqual({
      enforcementId: e.id,
      agentId: agent.id,
      type: "warning",
      status: "active",
      reason: "rude to a customer",
    })
  })

  it("issues a throttle with its limit and an expiry; throttleFor reports the lowest in force", async () => {
    const agent = await register()
    const a = await issue({ agentId: agent.id, type: "throttle", limitPerMinute: 60, durationSeconds: 3600 })
    expect(a.limitPerMinute).toBe(60)
    expect(Date.parse(a.expiresAt) - Date.parse(a.createdAt)).toBe(3_600_000)
    await issue({ agentId: agent.id, type: "throttle", limitPerMinute: 10 })
    const throttle = (agentId: string) =>
      run<number | undefined>(EnforcementService.use((s) => s.throttleFor(t.workspaceId, agentId)))
    expect(await throttle(agent.id)).toBe(10)
    expect(await throttle((await register()).id)).toBeUndefined()
  })

  it("refuses an unknown or another workspace's agent with 404, a deregistered one with 409", async () => {
    const gone = await register()
    expect((await t.call("DELETE", `/api/v1/agents/${gone.id}`)).status).toBe(200)
    const before = await t.chainLength()
    for (const agentId of ["agt_missing", other.agent]) {
      const res = await t.call("POST", "/api/v1/enforcement", { body: { agentId, type: "warning", reason: "r" } })
      expectError(res, 404, "AGENT_NOT_FOUND")
    }
    const res = await t.call("POST", "/api/v1/enforcement", {
      body: { agentId: gone.id, type: "suspension", reason: "r" },
    })
    expectError(res, 409, "AGENT_DEREGISTERED")
    expect(await t.chainLength()).toBe(before)
    expect(await agentStatus(gone.id)).toBe("deregistered")
  })

  it.each([
    ["a missing agentId", { agentId: undefined }, "agentId"],
    ["a missing type", { type: undefined }, "type"],
    ["an unknown type", { type: "ban" }, "type"],
    ["a missing reason", { reason: undefined }, "reason"],
    ["an empty reason", { reason: "" }, "reason"],
    ["a reason of only whitespace", { reason: " \t\n" }, "reason"],
    ["a reason over 2000 characters", { reason: "r".repeat(2001) }, "reason"],
    ["an expiry that is not a timestamp", { expiresAt: "tomorrow" }, "expiresAt"],
    ["an expiry in the past", { expiresAt: "2020-01-01T00:00:00.000Z" }, "expiresAt"],
    ["a duration of 0", { durationSeconds: 0 }, "durationSeconds"],
    ["a duration over ten years", { durationSeconds: 315_360_001 }, "durationSeconds"],
    // Outside review: an expiry was unbounded (year 9999) while a duration stops at ten years.
    ["an expiry over ten years away", { expiresAt: "9999-12-31T23:59:59Z" }, "expiresAt"],
    ["both an expiry and a duration", { expiresAt: "2099-01-01T00:00:00Z", durationSeconds: 60 }, "durationSeconds"],
    ["a limit on a suspension", { limitPerMinute: 10 }, "limitPerMinute"],
    ["a throttle without a limit", { type: "throttle" }, "limitPerMinute"],
    ["a throttle limit of 0", { type: "throttle", limitPerMinute: 0 }, "limitPerMinute"],
    ["a revocation with an expiry", { type: "revocation", durationSeconds: 60 }, "durationSeconds"],
    ["an unknown field", { severity: "high" }, "severity"],
  ])("refuses %s with 422 naming the field; the agent stays active", async (_, change, field) => {
    const agent = await register()
    const before = await t.chainLength()
    const body: Record<string, unknown> = { agentId: agent.id, type: "suspension", reason: "r", ...change }
    for (const [k, v] of Object.entries(body)) if (v === undefined) delete body[k]
    expectError(await t.call("POST", "/api/v1/enforcement", { body }), 422, "VALIDATION_ERROR", field)
    expect(await t.chainLength()).toBe(before)
    expect(await agentStatus(agent.id)).toBe("active")
  })
})

describe("suspension, appeal and resolution", () => {
  it("suspend → the agent appeals with its own key → overturned → active again", async () => {
    const agent = await agentWithKey()
    let before = await t.chainLength()
    const e = await issue({ agentId: agent.id, type: "suspension", reason: "spamming" })
    expect(e).toMatchObject({ type: "suspension", status: "active", inForce: true })
    expect(await agentStatus(agent.id)).toBe("suspended")
    let events = await eventsAfter(before)
    expect(events.map((x) => x.type)).toEqual(["enforcement.created", "agent.suspended"])
    expect(events[1]!.data).toEqual({
      agentId: agent.id,
      agentName: agent.name,
      enforcementId: e.id,
      reason: "spamming",
    })

    // The suspended agent's key still reads its agent and its enforcement, and appeals.
    expect((await t.call("GET", `/api/v1/agents/${agent.id}`, { key: agent.key })).body.data.status).toBe("suspended")
    expect((await t.call("GET", `/api/v1/enforcement/${e.id}`, { key: agent.key })).body.data).toEqual(e)
    before = await t.chainLength()
    const appealed = await appeal(e.id, { reason: "it was a test run" }, agent.key)
    expect(appealed.status, JSON.stringify(appealed.body)).toBe(200)
    expect(appealed.body.data).toEqual({
      ...e,
      status: "appealed",
      appealReason: "it was a test run",
      appealedAt: expect.stringMatching(ISO_MS),
      updatedAt: appealed.body.data.appealedAt,
    })
    events = await eventsAfter(before)
    expect(events.map((x) => [x.type, x.actor_id])).toEqual([["enforcement.appealed", agent.keyId]])
    expect(events[0]!.data).toEqual({
      enforcementId: e.id,
      agentId: agent.id,
      type: "suspension",
      status: "appealed",
      reason: "it was a test run",
    })
    expect(await agentStatus(agent.id)).toBe("suspended")
    expectError(await appeal(e.id, { reason: "again" }, agent.key), 409, "ENFORCEMENT_ALREADY_APPEALED")

    before = await t.chainLength()
    const resolved = await patch(e.id, { resolution: "overturned", note: "confirmed test traffic" })
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200)
    expect(resolved.body.data).toMatchObject({
      status: "resolved",
      inForce: false,
      resolution: "overturned",
      resolutionNote: "confirmed test traffic",
      resolvedAt: expect.stringMatching(ISO_MS),
    })
    expect(await agentStatus(agent.id)).toBe("active")
    events = await eventsAfter(before)
    expect(events.map((x) => x.type)).toEqual(["enforcement.resolved"])
    expect(events[0]!.data).toEqual({
      enforcementId: e.id,
      agentId: agent.id,
      type: "suspension",
      status: "resolved",
      resolution: "overturned",
      reason: "confirmed test traffic",
      reinstated: true,
    })

    // Closed: nothing changes it any more.
    const after = await t.chainLength()
    expectError(await patch(e.id, { resolution: "upheld" }), 409, "ENFORCEMENT_CLOSED")
    expectError(await patch(e.id, { resolution: "overturned" }), 409, "ENFORCEMENT_CLOSED")
    expectError(await patch(e.id, { reason: "new" }), 409, "ENFORCEMENT_CLOSED")
    expectError(await appeal(e.id, { reason: "x" }, agent.key), 409, "ENFORCEMENT_CLOSED")
    expect(await t.chainLength()).toBe(after)
  })

  it("upheld keeps the agent suspended and the enforcement in force; a later review can overturn it", async () => {
    const agent = await agentWithKey()
    const e = await issue({ agentId: agent.id, type: "suspension" })
    expect((await appeal(e.id, { reason: "please" }, agent.key)).status).toBe(200)
    const before = await t.chainLength()
    const upheld = await patch(e.id, { resolution: "upheld" })
    expect(upheld.status).toBe(200)
    expect(upheld.body.data).toMatchObject({
      status: "resolved",
      resolution: "upheld",
      inForce: true,
      resolutionNote: null,
    })
    expect(await agentStatus(agent.id)).toBe("suspended")
    const [event] = await eventsAfter(before)
    expect(event!.data).toEqual({
      enforcementId: e.id,
      agentId: agent.id,
      type: "suspension",
      status: "resolved",
      resolution: "upheld",
      reinstated: false,
    })
    // In force: listed by default, and its agent's view shows it.
    const listed = await t.call("GET", `/api/v1/enforcement?agentId=${agent.id}`)
    expect(listed.body.data.map((x: any) => x.id)).toEqual([e.id])
    expectError(await patch(e.id, { resolution: "upheld" }), 409, "ENFORCEMENT_CLOSED")
    expectError(await appeal(e.id, { reason: "again" }, agent.key), 409, "ENFORCEMENT_CLOSED")
    const overturned = await patch(e.id, { resolution: "overturned" })
    expect(overturned.body.data).toMatchObject({ resolution: "overturned", inForce: false })
    expect(await agentStatus(agent.id)).toBe("active")
  })

  it("overturning one of two suspensions keeps the agent suspended until the last is lifted", async () => {
    const agent = await register()
    const first = await issue({ agentId: agent.id, type: "suspension" })
    const before = await t.chainLength()
    const second = await issue({ agentId: agent.id, type: "suspension", reason: "second" })
    // Already suspended: the second one does not suspend it again.
    expect((await eventsAfter(before)).map((x) => x.type)).toEqual(["enforcement.created"])
    const r1 = await patch(first.id, { resolution: "overturned" })
    expect(r1.status).toBe(200)
    expect(await agentStatus(agent.id)).toBe("suspended")
    const mid = await t.chainLength()
    expect((await patch(second.id, { resolution: "overturned" })).status).toBe(200)
    expect(await agentStatus(agent.id)).toBe("active")
    expect((await eventsAfter(mid))[0]!.data.reinstated).toBe(true)
  })

  it("lifting both suspensions at once reinstates the agent exactly once", async () => {
    const agent = await register()
    const first = await issue({ agentId: agent.id, type: "suspension" })
    const second = await issue({ agentId: agent.id, type: "suspension" })
    const before = await t.chainLength()
    const results = await Promise.all([first, second].map((e) => patch(e.id, { resolution: "overturned" })))
    expect(results.map((r) => r.status)).toEqual([200, 200])
    expect(await agentStatus(agent.id)).toBe("active")
    const reinstated = (await eventsAfter(before)).map((x) => x.data.reinstated)
    expect(reinstated.sort()).toEqual([false, true])
  })

  it("of simultaneous appeals exactly one is accepted", async () => {
    const agent = await agentWithKey()
    const e = await issue({ agentId: agent.id, type: "suspension" })
    const results = await Promise.all([1, 2, 3].map((i) => appeal(e.id, { reason: `appeal ${i}` }, agent.key)))
    expect(results.filter((r) => r.status === 200)).toHaveLength(1)
    for (const r of results.filter((x) => x.status !== 200)) expectError(r, 409, "ENFORCEMENT_ALREADY_APPEALED")
  })

  it("refuses an appeal whose reason is empty, only whitespace or only invisible characters, with 422", async () => {
    const agent = await agentWithKey()
    const e = await issue({ agentId: agent.id, type: "suspension" })
    const before = await t.chainLength()
    for (const reason of ["", "   ", "\n\t", "\u200b\u2060"])
      expectError(await appeal(e.id, { reason }, agent.key), 422, "VALIDATION_ERROR", "reason")
    expect(await t.chainLength()).toBe(before)
    // Still appealable: the refusals spent nothing.
    expect((await appeal(e.id, { reason: "a real reason" }, agent.key)).status).toBe(200)
  })

  it("an operator may resolve without an appeal; a warning's resolution leaves the agent as it is", async () => {
    const agent = await register()
    const suspension = await issue({ agentId: agent.id, type: "suspension" })
    const warning = await issue({ agentId: agent.id, type: "warning" })
    const res = await patch(warning.id, { resolution: "overturned" })
    expect(res.body.data).toMatchObject({ status: "resolved", appealedAt: null })
    expect(await agentStatus(agent.id)).toBe("suspended")
    expect((await patch(suspension.id, { resolution: "upheld", note: "no appeal" })).status).toBe(200)
    expect(await agentStatus(agent.id)).toBe("suspended")
  })
})

describe("revocation", () => {
  it("revokes every key of the agent at once and suspends it; overturning reinstates the agent, not its keys", async () => {
    const agent = await agentWithKey()
    const second = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "second", type: "agent", agentId: agent.id, scopes: ["events:write"] },
    })
    const bystander = await agentWithKey()
    const token = await t.call("POST", "/api/v1/tokens", { key: agent.key })
    expect(token.status).toBe(201)
    expect((await t.call("GET", `/api/v1/agents/${agent.id}`, { key: token.body.data.token })).status).toBe(200)

    const before = await t.chainLength()
    const e = await issue({ agentId: agent.id, type: "revocation", reason: "leaked credentials" })
    expect(await agentStatus(agent.id)).toBe("suspended")
    const events = await eventsAfter(before)
    expect(events.map((x) => x.type)).toEqual([
      "enforcement.created",
      "agent.suspended",
      "apikey.revoked",
      "apikey.revoked",
    ])
    expect(
      events
        .slice(2)
        .map((x) => x.data.keyId)
        .sort(),
    ).toEqual([agent.keyId, second.body.data.id].sort())
    for (const x of events.slice(2)) expect(x.data.reason).toBe("agent_revoked")

    const refused = await t.call("GET", `/api/v1/agents/${agent.id}`, { key: agent.key })
    expectError(refused, 401, "UNAUTHORIZED")
    expect(refused.body.error.message).toContain("revoked")
    const stored = await t.call("GET", `/api/v1/api-keys/${agent.keyId}`)
    expect(stored.body.data).toMatchObject({ status: "revoked", revokedReason: "agent_revoked" })
    // The key's SDK token stops too (D5: within 5 s on every instance).
    let tokenStatus = 0
    for (let i = 0; i < 50 && tokenStatus !== 401; i++) {
      tokenStatus = (await t.call("GET", `/api/v1/agents/${agent.id}`, { key: token.body.data.token })).status
      if (tokenStatus !== 401) await new Promise((r) => setTimeout(r, 100))
    }
    expect(tokenStatus).toBe(401)
    // Other agents' keys are untouched.
    expect((await t.call("GET", `/api/v1/agents/${bystander.id}`, { key: bystander.key })).status).toBe(200)

    // While it is in force, no new key may undo it.
    const spec = { name: "replacement", type: "agent", agentId: agent.id, scopes: ["agents:read"] }
    expectError(await t.call("POST", "/api/v1/api-keys", { body: spec }), 409, "AGENT_REVOKED")

    expect((await patch(e.id, { resolution: "overturned" })).status).toBe(200)
    expect(await agentStatus(agent.id)).toBe("active")
    expectError(await t.call("GET", `/api/v1/agents/${agent.id}`, { key: agent.key }), 401, "UNAUTHORIZED")
    // Overturned: the agent may have keys again.
    expect((await t.call("POST", "/api/v1/api-keys", { body: spec })).status).toBe(201)
  })

  it("a revoked agent's appeal is filed by an operator: its revoked key stays refused, on the appeal path too", async () => {
    const agent = await agentWithKey()
    const e = await issue({ agentId: agent.id, type: "revocation", reason: "leaked credentials" })
    const before = await t.chainLength()
    // A revoked key may be in someone else's hands: it neither appeals (which would spend the one appeal) nor reads.
    const refused = await appeal(e.id, { reason: "let me back in" }, agent.key)
    expectError(refused, 401, "UNAUTHORIZED")
    expect(await t.chainLength()).toBe(before)
    expect((await t.call("GET", `/api/v1/enforcement/${e.id}`)).body.data.status).toBe("active")
    // A workspace credential with enforcement:write submits it for the agent (the spec's "submit appeals").
    const filed = await appeal(e.id, { reason: "the owner confirms the key was rotated out of the leak" })
    expect(filed.status, JSON.stringify(filed.body)).toBe(200)
    expect(filed.body.data).toMatchObject({ status: "appealed", inForce: true })
    const events = await eventsAfter(before)
    expect(events.map((x) => [x.type, x.actor_type])).toEqual([["enforcement.appealed", "api_key"]])
  })
})

describe("expiry", () => {
  it("a suspension's expiry shows at once on read; the sweep records it and reinstates the agent", async () => {
    const agent = await register()
    const e = await issue({ agentId: agent.id, type: "suspension", durationSeconds: 1 })
    const lasting = await issue({ agentId: agent.id, type: "warning" })
    expect(await agentStatus(agent.id)).toBe("suspended")
    await waitPast(e.expiresAt)
    // The agent too, before the sweep: GET and the status filters of GET /agents.
    expect(await agentStatus(agent.id)).toBe("active")
    const listed = async (status: string) =>
      (await t.call("GET", `/api/v1/agents?status=${status}&limit=100`)).body.data.map((a: any) => a.id)
    expect(await listed("active")).toContain(agent.id)
    expect(await listed("suspended")).not.toContain(agent.id)
    const expected = { ...e, status: "expired", inForce: false, updatedAt: e.expiresAt }
    expect((await t.call("GET", `/api/v1/enforcement/${e.id}`)).body.data).toEqual(expected)
    const inForce = await t.call("GET", `/api/v1/enforcement?agentId=${agent.id}`)
    expect(inForce.body.data.map((x: any) => x.id)).toEqual([lasting.id])
    const expired = await t.call("GET", `/api/v1/enforcement?agentId=${agent.id}&status=expired`)
    expect(expired.body.data).toEqual([expected])
    const before = await t.chainLength()
    expectError(await appeal(e.id, { reason: "x" }), 409, "ENFORCEMENT_CLOSED")
    expectError(await patch(e.id, { resolution: "overturned" }), 409, "ENFORCEMENT_CLOSED")
    expectError(await patch(e.id, { durationSeconds: 60 }), 409, "ENFORCEMENT_CLOSED")
    expect(await t.chainLength()).toBe(before)

    expect(await run<number>(EnforcementService.use((s) => s.expireDue))).toBeGreaterThanOrEqual(1)
    expect(await agentStatus(agent.id)).toBe("active")
    const events = (await eventsAfter(before)).filter((x) => x.data.enforcementId === e.id)
    expect(events.map((x) => [x.type, x.actor_type])).toEqual([["enforcement.resolved", "system"]])
    expect(events[0]!.data).toEqual({
      enforcementId: e.id,
      agentId: agent.id,
      type: "suspension",
      status: "expired",
      reinstated: true,
    })
    expect((await t.call("GET", `/api/v1/enforcement/${e.id}`)).body.data).toEqual(expected)
    const again = await t.chainLength()
    await run(EnforcementService.use((s) => s.expireDue))
    expect((await eventsAfter(again)).filter((x) => x.data.enforcementId === e.id)).toEqual([])
  })

  it("an expiring suspension does not reinstate an agent another suspension still holds", async () => {
    const agent = await register()
    const short = await issue({ agentId: agent.id, type: "suspension", durationSeconds: 1 })
    await issue({ agentId: agent.id, type: "suspension" })
    await waitPast(short.expiresAt)
    const before = await t.chainLength()
    await run(EnforcementService.use((s) => s.expireDue))
    expect(await agentStatus(agent.id)).toBe("suspended")
    const [event] = (await eventsAfter(before)).filter((x) => x.data.enforcementId === short.id)
    expect(event!.data.reinstated).toBe(false)
  })

  it("a new suspension of an agent whose suspension has lapsed (not yet swept) records the lapse, then agent.suspended", async () => {
    // Outside review (approvals and enforcement): the agent read `active`, the new suspension made it read
    // `suspended` again, with no agent.suspended and its updatedAt moved back; the sweep then said reinstated: false.
    const agent = await register()
    const short = await issue({ agentId: agent.id, type: "suspension", durationSeconds: 1 })
    await waitPast(short.expiresAt)
    const shown = (await t.call("GET", `/api/v1/agents/${agent.id}`)).body.data
    expect(shown.status).toBe("active")
    const before = await t.chainLength()
    const second = await issue({ agentId: agent.id, type: "suspension", reason: "again" })
    const after = (await t.call("GET", `/api/v1/agents/${agent.id}`)).body.data
    expect(after.status).toBe("suspended")
    expect(Date.parse(after.updatedAt)).toBeGreaterThanOrEqual(Date.parse(second.createdAt))
    const events = (await eventsAfter(before)).filter((x) => x.agent_id === agent.id)
    expect(events.map((x) => [x.type, x.data.enforcementId])).toEqual([
      ["enforcement.resolved", short.id],
      ["enforcement.created", second.id],
      ["agent.suspended", second.id],
      // D14: a suspension ends certifications (none here)
    ])
    expect(events[0]!.data).toMatchObject({ status: "expired", reinstated: true })
    expect((await t.call("GET", `/api/v1/enforcement/${short.id}`)).body.data.status).toBe("expired")
    // The sweep finds nothing left to record for the first one.
    const swept = await t.chainLength()
    await run(EnforcementService.use((s) => s.expireDue))
    expect((await eventsAfter(swept)).filter((x) => x.data.enforcementId === short.id)).toEqual([])
    expect(await agentStatus(agent.id)).toBe("suspended")
  })
})

describe("PATCH /enforcement/:id", () => {
  it("changes the reason and the expiry, records enforcement.updated with the changes, and clears the expiry with null", async () => {
    const agent = await register()
    const e = await issue({ agentId: agent.id, type: "suspension", reason: "first" })
    let before = await t.chainLength()
    const res = await patch(e.id, { reason: "second", durationSeconds: 7200 })
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ reason: "second", status: "active" })
    expect(Date.parse(res.body.data.expiresAt) - Date.parse(res.body.data.updatedAt)).toBe(7_200_000)
    let events = await eventsAfter(before)
    expect(events.map((x) => x.type)).toEqual(["enforcement.updated"])
    expect(events[0]!.data).toEqual({
      enforcementId: e.id,
      agentId: agent.id,
      type: "suspension",
      changes: ["reason", "expiresAt"],
      reason: "second",
      expiresAt: res.body.data.expiresAt,
    })
    before = await t.chainLength()
    const cleared = await patch(e.id, { expiresAt: null })
    expect(cleared.body.data.expiresAt).toBeNull()
    events = await eventsAfter(before)
    expect(events[0]!.data).toEqual({
      enforcementId: e.id,
      agentId: agent.id,
      type: "suspension",
      changes: ["expiresAt"],
      expiresAt: null,
    })
    // Nothing changed: no event.
    before = await t.chainLength()
    expect((await patch(e.id, { reason: "second" })).body.data).toEqual(cleared.body.data)
    expect((await patch(e.id, {})).body.data).toEqual(cleared.body.data)
    expect(await t.chainLength()).toBe(before)
  })

  it.each([
    ["a resolution with other changes", { resolution: "upheld", reason: "x" }, "resolution"],
    ["a note without a resolution", { note: "x" }, "note"],
    ["an unknown resolution", { resolution: "pardoned" }, "resolution"],
    ["an expiry in the past", { expiresAt: "2021-01-01T00:00:00Z" }, "expiresAt"],
    ["both an expiry and a duration", { expiresAt: "2099-01-01T00:00:00Z", durationSeconds: 5 }, "durationSeconds"],
    ["an empty reason", { reason: "" }, "reason"],
    // Second pass: a blank note (or reason) was stored as one, an invisible one too.
    ["an empty resolution note", { resolution: "upheld", note: "" }, "note"],
    ["a resolution note of only whitespace", { resolution: "overturned", note: " \n\t " }, "note"],
    ["a resolution note of only invisible characters", { resolution: "upheld", note: "\u200b\u00ad" }, "note"],
    ["a reason of only whitespace", { reason: "   " }, "reason"],
    ["the type", { type: "warning" }, "type"],
    ["the path parameter in the body", { id: "enf_x" }, "id"],
  ])("refuses %s with 422 naming the field, changing nothing", async (_, body, field) => {
    const agent = await register()
    const e = await issue({ agentId: agent.id, type: "suspension" })
    const before = await t.chainLength()
    expectError(await patch(e.id, body), 422, "VALIDATION_ERROR", field)
    expect(await t.chainLength()).toBe(before)
    expect((await t.call("GET", `/api/v1/enforcement/${e.id}`)).body.data).toEqual(e)
  })

  it("refuses an expiry on a revocation", async () => {
    const agent = await register()
    const e = await issue({ agentId: agent.id, type: "revocation" })
    expectError(await patch(e.id, { durationSeconds: 60 }), 422, "VALIDATION_ERROR", "durationSeconds")
  })
})

describe("GET /enforcement", () => {
  it("lists those in force newest first by default, and filters by agent, type and status", async () => {
    const agent = await register()
    const warning = await issue({ agentId: agent.id, type: "warning" })
    const throttle = await issue({ agentId: agent.id, type: "throttle", limitPerMinute: 5 })
    const suspension = await issue({ agentId: agent.id, type: "suspension" })
    const lifted = await issue({ agentId: agent.id, type: "warning" })
    expect((await patch(lifted.id, { resolution: "overturned" })).status).toBe(200)
    const ids = async (query: string) => {
      const res = await t.call("GET", `/api/v1/enforcement?agentId=${agent.id}${query}`)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body.data.map((x: any) => x.id)
    }
    expect(await ids("")).toEqual([suspension.id, throttle.id, warning.id])
    expect(await ids("&type=warning")).toEqual([warning.id])
    expect(await ids("&type=warning,throttle")).toEqual([throttle.id, warning.id])
    expect(await ids("&status=resolved")).toEqual([lifted.id])
    expect(await ids("&status=all")).toEqual([lifted.id, suspension.id, throttle.id, warning.id])
    expect(await ids("&status=active&type=suspension")).toEqual([suspension.id])
    expect(await ids("&status=appealed")).toEqual([])
  })

  it("pages with a cursor: no duplicates, no gaps", async () => {
    const agent = await register()
    const created: Array<string> = []
    for (let i = 0; i < 5; i++) created.push((await issue({ agentId: agent.id, type: "warning" })).id)
    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const path: string = `/api/v1/enforcement?agentId=${agent.id}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`
      const res = await t.call("GET", path)
      expect(res.status).toBe(200)
      seen.push(...res.body.data.map((x: any) => x.id))
      cursor = res.body.meta.cursor
      expect(res.body.meta.hasMore).toBe(cursor !== null)
    } while (cursor)
    expect(seen).toEqual([...created].reverse())
  })

  it.each([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["cursor=%%%", "cursor"],
    ["cursor=djE6", "cursor"],
    ["status=open", "status[0]"],
    ["type=ban", "type[0]"],
    ["sort=asc", "sort"],
  ])("refuses the query %s with 400 naming the parameter", async (query, field) => {
    expectError(await t.call("GET", `/api/v1/enforcement?${query}`), 400, "BAD_REQUEST", field)
  })
})

describe("security", () => {
  const endpoints = (id: string, agentId: string) =>
    [
      ["POST", "/api/v1/enforcement", { agentId, type: "warning", reason: "r" }, "enforcement:write"],
      ["GET", "/api/v1/enforcement", undefined, "enforcement:read"],
      ["GET", `/api/v1/enforcement/${id}`, undefined, "enforcement:read"],
      ["PATCH", `/api/v1/enforcement/${id}`, { reason: "changed" }, "enforcement:write"],
      ["POST", `/api/v1/enforcement/${id}/appeal`, { reason: "r" }, "enforcement:read"],
    ] as const

  it("every endpoint refuses a request without a credential, or with an expired key, with 401", async () => {
    const agent = await register()
    const e = await issue({ agentId: agent.id, type: "warning" })
    const expired = await creds.expiredKey()
    for (const [method, path, body] of endpoints(e.id, agent.id)) {
      expectError(await t.call(method, path, { body, key: null }), 401, "UNAUTHORIZED")
      expectError(await t.call(method, path, { body, key: expired }), 401, "UNAUTHORIZED")
    }
  })

  it("every endpoint refuses a credential lacking its scope with 403 naming the scope, changing nothing", async () => {
    const agent = await register()
    const e = await issue({ agentId: agent.id, type: "warning" })
    const list = endpoints(e.id, agent.id)
    const keys = new Map<string, string>()
    for (const [, , , scope] of list) keys.set(scope, await creds.keyWithout(scope))
    const before = await t.chainLength()
    for (const [method, path, body, scope] of list) {
      const res = await t.call(method, path, { body, key: keys.get(scope) })
      expectError(res, 403, "FORBIDDEN", "scope")
      expect(res.body.error.details.issue).toBe(`requires ${scope}`)
    }
    // A workspace credential appeals only with enforcement:write.
    const res = await appeal(e.id, { reason: "r" }, await creds.keyWithout("enforcement:write"))
    expectError(res, 403, "FORBIDDEN", "scope")
    expect(res.body.error.details.issue).toBe("requires enforcement:write")
    expect(await t.chainLength()).toBe(before)
    expect((await t.call("GET", `/api/v1/enforcement/${e.id}`)).body.data).toEqual(e)
  })

  it("an agent key sees, and appeals, only its own agent's enforcements, and changes nothing else", async () => {
    const agent = await agentWithKey()
    const neighbour = await register()
    const mine = await issue({ agentId: agent.id, type: "warning" })
    const theirs = await issue({ agentId: neighbour.id, type: "warning" })
    const listed = await t.call("GET", "/api/v1/enforcement?status=all", { key: agent.key })
    expect(listed.body.data.map((x: any) => x.id)).toEqual([mine.id])
    expectError(
      await t.call("GET", `/api/v1/enforcement?agentId=${neighbour.id}`, { key: agent.key }),
      403,
      "FORBIDDEN",
      "agentId",
    )
    expectError(
      await t.call("GET", `/api/v1/enforcement/${theirs.id}`, { key: agent.key }),
      404,
      "ENFORCEMENT_NOT_FOUND",
    )
    const before = await t.chainLength()
    expectError(await appeal(theirs.id, { reason: "not mine" }, agent.key), 404, "ENFORCEMENT_NOT_FOUND")
    const created = await t.call("POST", "/api/v1/enforcement", {
      body: { agentId: agent.id, type: "warning", reason: "self" },
      key: agent.key,
    })
    expectError(created, 403, "FORBIDDEN", "scope")
    expectError(await patch(mine.id, { resolution: "overturned" }, agent.key), 403, "FORBIDDEN", "scope")
    expect(await t.chainLength()).toBe(before)
    expect((await t.call("GET", `/api/v1/enforcement/${theirs.id}`)).body.data.status).toBe("active")
  })

  it("another workspace's enforcement is 404 ENFORCEMENT_NOT_FOUND everywhere, and stays as it was", async () => {
    const theirs = await t.call("POST", "/api/v1/enforcement", {
      body: { agentId: other.agent, type: "suspension", reason: "r" },
      key: other.key,
    })
    expect(theirs.status).toBe(201)
    const id = theirs.body.data.id
    expectError(await t.call("GET", `/api/v1/enforcement/${id}`), 404, "ENFORCEMENT_NOT_FOUND")
    expectError(await patch(id, { resolution: "overturned" }), 404, "ENFORCEMENT_NOT_FOUND")
    expectError(await appeal(id, { reason: "r" }), 404, "ENFORCEMENT_NOT_FOUND")
    expectError(await t.call("GET", "/api/v1/enforcement/enf_missing"), 404, "ENFORCEMENT_NOT_FOUND")
    const listed = await t.call("GET", "/api/v1/enforcement?status=all&limit=100")
    expect(listed.body.data.map((x: any) => x.id)).not.toContain(id)
    const still = await t.call("GET", `/api/v1/enforcement/${id}`, { key: other.key })
    expect(still.body.data).toEqual(theirs.body.data)
    expect((await t.call("GET", `/api/v1/agents/${other.agent}`, { key: other.key })).body.data.status).toBe(
      "suspended",
    )
  })
})

describe("the server's own sweep", () => {
  it("records expiries and reinstates agents without anyone asking", async () => {
    const s = await startTestServer({ sweepIntervalMs: 100 })
    try {
      const agent = await s.call("POST", "/api/v1/agents", { body: { name: unique("swept") } })
      const agentId = agent.body.data.id
      const e = await s.call("POST", "/api/v1/enforcement", {
        // 3 s: still in force when read back below on a loaded machine; the sweep's loop waits up to 10 s.
        body: { agentId, type: "suspension", reason: "r", durationSeconds: 3 },
      })
      const a = await s.call("POST", "/api/v1/approvals", { body: { agentId, action: "x", timeoutSeconds: 1 } })
      expect([e.status, a.status]).toEqual([201, 201])
      expect((await s.call("GET", `/api/v1/agents/${agentId}`)).body.data.status).toBe("suspended")
      const recorded = async () => {
        const res = await s.call("GET", `/api/v1/events?agentId=${agentId}&type=enforcement.resolved,approval.decided`)
        return res.body.data.map((x: any) => x.type).sort()
      }
      let types: Array<string> = []
      for (let i = 0; i < 100 && types.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 100))
        types = await recorded()
      }
      expect(types).toEqual(["approval.decided", "enforcement.resolved"])
      expect((await s.call("GET", `/api/v1/agents/${agentId}`)).body.data.status).toBe("active")
    } finally {
      await s.close()
    }
  })
})
