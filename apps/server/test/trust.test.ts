import { BADGE_TYP, renderBadgeSvg, SigningKeys, SYSTEM_EVENTS, TrustRecompute } from "@agentgov/domain"
import { verifyBadge } from "@agentgov/verifier"
import { Effect, Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signCompact } from "../../../packages/domain/src/keys/jws.ts"
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

beforeAll(async () => {
  t = await startTestServer({ trustWorker: true })
  creds = await credentialFixtures(t)
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("other") } })
  expect(ws.status, JSON.stringify(ws.body)).toBe(201)
  const key = ws.body.data.apiKey.apiKey as string
  const agent = await t.call("POST", "/api/v1/agents", { body: { name: unique("theirs") }, key })
  expect(agent.status).toBe(201)
  other = { id: ws.body.data.workspace.id, key, agent: agent.body.data.id }
}, 60_000)

afterAll(async () => {
  await t?.close()
})

/** Until the trust worker has read every event of the workspace (the test's passes and the server's own alike). */
const caughtUp = async (workspaceId = t.workspaceId) => {
  for (let i = 0; i < 500; i++) {
    const pass = await run<{ skipped: boolean }>(TrustRecompute.use((r) => r.catchUp(workspaceId)))
    if (pass.skipped) await new Promise((r) => setTimeout(r, 10))
    const behind = await run<ReadonlyArray<string>>(TrustRecompute.use((r) => r.behind))
    if (!behind.includes(workspaceId)) return
  }
  throw new Error("the trust worker did not catch up")
}

interface EventRow {
  readonly sequence: number
  readonly type: string
  readonly data: any
}

/** The trust and badge events of an agent after `after`, each decoded strictly with its catalog schema. */
const trustEvents = async (agentId: string, after = 0): Promise<ReadonlyArray<EventRow>> => {
  const rows = await t.query<EventRow>(
    (sql) => sql`SELECT sequence::int AS sequence, type, data FROM events
      WHERE workspace_id = ${t.workspaceId} AND agent_id = ${agentId} AND sequence > ${after}
        AND (type LIKE 'trust.%' OR type LIKE 'badge.%') ORDER BY sequence`,
  )
  for (const row of rows) {
    const schema = (SYSTEM_EVENTS as Record<string, { data: Schema.Codec<any, any> }>)[row.type]!.data
    Schema.decodeUnknownSync(schema)(row.data, { onExcessProperty: "error" })
  }
  return rows
}

const register = async (name = unique("agent")) => {
  const res = await t.call("POST", "/api/v1/agents", { body: { name } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data as { id: string; name: string }
}

const adjust = async (agentId: string, delta: number, reason = "test") => {
  const res = await t.call("POST", `/api/v1/trust/score/${agentId}/adjustments`, { body: { delta, reason } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data
}

/** An agent in bronze (550 = 400 + 150 by adjustment), caught up. */
const bronzeAgent = async (name?: string) => {
  const agent = await register(name)
  await adjust(agent.id, 150, "vetted by the operator")
  await caughtUp()
  return agent
}

const publicGet = (path: string, headers: Record<string, string> = {}) => t.call("GET", path, { key: null, headers })

describe("GET /trust/score/:agentId", () => {
  it("a new agent is in probation at 400, with every component and its inputs", async () => {
    const agent = await register()
    const res = await t.call("GET", `/api/v1/trust/score/${agent.id}`)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.data).toMatchObject({
      agentId: agent.id,
      score: 400,
      tier: "probation",
      policyVersion: "trust-model/1",
    })
    expect(res.body.data.computedAt).toMatch(ISO_MS)
    expect(res.body.data.components.map((c: { name: string }) => c.name)).toEqual([
      "policy_compliance",
      "enforcement_history",
      "human_oversight",
      "tenure_activity",
      "identity_keys",
      "operator_adjustment",
    ])
    for (const c of res.body.data.components) expect(Object.keys(c.detail).length).toBeGreaterThan(0)
    // Once the worker has read its registration, the stored score is the same.
    await caughtUp()
    expect((await t.call("GET", `/v1/trust/score/${agent.id}`)).body.data.score).toBe(400)
  })

  it("takes trust:read or agents:read; with neither, 403", async () => {
    const agent = await register()
    const trustOnly = await t.createKey({ type: "workspace", scopes: ["trust:read"] })
    const agentsOnly = await t.createKey({ type: "workspace", scopes: ["agents:read"] })
    const neither = await t.createKey({ type: "workspace", scopes: ["events:read"] })
    expect((await t.call("GET", `/api/v1/trust/score/${agent.id}`, { key: trustOnly })).status).toBe(200)
    expect((await t.call("GET", `/api/v1/trust/score/${agent.id}`, { key: agentsOnly })).status).toBe(200)
    expectError(await t.call("GET", `/api/v1/trust/score/${agent.id}`, { key: neither }), 403, "FORBIDDEN", "scope")
    expectError(await t.call("GET", `/api/v1/trust/score/${agent.id}`, { key: null }), 401, "UNAUTHORIZED")
  })

  it("another workspace's agent is indistinguishable from a missing one; an agent key reads only its agent", async () => {
    expectError(await t.call("GET", `/api/v1/trust/score/${other.agent}`), 404, "AGENT_NOT_FOUND")
    expectError(await t.call("GET", "/api/v1/trust/score/agt_nope"), 404, "AGENT_NOT_FOUND")
    const mine = await register()
    const theirs = await register()
    const key = await t.createKey({ type: "agent", agentId: mine.id, scopes: ["agents:read"] })
    expect((await t.call("GET", `/api/v1/trust/score/${mine.id}`, { key })).status).toBe(200)
    expectError(await t.call("GET", `/api/v1/trust/score/${theirs.id}`, { key }), 403, "FORBIDDEN")
  })
})

describe("recomputation from the audit trail", () => {
  it("guard decisions become evidence; a denial lowers compliance; reads never recompute", async () => {
    const agent = await register()
    const policy = await t.call("POST", "/api/v1/policies", {
      body: {
        name: unique("deny"),
        target: { agentIds: [agent.id] },
        rules: [{ id: "no-delete", effect: "deny", actions: ["files.delete"] }],
      },
    })
    expect(policy.status).toBe(201)
    for (let i = 0; i < 5; i++)
      expect((await t.call("POST", "/v1/guard", { body: { agentId: agent.id, action: "files.read" } })).status).toBe(
        200,
      )
    await caughtUp()
    const before = (await t.call("GET", `/api/v1/trust/score/${agent.id}`)).body.data
    const compliance = (s: any) => s.components.find((c: any) => c.name === "policy_compliance")
    expect(compliance(before).detail).toMatchObject({ allowed: 5, denied: 0 })
    // The server's own worker wakes on the denial's append and may pass before the read below. Holding the
    // workspace's cursor row makes every pass skip it (as another instance's would), so the read can only
    // answer a new score if reads recompute, which they must not.
    const answered = await run<string>(
      SqlClient.SqlClient.use((sql) =>
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT 1 FROM trust_cursors WHERE workspace_id = ${t.workspaceId} FOR UPDATE`
            const denied = yield* Effect.promise(() =>
              t.call("POST", "/v1/guard", { body: { agentId: agent.id, action: "files.delete" } }),
            )
            expect(denied.body.data.decision).toBe("deny")
            const read = yield* Effect.promise(() => t.call("GET", `/api/v1/trust/score/${agent.id}`))
            return read.body.data.computedAt as string
          }),
        ),
      ),
    )
    expect(answered).toBe(before.computedAt)
    await caughtUp()
    const after = (await t.call("GET", `/api/v1/trust/score/${agent.id}`)).body.data
    expect(compliance(after).detail).toMatchObject({ allowed: 5, denied: 1 })
    expect(compliance(after).score).toBeLessThan(compliance(before).score)
    const reputation = await t.call("GET", `/api/v1/agents/${agent.id}/reputation`)
    expect(reputation.status).toBe(200)
    expect(reputation.body.data.counts).toMatchObject({ evaluations: 6, allowed: 5, denied: 1 })
    expect(reputation.body.data.history[0]).toMatchObject({ score: 400, tier: "probation" })
  })

  it("the server's own worker wakes on the append, without a pass from the test", async () => {
    const agent = await register()
    await adjust(agent.id, 40)
    for (let i = 0; i < 200; i++) {
      const score = (await t.call("GET", `/api/v1/trust/score/${agent.id}`)).body.data.score
      if (score === 440) return
      await new Promise((r) => setTimeout(r, 25))
    }
    throw new Error("the worker never applied the adjustment")
  })

  it("two passes at once (two instances) read and announce each event once", async () => {
    const agent = await register()
    const start = await t.chainLength()
    await adjust(agent.id, 200)
    await Promise.all([
      run(TrustRecompute.use((r) => r.catchUp(t.workspaceId))),
      run(TrustRecompute.use((r) => r.catchUp(t.workspaceId))),
    ])
    await caughtUp()
    const types = (await trustEvents(agent.id, start)).map((e) => e.type)
    expect(types.filter((x) => x === "trust.score.changed")).toHaveLength(1)
    expect(types.filter((x) => x === "badge.earned")).toHaveLength(1)
  })
})

describe("evidence an actor manufactured (second review)", () => {
  const detailOf = (score: any, name: string) => score.components.find((c: any) => c.name === name)
  it("approvals asked for and decided by the same credential earn the agent nothing", async () => {
    const agent = await register()
    for (let i = 0; i < 5; i++) {
      const asked = await t.call("POST", "/api/v1/approvals", {
        body: { agentId: agent.id, action: "payment.send", context: { i } },
      })
      expect(asked.status, JSON.stringify(asked.body)).toBe(201)
      const decided = await t.call("POST", `/api/v1/approvals/${asked.body.data.id}/decide`, {
        body: { decision: "approved" },
      })
      expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    }
    await caughtUp()
    const score = (await t.call("GET", `/api/v1/trust/score/${agent.id}`)).body.data
    expect(detailOf(score, "human_oversight")).toMatchObject({ score: 600, detail: { approved: 0, denied: 0 } })
    expect(score.score).toBe(400)
    const reputation = await t.call("GET", `/api/v1/agents/${agent.id}/reputation`)
    expect(reputation.body.data.counts).toMatchObject({ approvalsSelfDecided: 5 })
  })

  it("an ingested event naming an agent only in its data is no agent's activity", async () => {
    const agent = await register()
    const ingest = async (event: Record<string, unknown>) => {
      const res = await t.call("POST", "/api/v1/events/ingest", { body: { events: [event] } })
      expect(res.status, JSON.stringify(res.body)).toBe(201)
    }
    await ingest({ type: "task.done", data: { agentId: agent.id } })
    await caughtUp()
    const before = (await t.call("GET", `/api/v1/trust/score/${agent.id}`)).body.data
    expect(detailOf(before, "tenure_activity").detail.activeDays).toBe(0)
    // GET /events?agentId= does not list it either: the agentId field is what names the agent, everywhere.
    const listed = await t.call("GET", `/api/v1/events?agentId=${agent.id}&type=task.done`)
    expect(listed.body.data).toEqual([])
    // The time is the service's: an occurredAt in the future (which decay would make worth more than a day) or the
    // past changes nothing.
    await ingest({ type: "task.done", agentId: agent.id, data: {}, occurredAt: "2099-01-01T00:00:00.000Z" })
    await ingest({ type: "task.done", agentId: agent.id, data: {}, occurredAt: "2001-01-01T00:00:00.000Z" })
    await caughtUp()
    const after = (await t.call("GET", `/api/v1/trust/score/${agent.id}`)).body.data
    expect(detailOf(after, "tenure_activity").detail.activeDays).toBe(1)
  })
})

describe("tier crossings (D12, D13)", () => {
  it("crossing into bronze emits score.changed, tier.upgraded and badge.earned once, with the spec's fields", async () => {
    const agent = await register()
    await caughtUp()
    const start = await t.chainLength()
    await adjust(agent.id, 150, "vetted")
    await caughtUp()
    await caughtUp() // a second pass finds nothing more to say
    const events = await trustEvents(agent.id, start)
    expect(events.map((e) => e.type)).toEqual([
      "trust.score.adjusted",
      "trust.score.changed",
      "trust.tier.upgraded",
      "badge.earned",
    ])
    const changed = events[1]!.data
    expect(Object.keys(changed).sort()).toEqual(
      ["agentId", "agentName", "previousScore", "newScore", "delta", "reason", "newTier"].sort(),
    )
    expect(changed).toMatchObject({
      agentId: agent.id,
      agentName: agent.name,
      previousScore: 400,
      newScore: 550,
      delta: 150,
      newTier: "bronze",
    })
    expect(changed.reason).toContain("operator adjustment +150: vetted")
    expect(events[2]!.data).toEqual({
      agentId: agent.id,
      agentName: agent.name,
      previousTier: "probation",
      newTier: "bronze",
      score: 550,
    })
    expect(events[3]!.data).toEqual({ agentId: agent.id, agentName: agent.name, tier: "bronze", score: 550 })
    // The guard's copy: agents.trust_score holds the announced score.
    expect((await t.call("GET", `/api/v1/agents/${agent.id}`)).body.data.trustScore).toBe(550)
  })

  it("a change under 10 points is not announced; falling below bronze downgrades and revokes", async () => {
    const agent = await bronzeAgent()
    const start = await t.chainLength()
    await adjust(agent.id, -5)
    await caughtUp()
    expect((await trustEvents(agent.id, start)).map((e) => e.type)).toEqual(["trust.score.adjusted"])
    await adjust(agent.id, -60)
    await caughtUp()
    const events = await trustEvents(agent.id, start)
    expect(events.map((e) => e.type)).toEqual([
      "trust.score.adjusted",
      "trust.score.adjusted",
      "trust.score.changed",
      "trust.tier.downgraded",
      "badge.revoked",
    ])
    expect(events[2]!.data).toMatchObject({ previousScore: 550, newScore: 485, delta: -65, newTier: "probation" })
    expect(events[4]!.data).toEqual({
      agentId: agent.id,
      agentName: agent.name,
      tier: "bronze",
      reason: "tier_below_bronze",
    })
  })

  it("a suspension revokes the badge at once; its overturn restores it", async () => {
    const agent = await bronzeAgent()
    expect((await publicGet(`/api/v1/badge/${agent.id}?format=json`)).status).toBe(200)
    const start = await t.chainLength()
    const enf = await t.call("POST", "/api/v1/enforcement", {
      body: { agentId: agent.id, type: "suspension", reason: "investigating" },
    })
    expect(enf.status, JSON.stringify(enf.body)).toBe(201)
    // The public badge follows the agent's status without waiting for the worker.
    expectError(await publicGet(`/api/v1/badge/${agent.id}?format=json`), 404, "BADGE_NOT_FOUND")
    await caughtUp()
    const revoked = (await trustEvents(agent.id, start)).filter((e) => e.type.startsWith("badge."))
    expect(revoked.map((e) => [e.type, e.data.reason])).toEqual([["badge.revoked", "agent_suspended"]])

    const mid = await t.chainLength()
    const overturned = await t.call("PATCH", `/api/v1/enforcement/${enf.body.data.id}`, {
      body: { resolution: "overturned", note: "false alarm" },
    })
    expect(overturned.status, JSON.stringify(overturned.body)).toBe(200)
    await caughtUp()
    const events = await trustEvents(agent.id, mid)
    expect(events.filter((e) => e.type.startsWith("badge.")).map((e) => e.type)).toEqual(["badge.earned"])
    // An overturned enforcement costs nothing: the score is what it was.
    const score = (await t.call("GET", `/api/v1/trust/score/${agent.id}`)).body.data
    expect(score.components.find((c: any) => c.name === "enforcement_history").score).toBe(1000)
    expect((await publicGet(`/api/v1/badge/${agent.id}?format=json`)).body.data.tier).toBe("bronze")
  })
})

describe("certifications (D14) and trust", () => {
  /**
   * A certification in force for `agent` (issuing one through its report is compliance.test.ts's). Its report row is
   * a `ready` one: a `generating` row would be taken up by the server's compliance worker, whose
   * `compliance.report.generated` would land in a later test's window of events.
   */
  const certify = async (agentId: string, now: number) => {
    await t.query(
      (
        sql,
      ) => sql`INSERT INTO compliance_reports (id, workspace_id, framework, agent_id, period_from, period_to, status,
          requested_by, summary, document, created_at, completed_at)
        VALUES (${`rpt_trust${now}`}, ${t.workspaceId}, 'soc2', ${agentId}, now() - interval '1 day', now(),
          'ready', 'test', '{}'::jsonb, '{}', now(), now())`,
    )
    await t.query(
      (sql) => sql`INSERT INTO certifications (id, workspace_id, agent_id, framework, report_id, status, issued_at,
          expires_at, signature)
        VALUES (${`crt_trust${now}`}, ${t.workspaceId}, ${agentId}, 'soc2', ${`rpt_trust${now}`}, 'active', now(),
          now() + interval '365 days', 'sig')`,
    )
  }

  it("the badge names the frameworks the agent is certified for, signed with the rest", async () => {
    const agent = await bronzeAgent()
    await certify(agent.id, Date.now())
    const res = await publicGet(`/api/v1/badge/${agent.id}?format=json`)
    expect(res.status).toBe(200)
    const badge = res.body.data
    expect(badge.certifications).toEqual(["soc2"])
    const jwks = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`))
    const { payload } = await jwtVerify(badge.signature, jwks, { issuer: badge.issuer, typ: BADGE_TYP })
    expect(payload.certifications).toEqual(["soc2"])
    const served = (await publicGet("/.well-known/jwks.json")).body
    expect(verifyBadge(JSON.stringify(badge), served, { agentId: agent.id })).toMatchObject({ valid: true })
    // A badge that claims more certifications than were signed is refused.
    expect(
      verifyBadge(JSON.stringify({ ...badge, certifications: ["eu-ai-act", "soc2"] }), served, { agentId: agent.id }),
    ).toMatchObject({ valid: false, reason: "bad_signature" })
  })

  it("a badge naming a certification revoked since is not current; the agent's new badge is", async () => {
    const agent = await bronzeAgent()
    const now = Date.now()
    await certify(agent.id, now)
    const old = (await publicGet(`/api/v1/badge/${agent.id}?format=json`)).body.data
    expect(old.certifications).toEqual(["soc2"])
    const verify = async (presented: unknown) => {
      const res = await t.call("POST", `/api/v1/badge/${agent.id}/verify`, { key: null, body: { badge: presented } })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body.data
    }
    expect(await verify(JSON.stringify(old))).toMatchObject({ valid: true, current: true })
    const revoked = await t.call("POST", `/api/v1/compliance/certifications/crt_trust${now}/revoke`, {
      body: { reason: "the audit found gaps" },
    })
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200)
    // Still the service's signature, unexpired and this agent's, at the same tier: but it claims soc2, which ended.
    for (const presented of [JSON.stringify(old), old.signature])
      expect(await verify(presented)).toMatchObject({ valid: true, tier: "bronze", current: false })
    const fresh = (await publicGet(`/api/v1/badge/${agent.id}?format=json`)).body.data
    expect(fresh.certifications).toEqual([])
    expect(await verify(fresh.signature)).toMatchObject({ valid: true, current: true })
    expect((await publicGet(`/api/v1/badge/${agent.id}/verify`)).body.data).toMatchObject({ current: true })
  })

  it("verify reads the agent's state, not the image's cache: a change whose notification is on its way counts", async () => {
    const agent = await bronzeAgent()
    const now = Date.now() + 1
    await certify(agent.id, now)
    const badge = (await publicGet(`/api/v1/badge/${agent.id}?format=json`)).body.data
    expect(badge.certifications).toEqual(["soc2"])
    // Ended with no notification at all: what the revocation looks like to this instance until its notification
    // arrives (the response to the revoke can reach a client first).
    await t.query(
      (sql) => sql`UPDATE certifications SET status = 'revoked', revoked_at = now() WHERE id = ${`crt_trust${now}`}`,
    )
    const checked = await t.call("POST", `/api/v1/badge/${agent.id}/verify`, { key: null, body: { badge } })
    expect(checked.body.data).toMatchObject({ valid: true, current: false })
    expect((await publicGet(`/api/v1/badge/${agent.id}/verify`)).body.data).toMatchObject({
      valid: true,
      current: true,
    })
  })

  it("a fall below bronze revokes the agent's certifications in the pass that announces it", async () => {
    const agent = await bronzeAgent()
    const now = Date.now()
    await certify(agent.id, now)
    const [head] = await t.query<{ last: number }>(
      (sql) => sql`SELECT max(sequence)::int AS last FROM events WHERE workspace_id = ${t.workspaceId}`,
    )
    await adjust(agent.id, -300, "incident review")
    await caughtUp()
    const rows = await t.query<{ type: string; data: any }>(
      (sql) => sql`SELECT type, data FROM events WHERE workspace_id = ${t.workspaceId} AND agent_id = ${agent.id}
          AND sequence > ${head!.last} AND type IN ('trust.tier.downgraded', 'certification.revoked') ORDER BY sequence`,
    )
    expect(rows.map((r) => r.type)).toEqual(["trust.tier.downgraded", "certification.revoked"])
    expect(rows[1]!.data).toEqual({
      certificationId: `crt_trust${now}`,
      agentId: agent.id,
      framework: "soc2",
      reportId: `rpt_trust${now}`,
      reason: "trust_below_bronze",
    })
    const [cert] = await t.query<{ status: string }>(
      (sql) => sql`SELECT status FROM certifications WHERE id = ${`crt_trust${now}`}`,
    )
    expect(cert!.status).toBe("revoked")
  })
})

describe("adjustments", () => {
  it("need trust:write, refuse bad input without changing anything, and are audited", async () => {
    const agent = await register()
    const noWrite = await creds.keyWithout("trust:write")
    expectError(
      await t.call("POST", `/api/v1/trust/score/${agent.id}/adjustments`, {
        body: { delta: 10, reason: "x" },
        key: noWrite,
      }),
      403,
      "FORBIDDEN",
    )
    // The trust worker has read the registration (its own events would otherwise land in the window below).
    await caughtUp()
    const before = await t.chainLength()
    for (const [body, field] of [
      [{ delta: 0, reason: "x" }, "delta"],
      [{ delta: 1001, reason: "x" }, "delta"],
      [{ delta: 1.5, reason: "x" }, "delta"],
      [{ delta: 5, reason: "" }, "reason"],
      [{ delta: 5 }, "reason"],
    ] as const)
      expectError(
        await t.call("POST", `/api/v1/trust/score/${agent.id}/adjustments`, { body }),
        422,
        "VALIDATION_ERROR",
        field,
      )
    expectError(
      await t.call("POST", `/api/v1/trust/score/${other.agent}/adjustments`, { body: { delta: 5, reason: "x" } }),
      404,
      "AGENT_NOT_FOUND",
    )
    // Nothing of the refused calls' own: the trust worker may still record its passes over earlier tests' agents
    // in this window (it did, once in a while: the chain grew by one), so only its event types are let through.
    const appended = await t.query<{ type: string }>(
      (sql) => sql`SELECT type FROM events WHERE workspace_id = ${t.workspaceId} AND sequence > ${before}
        AND type NOT IN ('trust.score.changed', 'trust.tier.upgraded', 'trust.tier.downgraded', 'badge.earned',
          'badge.revoked')`,
    )
    expect(appended).toEqual([])
    const made = await adjust(agent.id, -30, "noisy")
    expect(made).toMatchObject({ id: expect.stringMatching(/^adj_/), agentId: agent.id, delta: -30, reason: "noisy" })
  })
})

describe("badges (D13)", () => {
  it("JSON: the D13 fields, a JWS that jose verifies against the served JWKS, cacheable", async () => {
    const agent = await bronzeAgent()
    const res = await publicGet(`/api/v1/badge/${agent.id}?format=json`)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const badge = res.body.data
    expect(Object.keys(badge).sort()).toEqual(
      [
        "agentId",
        "agentName",
        "tier",
        "score",
        "issuedAt",
        "expiresAt",
        "issuer",
        "certifications",
        "signature",
      ].sort(),
    )
    expect(badge).toMatchObject({
      agentId: agent.id,
      agentName: agent.name,
      tier: "bronze",
      score: 550,
      certifications: [],
    })
    expect(Date.parse(badge.expiresAt) - Date.parse(badge.issuedAt)).toBeLessThanOrEqual(24 * 3_600_000)
    expect(res.headers.get("cache-control")).toMatch(/public, max-age=\d+/)
    const etag = res.headers.get("etag")!
    expect(etag).toBeTruthy()
    const again = await publicGet(`/api/v1/badge/${agent.id}?format=json`, { "if-none-match": etag })
    expect(again.status).toBe(304)

    const jwks = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`))
    const { payload, protectedHeader } = await jwtVerify(badge.signature, jwks, {
      issuer: badge.issuer,
      typ: BADGE_TYP,
    })
    expect(protectedHeader.alg).toBe("EdDSA")
    for (const f of ["agentId", "agentName", "tier", "score", "issuedAt", "expiresAt", "issuer", "certifications"])
      expect(payload[f], f).toEqual(badge[f])
    // agentgov-verify's check, offline, against the JWKS as served.
    const served = (await publicGet("/.well-known/jwks.json")).body
    expect(verifyBadge(JSON.stringify(res.body), served, { agentId: agent.id, issuer: badge.issuer })).toMatchObject({
      valid: true,
      claims: { tier: "bronze", score: 550 },
    })
    // The same badge under /trust/badges and /v1, and through Accept.
    expect((await publicGet(`/api/v1/trust/badges/${agent.id}`)).body.data).toEqual(badge)
    expect((await publicGet(`/v1/badge/${agent.id}`, { accept: "application/json" })).body.data).toEqual(badge)
  })

  it("a change to the agent that the badge does not show keeps its bytes and ETag; a rename signs a new one", async () => {
    const agent = await bronzeAgent()
    const first = await publicGet(`/api/v1/badge/${agent.id}?format=json`)
    const etag = first.headers.get("etag")!
    // Each update notifies every cache of the agent's row (in process, and by the database's trigger).
    for (const description of ["one", "two"]) {
      const patched = await t.call("PATCH", `/api/v1/agents/${agent.id}`, { body: { description } })
      expect(patched.status, JSON.stringify(patched.body)).toBe(200)
      const again = await publicGet(`/api/v1/badge/${agent.id}?format=json`, { "if-none-match": etag })
      expect(again.status).toBe(304)
    }
    const json = await publicGet(`/api/v1/badge/${agent.id}?format=json`)
    expect(json.body.data).toEqual(first.body.data)

    const renamed = await t.call("PATCH", `/api/v1/agents/${agent.id}`, { body: { name: unique("renamed") } })
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200)
    const after = await publicGet(`/api/v1/badge/${agent.id}?format=json`, { "if-none-match": etag })
    expect(after.status).toBe(200)
    expect(after.headers.get("etag")).not.toBe(etag)
    expect(after.body.data.agentName).toBe(renamed.body.data.name)
  })

  it("SVG by default: the tier's colour, the JWS in <metadata>, a grey badge for none", async () => {
    const agent = await bronzeAgent()
    const res = await fetch(`${t.url}/api/v1/badge/${agent.id}`, { headers: { accept: "image/avif,image/*,*/*" } })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("image/svg+xml; charset=utf-8")
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'")
    const svg = await res.text()
    expect(svg).toContain("#8c4f1f")
    expect(svg).toContain("bronze 550")
    const jws = /<metadata id="agentgov-badge">([^<]+)<\/metadata>/.exec(svg)?.[1]
    expect(jws).toBeDefined()
    const verified = await t.call("POST", `/api/v1/badge/${agent.id}/verify`, { key: null, body: { badge: svg } })
    expect(verified.body.data).toMatchObject({ valid: true, tier: "bronze", score: 550, current: true })

    const none = await fetch(`${t.url}/api/v1/badge/agt_unknown?format=svg`)
    expect(none.status).toBe(404)
    expect(none.headers.get("content-type")).toBe("image/svg+xml; charset=utf-8")
    expect(await none.text()).toContain("not verified")
  })

  it("names are escaped: markup, quotes, right-to-left overrides and very long names", async () => {
    const hostile = `<script>alert("x")</script>'&\u202Egnp.exe`
    // Registration now refuses bidi controls in a name; one stored before that rule is still drawn safely.
    const agent = await bronzeAgent()
    await t.query((sql) => sql`UPDATE agents SET name = ${hostile} WHERE id = ${agent.id}`)
    const svg = await (await fetch(`${t.url}/api/v1/badge/${agent.id}`)).text()
    expect(svg).not.toContain("<script")
    expect(svg).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;")
    expect(svg).not.toContain("\u202E")
    // Every element the badge has, and nothing the name brought.
    const elements = new Set([...svg.matchAll(/<([a-zA-Z]+)/g)].map((m) => m[1]))
    expect([...elements].sort()).toEqual(
      ["clipPath", "g", "linearGradient", "metadata", "rect", "stop", "svg", "text", "title"].sort(),
    )
    const long = await bronzeAgent(`${"w".repeat(150)}${unique("x")}`)
    const longSvg = await (await fetch(`${t.url}/api/v1/badge/${long.id}`)).text()
    expect(longSvg).toContain(`${"w".repeat(39)}…`)
    expect(Number(/width="(\d+)"/.exec(longSvg)![1])).toBeLessThan(600)
    const rtl = await bronzeAgent(`وكيل-${unique("r")}`)
    const rtlSvg = await (await fetch(`${t.url}/api/v1/badge/${rtl.id}`)).text()
    expect(rtlSvg).toContain("وكيل-")
    expect(rtlSvg).toContain("bronze 550")
  })

  it("a name with characters XML does not allow still draws a well-formed badge; bidi marks go", async () => {
    // XML 1.0's Char excludes the noncharacters U+FFFE and U+FFFF (and most C0 controls): one in the name made the
    // whole SVG ill-formed, a broken image wherever it is embedded. U+061C (Arabic letter mark) is a bidi mark as
    // U+200E and U+200F are.
    const agent = await bronzeAgent(`a\uFFFEb\uFFFFc\u061Cd-${unique("x")}`)
    const svg = await (await fetch(`${t.url}/api/v1/badge/${agent.id}`)).text()
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what XML 1.0 forbids is the point
    expect(svg).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff\u061c]/)
    expect(svg).toContain("abcd-")
    expect(renderBadgeSvg({ agentName: "\uFFFF\uFFFE", tier: "bronze", score: 550, signature: "a.b.c" })).toContain(
      ">agent</text>",
    )
  })

  it("verify: valid, tampered, expired, another agent's, unknown and retired keys", async () => {
    const agent = await bronzeAgent()
    const second = await bronzeAgent()
    const badge = (await publicGet(`/api/v1/badge/${agent.id}?format=json`)).body.data
    const verify = async (id: string, presented: string) => {
      const res = await t.call("POST", `/api/v1/badge/${id}/verify`, { key: null, body: { badge: presented } })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body.data
    }
    expect(await verify(agent.id, badge.signature)).toEqual({
      valid: true,
      agentId: agent.id,
      tier: "bronze",
      score: 550,
      issuedAt: badge.issuedAt,
      expiresAt: badge.expiresAt,
      current: true,
    })
    expect(await verify(agent.id, JSON.stringify(badge))).toMatchObject({ valid: true })
    // GET checks the agent's current badge.
    expect((await publicGet(`/api/v1/badge/${agent.id}/verify`)).body.data).toMatchObject({
      valid: true,
      current: true,
    })

    // Tampered: the JSON says gold, or the payload itself was changed.
    expect(await verify(agent.id, JSON.stringify({ ...badge, tier: "gold" }))).toMatchObject({
      valid: false,
      reason: "bad_signature",
    })
    const [h, p, s] = badge.signature.split(".")
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(p, "base64url").toString()), tier: "platinum" }),
    ).toString("base64url")
    expect(await verify(agent.id, `${h}.${forged}.${s}`)).toMatchObject({ valid: false, reason: "bad_signature" })
    expect(await verify(agent.id, "not a badge")).toMatchObject({ valid: false, reason: "malformed" })
    // Another agent's badge presented for this one.
    expect(await verify(second.id, badge.signature)).toMatchObject({
      valid: false,
      reason: "other_agent",
      current: false,
    })

    // Expired: signed by the service's key with a lifetime that has ended.
    const key = await run<{ kid: string; privateKey: any }>(SigningKeys.use((k) => k.current))
    const past = Date.now() - 48 * 3_600_000
    const fields = {
      agentId: agent.id,
      agentName: agent.name,
      tier: "bronze",
      score: 550,
      issuedAt: new Date(past).toISOString(),
      expiresAt: new Date(past + 24 * 3_600_000).toISOString(),
      issuer: badge.issuer,
    }
    const expired = signCompact(
      { alg: "EdDSA", typ: BADGE_TYP, kid: key.kid },
      { ...fields, iss: badge.issuer, sub: agent.id, iat: past / 1000, exp: (past + 24 * 3_600_000) / 1000 },
      key.privateKey,
    )
    expect(await verify(agent.id, expired)).toMatchObject({ valid: false, reason: "expired", tier: "bronze" })
    const unknownKid = signCompact({ alg: "EdDSA", typ: BADGE_TYP, kid: "key_nope" }, { ...fields }, key.privateKey)
    expect(await verify(agent.id, unknownKid)).toMatchObject({ valid: false, reason: "unknown_key" })

    // Retired key: rotate, retire the old key's private part; what it signed verifies until it expires (as tokens).
    const oldKid = decodeProtectedHeader(badge.signature).kid
    await run(SigningKeys.use((k) => k.rotate(0)))
    await t.query((sql) => sql`UPDATE signing_keys SET retires_at = now() - interval '1 minute' WHERE kid = ${oldKid}`)
    const retired = await run<ReadonlyArray<string>>(SigningKeys.use((k) => k.retire))
    expect(retired).toContain(oldKid)
    expect(await verify(agent.id, badge.signature)).toMatchObject({ valid: true, current: true })
    const jwks = (await publicGet("/.well-known/jwks.json")).body
    expect(jwks.keys.map((k: { kid: string }) => k.kid)).toContain(oldKid)
  })

  it("verify takes the badge object GET answers, with or without its envelope, checked as exactly as its text", async () => {
    const agent = await bronzeAgent()
    const answer = (await publicGet(`/api/v1/badge/${agent.id}?format=json`)).body
    const badge = answer.data
    const verify = async (presented: unknown) => {
      const res = await t.call("POST", `/api/v1/badge/${agent.id}/verify`, { key: null, body: { badge: presented } })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body.data
    }
    const good = { valid: true, agentId: agent.id, tier: "bronze", score: 550, current: true }
    expect(await verify(badge)).toMatchObject(good)
    expect(await verify(answer)).toMatchObject(good)
    // Altered, or with a field the badge does not have, inside or beside the envelope: refused as its text is.
    for (const altered of [
      { ...badge, tier: "gold" },
      { ...badge, score: 999 },
      { ...badge, certifications: ["soc2"] },
      { ...badge, verifiedBy: "agentgov" },
      { ok: true, data: { ...badge, tier: "platinum" } },
      { ok: true, data: badge, verifiedBy: "agentgov: platinum" },
      { ok: true, data: badge, signature: "x.y.z" },
    ]) {
      expect(await verify(altered), JSON.stringify(altered).slice(0, 80)).toMatchObject({
        valid: false,
        reason: "bad_signature",
      })
      expect(await verify(JSON.stringify(altered))).toMatchObject({ valid: false, reason: "bad_signature" })
    }
    expect(await verify({ tier: "gold" })).toMatchObject({ valid: false, reason: "malformed" })
    expect(await verify({})).toMatchObject({ valid: false, reason: "malformed" })
    // Neither text nor an object: a clear 422 that says what to send, and nothing changes.
    for (const wrong of [42, ["x"], null, true, ""]) {
      const res = await t.call("POST", `/api/v1/badge/${agent.id}/verify`, { key: null, body: { badge: wrong } })
      expectError(res, 422, "VALIDATION_ERROR", "badge")
      expect(res.body.error.message).toMatch(/JSON.*SVG.*JWS/)
    }
    const huge = { ...badge, padding: "x".repeat(70_000) }
    const tooBig = await t.call("POST", `/api/v1/badge/${agent.id}/verify`, { key: null, body: { badge: huge } })
    expect(tooBig.status).toBe(413)
  })

  it("verify answers a crafted SVG as malformed", async () => {
    // Quadratic matching took ~700 ms of blocked event loop here; the pattern is linear now (jwsOfSvg). Tests
    // assert no timings: this checks the answer.
    const crafted = `<${"<metadata".repeat(7_000)}`
    const res = await t.call("POST", "/api/v1/badge/agt_00000000000000000000000000/verify", {
      key: null,
      body: { badge: crafted },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.data).toMatchObject({ valid: false, reason: "malformed" })
  })

  it("public endpoints need no credential, leak nothing, and answer unknown, deregistered and unbadged agents alike", async () => {
    const deregistered = await bronzeAgent()
    expect((await t.call("DELETE", `/api/v1/agents/${deregistered.id}`)).status).toBe(200)
    await caughtUp()
    const probation = await register()
    const ids = [deregistered.id, probation.id, other.agent, "agt_00000000000000000000000000"]
    const answers = await Promise.all(
      ids.map(async (id) => {
        const json = await publicGet(`/api/v1/badge/${id}?format=json`)
        const svg = await fetch(`${t.url}/api/v1/badge/${id}`)
        const data = await publicGet(`/api/v1/trust/badges/${id}`)
        const verify = await publicGet(`/api/v1/badge/${id}/verify`)
        return {
          json: [json.status, json.body.error?.code],
          svg: [svg.status, await svg.text()],
          data: [data.status, data.body.error?.code],
          verify: { ...verify.body.data, agentId: undefined },
        }
      }),
    )
    for (const a of answers.slice(1)) expect(a).toEqual(answers[0])
    expect(answers[0]!.json).toEqual([404, "BADGE_NOT_FOUND"])
    expect(answers[0]!.verify).toMatchObject({ valid: false, reason: "no_badge", tier: null, current: false })
    // Another workspace's bronze agent: its badge shows only D13's fields, nothing of its workspace.
    const theirs = await t.call("POST", `/api/v1/trust/score/${other.agent}/adjustments`, {
      body: { delta: 200, reason: "x" },
      key: other.key,
    })
    expect(theirs.status).toBe(201)
    await caughtUp(other.id)
    const shown = await publicGet(`/api/v1/badge/${other.agent}?format=json`)
    expect(shown.status).toBe(200)
    expect(JSON.stringify(shown.body)).not.toContain(other.id)
    // A credential is not needed, and a bad one is not looked at.
    expect(
      (await t.call("GET", `/api/v1/badge/${other.agent}?format=json`, { key: "svc_ws_test_garbage" })).status,
    ).toBe(200)
    // tRPC serves the same operations without a credential too.
    const input = encodeURIComponent(JSON.stringify({ agentId: other.agent }))
    const viaTrpc = await fetch(`${t.url}/trpc/trust.badgeData?input=${input}`)
    expect(viaTrpc.status).toBe(200)
    expect(((await viaTrpc.json()) as any).result.data).toEqual(shown.body.data)
    const noneViaTrpc = await fetch(
      `${t.url}/trpc/trust.badgeData?input=${encodeURIComponent(JSON.stringify({ agentId: probation.id }))}`,
    )
    expect(((await noneViaTrpc.json()) as any).error.data.apiError.code).toBe("BADGE_NOT_FOUND")
    expectError(await publicGet(`/api/v1/badge/${other.agent}?format=xml`), 400, "BAD_REQUEST", "format")
    expectError(await publicGet(`/api/v1/badge/${other.agent}?x=1`), 400, "BAD_REQUEST", "x")
    expectError(await t.call("DELETE", `/api/v1/badge/${other.agent}`, { key: null }), 405, "METHOD_NOT_ALLOWED")
  })
})

describe("guard rules on the trust tier (D6)", () => {
  it("require approval for payment.* below silver; the same agent is allowed once it reaches silver", async () => {
    const agent = await register()
    const policy = await t.call("POST", "/api/v1/policies", {
      body: {
        name: unique("payments"),
        target: { agentIds: [agent.id] },
        rules: [
          {
            id: "payments-below-silver",
            effect: "require_approval",
            actions: ["payment.*"],
            when: { field: "agent.trust.tier", op: "in", value: ["untrusted", "probation", "bronze"] },
          },
          {
            id: "refunds-low-score",
            effect: "deny",
            actions: ["refund.*"],
            when: { cel: "agent.trust.score < 700" },
          },
          { id: "otherwise", effect: "allow", actions: ["payment.*", "refund.*"] },
        ],
      },
    })
    expect(policy.status, JSON.stringify(policy.body)).toBe(201)
    const guard = async (action: string) =>
      (await t.call("POST", "/v1/guard", { body: { agentId: agent.id, action } })).body.data
    expect((await guard("payment.send")).decision).toBe("require_approval")
    expect((await guard("refund.issue")).decision).toBe("deny")
    await adjust(agent.id, 400, "trusted partner") // 400 + 400, less the denial of refund.issue: silver
    await caughtUp()
    expect((await t.call("GET", `/api/v1/agents/${agent.id}`)).body.data.trustScore).toBeGreaterThanOrEqual(700)
    // The agents trigger told the guard's cache; the next call sees silver.
    let decided: string | undefined
    for (let i = 0; i < 100 && decided !== "allow"; i++) {
      decided = (await guard("payment.send")).decision
      if (decided !== "allow") await new Promise((r) => setTimeout(r, 20))
    }
    expect(decided).toBe("allow")
    expect((await guard("refund.issue")).decision).toBe("allow")
  })

  it("the camel-case names of earlier policies still work", async () => {
    const agent = await register()
    const policy = await t.call("POST", "/api/v1/policies", {
      body: {
        name: unique("legacy"),
        target: { agentIds: [agent.id] },
        rules: [
          { id: "low", effect: "deny", actions: ["x.*"], when: { field: "agent.trustScore", op: "lt", value: 500 } },
        ],
      },
    })
    expect(policy.status).toBe(201)
    expect((await t.call("POST", "/v1/guard", { body: { agentId: agent.id, action: "x.y" } })).body.data.decision).toBe(
      "deny",
    )
  })
})

describe("rate limits on public endpoints", () => {
  it("are counted per client address and answer 429 with Retry-After past the limit", async () => {
    const limited = await startTestServer({
      rateLimits: {
        ...(await import("@agentgov/domain")).DEFAULT_RATE_LIMITS,
        plans: { free: 1e9, pro: 1e9, enterprise: 1e9 },
        agent: 1e9,
        anonymous: 3,
      },
    })
    try {
      const statuses: Array<number> = []
      let last: Response | undefined
      for (let i = 0; i < 4; i++) {
        last = await fetch(`${limited.url}/api/v1/badge/agt_unknown?format=json`)
        statuses.push(last.status)
        expect(last.headers.get("x-ratelimit-limit")).toBe("3")
      }
      expect(statuses).toEqual([404, 404, 404, 429])
      expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0)
    } finally {
      await limited.close()
    }
  }, 60_000)
})
