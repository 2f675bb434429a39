import { mintKey, SCOPES } from "@agentgov/domain"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type ApiResponse,
  type CredentialFixtures,
  credentialFixtures,
  expectError,
  ISO_MS,
  startTestServer,
  type TestServer,
  tamper,
  unique,
} from "./helpers.ts"

let t: TestServer
let creds: CredentialFixtures
/** A second workspace, created through the API, with its all-scope key. */
let other: { id: string; key: string }
let revokedKey: string
/** Agents of the bootstrap workspace used by the security cases. */
let target: string
let bound: string
/** An agent key bound to `bound`, with agents:read. */
let agentKey: string

const events = (workspaceId = t.workspaceId) =>
  t.query<{ type: string; data: any; agent_id: string | null }>(
    (sql) => sql`SELECT type, data, agent_id FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
  )
const eventCount = async (workspaceId = t.workspaceId) => (await events(workspaceId)).length

const register = async (spec: Record<string, unknown> = {}, key?: string) => {
  const res = await t.call("POST", "/api/v1/agents", { body: { name: unique("agent"), ...spec }, key })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data
}

beforeAll(async () => {
  t = await startTestServer()
  creds = await credentialFixtures(t)
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: "agents-other" } })
  expect(ws.status).toBe(201)
  other = { id: ws.body.data.workspace.id, key: ws.body.data.apiKey.apiKey }
  const revoked = await t.call("POST", "/api/v1/api-keys", {
    body: { name: "to revoke", type: "workspace", scopes: [...SCOPES] },
  })
  revokedKey = revoked.body.data.apiKey
  expect((await t.call("DELETE", `/api/v1/api-keys/${revoked.body.data.id}`)).status).toBe(200)
  target = (await register({ name: unique("target") })).id
  bound = (await register({ name: unique("bound") })).id
  agentKey = await t.createKey({ type: "agent", agentId: bound, scopes: ["agents:read"] })
})
afterAll(async () => t?.close())

describe("POST /agents", () => {
  it("registers an agent and returns it", async () => {
    const name = unique("create")
    const res = await t.call("POST", "/api/v1/agents", {
      body: { name, description: "books flights", labels: ["travel", "prod", "travel"], metadata: { team: "ops" } },
    })
    expect(res.status).toBe(201)
    expect(res.body.ok).toBe(true)
    const a = res.body.data
    expect(a).toEqual({
      id: expect.stringMatching(/^agt_[0-9a-z]{26}$/),
      workspaceId: t.workspaceId,
      name,
      description: "books flights",
      labels: ["travel", "prod"],
      metadata: { team: "ops" },
      status: "active",
      currentVersion: null,
      trustScore: 400,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
      deregisteredAt: null,
    })
    const got = await t.call("GET", `/api/v1/agents/${a.id}`)
    expect(got.status).toBe(200)
    expect(got.body.data).toEqual(a)
    const listed = await t.call("GET", `/api/v1/agents?namePrefix=${encodeURIComponent(name)}`)
    expect(listed.body.data).toEqual([a])
  })

  it("defaults description, labels and metadata", async () => {
    const a = await register()
    expect(a.description).toBeNull()
    expect(a.labels).toEqual([])
    expect(a.metadata).toEqual({})
  })

  it("records agent.registered with agentId, agentName and trustScore", async () => {
    const a = await register()
    const last = (await events()).at(-1)!
    expect(last.type).toBe("agent.registered")
    expect(last.agent_id).toBe(a.id)
    expect(last.data).toEqual({ agentId: a.id, agentName: a.name, trustScore: 400 })
  })

  it("refuses a duplicate name with 409 and records nothing", async () => {
    const a = await register()
    const before = await eventCount()
    const res = await t.call("POST", "/api/v1/agents", { body: { name: a.name } })
    expectError(res, 409, "CONFLICT", "name")
    expect(await eventCount()).toBe(before)
    const listed = await t.call("GET", `/api/v1/agents?namePrefix=${encodeURIComponent(a.name)}`)
    expect(listed.body.data).toHaveLength(1)
  })

  it("allows the same name in another workspace", async () => {
    const a = await register()
    const res = await t.call("POST", "/api/v1/agents", { body: { name: a.name }, key: other.key })
    expect(res.status).toBe(201)
    expect(res.body.data.workspaceId).toBe(other.id)
    expect(res.body.data.id).not.toBe(a.id)
  })

  it("answers malformed JSON with 400", async () => {
    const before = await eventCount()
    const res = await t.call("POST", "/api/v1/agents", { rawBody: '{"name": "x",' })
    expectError(res, 400, "BAD_REQUEST")
    expect(await eventCount()).toBe(before)
  })

  it.each([
    ["a missing name", {}, "name"],
    ["an empty name", { name: "" }, "name"],
    ["a name over 200 characters", { name: "n".repeat(201) }, "name"],
    ["a name that is not a string", { name: 42 }, "name"],
    ["an invalid second label", { labels: ["ok", "Not OK"] }, "labels[1]"],
    ["labels that are not an array", { labels: "ok" }, "labels"],
    ["more than 50 labels", { labels: Array.from({ length: 51 }, (_, i) => `l${i}`) }, "labels"],
    ["a description over 2000 characters", { description: "d".repeat(2001) }, "description"],
    ["metadata that is not an object", { metadata: [1, 2] }, "metadata"],
    ["metadata over 16 KiB", { metadata: { blob: "x".repeat(17 * 1024) } }, "metadata"],
    ["an unknown field", { colour: "blue" }, "colour"],
  ])("refuses %s with 422 naming the field", async (_, patch, field) => {
    const before = await eventCount()
    const body = { name: unique("invalid"), ...patch }
    if (!("name" in patch) && field === "name") delete (body as Record<string, unknown>).name
    const res = await t.call("POST", "/api/v1/agents", { body })
    expectError(res, 422, "VALIDATION_ERROR", field)
    expect(typeof res.body.error.details.issue).toBe("string")
    expect(await eventCount()).toBe(before)
  })

  // A name shows on public badges, in chat messages and on terminals: what would forge a line or reorder the text
  // around it is refused, and so is a blank name.
  it.each([
    ["an escape sequence", "bot\u001b[2J"],
    ["a newline", "bot\nforged line"],
    ["a C1 control", "bot\u0085"],
    ["a right-to-left override", "bot\u202egpj.exe"],
    ["a line separator", "bot\u2028"],
    ["only spaces", "   "],
    ["a leading space", " bot"],
    ["a trailing no-break space", "bot\u00a0"],
  ])("refuses a name with %s with 422 and records nothing", async (_, name) => {
    const before = await eventCount()
    const res = await t.call("POST", "/api/v1/agents", { body: { name } })
    expectError(res, 422, "VALIDATION_ERROR", "name")
    expect(await eventCount()).toBe(before)
    const a = await register()
    expectError(await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { name } }), 422, "VALIDATION_ERROR", "name")
    expect((await t.call("GET", `/api/v1/agents/${a.id}`)).body.data.name).toBe(a.name)
  })

  it("stores the name in NFC: the same name sent decomposed is a duplicate", async () => {
    const base = unique("cafe")
    const a = await register({ name: `${base}-caf\u00e9` })
    const before = await eventCount()
    expectError(
      await t.call("POST", "/api/v1/agents", { body: { name: `${base}-cafe\u0301` } }),
      409,
      "CONFLICT",
      "name",
    )
    const decomposed = await register({ name: `${base}-nai\u0308ve` })
    expect(decomposed.name).toBe(`${base}-na\u00efve`)
    expect(await eventCount()).toBe(before + 1)
    const listed = await t.call("GET", `/api/v1/agents?namePrefix=${encodeURIComponent(`${base}-cafe\u0301`)}`)
    expect(listed.body.data.map((x: any) => x.id)).toEqual([a.id])
  })

  it("refuses a name that differs from a registered agent's only in letter case with 409", async () => {
    const a = await register({ name: unique("PayBot") })
    const before = await eventCount()
    const taken = await t.call("POST", "/api/v1/agents", { body: { name: a.name.toLowerCase() } })
    expectError(taken, 409, "CONFLICT", "name")
    // The message names the registered agent's name, as it is spelt.
    expect(taken.body.error.message).toContain(`"${a.name}"`)
    const b = await register()
    expectError(
      await t.call("PATCH", `/api/v1/agents/${b.id}`, { body: { name: a.name.toUpperCase() } }),
      409,
      "CONFLICT",
      "name",
    )
    expect(await eventCount()).toBe(before + 1)
    // An agent may change the case of its own name; a deregistered agent's name is free.
    const own = await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { name: a.name.toUpperCase() } })
    expect(own.status, JSON.stringify(own.body)).toBe(200)
    expect((await t.call("DELETE", `/api/v1/agents/${a.id}`)).status).toBe(200)
    expect((await register({ name: a.name.toLowerCase() })).name).toBe(a.name.toLowerCase())
  })

  it("lets only one of concurrent registrations of names differing in case through", async () => {
    const name = unique("Racer")
    const variants = [name, name.toLowerCase(), name.toUpperCase(), name.replace("Racer", "rACER")]
    const results = await Promise.all(variants.map((n) => t.call("POST", "/api/v1/agents", { body: { name: n } })))
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409])
  })

  it("refuses a body that is not a JSON object with 422", async () => {
    expectError(await t.call("POST", "/api/v1/agents", { rawBody: '["a"]' }), 422, "VALIDATION_ERROR", "body")
    expectError(await t.call("POST", "/api/v1/agents", { rawBody: "null" }), 422, "VALIDATION_ERROR", "body")
  })

  it("refuses an agent key: agent keys cannot register agents", async () => {
    const res = await t.call("POST", "/api/v1/agents", { body: { name: unique("by-agent") }, key: agentKey })
    expect(res.status).toBe(403)
    expect(res.body.error.code).toBe("FORBIDDEN")
  })
})

describe("GET /agents", () => {
  it("lists newest first, hides deregistered agents unless asked, filters by label and name prefix", async () => {
    const prefix = unique("filter")
    const a = await register({ name: `${prefix}-a`, labels: ["blue"] })
    const b = await register({ name: `${prefix}-b`, labels: ["green"] })
    const c = await register({ name: `${prefix}-c`, labels: ["blue", "green"] })
    expect((await t.call("DELETE", `/api/v1/agents/${b.id}`)).status).toBe(200)
    const q = `namePrefix=${encodeURIComponent(prefix)}`
    const all = await t.call("GET", `/api/v1/agents?${q}`)
    expect(all.status).toBe(200)
    expect(all.body.data.map((x: any) => x.id)).toEqual([c.id, a.id])
    expect(all.body.meta).toEqual({ cursor: null, hasMore: false })
    const blue = await t.call("GET", `/api/v1/agents?${q}&label=blue`)
    expect(blue.body.data.map((x: any) => x.id)).toEqual([c.id, a.id])
    const green = await t.call("GET", `/api/v1/agents?${q}&label=green`)
    expect(green.body.data.map((x: any) => x.id)).toEqual([c.id])
    const gone = await t.call("GET", `/api/v1/agents?${q}&status=deregistered`)
    expect(gone.body.data.map((x: any) => x.id)).toEqual([b.id])
    expect(gone.body.data[0].status).toBe("deregistered")
    const active = await t.call("GET", `/api/v1/agents?${q}&status=active`)
    expect(active.body.data.map((x: any) => x.id)).toEqual([c.id, a.id])
  })

  it("pages with a cursor: no duplicates, no gaps, newest first, stable while new agents arrive", async () => {
    const prefix = unique("page")
    const created: Array<string> = []
    for (let i = 0; i < 7; i++) created.push((await register({ name: `${prefix}-${i}` })).id)
    const expected = [...created].reverse()
    const seen: Array<string> = []
    const metas: Array<any> = []
    let cursor: string | null = null
    let pages = 0
    do {
      const path: string = `/api/v1/agents?namePrefix=${encodeURIComponent(prefix)}&limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`
      const res = await t.call("GET", path)
      expect(res.status).toBe(200)
      seen.push(...res.body.data.map((a: any) => a.id))
      metas.push(res.body.meta)
      cursor = res.body.meta.cursor
      if (pages === 0) await register({ name: `${prefix}-late` }) // newer than every page: must not appear
      pages++
    } while (cursor !== null && pages < 10)
    expect(pages).toBe(3)
    expect(seen).toEqual(expected)
    expect(new Set(seen).size).toBe(7)
    expect(metas.map((m) => m.hasMore)).toEqual([true, true, false])
    expect(metas[0].cursor).toEqual(expect.any(String))
    expect(metas[2].cursor).toBeNull()
  })

  it("returns 25 by default and accepts limit=100", async () => {
    const prefix = unique("deflimit")
    for (let i = 0; i < 26; i++) await register({ name: `${prefix}-${i}` })
    const res = await t.call("GET", `/api/v1/agents?namePrefix=${encodeURIComponent(prefix)}`)
    expect(res.body.data).toHaveLength(25)
    expect(res.body.meta.hasMore).toBe(true)
    const max = await t.call("GET", `/api/v1/agents?namePrefix=${encodeURIComponent(prefix)}&limit=100`)
    expect(max.status).toBe(200)
    expect(max.body.data).toHaveLength(26)
    expect(max.body.meta).toEqual({ cursor: null, hasMore: false })
  })

  it.each([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=abc", "limit"],
    ["limit=2.5", "limit"],
    ["limit=-1", "limit"],
    ["limit=1&limit=2", "limit"],
    ["colour=blue", "colour"],
    ["cursor=not-a-cursor", "cursor"],
    [`cursor=${Buffer.from("v1:").toString("base64url")}`, "cursor"],
    ["status=sleeping", "status"],
    ["label=Not%20A%20Label", "label"],
  ])("refuses ?%s with 400", async (query, field) => {
    expectError(await t.call("GET", `/api/v1/agents?${query}`), 400, "BAD_REQUEST", field)
  })

  it("shows an agent key its own agent only", async () => {
    const res = await t.call("GET", "/api/v1/agents?limit=100", { key: agentKey })
    expect(res.status).toBe(200)
    expect(res.body.data.map((a: any) => a.id)).toEqual([bound])
  })

  it("shows a workspace none of another workspace's agents", async () => {
    const mine = await register()
    const res = await t.call("GET", "/api/v1/agents?limit=100", { key: other.key })
    expect(res.status).toBe(200)
    expect(res.body.data.every((a: any) => a.workspaceId === other.id)).toBe(true)
    expect(res.body.data.map((a: any) => a.id)).not.toContain(mine.id)
  })
})

describe("GET /agents/:id", () => {
  it("answers 404 AGENT_NOT_FOUND for an unknown id", async () => {
    expectError(await t.call("GET", "/api/v1/agents/agt_00000000000000000000000000"), 404, "AGENT_NOT_FOUND")
    expectError(await t.call("GET", "/api/v1/agents/nonsense"), 404, "AGENT_NOT_FOUND")
  })

  it("refuses query parameters it does not know with 400", async () => {
    expectError(await t.call("GET", `/api/v1/agents/${target}?limit=1`), 400, "BAD_REQUEST", "limit")
  })

  it("lets an agent key read its own agent", async () => {
    const res = await t.call("GET", `/api/v1/agents/${bound}`, { key: agentKey })
    expect(res.status).toBe(200)
    expect(res.body.data.id).toBe(bound)
  })
})

describe("PATCH /agents/:id", () => {
  it("updates the given fields, records agent.updated naming them, and GET reflects it", async () => {
    const a = await register({ description: "old", labels: ["one"], metadata: { v: 1 } })
    const name = unique("renamed")
    const res = await t.call("PATCH", `/api/v1/agents/${a.id}`, {
      body: { name, description: null, labels: ["two", "two", "three"] },
    })
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({
      id: a.id,
      name,
      description: null,
      labels: ["two", "three"],
      metadata: { v: 1 },
      createdAt: a.createdAt,
    })
    expect(Date.parse(res.body.data.updatedAt)).toBeGreaterThanOrEqual(Date.parse(a.updatedAt))
    const got = await t.call("GET", `/api/v1/agents/${a.id}`)
    expect(got.body.data).toEqual(res.body.data)
    const last = (await events()).at(-1)!
    expect(last.type).toBe("agent.updated")
    expect(last.data).toEqual({ agentId: a.id, agentName: name, changes: ["name", "description", "labels"] })
  })

  it("replaces metadata", async () => {
    const a = await register({ metadata: { a: 1 } })
    const res = await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { metadata: { b: [1, "x"] } } })
    expect(res.status).toBe(200)
    expect((await t.call("GET", `/api/v1/agents/${a.id}`)).body.data.metadata).toEqual({ b: [1, "x"] })
  })

  it("changes nothing and records nothing for a patch equal to the agent", async () => {
    const a = await register({ labels: ["same"] })
    const before = await eventCount()
    const res = await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { name: a.name, labels: ["same"] } })
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual(a)
    expect(await eventCount()).toBe(before)
  })

  it("refuses a name another agent has with 409 and records nothing", async () => {
    const a = await register()
    const b = await register()
    const before = await eventCount()
    expectError(await t.call("PATCH", `/api/v1/agents/${b.id}`, { body: { name: a.name } }), 409, "CONFLICT", "name")
    expect(await eventCount()).toBe(before)
    expect((await t.call("GET", `/api/v1/agents/${b.id}`)).body.data.name).toBe(b.name)
  })

  it("answers 400 to malformed JSON and 422 to invalid fields", async () => {
    const a = await register()
    expectError(await t.call("PATCH", `/api/v1/agents/${a.id}`, { rawBody: "{labels:[]}" }), 400, "BAD_REQUEST")
    expectError(
      await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { labels: ["fine", "ok", "NO"] } }),
      422,
      "VALIDATION_ERROR",
      "labels[2]",
    )
    expectError(
      await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { name: "" } }),
      422,
      "VALIDATION_ERROR",
      "name",
    )
    expectError(
      await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { status: "suspended" } }),
      422,
      "VALIDATION_ERROR",
      "status",
    )
    expectError(
      await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { metadata: "x" } }),
      422,
      "VALIDATION_ERROR",
      "metadata",
    )
    expect((await t.call("GET", `/api/v1/agents/${a.id}`)).body.data).toEqual(a)
  })

  it("answers 404 AGENT_NOT_FOUND for an unknown id", async () => {
    expectError(
      await t.call("PATCH", "/api/v1/agents/agt_00000000000000000000000000", { body: { description: "x" } }),
      404,
      "AGENT_NOT_FOUND",
    )
  })
})

describe("DELETE /agents/:id", () => {
  it("deregisters: the agent stays readable, its keys are revoked at once, its name is freed", async () => {
    const a = await register()
    const key = await t.createKey({ type: "agent", agentId: a.id, scopes: ["agents:read"] })
    expect((await t.call("GET", `/api/v1/agents/${a.id}`, { key })).status).toBe(200)
    const res = await t.call("DELETE", `/api/v1/agents/${a.id}`)
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({
      id: a.id,
      status: "deregistered",
      deregisteredAt: expect.stringMatching(ISO_MS),
    })
    const got = await t.call("GET", `/api/v1/agents/${a.id}`)
    expect(got.status).toBe(200)
    expect(got.body.data.status).toBe("deregistered")
    expectError(await t.call("GET", `/api/v1/agents/${a.id}`, { key }), 401, "UNAUTHORIZED")
    const keys = await t.call("GET", `/api/v1/api-keys?agentId=${a.id}`)
    expect(keys.body.data).toHaveLength(1)
    expect(keys.body.data[0]).toMatchObject({ status: "revoked", revokedReason: "agent_deregistered" })
    const listed = await t.call("GET", `/api/v1/agents?namePrefix=${encodeURIComponent(a.name)}`)
    expect(listed.body.data).toEqual([])
    const again = await register({ name: a.name })
    expect(again.id).not.toBe(a.id)
  })

  it("records agent.deregistered and apikey.revoked for each revoked key", async () => {
    const a = await register()
    await t.createKey({ type: "agent", agentId: a.id, scopes: ["agents:read"] })
    await t.createKey({ type: "agent", agentId: a.id, scopes: ["events:write"] })
    const before = await eventCount()
    expect((await t.call("DELETE", `/api/v1/agents/${a.id}`)).status).toBe(200)
    const added = (await events()).slice(before)
    expect(added.map((e) => e.type)).toEqual(["agent.deregistered", "apikey.revoked", "apikey.revoked"])
    expect(added[0]!.data).toEqual({ agentId: a.id, agentName: a.name })
    expect(added.slice(1).every((e) => e.data.reason === "agent_deregistered")).toBe(true)
  })

  it("is idempotent: deregistering twice answers 200 and records nothing more", async () => {
    const a = await register()
    const first = await t.call("DELETE", `/api/v1/agents/${a.id}`)
    const before = await eventCount()
    const second = await t.call("DELETE", `/api/v1/agents/${a.id}`)
    expect(second.status).toBe(200)
    expect(second.body.data).toEqual(first.body.data)
    expect(await eventCount()).toBe(before)
  })

  it("refuses to change a deregistered agent with 409 AGENT_DEREGISTERED", async () => {
    const a = await register()
    await t.call("DELETE", `/api/v1/agents/${a.id}`)
    const before = await eventCount()
    expectError(
      await t.call("PATCH", `/api/v1/agents/${a.id}`, { body: { description: "back?" } }),
      409,
      "AGENT_DEREGISTERED",
    )
    expectError(
      await t.call("POST", `/api/v1/agents/${a.id}/versions`, { body: { version: "9.9.9" } }),
      409,
      "AGENT_DEREGISTERED",
    )
    expect(await eventCount()).toBe(before)
    expect((await t.call("GET", `/api/v1/agents/${a.id}/versions`)).status).toBe(200)
  })

  it("answers 404 AGENT_NOT_FOUND for an unknown id", async () => {
    expectError(await t.call("DELETE", "/api/v1/agents/agt_00000000000000000000000000"), 404, "AGENT_NOT_FOUND")
  })
})

describe("agent versions", () => {
  it("creates a version that becomes the current one, and records it", async () => {
    const a = await register()
    const res = await t.call("POST", `/api/v1/agents/${a.id}/versions`, {
      body: { version: "1.0.0", description: "first", metadata: { model: "m1" } },
    })
    expect(res.status).toBe(201)
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^ver_/),
      agentId: a.id,
      version: "1.0.0",
      description: "first",
      metadata: { model: "m1" },
      createdAt: expect.stringMatching(ISO_MS),
    })
    expect((await t.call("GET", `/api/v1/agents/${a.id}`)).body.data.currentVersion).toBe("1.0.0")
    const last = (await events()).at(-1)!
    expect(last.type).toBe("agent.updated")
    expect(last.data).toMatchObject({
      agentId: a.id,
      changes: ["currentVersion"],
      versionId: res.body.data.id,
      version: "1.0.0",
      previousVersion: null,
    })
    const second = await t.call("POST", `/api/v1/agents/${a.id}/versions`, { body: { version: "1.1.0" } })
    expect(second.status).toBe(201)
    expect(second.body.data.description).toBeNull()
    expect(second.body.data.metadata).toEqual({})
    expect((await t.call("GET", `/api/v1/agents/${a.id}`)).body.data.currentVersion).toBe("1.1.0")
    expect((await events()).at(-1)!.data.previousVersion).toBe("1.0.0")
  })

  it("refuses a version string the agent already has with 409 and records nothing", async () => {
    const a = await register()
    await t.call("POST", `/api/v1/agents/${a.id}/versions`, { body: { version: "2.0.0" } })
    await t.call("POST", `/api/v1/agents/${a.id}/versions`, { body: { version: "2.1.0" } })
    const before = await eventCount()
    expectError(
      await t.call("POST", `/api/v1/agents/${a.id}/versions`, { body: { version: "2.0.0" } }),
      409,
      "CONFLICT",
      "version",
    )
    expect(await eventCount()).toBe(before)
    expect((await t.call("GET", `/api/v1/agents/${a.id}`)).body.data.currentVersion).toBe("2.1.0")
    // Another agent may use the same version string.
    const b = await register()
    expect((await t.call("POST", `/api/v1/agents/${b.id}/versions`, { body: { version: "2.0.0" } })).status).toBe(201)
  })

  it("answers 400 to malformed JSON and 422 naming the field", async () => {
    const a = await register()
    const path = `/api/v1/agents/${a.id}/versions`
    expectError(await t.call("POST", path, { rawBody: '{"version":' }), 400, "BAD_REQUEST")
    expectError(await t.call("POST", path, { body: {} }), 422, "VALIDATION_ERROR", "version")
    expectError(await t.call("POST", path, { body: { version: "" } }), 422, "VALIDATION_ERROR", "version")
    expectError(await t.call("POST", path, { body: { version: "v".repeat(101) } }), 422, "VALIDATION_ERROR", "version")
    expectError(await t.call("POST", path, { body: { version: 1 } }), 422, "VALIDATION_ERROR", "version")
    expectError(
      await t.call("POST", path, { body: { version: "1", metadata: { big: "x".repeat(17 * 1024) } } }),
      422,
      "VALIDATION_ERROR",
      "metadata",
    )
    expectError(await t.call("POST", path, { body: { version: "1", tag: "x" } }), 422, "VALIDATION_ERROR", "tag")
    // A version is read as one line, in agent.updated and in chat messages: not a forged second one, not padded.
    for (const version of ["1.0\nreleased by: admin", "1.0\u001b[31m", "2.0\u202e", " 1.0", "1.0 "])
      expectError(await t.call("POST", path, { body: { version } }), 422, "VALIDATION_ERROR", "version")
    expect((await t.call("GET", path)).body.data).toEqual([])
  })

  it("answers 404 AGENT_NOT_FOUND for an unknown agent", async () => {
    const id = "agt_00000000000000000000000000"
    expectError(
      await t.call("POST", `/api/v1/agents/${id}/versions`, { body: { version: "1" } }),
      404,
      "AGENT_NOT_FOUND",
    )
    expectError(await t.call("GET", `/api/v1/agents/${id}/versions`), 404, "AGENT_NOT_FOUND")
  })

  it("lists versions newest first with cursor pagination", async () => {
    const a = await register()
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const res = await t.call("POST", `/api/v1/agents/${a.id}/versions`, { body: { version: `0.${i}.0` } })
      ids.push(res.body.data.id)
    }
    const seen: Array<string> = []
    const versions: Array<string> = []
    const hasMore: Array<boolean> = []
    let cursor: string | null = null
    do {
      const res: ApiResponse = await t.call(
        "GET",
        `/api/v1/agents/${a.id}/versions?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      )
      expect(res.status).toBe(200)
      seen.push(...res.body.data.map((v: any) => v.id))
      versions.push(...res.body.data.map((v: any) => v.version))
      hasMore.push(res.body.meta.hasMore)
      cursor = res.body.meta.cursor
    } while (cursor !== null && hasMore.length < 10)
    expect(seen).toEqual([...ids].reverse())
    expect(versions).toEqual(["0.4.0", "0.3.0", "0.2.0", "0.1.0", "0.0.0"])
    expect(hasMore).toEqual([true, true, false])
  })

  it.each([["limit=0"], ["limit=101"], ["limit=abc"], ["cursor=%%%"], ["version=1"]])(
    "refuses ?%s on the version list with 400",
    async (query) => {
      expectError(await t.call("GET", `/api/v1/agents/${target}/versions?${query}`), 400, "BAD_REQUEST")
    },
  )

  it("lets an agent key list its own agent's versions", async () => {
    const res = await t.call("GET", `/api/v1/agents/${bound}/versions`, { key: agentKey })
    expect(res.status).toBe(200)
    expect(res.body.meta).toEqual({ cursor: null, hasMore: false })
  })
})

interface Endpoint {
  readonly method: string
  readonly path: (id: string) => string
  readonly body?: () => unknown
  readonly scope: string
  readonly byId: boolean
}

const endpoints: ReadonlyArray<Endpoint> = [
  {
    method: "POST",
    path: () => "/api/v1/agents",
    body: () => ({ name: unique("sec") }),
    scope: "agents:write",
    byId: false,
  },
  { method: "GET", path: () => "/api/v1/agents", scope: "agents:read", byId: false },
  { method: "GET", path: (id) => `/api/v1/agents/${id}`, scope: "agents:read", byId: true },
  {
    method: "PATCH",
    path: (id) => `/api/v1/agents/${id}`,
    body: () => ({ description: unique("changed") }),
    scope: "agents:write",
    byId: true,
  },
  { method: "DELETE", path: (id) => `/api/v1/agents/${id}`, scope: "agents:write", byId: true },
  {
    method: "POST",
    path: (id) => `/api/v1/agents/${id}/versions`,
    body: () => ({ version: unique("v") }),
    scope: "agents:write",
    byId: true,
  },
  { method: "GET", path: (id) => `/api/v1/agents/${id}/versions`, scope: "agents:read", byId: true },
]

describe.each(endpoints.map((e) => [`${e.method} ${e.path(":id").replace("/api/v1", "")}`, e] as const))(
  "%s security",
  (_, ep) => {
    const send = (key: string | null, id = target) => t.call(ep.method, ep.path(id), { body: ep.body?.(), key })

    /** The request is refused and neither the agent nor the audit trail changed. */
    const refused = async (key: string | null, status: number, code: string, id = target) => {
      const before = await eventCount()
      const agentBefore = (await t.call("GET", `/api/v1/agents/${target}`)).body.data
      const res = await send(key, id)
      expectError(res, status, code)
      expect(res.headers.get("x-request-id")).toBeTruthy()
      expect(await eventCount()).toBe(before)
      expect((await t.call("GET", `/api/v1/agents/${target}`)).body.data).toEqual(agentBefore)
      return res
    }

    it("refuses a request without a credential with 401", async () => {
      const res = await refused(null, 401, "UNAUTHORIZED")
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/)
    })
    it("refuses a garbage credential with 401", async () => {
      await refused("garbage", 401, "UNAUTHORIZED")
      await refused("svc_ws_live_short", 401, "UNAUTHORIZED")
    })
    it("refuses a non-Bearer Authorization header with 401", async () => {
      const res = await t.call(ep.method, ep.path(target), {
        body: ep.body?.(),
        headers: { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` },
      })
      expectError(res, 401, "UNAUTHORIZED")
    })
    it("refuses a well-formed key with a bad checksum with 401", async () => {
      await refused(tamper(t.key), 401, "UNAUTHORIZED")
    })
    it("refuses a well-formed, correctly checksummed key it never issued with 401", async () => {
      await refused(mintKey("workspace", "live").key, 401, "UNAUTHORIZED")
    })
    it("refuses a revoked key with 401", async () => {
      await refused(revokedKey, 401, "UNAUTHORIZED")
    })
    it("refuses an expired key with 401", async () => {
      await refused(await creds.expiredKey(), 401, "UNAUTHORIZED")
    })
    it(`refuses a key without ${ep.scope} with 403 naming the scope`, async () => {
      const res = await refused(await creds.keyWithout(ep.scope), 403, "FORBIDDEN")
      expect(res.body.error.details).toEqual({ field: "scope", issue: `requires ${ep.scope}` })
      expect(res.body.error.message).toContain(ep.scope)
    })
    if (ep.byId) {
      it("answers 404 AGENT_NOT_FOUND for another workspace's agent", async () => {
        await refused(other.key, 404, "AGENT_NOT_FOUND")
      })
      it("refuses an agent key reaching for another agent with 403", async () => {
        await refused(agentKey, 403, "FORBIDDEN")
      })
    }
  },
)

describe("security fixtures", () => {
  it("left the target agent untouched and the agent key working", async () => {
    const res = await t.call("GET", `/api/v1/agents/${target}`)
    expect(res.body.data.status).toBe("active")
    expect(res.body.data.currentVersion).toBeNull()
    expect((await t.call("GET", `/api/v1/agents/${bound}`, { key: agentKey })).status).toBe(200)
    expect((await t.call("GET", `/api/v1/agents/${target}`, { key: agentKey })).body.error.details).toEqual({
      field: "agentId",
      issue: "outside this credential's agent",
    })
  })
})
