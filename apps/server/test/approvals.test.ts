import { createHash } from "node:crypto"
import { ApprovalService, canonicalize, type GuardApprovalRequest, SYSTEM_EVENTS } from "@agentgov/domain"
import { Effect, Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { TestClock } from "effect/testing"
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
/** Agents of the bootstrap workspace: `bound` has an agent key, `elsewhere` does not. */
let bound: string
let elsewhere: string
/** Agent key of `bound` with approvals:read and agents:read. */
let agentKey: string
/** A workspace key with approvals:manage (and everything else), and its id. */
let manager: { id: string; key: string }

const run = <A, E>(effect: Effect.Effect<A, E, any>): Promise<A> => t.server.runtime.runPromise(effect as any) as any

interface EventRow {
  readonly sequence: number
  readonly type: string
  readonly agent_id: string | null
  readonly actor_type: string
  readonly actor_id: string | null
  readonly data: any
}

/** The events recorded after sequence `after`, in order; each decodes strictly with its catalog schema. */
const eventsAfter = async (after: number, workspaceId = t.workspaceId): Promise<ReadonlyArray<EventRow>> => {
  const rows = await run(
    SqlClient.SqlClient.use(
      (sql) => sql<EventRow>`SELECT sequence::int AS sequence, type, agent_id, actor_type, actor_id, data FROM events
        WHERE workspace_id = ${workspaceId} AND sequence > ${after} ORDER BY sequence`,
    ),
  )
  for (const row of rows) {
    const schema = (SYSTEM_EVENTS as Record<string, { data: Schema.Codec<any, any> }>)[row.type]?.data
    expect(schema, row.type).toBeDefined()
    Schema.decodeUnknownSync(schema!)(row.data, { onExcessProperty: "error" })
  }
  return rows
}

const bindingHash = (agentId: string, action: string, context: unknown) =>
  createHash("sha256").update(canonicalize({ agentId, action, context })).digest("hex")

const request = async (spec: Record<string, unknown> = {}, key?: string) => {
  const res = await t.call("POST", "/api/v1/approvals", {
    body: { agentId: bound, action: unique("action"), ...spec },
    key,
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data
}

const decide = (id: string, body: Record<string, unknown>, key = manager.key) =>
  t.call("POST", `/api/v1/approvals/${id}/decide`, { body, key })

const waitPast = async (iso: string) => {
  const wait = Date.parse(iso) + 25 - Date.now()
  if (wait > 0) await new Promise((r) => setTimeout(r, wait))
}

/** Runs an effect with effect's clock at `ms` (the store's own clock is never consulted). */
const atTime = <A, E, R>(ms: number, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(ms)
    return yield* effect
  }).pipe(Effect.provide(TestClock.layer()))

const consume = (approvalId: string, spec: { agentId?: string; action: string; context: unknown }, at?: number) => {
  const effect = ApprovalService.use((s) =>
    s.consumeForGuard({
      workspaceId: t.workspaceId,
      approvalId,
      agentId: spec.agentId ?? bound,
      action: spec.action,
      context: spec.context as Record<string, unknown>,
    }),
  )
  return run(at === undefined ? effect : atTime(at, effect))
}

/** A new approval the guard's request opens (a fresh action each time, so none stands). */
const guardRequest = async (spec: Partial<GuardApprovalRequest> = {}) => {
  const asked = await run(
    ApprovalService.use((s) =>
      s.requestForGuard({
        workspaceId: t.workspaceId,
        agentId: bound,
        action: unique("guarded"),
        context: { amount: 10 },
        policyId: "pol_test",
        ruleId: "needs-approval",
        ...spec,
      }),
    ),
  )
  if (asked.kind !== "requested") throw new Error(`no approval was requested: ${asked.kind}`)
  return asked.approval
}

beforeAll(async () => {
  t = await startTestServer()
  creds = await credentialFixtures(t)
  const register = async (key?: string) => {
    const res = await t.call("POST", "/api/v1/agents", { body: { name: unique("agent") }, key })
    expect(res.status).toBe(201)
    return res.body.data.id as string
  }
  bound = await register()
  elsewhere = await register()
  agentKey = await t.createKey({ type: "agent", agentId: bound, scopes: ["approvals:read", "agents:read"] })
  const m = await t.call("POST", "/api/v1/api-keys", {
    body: { name: "approver", type: "workspace", scopes: ["approvals:read", "approvals:manage"] },
  })
  expect(m.status).toBe(201)
  manager = { id: m.body.data.id, key: m.body.data.apiKey }
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("approvals-other") } })
  expect(ws.status).toBe(201)
  const otherKey = ws.body.data.apiKey.apiKey as string
  other = { id: ws.body.data.workspace.id, key: otherKey, agent: await register(otherKey) }
})
afterAll(async () => t?.close())

describe("POST /approvals", () => {
  it("creates a pending approval bound to its agent, action and context, and records approval.requested", async () => {
    const before = await t.chainLength()
    const action = unique("payments.transfer")
    const context = { amount: 1200, currency: "EUR", to: { iban: "DE89" } }
    const res = await t.call("POST", "/api/v1/approvals", {
      body: { agentId: bound, action, context, reason: "large transfer", timeoutSeconds: 600 },
    })
    expect(res.status).toBe(201)
    const a = res.body.data
    expect(a).toEqual({
      id: expect.stringMatching(/^apr_[0-9a-z]{26}$/),
      workspaceId: t.workspaceId,
      agentId: bound,
      action,
      context,
      status: "pending",
      reason: "large transfer",
      policyId: null,
      ruleId: null,
      approvers: [],
      bindingHash: bindingHash(bound, action, context),
      decidedBy: null,
      decisionReason: null,
      decidedAt: null,
      expiresAt: expect.stringMatching(ISO_MS),
      usedAt: null,
      createdAt: expect.stringMatching(ISO_MS),
    })
    expect(Date.parse(a.expiresAt) - Date.parse(a.createdAt)).toBe(600_000)
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data).toEqual(a)
    const events = await eventsAfter(before)
    expect(events.map((e) => [e.type, e.agent_id])).toEqual([["approval.requested", bound]])
    expect(events[0]!.data).toEqual({
      approvalId: a.id,
      agentId: bound,
      action,
      status: "pending",
      expiresAt: a.expiresAt,
      reason: "large transfer",
    })
  })

  it("defaults the context to {} and the time-out to one hour", async () => {
    const a = await request()
    expect(a.context).toEqual({})
    expect(a.reason).toBeNull()
    expect(a.bindingHash).toBe(bindingHash(bound, a.action, {}))
    expect(Date.parse(a.expiresAt) - Date.parse(a.createdAt)).toBe(3_600_000)
  })

  it("replays an Idempotency-Key instead of requesting twice", async () => {
    const body = { agentId: bound, action: unique("idem") }
    const headers = { "idempotency-key": unique("idem-key") }
    const first = await t.call("POST", "/api/v1/approvals", { body, headers })
    const before = await t.chainLength()
    const second = await t.call("POST", "/api/v1/approvals", { body, headers })
    expect(first.status).toBe(201)
    expect(second.status).toBe(201)
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    expect(second.body.data.id).toBe(first.body.data.id)
    expect(await t.chainLength()).toBe(before)
  })

  it("refuses an unknown and another workspace's agent with 404 AGENT_NOT_FOUND, a deregistered one with 409 AGENT_DEREGISTERED", async () => {
    const gone = (await t.call("POST", "/api/v1/agents", { body: { name: unique("gone") } })).body.data.id
    expect((await t.call("DELETE", `/api/v1/agents/${gone}`)).status).toBe(200)
    const before = await t.chainLength()
    for (const agentId of ["agt_missing", other.agent]) {
      const res = await t.call("POST", "/api/v1/approvals", { body: { agentId, action: "x" } })
      expectError(res, 404, "AGENT_NOT_FOUND")
    }
    expectError(
      await t.call("POST", "/api/v1/approvals", { body: { agentId: gone, action: "x" } }),
      409,
      "AGENT_DEREGISTERED",
    )
    expect(await t.chainLength()).toBe(before)
  })

  it.each([
    ["a missing agentId", { agentId: undefined }, "agentId"],
    ["a missing action", { action: undefined }, "action"],
    ["an empty action", { action: "" }, "action"],
    ["an action over 200 characters", { action: "a".repeat(201) }, "action"],
    // Second pass: the guard refuses such an action (422), so an approval for it could never be used.
    ["an action with a zero-width space", { action: "deploy\u200b.prod" }, "action"],
    ["an action with a space", { action: "deploy prod" }, "action"],
    ["an action with a bidi control", { action: "pay\u202e.out" }, "action"],
    ["an action not in NFC", { action: "cafe\u0301.order" }, "action"],
    ["a reason of only whitespace", { reason: " \n " }, "reason"],
    ["a context that is not an object", { context: [1, 2] }, "context"],
    ["a context over 32 KiB", { context: { blob: "x".repeat(33 * 1024) } }, "context"],
    ["a reason over 2000 characters", { reason: "r".repeat(2001) }, "reason"],
    ["a time-out of 0", { timeoutSeconds: 0 }, "timeoutSeconds"],
    ["a time-out over 30 days", { timeoutSeconds: 2_592_001 }, "timeoutSeconds"],
    ["a fractional time-out", { timeoutSeconds: 1.5 }, "timeoutSeconds"],
    ["a time-out given as a string", { timeoutSeconds: "60" }, "timeoutSeconds"],
    ["a context holding a NUL", { context: { note: "a\u0000b" } }, "context.note"],
    ["an unknown field", { status: "approved" }, "status"],
  ])("refuses %s with 422 naming the field, and records nothing", async (_, patch, field) => {
    const before = await t.chainLength()
    const body: Record<string, unknown> = { agentId: bound, action: "act", ...patch }
    for (const [k, v] of Object.entries(body)) if (v === undefined) delete body[k]
    expectError(await t.call("POST", "/api/v1/approvals", { body }), 422, "VALIDATION_ERROR", field)
    expect(await t.chainLength()).toBe(before)
  })

  it("refuses malformed JSON with 400", async () => {
    expectError(await t.call("POST", "/api/v1/approvals", { rawBody: '{"agentId":' }), 400, "BAD_REQUEST")
  })
})

describe("GET /approvals", () => {
  it("lists pending approvals newest first by default, and filters by agent, action and status", async () => {
    const action = unique("listed")
    const a1 = await request({ action })
    const a2 = await request({ action, agentId: elsewhere })
    const a3 = await request({ action })
    const a4 = await request({ action })
    expect((await decide(a4.id, { decision: "denied" })).status).toBe(200)
    const q = `action=${encodeURIComponent(action)}`
    const ids = async (query: string) => {
      const res = await t.call("GET", `/api/v1/approvals?${query}`)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body.data.map((a: any) => a.id)
    }
    expect(await ids(q)).toEqual([a3.id, a2.id, a1.id])
    expect(await ids(`${q}&agentId=${bound}`)).toEqual([a3.id, a1.id])
    expect(await ids(`${q}&status=denied`)).toEqual([a4.id])
    expect(await ids(`${q}&status=denied,pending`)).toEqual([a4.id, a3.id, a2.id, a1.id])
    expect(await ids(`${q}&status=approved`)).toEqual([])
    expect(await ids(`${q}&status=all&agentId=${elsewhere}`)).toEqual([a2.id])
    // Every listed approval has the shape get returns.
    const listed = await t.call("GET", `/api/v1/approvals?${q}&status=all`)
    expect(listed.body.meta).toEqual({ cursor: null, hasMore: false })
    expect(listed.body.data[0]).toEqual((await t.call("GET", `/api/v1/approvals/${a4.id}`)).body.data)
  })

  it("pages with a cursor: no duplicates, no gaps, newest first", async () => {
    const action = unique("paged")
    const created: Array<string> = []
    for (let i = 0; i < 5; i++) created.push((await request({ action })).id)
    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const path: string = `/api/v1/approvals?action=${encodeURIComponent(action)}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`
      const res = await t.call("GET", path)
      expect(res.status).toBe(200)
      expect(res.body.data.length).toBeLessThanOrEqual(2)
      seen.push(...res.body.data.map((a: any) => a.id))
      cursor = res.body.meta.cursor
      expect(res.body.meta.hasMore).toBe(cursor !== null)
    } while (cursor)
    expect(seen).toEqual([...created].reverse())
  })

  it.each([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=abc", "limit"],
    ["cursor=not-a-cursor", "cursor"],
    ["status=maybe", "status[0]"],
    ["colour=blue", "colour"],
    ["limit=1&limit=2", "limit"],
  ])("refuses the query %s with 400 naming the parameter", async (query, field) => {
    expectError(await t.call("GET", `/api/v1/approvals?${query}`), 400, "BAD_REQUEST", field)
  })
})

describe("GET /approvals/:id", () => {
  it("is 404 APPROVAL_NOT_FOUND for a missing id and for another workspace's approval", async () => {
    expectError(await t.call("GET", "/api/v1/approvals/apr_missing"), 404, "APPROVAL_NOT_FOUND")
    const theirs = await t.call("POST", "/api/v1/approvals", {
      body: { agentId: other.agent, action: "x" },
      key: other.key,
    })
    expect(theirs.status).toBe(201)
    expectError(await t.call("GET", `/api/v1/approvals/${theirs.body.data.id}`), 404, "APPROVAL_NOT_FOUND")
    const listed = await t.call("GET", "/api/v1/approvals?status=all&limit=100")
    expect(listed.body.data.map((a: any) => a.id)).not.toContain(theirs.body.data.id)
    expect((await t.call("GET", `/api/v1/approvals/${theirs.body.data.id}`, { key: other.key })).status).toBe(200)
  })
})

describe("POST /approvals/:id/decide", () => {
  it("approves once: the decision, who made it and why are recorded; deciding again is 409", async () => {
    const a = await request()
    const before = await t.chainLength()
    const res = await decide(a.id, { decision: "approved", reason: "looks fine" })
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual({
      ...a,
      status: "approved",
      decidedBy: manager.id,
      decisionReason: "looks fine",
      decidedAt: expect.stringMatching(ISO_MS),
    })
    const events = await eventsAfter(before)
    expect(events.map((e) => [e.type, e.agent_id, e.actor_id])).toEqual([["approval.decided", bound, manager.id]])
    expect(events[0]!.data).toEqual({
      approvalId: a.id,
      agentId: bound,
      action: a.action,
      decision: "approved",
      expired: false,
      decidedBy: manager.id,
      reason: "looks fine",
    })
    const after = await t.chainLength()
    for (const decision of ["approved", "denied"]) {
      const again = await decide(a.id, { decision })
      expectError(again, 409, "APPROVAL_NOT_PENDING")
      expect(again.body.error.message).toContain("approved")
    }
    expect(await t.chainLength()).toBe(after)
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data).toEqual(res.body.data)
  })

  it("of simultaneous decisions exactly one wins; the others are 409 and record nothing", async () => {
    const a = await request()
    const before = await t.chainLength()
    const results = await Promise.all(
      ["approved", "denied", "approved", "denied"].map((decision) => decide(a.id, { decision })),
    )
    const winners = results.filter((r) => r.status === 200)
    expect(winners).toHaveLength(1)
    for (const r of results.filter((x) => x.status !== 200)) expectError(r, 409, "APPROVAL_NOT_PENDING")
    const events = await eventsAfter(before)
    expect(events.map((e) => [e.type, e.data.decision])).toEqual([["approval.decided", winners[0]!.body.data.status]])
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data).toEqual(winners[0]!.body.data)
  })

  it("denies, without a reason", async () => {
    const a = await request()
    const before = await t.chainLength()
    const res = await decide(a.id, { decision: "denied" })
    expect(res.status).toBe(200)
    expect(res.body.data.status).toBe("denied")
    expect(res.body.data.decisionReason).toBeNull()
    const [event] = await eventsAfter(before)
    expect(event!.data).toEqual({
      approvalId: a.id,
      agentId: bound,
      action: a.action,
      decision: "denied",
      expired: false,
      decidedBy: manager.id,
    })
    expectError(await decide(a.id, { decision: "approved" }), 409, "APPROVAL_NOT_PENDING")
  })

  it.each([
    ["a missing decision", {}, "decision"],
    ["an unknown decision", { decision: "maybe" }, "decision"],
    ["a reason over 2000 characters", { decision: "approved", reason: "r".repeat(2001) }, "reason"],
    // Second pass: an empty note was stored as a note ("" beside null for none).
    ["an empty reason", { decision: "denied", reason: "" }, "reason"],
    ["a reason of only whitespace", { decision: "approved", reason: "  \t" }, "reason"],
    ["a reason of only invisible characters", { decision: "denied", reason: "\u200b" }, "reason"],
    ["an unknown field", { decision: "approved", approver: "me" }, "approver"],
    ["the path parameter in the body", { decision: "approved", id: "apr_x" }, "id"],
  ])("refuses %s with 422, leaving the approval pending", async (_, body, field) => {
    const a = await request()
    expectError(await decide(a.id, body), 422, "VALIDATION_ERROR", field)
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data.status).toBe("pending")
  })

  it("is 404 for a missing id and for another workspace's approval, which stays pending", async () => {
    expectError(await decide("apr_missing", { decision: "approved" }), 404, "APPROVAL_NOT_FOUND")
    const theirs = await t.call("POST", "/api/v1/approvals", {
      body: { agentId: other.agent, action: "x" },
      key: other.key,
    })
    expectError(await decide(theirs.body.data.id, { decision: "approved" }), 404, "APPROVAL_NOT_FOUND")
    expectError(await decide(theirs.body.data.id, { decision: "approved" }, t.key), 404, "APPROVAL_NOT_FOUND")
    const still = await t.call("GET", `/api/v1/approvals/${theirs.body.data.id}`, { key: other.key })
    expect(still.body.data.status).toBe("pending")
  })

  it("lets only the named approvers decide an approval that names them", async () => {
    const a = await guardRequest({ approvers: [manager.id, "key_someone_else"] })
    expect(a.approvers).toEqual([manager.id, "key_someone_else"])
    const res = await decide(a.id, { decision: "approved" }, t.key)
    expectError(res, 403, "FORBIDDEN", "approvers")
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data.status).toBe("pending")
    expect((await decide(a.id, { decision: "approved" })).status).toBe(200)
  })
})

describe("an approver who rotated their key", () => {
  it("decides with the new key an approval naming the old one, and the guard uses that decision", async () => {
    const m = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "rotating approver", type: "workspace", scopes: ["approvals:read", "approvals:manage"] },
    })
    expect(m.status).toBe(201)
    const first = m.body.data as { id: string; apiKey: string }
    const a = await guardRequest({ approvers: [first.id] })
    const rotated = await t.call("POST", `/api/v1/api-keys/${first.id}/rotate`, { body: { overlapSeconds: 0 } })
    expect(rotated.status).toBe(201)
    const second = await t.call("POST", `/api/v1/api-keys/${rotated.body.data.id}/rotate`, {
      body: { overlapSeconds: 0 },
    })
    expect(second.status).toBe(201)
    // Two rotations on, the holder still decides; someone else still cannot.
    expectError(await decide(a.id, { decision: "approved" }, t.key), 403, "FORBIDDEN", "approvers")
    expect((await decide(a.id, { decision: "approved" }, second.body.data.apiKey)).status).toBe(200)
    const used = await run<any, unknown>(
      ApprovalService.use((s) =>
        s.consumeForGuard({
          workspaceId: t.workspaceId,
          approvalId: a.id,
          agentId: bound,
          action: a.action,
          context: { amount: 10 },
          approvers: [first.id],
        }),
      ),
    )
    expect(used.ok).toBe(true)
  })
})

describe("expiry", () => {
  it("an undecided approval expires as denied: at once on read, recorded by the sweep", async () => {
    const action = unique("expiring")
    const a = await request({ action, timeoutSeconds: 1 })
    const kept = await request({ action })
    await waitPast(a.expiresAt)
    const expected = { ...a, status: "expired", decidedAt: a.expiresAt }
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data).toEqual(expected)
    const q = `/api/v1/approvals?action=${encodeURIComponent(action)}`
    expect((await t.call("GET", q)).body.data.map((x: any) => x.id)).toEqual([kept.id])
    expect((await t.call("GET", `${q}&status=expired`)).body.data).toEqual([expected])
    // Deciding it now is too late, and records nothing.
    const before = await t.chainLength()
    const late = await decide(a.id, { decision: "approved" })
    expectError(late, 409, "APPROVAL_NOT_PENDING")
    expect(late.body.error.message).toContain("expired")
    expect(await t.chainLength()).toBe(before)

    // The sweep records it once: approval.decided, denied, expired; the record reads the same as before.
    expect(await run(ApprovalService.use((s) => s.expireDue))).toBeGreaterThanOrEqual(1)
    const events = (await eventsAfter(before)).filter((e) => e.data.approvalId === a.id)
    expect(events.map((e) => [e.type, e.actor_type, e.agent_id])).toEqual([["approval.decided", "system", bound]])
    expect(events[0]!.data).toEqual({
      approvalId: a.id,
      agentId: bound,
      action,
      decision: "denied",
      expired: true,
    })
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data).toEqual(expected)
    const afterSweep = await t.chainLength()
    await run(ApprovalService.use((s) => s.expireDue))
    expect((await eventsAfter(afterSweep)).filter((e) => e.data.approvalId === a.id)).toEqual([])
    expect((await t.call("GET", `/api/v1/approvals/${kept.id}`)).body.data.status).toBe("pending")
  })
})

describe("consumeForGuard", () => {
  const approved = async (spec: Record<string, unknown> = {}) => {
    const a = await request({ context: { amount: 50, to: "acme" }, ...spec })
    expect((await decide(a.id, { decision: "approved" })).status).toBe(200)
    return a
  }

  it("lets an approved approval through exactly once, and only for its own agent, action and context", async () => {
    const a = await approved()
    // Other contexts, actions or agents are refused, and do not use the approval up.
    expect(await consume(a.id, { action: a.action, context: { amount: 51, to: "acme" } })).toMatchObject({
      ok: false,
      reason: "mismatch",
    })
    expect(await consume(a.id, { action: `${a.action}.other`, context: a.context })).toMatchObject({
      ok: false,
      reason: "mismatch",
    })
    expect(await consume(a.id, { agentId: elsewhere, action: a.action, context: a.context })).toMatchObject({
      ok: false,
      reason: "mismatch",
    })
    expect(await consume(a.id, { action: a.action, context: {} })).toMatchObject({ ok: false, reason: "mismatch" })
    // Key order does not matter (JCS).
    const first = await consume(a.id, { action: a.action, context: { to: "acme", amount: 50 } })
    expect(first).toMatchObject({ ok: true, approval: { id: a.id, status: "approved" } })
    const usedAt = (first as any).approval.usedAt
    expect(usedAt).toMatch(ISO_MS)
    expect(await consume(a.id, { action: a.action, context: a.context })).toMatchObject({
      ok: false,
      reason: "used",
    })
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`)).body.data.usedAt).toBe(usedAt)
  })

  it("lets exactly one of several simultaneous guard calls through", async () => {
    const a = await approved()
    const results = await Promise.all(
      Array.from({ length: 6 }, () => consume(a.id, { action: a.action, context: a.context })),
    )
    expect(results.filter((r) => r.ok)).toHaveLength(1)
    expect(results.filter((r) => !r.ok).map((r) => (r as any).reason)).toEqual(Array(5).fill("used"))
  })

  it("refuses pending, denied, expired and unknown approvals, saying which", async () => {
    const pending = await request()
    expect(await consume(pending.id, { action: pending.action, context: {} })).toMatchObject({
      ok: false,
      reason: "pending",
      approval: { id: pending.id, status: "pending" },
    })
    const denied = await request()
    expect((await decide(denied.id, { decision: "denied" })).status).toBe(200)
    expect(await consume(denied.id, { action: denied.action, context: {} })).toMatchObject({
      ok: false,
      reason: "denied",
    })
    // Undecided past its expiry, and approved but not used by then: both expired.
    const later = Date.parse(pending.expiresAt) + 1
    expect(await consume(pending.id, { action: pending.action, context: {} }, later)).toMatchObject({
      ok: false,
      reason: "expired",
      approval: { status: "expired" },
    })
    const unused = await approved()
    expect(
      await consume(unused.id, { action: unused.action, context: unused.context }, Date.parse(unused.expiresAt)),
    ).toMatchObject({ ok: false, reason: "expired", approval: { status: "approved", usedAt: null } })
    // …while a millisecond before the deadline it is still good.
    expect(
      await consume(unused.id, { action: unused.action, context: unused.context }, Date.parse(unused.expiresAt) - 1),
    ).toMatchObject({ ok: true })
    expect(await consume("apr_missing", { action: "x", context: {} })).toEqual({ ok: false, reason: "not_found" })
  })

  it("does not find another workspace's approval", async () => {
    const theirs = await t.call("POST", "/api/v1/approvals", {
      body: { agentId: other.agent, action: "x" },
      key: other.key,
    })
    expect(await consume(theirs.body.data.id, { agentId: other.agent, action: "x", context: {} })).toEqual({
      ok: false,
      reason: "not_found",
    })
  })

  it("joins the caller's transaction: rolled back, the approval is still unused", async () => {
    const a = await approved()
    const rolledBack = SqlClient.SqlClient.use((sql) =>
      sql.withTransaction(
        Effect.gen(function* () {
          const use = yield* ApprovalService.use((s) =>
            s.consumeForGuard({
              workspaceId: t.workspaceId,
              approvalId: a.id,
              agentId: bound,
              action: a.action,
              context: a.context,
            }),
          )
          expect(use.ok).toBe(true)
          return yield* Effect.fail("abort" as const)
        }),
      ),
    )
    expect(await run(Effect.flip(rolledBack))).toBe("abort")
    expect(await consume(a.id, { action: a.action, context: a.context })).toMatchObject({ ok: true })
  })
})

describe("requestForGuard", () => {
  it("creates a pending approval naming the policy and rule, and records approval.requested", async () => {
    const before = await t.chainLength()
    const a = await guardRequest({ reason: "over the limit", timeoutSeconds: 120, approvers: [manager.id] })
    expect(a).toMatchObject({
      status: "pending",
      agentId: bound,
      context: { amount: 10 },
      policyId: "pol_test",
      ruleId: "needs-approval",
      reason: "over the limit",
      approvers: [manager.id],
      bindingHash: bindingHash(bound, a.action, { amount: 10 }),
    })
    expect(Date.parse(a.expiresAt) - Date.parse(a.createdAt)).toBe(120_000)
    const events = await eventsAfter(before)
    expect(events.map((e) => [e.type, e.actor_type])).toEqual([["approval.requested", "system"]])
    expect(events[0]!.data).toEqual({
      approvalId: a.id,
      agentId: bound,
      action: a.action,
      status: "pending",
      expiresAt: a.expiresAt,
      policyId: "pol_test",
      ruleId: "needs-approval",
      reason: "over the limit",
      approvers: [manager.id],
    })
    // The agent sees it with its own key, and an approver decides it over the API.
    expect((await t.call("GET", `/api/v1/approvals/${a.id}`, { key: agentKey })).body.data).toEqual(a)
    expect((await decide(a.id, { decision: "approved" })).status).toBe(200)
  })

  it("joins the caller's transaction: rolled back, there is no approval and no event", async () => {
    const before = await t.chainLength()
    const action = unique("rolled-back")
    const rolledBack = SqlClient.SqlClient.use((sql) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* ApprovalService.use((s) =>
            s.requestForGuard({
              workspaceId: t.workspaceId,
              agentId: bound,
              action,
              context: {},
              policyId: "pol_test",
              ruleId: "r",
            }),
          )
          return yield* Effect.fail("abort" as const)
        }),
      ),
    )
    expect(await run(Effect.flip(rolledBack))).toBe("abort")
    expect(await t.chainLength()).toBe(before)
    const listed = await t.call("GET", `/api/v1/approvals?status=all&action=${encodeURIComponent(action)}`)
    expect(listed.body.data).toEqual([])
  })

  it("refuses a time-out outside 1..2592000 seconds", async () => {
    for (const timeoutSeconds of [0, 2_592_001, 1.5]) {
      const error = await run(
        Effect.flip(
          ApprovalService.use((s) =>
            s.requestForGuard({
              workspaceId: t.workspaceId,
              agentId: bound,
              action: "x",
              context: {},
              policyId: "p",
              ruleId: "r",
              timeoutSeconds,
            }),
          ),
        ),
      )
      expect(error).toMatchObject({ _tag: "InvalidInput", field: "timeoutSeconds" })
    }
  })
})

describe("asking again through the guard (second pass: approvers were flooded)", () => {
  const guard = (body: Record<string, unknown>) => t.call("POST", "/v1/guard", { body })
  const codes = (res: { body: any }) => res.body.data.reasons.map((r: { code: string }) => r.code)

  it("waits for the pending approval instead of opening another; once denied, the same request is denied", async () => {
    const agent = (await t.call("POST", "/api/v1/agents", { body: { name: unique("flooder") } })).body.data.id
    const action = `${unique("wire")}.money`
    const policy = await t.call("POST", "/api/v1/policies", {
      body: {
        name: unique("ask"),
        rules: [{ id: "human", effect: "require_approval", actions: [action], approval: { timeoutSeconds: 600 } }],
      },
    })
    expect(policy.status, JSON.stringify(policy.body)).toBe(201)
    const context = { amount: 9000, to: "acme" }
    const first = await guard({ agentId: agent, action, context })
    expect(first.body.data).toMatchObject({ decision: "require_approval" })
    const approvalId = first.body.data.approvalId as string

    // Asked again and again, one after another and at once: the same approval, nothing more to decide.
    const again = [
      await guard({ agentId: agent, action, context }),
      await guard({ agentId: agent, action, context: { to: "acme", amount: 9000 } }),
      ...(await Promise.all(Array.from({ length: 5 }, () => guard({ agentId: agent, action, context })))),
    ]
    for (const res of again) {
      expect(res.body.data).toMatchObject({ decision: "require_approval", approvalId })
      expect(codes(res)).toEqual(["APPROVAL_REQUIRED", "APPROVAL_PENDING"])
    }
    const queue = async () =>
      (await t.call("GET", `/api/v1/approvals?agentId=${agent}&status=all`)).body.data.map((a: any) => a.id)
    expect(await queue()).toEqual([approvalId])

    expect((await decide(approvalId, { decision: "denied", reason: "not this week" })).status).toBe(200)
    // Asking again without the denied approval is not another chance: denied, and nothing new is requested.
    for (const body of [
      { agentId: agent, action, context },
      { agentId: agent, action, context, approvalId },
    ]) {
      const res = await guard(body)
      expect(res.body.data).toMatchObject({ decision: "deny", allowed: false })
      expect(codes(res)).toEqual(["APPROVAL_DENIED", "APPROVAL_REQUIRED"])
      expect(res.body.data.reasons[0].message).toContain(approvalId)
    }
    expect(await queue()).toEqual([approvalId])
    // Another context is another request.
    const other = await guard({ agentId: agent, action, context: { amount: 10, to: "acme" } })
    expect(other.body.data.decision).toBe("require_approval")
    expect(other.body.data.approvalId).not.toBe(approvalId)
  })
})

describe("an agent's deregistration (fourth pass: its pending approvals stayed listed and could not be cleared)", () => {
  it("expires its pending approvals in the DELETE, each with approval.decided: nothing pending, none decidable", async () => {
    const agent = (await t.call("POST", "/api/v1/agents", { body: { name: unique("leaving") } })).body.data.id
    const action = `${unique("ship")}.release`
    const policy = await t.call("POST", "/api/v1/policies", {
      body: { name: unique("ask"), rules: [{ id: "human", effect: "require_approval", actions: [action] }] },
    })
    expect(policy.status, JSON.stringify(policy.body)).toBe(201)
    const guarded = await t.call("POST", "/v1/guard", { body: { agentId: agent, action, context: { v: 1 } } })
    expect(guarded.body.data).toMatchObject({ decision: "require_approval" })
    const viaGuard = guarded.body.data.approvalId as string
    const explicit = (await request({ agentId: agent })).id as string
    const listed = async (status: string) =>
      (await t.call("GET", `/api/v1/approvals?agentId=${agent}&status=${status}`)).body.data.map((a: any) => a.id)
    expect(await listed("pending")).toEqual([explicit, viaGuard])

    const before = await t.chainLength()
    const gone = await t.call("DELETE", `/api/v1/agents/${agent}`)
    expect(gone.status).toBe(200)
    const at = gone.body.data.deregisteredAt as string

    expect(await listed("pending")).toEqual([])
    expect(await listed("expired")).toEqual([explicit, viaGuard])
    for (const id of [explicit, viaGuard]) {
      const read = await t.call("GET", `/api/v1/approvals/${id}`)
      expect(read.body.data).toMatchObject({
        status: "expired",
        decidedAt: at,
        expiresAt: at,
        decidedBy: null,
        decisionReason: "the agent was deregistered",
      })
      for (const decision of ["approved", "denied"]) {
        const res = await decide(id, { decision })
        expectError(res, 409, "APPROVAL_NOT_PENDING")
      }
    }
    // The deregistration's events, each decoding with its catalog schema; nothing more from the refused decisions.
    const events = await eventsAfter(before)
    expect(events.map((e) => e.type)).toEqual([
      "agent.deregistered",
      "approval.decided",
      "approval.decided",
      ...events.slice(3).map(() => "api_key.revoked"),
    ])
    expect(events.slice(1, 3).map((e) => e.data)).toEqual(
      [viaGuard, explicit].map((approvalId) => ({
        approvalId,
        agentId: agent,
        action: expect.any(String),
        decision: "denied",
        expired: true,
        reason: "the agent was deregistered",
      })),
    )
    expect(new Set(events.map((e) => e.actor_type))).toEqual(new Set(["api_key"]))
    expect(events.every((e) => e.agent_id === agent)).toBe(true)
  })
})

describe("security", () => {
  const endpoints = () =>
    [
      ["POST", "/api/v1/approvals", { agentId: bound, action: "x" }, "approvals:write"],
      ["GET", "/api/v1/approvals", undefined, "approvals:read"],
      ["GET", "/api/v1/approvals/apr_missing", undefined, "approvals:read"],
      ["POST", "/api/v1/approvals/apr_missing/decide", { decision: "approved" }, "approvals:manage"],
    ] as const

  it("every endpoint refuses a request without a credential, and a revoked or expired key, with 401", async () => {
    const expired = await creds.expiredKey()
    for (const [method, path, body] of endpoints()) {
      expectError(await t.call(method, path, { body, key: null }), 401, "UNAUTHORIZED")
      expectError(await t.call(method, path, { body, key: "svc_ws_test_garbage" }), 401, "UNAUTHORIZED")
      expectError(await t.call(method, path, { body, key: expired }), 401, "UNAUTHORIZED")
    }
  })

  it("every endpoint refuses a credential lacking its scope with 403 naming the scope, and records nothing", async () => {
    const keys = new Map<string, string>()
    for (const [, , , scope] of endpoints()) keys.set(scope, await creds.keyWithout(scope))
    const before = await t.chainLength()
    for (const [method, path, body, scope] of endpoints()) {
      const res = await t.call(method, path, { body, key: keys.get(scope) })
      expectError(res, 403, "FORBIDDEN", "scope")
      expect(res.body.error.details.issue).toBe(`requires ${scope}`)
    }
    expect(await t.chainLength()).toBe(before)
  })

  it("an agent key sees only its own agent's approvals", async () => {
    const action = unique("agent-view")
    const mine = await request({ action })
    const theirs = await request({ action, agentId: elsewhere })
    const listed = await t.call("GET", `/api/v1/approvals?action=${encodeURIComponent(action)}`, { key: agentKey })
    expect(listed.status).toBe(200)
    expect(listed.body.data.map((a: any) => a.id)).toEqual([mine.id])
    expect((await t.call("GET", `/api/v1/approvals/${mine.id}`, { key: agentKey })).body.data).toEqual(mine)
    expectError(await t.call("GET", `/api/v1/approvals/${theirs.id}`, { key: agentKey }), 404, "APPROVAL_NOT_FOUND")
    const asked = await t.call("GET", `/api/v1/approvals?agentId=${elsewhere}`, { key: agentKey })
    expectError(asked, 403, "FORBIDDEN", "agentId")
    expect((await t.call("GET", `/api/v1/approvals?agentId=${bound}`, { key: agentKey })).status).toBe(200)
  })

  it("an agent key can never decide, not even its own agent's approval, nor request one", async () => {
    const mine = await request()
    const before = await t.chainLength()
    const res = await decide(mine.id, { decision: "approved" }, agentKey)
    expectError(res, 403, "FORBIDDEN", "scope")
    expect(res.body.error.details.issue).toBe("requires approvals:manage")
    const created = await t.call("POST", "/api/v1/approvals", {
      body: { agentId: bound, action: "self-approve" },
      key: agentKey,
    })
    expectError(created, 403, "FORBIDDEN", "scope")
    expect(await t.chainLength()).toBe(before)
    expect((await t.call("GET", `/api/v1/approvals/${mine.id}`)).body.data.status).toBe("pending")
  })

  it("answers over /v1 and tRPC the same way", async () => {
    const a = await request()
    expect((await t.call("GET", `/v1/approvals/${a.id}`)).body.data).toEqual(a)
    const res = await fetch(`${t.url}/trpc/approvals.get?input=${encodeURIComponent(JSON.stringify({ id: a.id }))}`, {
      headers: { authorization: `Bearer ${t.key}` },
    })
    expect(res.status).toBe(200)
    expect(((await res.json()) as any).result.data).toEqual(a)
  })
})
