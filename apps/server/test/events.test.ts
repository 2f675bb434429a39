import { EventService, SCOPES, systemActor } from "@agentgov/domain"
import { canonicalize } from "@agentgov/verifier"
import { Effect } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer } from "./helpers.ts"

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
})
afterAll(async () => t?.close())

const sql = <T = any>(run: (sql: SqlClient.SqlClient) => any): Promise<T> => t.query(run) as Promise<any>

const ingest = (
  events: Array<Record<string, unknown>>,
  options: { key?: string; headers?: Record<string, string> } = {},
) => t.call("POST", "/api/v1/events/ingest", { body: { events }, ...options })

describe("POST /events/ingest", () => {
  it("stores each event's data as the exact JCS text its hash covers", async () => {
    const data = { z: 1, a: { y: [true, null, "é"], b: 0.5 }, "\u00e9": "key" }
    const res = await ingest([{ type: "canon.check", data }])
    const [row] = await sql((s) => s`SELECT data::text AS text FROM events WHERE id = ${res.body.data.events[0].id}`)
    expect(row.text).toBe(canonicalize(data))
  })

  it("stores a batch atomically, in order, and answers ids, sequences and hashes", async () => {
    const res = await ingest([
      { type: "tool.called", data: { tool: "search" } },
      { type: "tool.finished", data: { ms: 12 }, occurredAt: "2026-11-20T10:00:00Z" },
    ])
    expect(res.status).toBe(201)
    const [a, b] = res.body.data.events
    expect(a.id).toMatch(/^evt_/)
    expect(b.sequence).toBe(a.sequence + 1)
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/)
    const got = await t.call("GET", `/api/v1/events/${b.id}`)
    expect(got.status).toBe(200)
    expect(got.body.data).toMatchObject({
      type: "tool.finished",
      data: { ms: 12 },
      prevHash: a.hash,
      occurredAt: "2026-11-20T10:00:00.000Z",
    })
  })

  it("refuses 101 events with a 422 naming the limit, and stores none of a batch with one bad event", async () => {
    const before = await t.call("GET", "/api/v1/events?limit=1")
    const tooMany = await ingest(Array.from({ length: 101 }, () => ({ type: "a.b", data: {} })))
    expect(tooMany.status).toBe(422)
    expect(tooMany.body.error.details.field).toBe("events")
    expect(tooMany.body.error.message).toContain("100")
    const oneBad = await ingest([
      { type: "ok.event", data: {} },
      { type: "Not Dotted", data: {} },
    ])
    expect(oneBad.status).toBe(422)
    expect(oneBad.body.error.details.field).toBe("events[1].type")
    const after = await t.call("GET", "/api/v1/events?limit=1")
    expect(after.body.data[0].id).toBe(before.body.data[0].id)
  })

  it("refuses data that is not a JSON object, naming the event, and stores nothing", async () => {
    const before = await t.call("GET", "/api/v1/events?limit=1")
    for (const data of [[1, 2], null, "text", 3]) {
      const res = await ingest([
        { type: "ok.event", data: {} },
        { type: "ok.event", data },
      ])
      expect(res.status, JSON.stringify(data)).toBe(422)
      expect(res.body.error.details.field).toBe("events[1].data")
    }
    const missing = await ingest([{ type: "ok.event" }])
    expect(missing.status).toBe(422)
    expect(missing.body.error.details.field).toBe("events[0].data")
    const after = await t.call("GET", "/api/v1/events?limit=1")
    expect(after.body.data[0].id).toBe(before.body.data[0].id)
  })

  it("refuses the system's own event names and the enforcement.issued alias", async () => {
    for (const type of ["agent.registered", "policy.denied", "enforcement.issued", "apikey.revoked"]) {
      const res = await ingest([{ type, data: {} }])
      expect(res.status, type).toBe(422)
      expect(res.body.error.details.field).toBe("events[0].type")
    }
  })

  it("keeps the system's namespaces to the system: enforcement.created.v2 would reach enforcement.* subscribers", async () => {
    const before = await t.chainLength()
    for (const type of ["enforcement.created.v2", "agent.registered.v2", "apikey.leaked", "trust.score.forged"]) {
      const res = await ingest([
        { type: "deploy.finished", data: {} },
        { type, data: {} },
      ])
      expect(res.status, type).toBe(422)
      expect(res.body.error.details.field).toBe("events[1].type")
      expect(res.body.error.message).toContain("namespace")
    }
    expect(await t.chainLength()).toBe(before)
    // A first segment that merely starts like one is not the namespace.
    expect((await ingest([{ type: "agents.step", data: {} }])).status).toBe(201)
  })

  it("binds an agent key to its agent: default agentId, 403 for another agent", async () => {
    const mine = (await t.call("POST", "/api/v1/agents", { body: { name: "ingest-mine" } })).body.data.id
    const other = (await t.call("POST", "/api/v1/agents", { body: { name: "ingest-other" } })).body.data.id
    const key = await t.createKey({ type: "agent", agentId: mine, scopes: ["events:write", "events:read"] })
    const ok = await ingest([{ type: "tool.called", data: {} }], { key })
    expect(ok.status).toBe(201)
    const stored = await t.call("GET", `/api/v1/events/${ok.body.data.events[0].id}`)
    expect(stored.body.data.agentId).toBe(mine)
    const denied = await ingest(
      [
        { type: "tool.called", data: {} },
        { type: "tool.called", agentId: other, data: {} },
      ],
      { key },
    )
    expectError(denied, 403, "FORBIDDEN", "events[1].agentId")
    const otherEvents = await t.call("GET", `/api/v1/events?agentId=${other}`, { key })
    expect(otherEvents.status).toBe(403)
  })

  it("replays a retried call with the same Idempotency-Key instead of storing twice", async () => {
    const headers = { "idempotency-key": `ingest-${Date.now()}` }
    const first = await ingest([{ type: "retry.safe", data: { n: 1 } }], { headers })
    const second = await ingest([{ type: "retry.safe", data: { n: 1 } }], { headers })
    expect(second.status).toBe(201)
    expect(second.body).toEqual(first.body)
    const stored = await t.call("GET", "/api/v1/events?type=retry.safe")
    expect(stored.body.data).toHaveLength(1)
  })

  it("replays with Idempotent-Replayed, refuses the key for another body or endpoint, and stores once", async () => {
    const headers = { "idempotency-key": `ingest-other-${Date.now()}` }
    const events = [{ type: "retry.other", data: { n: 1 } }]
    const first = await ingest(events, { headers })
    expect(first.status).toBe(201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    const again = await ingest(events, { headers })
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(again.body).toEqual(first.body)
    expectError(await ingest([{ type: "retry.other", data: { n: 2 } }], { headers }), 409, "IDEMPOTENCY_KEY_REUSED")
    // The same body sent to another POST under the key is another request.
    expectError(await t.call("POST", "/api/v1/events/verify", { body: {}, headers }), 409, "IDEMPOTENCY_KEY_REUSED")
    expect((await t.call("GET", "/api/v1/events?type=retry.other")).body.data).toHaveLength(1)
  })

  it("keeps ingest keys per workspace: the same key and body in another workspace stores its own events", async () => {
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name: `ingest-keys-${Date.now()}` } })
    const other = created.body.data.apiKey.apiKey as string
    const headers = { "idempotency-key": `ingest-tenant-${Date.now()}` }
    const events = [{ type: "tenant.keyed", data: { n: 1 } }]
    const mine = await ingest(events, { headers })
    const theirs = await ingest(events, { headers, key: other })
    expect([mine.status, theirs.status]).toEqual([201, 201])
    expect(theirs.headers.get("idempotent-replayed")).toBeNull()
    expect(theirs.body.data.events[0].id).not.toBe(mine.body.data.events[0].id)
    const stored = await t.call("GET", "/api/v1/events?type=tenant.keyed", { key: other })
    expect(stored.body.data.map((e: { id: string }) => e.id)).toEqual([theirs.body.data.events[0].id])
  })

  it("stores nothing under the key of a refused call: the corrected retry with the same key runs", async () => {
    const headers = { "idempotency-key": `ingest-refused-${Date.now()}` }
    const refused = await ingest([{ type: "retry.refused", agentId: "agt_nope", data: {} }], { headers })
    expectError(refused, 422, "VALIDATION_ERROR", "events[0].agentId")
    const fixed = await ingest([{ type: "retry.refused", data: {} }], { headers })
    expect(fixed.status).toBe(201)
    expect(fixed.headers.get("idempotent-replayed")).toBeNull()
    expect((await t.call("GET", "/api/v1/events?type=retry.refused")).body.data).toHaveLength(1)
  })

  it("refuses an Idempotency-Key on a tRPC mutation (400) instead of ignoring it: a retry would store twice", async () => {
    const trpc = (headers: Record<string, string>) =>
      fetch(`${t.url}/trpc/events.ingest`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", ...headers },
        body: JSON.stringify({ events: [{ type: "trpc.keyed", data: {} }] }),
      })
    const keyed = await trpc({ "idempotency-key": `trpc-${Date.now()}` })
    expect(keyed.status).toBe(400)
    const body = (await keyed.json()) as { error: { data: { apiError: { code: string; details: unknown } } } }
    expect(body.error.data.apiError).toMatchObject({ code: "BAD_REQUEST", details: { field: "Idempotency-Key" } })
    expect((await t.call("GET", "/api/v1/events?type=trpc.keyed")).body.data).toHaveLength(0)
    // Without the header the mutation runs as before; queries never look at it.
    expect((await trpc({})).status).toBe(200)
    const query = await fetch(`${t.url}/trpc/events.list?input=${encodeURIComponent('{"limit":1}')}`, {
      headers: { authorization: `Bearer ${t.key}`, "idempotency-key": "ignored-on-queries" },
    })
    expect(query.status).toBe(200)
    // Nor does a POST that REST runs on every call whatever the key (POST /tokens).
    const token = await fetch(`${t.url}/trpc/tokens.create`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", "idempotency-key": "unused" },
      body: "{}",
    })
    expect(token.status).toBe(200)
  })

  it("runs a key again once its record is older than 24 hours, with any body", async () => {
    const key = `ingest-expired-${Date.now()}`
    const headers = { "idempotency-key": key }
    const first = await ingest([{ type: "retry.expired", data: { n: 1 } }], { headers })
    expect(first.status).toBe(201)
    await sql(
      (s) => s`UPDATE idempotency_keys SET created_at = created_at - interval '25 hours'
        WHERE workspace_id = ${t.workspaceId} AND key = ${key}`,
    )
    const second = await ingest([{ type: "retry.expired", data: { n: 2 } }], { headers })
    expect(second.status, JSON.stringify(second.body)).toBe(201)
    expect(second.headers.get("idempotent-replayed")).toBeNull()
    // The new record replays from now on.
    const third = await ingest([{ type: "retry.expired", data: { n: 2 } }], { headers })
    expect(third.headers.get("idempotent-replayed")).toBe("true")
    expect(third.body).toEqual(second.body)
    expect((await t.call("GET", "/api/v1/events?type=retry.expired")).body.data).toHaveLength(2)
  })

  it("refuses an unknown agent with the index of the event", async () => {
    const res = await ingest([
      { type: "a.b", data: {} },
      { type: "a.b", agentId: "agt_nope", data: {} },
    ])
    expect(res.status).toBe(422)
    expect(res.body.error.details.field).toBe("events[1].agentId")
  })
})

describe("GET /events", () => {
  it("filters by exact type, prefix.* and agent, and pages newest first without gaps", async () => {
    const agent = (await t.call("POST", "/api/v1/agents", { body: { name: "query-agent" } })).body.data.id
    await ingest(Array.from({ length: 7 }, (_, i) => ({ type: `query.kind${i % 2}`, agentId: agent, data: { i } })))
    const prefix = await t.call("GET", "/api/v1/events?type=query.*&limit=100")
    expect(prefix.body.data).toHaveLength(7)
    const exact = await t.call("GET", "/api/v1/events?type=query.kind0&limit=100")
    expect(exact.body.data.map((e: any) => e.data.i)).toEqual([6, 4, 2, 0])
    const byAgent = await t.call("GET", `/api/v1/events?agentId=${agent}&limit=100`)
    expect(byAgent.body.data.map((e: any) => e.type)).toContain("agent.registered")
    const seen: Array<number> = []
    let cursor: string | null = null
    do {
      const page: any = await t.call("GET", `/api/v1/events?type=query.*&limit=3${cursor ? `&cursor=${cursor}` : ""}`)
      seen.push(...page.body.data.map((e: any) => e.data.i))
      cursor = page.body.meta.cursor
    } while (cursor)
    expect(seen).toEqual([6, 5, 4, 3, 2, 1, 0])
    // D9's `*` is every event, as on the stream and webhooks; alone or beside other filters.
    const all = await t.call("GET", "/api/v1/events?limit=5")
    for (const q of ["type=*", "type=query.kind0,*"]) {
      const res = await t.call("GET", `/api/v1/events?${q}&limit=5`)
      expect(res.status).toBe(200)
      expect(res.body.data.map((e: any) => e.id)).toEqual(all.body.data.map((e: any) => e.id))
    }
  })

  it("answers 400 naming type for a filter that can match no event, instead of an empty page", async () => {
    for (const bad of ["Tool.Called", "tool", "query.*.x", "-.*"]) {
      const res = await t.call("GET", `/api/v1/events?type=${encodeURIComponent(bad)}`)
      expect(res.status, bad).toBe(400)
      expect(res.body.error.code).toBe("BAD_REQUEST")
      expect(res.body.error.details.field, bad).toMatch(/^type/)
    }
  })

  it("answers 400 for a bad query and 404 for an unknown event", async () => {
    expect((await t.call("GET", "/api/v1/events?fromSequence=0")).status).toBe(400)
    expect((await t.call("GET", "/api/v1/events?cursor=bad")).status).toBe(400)
    const missing = await t.call("GET", "/api/v1/events/evt_nope")
    expect(missing.status).toBe(404)
    expect(missing.body.error.code).toBe("EVENT_NOT_FOUND")
  })
})

describe("POST /events/verify detects tampering at the right sequence", () => {
  // Each case runs in its own workspace so that one tampering does not hide another.
  let ws: { id: string; key: string }
  let events: Array<{ sequence: number; id: string }>

  beforeEach(async () => {
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name: `tamper-${Math.random()}` } })
    ws = { id: created.body.data.workspace.id, key: created.body.data.apiKey.apiKey }
    const res = await ingest(
      Array.from({ length: 6 }, (_, i) => ({ type: "tamper.test", data: { i, nested: { b: [1, 2], a: "x" } } })),
      { key: ws.key },
    )
    events = res.body.data.events
    const clean = await t.call("POST", "/api/v1/events/verify", { key: ws.key })
    expect(clean.body.data).toMatchObject({ valid: true, checked: events.at(-1)!.sequence })
  })

  const verify = async () => (await t.call("POST", "/api/v1/events/verify", { key: ws.key })).body.data
  const target = () => events[3]!.sequence

  it("a changed data", async () => {
    await sql(
      (s) => s`UPDATE events SET data = '{"i": 99}'::jsonb WHERE workspace_id = ${ws.id} AND sequence = ${target()}`,
    )
    expect(await verify()).toMatchObject({ valid: false, firstBadSequence: target() })
  })

  it("a changed type", async () => {
    await sql(
      (s) => s`UPDATE events SET type = 'tamper.other' WHERE workspace_id = ${ws.id} AND sequence = ${target()}`,
    )
    expect(await verify()).toMatchObject({ valid: false, firstBadSequence: target() })
  })

  it("a changed timestamp", async () => {
    await sql(
      (s) =>
        s`UPDATE events SET ts = ts + interval '1 millisecond' WHERE workspace_id = ${ws.id} AND sequence = ${target()}`,
    )
    expect(await verify()).toMatchObject({ valid: false, firstBadSequence: target() })
  })

  it("a deleted event, in the middle or at the end", async () => {
    await sql((s) => s`DELETE FROM events WHERE workspace_id = ${ws.id} AND sequence = ${target()}`)
    expect(await verify()).toMatchObject({ valid: false, firstBadSequence: target() })
    const last = events.at(-1)!.sequence
    await sql((s) => s`DELETE FROM events WHERE workspace_id = ${ws.id} AND sequence = ${last}`)
    expect((await verify()).firstBadSequence).toBe(target())
  })

  it("a deleted tail event (the chain head still remembers it)", async () => {
    const last = events.at(-1)!.sequence
    await sql((s) => s`DELETE FROM events WHERE workspace_id = ${ws.id} AND sequence = ${last}`)
    expect(await verify()).toMatchObject({ valid: false, firstBadSequence: last })
  })

  it("two swapped events", async () => {
    const a = target()
    const b = a + 1
    await sql((s) => s`UPDATE events SET sequence = -1 WHERE workspace_id = ${ws.id} AND sequence = ${a}`)
    await sql((s) => s`UPDATE events SET sequence = ${a} WHERE workspace_id = ${ws.id} AND sequence = ${b}`)
    await sql((s) => s`UPDATE events SET sequence = ${b} WHERE workspace_id = ${ws.id} AND sequence = -1`)
    expect(await verify()).toMatchObject({ valid: false, firstBadSequence: a })
  })

  it("an inserted event", async () => {
    const a = target()
    // Shift the tail up by one and insert a forged event with a plausible prevHash.
    await sql((s) => s`UPDATE events SET sequence = sequence + 1000 WHERE workspace_id = ${ws.id} AND sequence >= ${a}`)
    await sql(
      (s) => s`UPDATE events SET sequence = sequence - 999 WHERE workspace_id = ${ws.id} AND sequence >= ${a + 1000}`,
    )
    await sql(
      (
        s,
      ) => s`INSERT INTO events (workspace_id, sequence, id, type, agent_id, actor_type, actor_id, data, ts, prev_hash, hash)
        SELECT workspace_id, ${a}, 'evt_forged', 'tamper.test', NULL, 'system', NULL, '{"i": -1}'::jsonb, ts, prev_hash, hash
        FROM events WHERE workspace_id = ${ws.id} AND sequence = ${a + 1}`,
    )
    expect(await verify()).toMatchObject({ valid: false, firstBadSequence: a })
  })

  it("records every verification", async () => {
    await verify()
    const rows = await sql<Array<{ valid: boolean; trigger: string }>>(
      (s) => s`SELECT valid, trigger FROM chain_verifications WHERE workspace_id = ${ws.id}`,
    )
    expect(rows.length).toBeGreaterThanOrEqual(2)
    expect(rows.every((r) => r.trigger === "api" && r.valid)).toBe(true)
  })
})

describe("POST /events/verify while the chain grows (outside review, 2026-11-29)", () => {
  it("does not take events appended during the verification for tampering", async () => {
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name: `growing-${Math.random()}` } })
    const ws = { id: created.body.data.workspace.id as string, key: created.body.data.apiKey.apiKey as string }
    const batch = (n: number) => Array.from({ length: n }, (_, i) => ({ type: "grow.test", data: { i } }))
    expect((await ingest(batch(5), { key: ws.key })).status).toBe(201)
    // Hold the checkpoints table: a verification reading it waits, and the ingest below (which does not read it)
    // commits meanwhile, so the verification's reads straddle the append, as under any steady ingest.
    let locked!: () => void
    let release!: () => void
    const isLocked = new Promise<void>((r) => (locked = r))
    const released = new Promise<void>((r) => (release = r))
    const holding = t.query((s) =>
      s.withTransaction(
        Effect.gen(function* () {
          yield* s`LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE`
          locked()
          yield* Effect.promise(() => released)
        }),
      ),
    )
    await isLocked
    try {
      const verifying = t.call("POST", "/api/v1/events/verify", { key: ws.key })
      for (let i = 0; ; i++) {
        const [row] = await sql<Array<{ n: number }>>(
          (s) => s`SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%checkpoints%'`,
        )
        if (row!.n >= 1) break
        if (i > 500) throw new Error("the verification never waited for the checkpoints table")
        await new Promise((r) => setTimeout(r, 10))
      }
      expect((await ingest(batch(3), { key: ws.key })).status).toBe(201)
      release()
      await holding
      const res = await verifying
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body.data.valid, JSON.stringify(res.body.data)).toBe(true)
    } finally {
      release()
      await holding
    }
    const alarms = await sql<Array<{ n: number }>>(
      (s) => s`SELECT count(*)::int AS n FROM events WHERE workspace_id = ${ws.id} AND type = 'chain.invalid'`,
    )
    expect(alarms[0]!.n).toBe(0)
    // And the next one sees everything.
    const again = await t.call("POST", "/api/v1/events/verify", { key: ws.key })
    expect(again.body.data).toMatchObject({ valid: true, checked: await t.chainLength(ws.id) })
  })
})

describe("POST /events/verify on demand (outside review, 2026-11-29)", () => {
  it("shares runs among concurrent requests of one workspace instead of rehashing the chain for each", async () => {
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name: `shared-${Math.random()}` } })
    const ws = created.body.data.workspace.id as string
    const key = created.body.data.apiKey.apiKey as string
    expect((await ingest([{ type: "share.test", data: {} }], { key })).status).toBe(201)
    const actor = systemActor(ws, "live", new Set(SCOPES))
    // Six at once (all asked before any run can finish): one runs, the others share the one run after it.
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => t.server.runtime.runPromise(EventService.use((s) => s.verify(actor, "api")))),
    )
    for (const a of answers) expect(a).toMatchObject({ valid: true, checked: await t.chainLength(ws) })
    const [runs] = await sql<Array<{ n: number }>>(
      (s) => s`SELECT count(*)::int AS n FROM chain_verifications WHERE workspace_id = ${ws} AND trigger = 'api'`,
    )
    expect(runs!.n).toBeLessThanOrEqual(2)
    // Over HTTP, one after another, each still gets its own run.
    for (let i = 0; i < 2; i++)
      expect((await t.call("POST", "/api/v1/events/verify", { key })).body.data.valid).toBe(true)
    const [after] = await sql<Array<{ n: number }>>(
      (s) => s`SELECT count(*)::int AS n FROM chain_verifications WHERE workspace_id = ${ws} AND trigger = 'api'`,
    )
    expect(after!.n).toBe(runs!.n + 2)
  })
})
