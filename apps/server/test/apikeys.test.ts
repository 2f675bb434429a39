import { createHash } from "node:crypto"
import { AGENT_KEY_SCOPES, mintKey, SCOPES } from "@agentgov/domain"
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
  withAuthorizations,
} from "./helpers.ts"

let t: TestServer
let creds: CredentialFixtures
let other: { id: string; key: string }
let revokedKey: string
/** A key of the bootstrap workspace the security cases aim at; it must stay untouched. */
let targetKeyId: string
/** An agent and an agent key bound to it. */
let agentId: string
let agentKey: string

const WS_LIVE = /^svc_ws_live_[0-9A-Za-z]{38,}$/
const AG_LIVE = /^svc_ag_sk_live_[0-9A-Za-z]{38,}$/
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex")

const events = (workspaceId = t.workspaceId) =>
  t.query<{ type: string; data: any }>(
    (sql) => sql`SELECT type, data FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
  )
const eventCount = async (workspaceId = t.workspaceId) => (await events(workspaceId)).length

const createKey = async (spec: Record<string, unknown>, key?: string) => {
  const res = await t.call("POST", "/api/v1/api-keys", { body: { name: unique("key"), ...spec }, key })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data
}
const registerAgent = async (key?: string) => {
  const res = await t.call("POST", "/api/v1/agents", { body: { name: unique("agent") }, key })
  expect(res.status).toBe(201)
  return res.body.data.id as string
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** Whether `key` authenticates (a cheap read that every key here may make). */
const works = async (key: string) => (await t.call("GET", "/api/v1/agents?limit=1", { key })).status === 200

beforeAll(async () => {
  t = await startTestServer()
  creds = await credentialFixtures(t)
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: "apikeys-other" } })
  other = { id: ws.body.data.workspace.id, key: ws.body.data.apiKey.apiKey }
  const revoked = await createKey({ type: "workspace", scopes: [...SCOPES] })
  revokedKey = revoked.apiKey
  expect((await t.call("DELETE", `/api/v1/api-keys/${revoked.id}`)).status).toBe(200)
  targetKeyId = (await createKey({ type: "workspace", scopes: ["agents:read"] })).id
  agentId = await registerAgent()
  agentKey = (await createKey({ type: "agent", agentId, scopes: [...AGENT_KEY_SCOPES] })).apiKey
})
afterAll(async () => t?.close())

describe("POST /api-keys", () => {
  it("creates a workspace key, returns its full value once, and the key works", async () => {
    const name = unique("ws-key")
    const res = await t.call("POST", "/api/v1/api-keys", {
      body: { name, type: "workspace", scopes: ["agents:read", "apikeys:read"] },
    })
    expect(res.status).toBe(201)
    const k = res.body.data
    expect(k).toEqual({
      id: expect.stringMatching(/^key_/),
      name,
      type: "workspace",
      agentId: null,
      environment: "live",
      scopes: ["agents:read", "apikeys:read"],
      prefix: expect.any(String),
      status: "active",
      expiresAt: null,
      revokedAt: null,
      revokedReason: null,
      rotatedTo: null,
      lastUsedAt: null,
      createdAt: expect.stringMatching(ISO_MS),
      apiKey: expect.stringMatching(WS_LIVE),
    })
    expect(k.prefix).toBe(k.apiKey.slice("svc_ws_live_".length, "svc_ws_live_".length + 6))
    expect(await works(k.apiKey)).toBe(true)
    const got = await t.call("GET", `/api/v1/api-keys/${k.id}`)
    expect(got.status).toBe(200)
    const { apiKey: _secret, ...record } = k
    expect(got.body.data).toEqual({ ...record, lastUsedAt: expect.stringMatching(ISO_MS) })
  })

  it("records apikey.created without the key value", async () => {
    const k = await createKey({ type: "workspace", scopes: ["events:read"] })
    const all = await events()
    const last = all.at(-1)!
    expect(last.type).toBe("apikey.created")
    expect(last.data).toEqual({
      keyId: k.id,
      name: k.name,
      type: "workspace",
      prefix: k.prefix,
      scopes: ["events:read"],
    })
    const text = JSON.stringify(all)
    expect(text).not.toContain(k.apiKey)
    expect(text).not.toContain(sha256(k.apiKey))
  })

  it("creates an agent key bound to its agent", async () => {
    const id = await registerAgent()
    const k = await createKey({ type: "agent", agentId: id, scopes: ["agents:read", "guard:evaluate"] })
    expect(k).toMatchObject({ type: "agent", agentId: id, environment: "live", apiKey: expect.stringMatching(AG_LIVE) })
    expect(k.prefix).toBe(k.apiKey.slice("svc_ag_sk_live_".length, "svc_ag_sk_live_".length + 6))
    const own = await t.call("GET", `/api/v1/agents/${id}`, { key: k.apiKey })
    expect(own.status).toBe(200)
  })

  it("mints _test_ keys in a test workspace", async () => {
    const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("sandbox"), environment: "test" } })
    expect(ws.status).toBe(201)
    const wsKey: string = ws.body.data.apiKey.apiKey
    expect(wsKey).toMatch(/^svc_ws_test_[0-9A-Za-z]{38,}$/)
    expect(ws.body.data.apiKey.environment).toBe("test")
    const k = await createKey({ type: "workspace", scopes: ["agents:read"] }, wsKey)
    expect(k.apiKey).toMatch(/^svc_ws_test_[0-9A-Za-z]{38,}$/)
    expect(k.environment).toBe("test")
    const id = await registerAgent(wsKey)
    const ak = await createKey({ type: "agent", agentId: id, scopes: ["agents:read"] }, wsKey)
    expect(ak.apiKey).toMatch(/^svc_ag_sk_test_[0-9A-Za-z]{38,}$/)
    expect(ak.environment).toBe("test")
    expect((await t.call("GET", `/api/v1/agents/${id}`, { key: ak.apiKey })).status).toBe(200)
  })

  it("mints a different key every time", async () => {
    const a = await createKey({ type: "workspace", scopes: ["agents:read"] })
    const b = await createKey({ type: "workspace", scopes: ["agents:read"] })
    expect(a.apiKey).not.toBe(b.apiKey)
    expect(a.id).not.toBe(b.id)
  })

  it("stores policies:evaluate as guard:evaluate and drops duplicate scopes", async () => {
    const k = await createKey({
      type: "workspace",
      scopes: ["policies:evaluate", "agents:read", "guard:evaluate", "agents:read"],
    })
    expect(k.scopes).toEqual(["guard:evaluate", "agents:read"])
  })

  it("keeps expiresAt, in UTC with milliseconds", async () => {
    const at = new Date(Date.now() + 3600_000)
    const k = await createKey({ type: "workspace", scopes: ["agents:read"], expiresAt: at.toISOString() })
    expect(k.expiresAt).toBe(at.toISOString())
    expect(await works(k.apiKey)).toBe(true)
  })

  it("answers malformed JSON with 400", async () => {
    expectError(await t.call("POST", "/api/v1/api-keys", { rawBody: '{"name":"x","type":' }), 400, "BAD_REQUEST")
  })

  it.each([
    ["a missing name", { name: undefined }, "name"],
    ["an empty name", { name: "" }, "name"],
    ["an unknown type", { type: "root" }, "type"],
    ["a missing type", { type: undefined }, "type"],
    ["no scopes", { scopes: [] }, "scopes"],
    ["scopes that are not an array", { scopes: "agents:read" }, "scopes"],
    ["more than 50 scopes", { scopes: Array.from({ length: 51 }, () => "agents:read") }, "scopes"],
    ["an unknown second scope", { scopes: ["agents:read", "agents:fly"] }, "scopes[1]"],
    ["a scope that is not a string", { scopes: ["agents:read", 7] }, "scopes[1]"],
    ["an agentId on a workspace key", { agentId: "agt_x" }, "agentId"],
    ["an expiresAt in the past", { expiresAt: "2020-01-01T00:00:00.000Z" }, "expiresAt"],
    ["an expiresAt that is not a timestamp", { expiresAt: "next tuesday" }, "expiresAt"],
    ["an expiresAt on a day that does not exist", { expiresAt: "2030-02-30T00:00:00.000Z" }, "expiresAt"],
    ["an expiresAt beyond what the store can keep", { expiresAt: "+275760-09-13T00:00:00.000Z" }, "expiresAt"],
    ["an unknown field", { owner: "me" }, "owner"],
  ])("refuses %s with 422 naming the field, and records nothing", async (_, patch, field) => {
    const before = await eventCount()
    const body: Record<string, unknown> = { name: unique("bad"), type: "workspace", scopes: ["agents:read"], ...patch }
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k]
    expectError(await t.call("POST", "/api/v1/api-keys", { body }), 422, "VALIDATION_ERROR", field)
    expect(await eventCount()).toBe(before)
  })

  it("refuses an agent key without agentId with 422", async () => {
    expectError(
      await t.call("POST", "/api/v1/api-keys", { body: { name: "a", type: "agent", scopes: ["agents:read"] } }),
      422,
      "VALIDATION_ERROR",
      "agentId",
    )
  })

  it.each(["agents:write", "apikeys:read", "workspaces:admin", "policies:write", "webhooks:write"])(
    "refuses the workspace-only scope %s on an agent key with 422 naming scopes[i]",
    async (scope) => {
      const before = await eventCount()
      const res = await t.call("POST", "/api/v1/api-keys", {
        body: { name: "agent key", type: "agent", agentId, scopes: ["agents:read", "events:write", scope] },
      })
      expectError(res, 422, "VALIDATION_ERROR", "scopes[2]")
      expect(await eventCount()).toBe(before)
    },
  )

  it("answers 404 AGENT_NOT_FOUND for an agent key of an unknown or foreign agent, 409 AGENT_DEREGISTERED for a deregistered one", async () => {
    const body = (id: string) => ({ body: { name: "k", type: "agent", agentId: id, scopes: ["agents:read"] } })
    expectError(
      await t.call("POST", "/api/v1/api-keys", body("agt_00000000000000000000000000")),
      404,
      "AGENT_NOT_FOUND",
    )
    const gone = await registerAgent()
    await t.call("DELETE", `/api/v1/agents/${gone}`)
    const before = await eventCount()
    expectError(await t.call("POST", "/api/v1/api-keys", body(gone)), 409, "AGENT_DEREGISTERED")
    expect(await eventCount()).toBe(before)
    const foreign = await registerAgent(other.key)
    expectError(await t.call("POST", "/api/v1/api-keys", body(foreign)), 404, "AGENT_NOT_FOUND")
  })

  it("leaves no live key of an agent deregistered while the key was created or rotated (workspaces review)", async () => {
    // Created beside DELETE /agents/:id, a key read the agent as registered and was inserted after the deregistration
    // revoked the agent's keys: 32 of 40 concurrent tries left a working key for a deregistered agent.
    const live: Array<string> = []
    for (let i = 0; i < 12; i++) {
      const agentId = await registerAgent()
      const rotatingId =
        i % 2 === 1
          ? (
              await t.call("POST", "/api/v1/api-keys", {
                body: { name: "to rotate", type: "agent", agentId, scopes: ["agents:read"] },
              })
            ).body.data.id
          : undefined
      const [made] = await Promise.all([
        rotatingId === undefined
          ? t.call("POST", "/api/v1/api-keys", {
              body: { name: "racing", type: "agent", agentId, scopes: ["agents:read"] },
            })
          : t.call("POST", `/api/v1/api-keys/${rotatingId}/rotate`, { body: { overlapSeconds: 0 } }),
        t.call("DELETE", `/api/v1/agents/${agentId}`),
      ])
      if (made.status === 200 || made.status === 201) {
        const read = await t.call("GET", `/api/v1/agents/${agentId}`, { key: made.body.data.apiKey })
        if (read.status === 200) live.push(agentId)
      } else expect([409], JSON.stringify(made.body)).toContain(made.status)
    }
    expect(live).toEqual([])
  })

  it("never grants a scope the caller lacks (403 naming the scope)", async () => {
    const onlyRead = await t.createKey({ type: "workspace", scopes: ["agents:read"] })
    const res = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "escalate", type: "workspace", scopes: ["agents:write"] },
      key: onlyRead,
    })
    expectError(res, 403, "FORBIDDEN")
    expect(res.body.error.details).toEqual({ field: "scope", issue: "requires apikeys:write" })

    const limited = await t.createKey({ type: "workspace", scopes: ["agents:read", "apikeys:write"] })
    const before = await eventCount()
    for (const [scopes, missing] of [
      [["agents:write"], "agents:write"],
      [["agents:read", "workspaces:admin"], "workspaces:admin"],
      [["agents:read", "apikeys:read"], "apikeys:read"],
    ] as const) {
      const denied = await t.call("POST", "/api/v1/api-keys", {
        body: { name: "escalate", type: "workspace", scopes },
        key: limited,
      })
      expectError(denied, 403, "FORBIDDEN")
      expect(denied.body.error.details).toEqual({ field: "scope", issue: `requires ${missing}` })
    }
    expect(await eventCount()).toBe(before)
    const allowed = await createKey({ type: "workspace", scopes: ["agents:read"] }, limited)
    expect(allowed.scopes).toEqual(["agents:read"])
  })
})

describe("GET /api-keys", () => {
  it("never contains a key value or its hash", async () => {
    const k = await createKey({ type: "workspace", scopes: ["agents:read"] })
    const list = await t.call("GET", "/api/v1/api-keys?limit=100")
    const got = await t.call("GET", `/api/v1/api-keys/${k.id}`)
    expect(list.status).toBe(200)
    for (const res of [list, got]) {
      const text = JSON.stringify(res.body)
      expect(text).not.toContain(k.apiKey)
      expect(text).not.toContain(k.apiKey.slice(12, 40))
      expect(text).not.toContain(sha256(k.apiKey))
      expect(text).not.toContain(t.key.slice(12, 40))
      expect(text).not.toContain(sha256(t.key))
    }
    const item = list.body.data.find((x: any) => x.id === k.id)
    expect(item).toBeDefined()
    expect(Object.keys(item).sort()).toEqual(
      [
        "id",
        "name",
        "type",
        "agentId",
        "environment",
        "scopes",
        "prefix",
        "status",
        "expiresAt",
        "revokedAt",
        "revokedReason",
        "rotatedTo",
        "lastUsedAt",
        "createdAt",
      ].sort(),
    )
    expect(got.body.data).toEqual(item)
  })

  it("lists newest first, filters by agent and status, and pages without duplicates or gaps", async () => {
    const id = await registerAgent()
    const created: Array<string> = []
    for (let i = 0; i < 5; i++)
      created.push((await createKey({ type: "agent", agentId: id, scopes: ["agents:read"] })).id)
    await t.call("DELETE", `/api/v1/api-keys/${created[1]}`)
    const seen: Array<string> = []
    const hasMore: Array<boolean> = []
    let cursor: string | null = null
    do {
      const res: ApiResponse = await t.call(
        "GET",
        `/api/v1/api-keys?agentId=${id}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      )
      expect(res.status).toBe(200)
      seen.push(...res.body.data.map((k: any) => k.id))
      hasMore.push(res.body.meta.hasMore)
      cursor = res.body.meta.cursor
    } while (cursor !== null && hasMore.length < 10)
    expect(seen).toEqual([...created].reverse())
    expect(hasMore).toEqual([true, true, false])
    const revoked = await t.call("GET", `/api/v1/api-keys?agentId=${id}&status=revoked`)
    expect(revoked.body.data.map((k: any) => k.id)).toEqual([created[1]])
    const active = await t.call("GET", `/api/v1/api-keys?agentId=${id}&status=active`)
    expect(active.body.data.map((k: any) => k.id)).toEqual([created[4], created[3], created[2], created[0]])
  })

  it("shows a workspace only its own keys", async () => {
    const mine = await createKey({ type: "workspace", scopes: ["agents:read"] })
    const res = await t.call("GET", "/api/v1/api-keys?limit=100", { key: other.key })
    expect(res.status).toBe(200)
    expect(res.body.data.length).toBeGreaterThan(0)
    expect(res.body.data.map((k: any) => k.id)).not.toContain(mine.id)
    const theirs = await t.call("GET", "/api/v1/api-keys?limit=100")
    const otherIds = new Set(res.body.data.map((k: any) => k.id))
    expect(theirs.body.data.some((k: any) => otherIds.has(k.id))).toBe(false)
  })

  it.each([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=abc", "limit"],
    ["limit=", "limit"],
    ["cursor=xyz", "cursor"],
    ["status=expired", "status"],
    ["type=agent", "type"],
  ])("refuses ?%s with 400", async (q, field) => {
    expectError(await t.call("GET", `/api/v1/api-keys?${q}`), 400, "BAD_REQUEST", field)
  })
})

describe("GET /api-keys/:id", () => {
  it("records when a key was last used", async () => {
    const k = await createKey({ type: "workspace", scopes: ["agents:read"] })
    expect((await t.call("GET", `/api/v1/api-keys/${k.id}`)).body.data.lastUsedAt).toBeNull()
    const before = Date.now()
    expect(await works(k.apiKey)).toBe(true)
    const used = (await t.call("GET", `/api/v1/api-keys/${k.id}`)).body.data.lastUsedAt
    expect(used).toMatch(ISO_MS)
    expect(Date.parse(used)).toBeGreaterThanOrEqual(before - 1000)
  })

  it("answers 404 API_KEY_NOT_FOUND for an unknown id", async () => {
    expectError(await t.call("GET", "/api/v1/api-keys/key_00000000000000000000000000"), 404, "API_KEY_NOT_FOUND")
  })

  it("shows an expired key as revoked with reason expired", async () => {
    const at = Date.now() + 1000
    const k = await createKey({ type: "workspace", scopes: ["agents:read"], expiresAt: new Date(at).toISOString() })
    expect(await works(k.apiKey)).toBe(true)
    await sleep(at + 100 - Date.now())
    expectError(await t.call("GET", "/api/v1/agents", { key: k.apiKey }), 401, "UNAUTHORIZED")
    const got = await t.call("GET", `/api/v1/api-keys/${k.id}`)
    expect(got.body.data).toMatchObject({ status: "revoked", revokedReason: "expired" })
    const active = await t.call("GET", "/api/v1/api-keys?status=active&limit=100")
    expect(active.body.data.map((x: any) => x.id)).not.toContain(k.id)
  })
})

describe("DELETE /api-keys/:id", () => {
  it("revokes at once, records apikey.revoked, and GET reflects it", async () => {
    const k = await createKey({ type: "workspace", scopes: ["agents:read"] })
    expect(await works(k.apiKey)).toBe(true)
    const res = await t.call("DELETE", `/api/v1/api-keys/${k.id}`)
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({
      id: k.id,
      status: "revoked",
      revokedReason: "revoked",
      revokedAt: expect.stringMatching(ISO_MS),
    })
    expect(res.body.data.apiKey).toBeUndefined()
    const refused = await t.call("GET", "/api/v1/agents", { key: k.apiKey })
    expectError(refused, 401, "UNAUTHORIZED")
    expect((await t.call("GET", `/api/v1/api-keys/${k.id}`)).body.data).toEqual(res.body.data)
    const last = (await events()).at(-1)!
    expect(last.type).toBe("apikey.revoked")
    expect(last.data).toEqual({ keyId: k.id, name: k.name, prefix: k.prefix, reason: "revoked" })
  })

  it("is idempotent: revoking a revoked key returns it unchanged and records nothing", async () => {
    const k = await createKey({ type: "workspace", scopes: ["agents:read"] })
    const first = await t.call("DELETE", `/api/v1/api-keys/${k.id}`)
    const before = await eventCount()
    const second = await t.call("DELETE", `/api/v1/api-keys/${k.id}`)
    expect(second.status).toBe(200)
    expect(second.body.data).toEqual(first.body.data)
    expect(await eventCount()).toBe(before)
  })

  it("lets a key revoke itself, after which it is refused", async () => {
    const k = await createKey({ type: "workspace", scopes: ["apikeys:write", "agents:read"] })
    expect((await t.call("DELETE", `/api/v1/api-keys/${k.id}`, { key: k.apiKey })).status).toBe(200)
    expectError(await t.call("GET", "/api/v1/agents", { key: k.apiKey }), 401, "UNAUTHORIZED")
  })

  it("answers 404 API_KEY_NOT_FOUND for an unknown id", async () => {
    expectError(await t.call("DELETE", "/api/v1/api-keys/key_00000000000000000000000000"), 404, "API_KEY_NOT_FOUND")
  })
})

describe("POST /api-keys/:id/rotate", () => {
  it("returns a new key with the same type, scopes and binding; the old key works during the overlap", async () => {
    const old = await createKey({ type: "workspace", scopes: ["agents:read", "events:read"] })
    const before = Date.now()
    const res = await t.call("POST", `/api/v1/api-keys/${old.id}/rotate`, { body: {} })
    expect(res.status).toBe(201)
    const next = res.body.data
    expect(next).toMatchObject({
      type: "workspace",
      agentId: null,
      scopes: ["agents:read", "events:read"],
      status: "active",
      expiresAt: null,
      rotatedTo: null,
      apiKey: expect.stringMatching(WS_LIVE),
    })
    expect(next.id).not.toBe(old.id)
    expect(next.apiKey).not.toBe(old.apiKey)
    expect(await works(next.apiKey)).toBe(true)
    expect(await works(old.apiKey)).toBe(true)
    const oldRecord = (await t.call("GET", `/api/v1/api-keys/${old.id}`)).body.data
    expect(oldRecord).toMatchObject({ status: "active", rotatedTo: next.id })
    // Default overlap: 86400 s.
    const until = Date.parse(oldRecord.expiresAt)
    expect(until).toBeGreaterThanOrEqual(before + 86_400_000 - 5_000)
    expect(until).toBeLessThanOrEqual(Date.now() + 86_400_000 + 5_000)
    const last = (await events()).at(-1)!
    expect(last.type).toBe("apikey.rotated")
    expect(last.data).toEqual({ keyId: old.id, newKeyId: next.id, overlapSeconds: 86400 })
    expect(JSON.stringify(await events())).not.toContain(next.apiKey)
  })

  it("refuses to rotate a key twice with 409 API_KEY_NOT_ROTATABLE", async () => {
    const old = await createKey({ type: "workspace", scopes: ["agents:read"] })
    expect((await t.call("POST", `/api/v1/api-keys/${old.id}/rotate`, { body: { overlapSeconds: 60 } })).status).toBe(
      201,
    )
    const before = await eventCount()
    expectError(await t.call("POST", `/api/v1/api-keys/${old.id}/rotate`, { body: {} }), 409, "API_KEY_NOT_ROTATABLE")
    expect(await eventCount()).toBe(before)
  })

  it("with overlapSeconds 0 revokes the old key at once", async () => {
    const old = await createKey({ type: "workspace", scopes: ["agents:read"] })
    const before = await eventCount()
    const res = await t.call("POST", `/api/v1/api-keys/${old.id}/rotate`, { body: { overlapSeconds: 0 } })
    expect(res.status).toBe(201)
    expectError(await t.call("GET", "/api/v1/agents", { key: old.apiKey }), 401, "UNAUTHORIZED")
    expect(await works(res.body.data.apiKey)).toBe(true)
    const oldRecord = (await t.call("GET", `/api/v1/api-keys/${old.id}`)).body.data
    expect(oldRecord).toMatchObject({ status: "revoked", revokedReason: "rotated", rotatedTo: res.body.data.id })
    const added = (await events()).slice(before)
    expect(added.map((e) => e.type)).toEqual(["apikey.created", "apikey.rotated", "apikey.revoked"])
    expect(added[2]!.data).toMatchObject({ keyId: old.id, reason: "rotated" })
    expectError(await t.call("POST", `/api/v1/api-keys/${old.id}/rotate`, { body: {} }), 409, "API_KEY_NOT_ROTATABLE")
  })

  it("stops the old key once the overlap has passed", async () => {
    const old = await createKey({ type: "workspace", scopes: ["agents:read"] })
    // 3 s: the old key is still checked within its overlap on a loaded machine.
    const res = await t.call("POST", `/api/v1/api-keys/${old.id}/rotate`, { body: { overlapSeconds: 3 } })
    expect(res.status).toBe(201)
    expect(await works(old.apiKey)).toBe(true)
    await sleep(3_200)
    expectError(await t.call("GET", "/api/v1/agents", { key: old.apiKey }), 401, "UNAUTHORIZED")
    expect(await works(res.body.data.apiKey)).toBe(true)
  })

  it("keeps the agent binding and the expiry of an agent key", async () => {
    const id = await registerAgent()
    const expiresAt = new Date(Date.now() + 7200_000).toISOString()
    const old = await createKey({ type: "agent", agentId: id, scopes: ["agents:read"], expiresAt })
    const res = await t.call("POST", `/api/v1/api-keys/${old.id}/rotate`, { body: { overlapSeconds: 3600 } })
    expect(res.status).toBe(201)
    expect(res.body.data).toMatchObject({
      type: "agent",
      agentId: id,
      scopes: ["agents:read"],
      expiresAt,
      apiKey: expect.stringMatching(AG_LIVE),
    })
    expect((await t.call("GET", `/api/v1/agents/${id}`, { key: res.body.data.apiKey })).status).toBe(200)
    expect((await t.call("GET", `/api/v1/agents/${agentId}`, { key: res.body.data.apiKey })).status).toBe(403)
    // The overlap never outlives the key's own expiry.
    const oldRecord = (await t.call("GET", `/api/v1/api-keys/${old.id}`)).body.data
    expect(Date.parse(oldRecord.expiresAt)).toBeLessThanOrEqual(Date.parse(expiresAt))
  })

  it("refuses to rotate a revoked key with 409", async () => {
    const k = await createKey({ type: "workspace", scopes: ["agents:read"] })
    await t.call("DELETE", `/api/v1/api-keys/${k.id}`)
    expectError(await t.call("POST", `/api/v1/api-keys/${k.id}/rotate`, { body: {} }), 409, "API_KEY_NOT_ROTATABLE")
  })

  it("refuses to hand out a key with scopes the caller lacks", async () => {
    // A key that may manage keys but holds nothing else must not obtain an all-scope key by rotating one.
    const powerful = await createKey({ type: "workspace", scopes: [...SCOPES] })
    const manager = await t.createKey({ type: "workspace", scopes: ["apikeys:read", "apikeys:write"] })
    const res = await t.call("POST", `/api/v1/api-keys/${powerful.id}/rotate`, {
      body: { overlapSeconds: 0 },
      key: manager,
    })
    expectError(res, 403, "FORBIDDEN")
    expect(res.body.error.details?.field).toBe("scope")
    expect(await works(powerful.apiKey)).toBe(true)
  })

  it("refuses to revoke a key holding scopes the caller lacks, as rotation does", async () => {
    // apikeys:write alone must not take out a stronger key, least of all the workspace's full-scope one.
    const powerful = await createKey({ type: "workspace", scopes: [...SCOPES] })
    const manager = await t.createKey({ type: "workspace", scopes: ["apikeys:read", "apikeys:write"] })
    const before = await eventCount()
    const res = await t.call("DELETE", `/api/v1/api-keys/${powerful.id}`, { key: manager })
    expectError(res, 403, "FORBIDDEN")
    expect(res.body.error.details?.field).toBe("scope")
    expect(await works(powerful.apiKey)).toBe(true)
    expect(await eventCount()).toBe(before)
    // A key no stronger than the caller's is still its to revoke.
    const weaker = await createKey({ type: "workspace", scopes: ["apikeys:read"] })
    expect((await t.call("DELETE", `/api/v1/api-keys/${weaker.id}`, { key: manager })).status).toBe(200)
    expect((await t.call("GET", `/api/v1/api-keys/${weaker.id}`)).body.data.status).toBe("revoked")
  })

  it.each([
    [{ overlapSeconds: -1 }],
    [{ overlapSeconds: 1.5 }],
    [{ overlapSeconds: "60" }],
    [{ overlapSeconds: 30 * 86400 + 1 }],
    [{ overlapSeconds: null }],
  ])("refuses %j with 422 naming overlapSeconds", async (body) => {
    const k = await createKey({ type: "workspace", scopes: ["agents:read"] })
    const before = await eventCount()
    expectError(
      await t.call("POST", `/api/v1/api-keys/${k.id}/rotate`, { body }),
      422,
      "VALIDATION_ERROR",
      "overlapSeconds",
    )
    expect(await eventCount()).toBe(before)
    expect((await t.call("GET", `/api/v1/api-keys/${k.id}`)).body.data.rotatedTo).toBeNull()
  })

  it("answers malformed JSON with 400 and an unknown id with 404", async () => {
    expectError(await t.call("POST", `/api/v1/api-keys/${targetKeyId}/rotate`, { rawBody: "{" }), 400, "BAD_REQUEST")
    expectError(
      await t.call("POST", "/api/v1/api-keys/key_00000000000000000000000000/rotate", { body: {} }),
      404,
      "API_KEY_NOT_FOUND",
    )
  })
})

describe("key values at rest", () => {
  it("keeps no plaintext key in the database, even under an Idempotency-Key", async () => {
    const res = await t.call("POST", "/api/v1/api-keys", {
      body: { name: unique("idem"), type: "workspace", scopes: ["agents:read"] },
      headers: { "idempotency-key": unique("idem-key") },
    })
    expect(res.status).toBe(201)
    const key: string = res.body.data.apiKey
    const count = async (table: string, column: string) =>
      (
        await t.query<{ n: number }>(
          (sql) => sql`SELECT count(*)::int AS n FROM ${sql(table)} WHERE strpos(${sql(column)}::text, ${key}) > 0`,
        )
      )[0]!.n
    expect(await count("events", "data"), "events.data holds the key").toBe(0)
    expect(await count("api_keys", "name"), "api_keys.name holds the key").toBe(0)
    expect(await count("idempotency_keys", "response_body"), "idempotency_keys.response_body holds the key").toBe(0)
    const [row] = await t.query<{ key_hash: string }>(
      (sql) => sql`SELECT key_hash FROM api_keys WHERE id = ${res.body.data.id}`,
    )
    expect(row!.key_hash).toBe(sha256(key))
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
    path: () => "/api/v1/api-keys",
    body: () => ({ name: unique("sec"), type: "workspace", scopes: ["agents:read"] }),
    scope: "apikeys:write",
    byId: false,
  },
  { method: "GET", path: () => "/api/v1/api-keys", scope: "apikeys:read", byId: false },
  { method: "GET", path: (id) => `/api/v1/api-keys/${id}`, scope: "apikeys:read", byId: true },
  { method: "DELETE", path: (id) => `/api/v1/api-keys/${id}`, scope: "apikeys:write", byId: true },
  {
    method: "POST",
    path: (id) => `/api/v1/api-keys/${id}/rotate`,
    body: () => ({ overlapSeconds: 0 }),
    scope: "apikeys:write",
    byId: true,
  },
]

describe.each(endpoints.map((e) => [`${e.method} ${e.path(":id").replace("/api/v1", "")}`, e] as const))(
  "%s security",
  (_, ep) => {
    const refused = async (key: string | null, status: number, code: string) => {
      const before = await eventCount()
      const keyBefore = (await t.call("GET", `/api/v1/api-keys/${targetKeyId}`)).body.data
      const res = await t.call(ep.method, ep.path(targetKeyId), { body: ep.body?.(), key })
      expectError(res, status, code)
      expect(await eventCount()).toBe(before)
      const keyAfter = (await t.call("GET", `/api/v1/api-keys/${targetKeyId}`)).body.data
      expect({ ...keyAfter, lastUsedAt: null }).toEqual({ ...keyBefore, lastUsedAt: null })
      return res
    }

    it("refuses a request without a credential with 401", async () => {
      await refused(null, 401, "UNAUTHORIZED")
    })
    it("refuses a garbage credential with 401", async () => {
      await refused("Bearer", 401, "UNAUTHORIZED")
      await refused("svc_ag_sk_live_!!!", 401, "UNAUTHORIZED")
    })
    it("refuses a well-formed key with a bad checksum with 401", async () => {
      await refused(tamper(t.key), 401, "UNAUTHORIZED")
    })
    it("refuses a correctly checksummed key it never issued with 401", async () => {
      await refused(mintKey("agent", "live").key, 401, "UNAUTHORIZED")
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
    })
    it("refuses an agent key with 403", async () => {
      const res = await refused(agentKey, 403, "FORBIDDEN")
      expect(res.body.error.details).toEqual({ field: "scope", issue: `requires ${ep.scope}` })
    })
    if (ep.byId) {
      it("answers 404 API_KEY_NOT_FOUND for another workspace's key", async () => {
        await refused(other.key, 404, "API_KEY_NOT_FOUND")
      })
    }
  },
)

describe("the Authorization header", () => {
  const withHeaders = async (values: ReadonlyArray<string>, path = "/api/v1/agents") => {
    const res = await withAuthorizations(`${t.url}${path}`, values)
    return { status: res.status, body: JSON.parse(res.text) }
  }

  it("refuses two Authorization headers whichever comes first (outside review, keys)", async () => {
    // A proxy that reads the last header and a server that reads the first would each act on another credential.
    for (const values of [
      [`Bearer ${t.key}`, "Bearer svc_ws_live_guess"],
      ["Bearer svc_ws_live_guess", `Bearer ${t.key}`],
      [`Bearer ${t.key}`, `Bearer ${t.key}`],
    ]) {
      const res = await withHeaders(values)
      expect(res.status, JSON.stringify(res.body)).toBe(401)
      expect(res.body.error.code).toBe("UNAUTHORIZED")
      expect(res.body.error.message).toMatch(/one Authorization header/)
    }
    expect((await withHeaders([`Bearer ${t.key}`])).status).toBe(200)
  })
})
