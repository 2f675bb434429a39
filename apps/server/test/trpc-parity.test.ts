import { SCOPES } from "@agentgov/domain"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ApiResponse, startTestServer, type TestServer, unique } from "./helpers.ts"

let t: TestServer
let other: { id: string; key: string }
let agentId: string
let agentKey: string
let revokedKey: string

const query = (op: string, input?: unknown, key?: string | null) =>
  t.call("GET", `/trpc/${op}${input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify(input))}`}`, {
    key,
  })
const mutation = (op: string, input: unknown, key?: string | null) =>
  t.call("POST", `/trpc/${op}`, { body: input, key })

/** The tRPC result's data, after checking it is one. */
const result = (res: ApiResponse) => {
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(res.body.error).toBeUndefined()
  return res.body.result.data
}

/** A REST error and a tRPC error carry the same code, status and details. */
const sameError = (rest: ApiResponse, trpc: ApiResponse, status: number, code: string) => {
  expect(rest.status, JSON.stringify(rest.body)).toBe(status)
  expect(rest.body.error.code).toBe(code)
  expect(trpc.status, JSON.stringify(trpc.body)).toBe(status)
  expect(trpc.body.error.data.apiError.code).toBe(code)
  expect(trpc.body.error.data.httpStatus).toBe(status)
  expect(trpc.body.error.data.apiError.details).toEqual(rest.body.error.details)
  expect(trpc.body.error.data.apiError.message).toBe(rest.body.error.message)
}

const eventTypes = () =>
  t.server.runtime
    .runPromise(
      SqlClient.SqlClient.use(
        (sql) => sql<{ type: string }>`SELECT type FROM events WHERE workspace_id = ${t.workspaceId} ORDER BY sequence`,
      ),
    )
    .then((rows) => rows.map((r) => r.type))

beforeAll(async () => {
  t = await startTestServer()
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: "trpc-other" } })
  other = { id: ws.body.data.workspace.id, key: ws.body.data.apiKey.apiKey }
  const agent = await t.call("POST", "/api/v1/agents", { body: { name: unique("parity"), labels: ["p"] } })
  agentId = agent.body.data.id
  await t.call("POST", `/api/v1/agents/${agentId}/versions`, { body: { version: "1.0.0" } })
  await t.call("POST", `/api/v1/agents/${agentId}/versions`, { body: { version: "1.1.0" } })
  agentKey = await t.createKey({ type: "agent", agentId, scopes: ["agents:read"] })
  const revoked = await t.call("POST", "/api/v1/api-keys", {
    body: { name: "revoked", type: "workspace", scopes: ["agents:read"] },
  })
  revokedKey = revoked.body.data.apiKey
  await t.call("DELETE", `/api/v1/api-keys/${revoked.body.data.id}`)
})
afterAll(async () => t?.close())

describe("queries return what REST returns", () => {
  it("agents.get", async () => {
    const rest = await t.call("GET", `/api/v1/agents/${agentId}`)
    expect(rest.status).toBe(200)
    expect(result(await query("agents.get", { id: agentId }))).toEqual(rest.body.data)
  })

  it("agents.list, with filters, and the cursors are interchangeable", async () => {
    const prefix = unique("parity-list")
    for (let i = 0; i < 3; i++) await t.call("POST", "/api/v1/agents", { body: { name: `${prefix}-${i}` } })
    const rest = await t.call("GET", `/api/v1/agents?namePrefix=${prefix}&limit=2`)
    const trpc = result(await query("agents.list", { namePrefix: prefix, limit: 2 }))
    expect(trpc).toEqual({ data: rest.body.data, meta: rest.body.meta })
    expect(trpc.meta.hasMore).toBe(true)
    const restNext = await t.call("GET", `/api/v1/agents?namePrefix=${prefix}&limit=2&cursor=${trpc.meta.cursor}`)
    const trpcNext = result(await query("agents.list", { namePrefix: prefix, limit: 2, cursor: rest.body.meta.cursor }))
    expect(trpcNext).toEqual({ data: restNext.body.data, meta: restNext.body.meta })
    expect(trpcNext.data).toHaveLength(1)
    const restAll = await t.call("GET", "/api/v1/agents")
    expect(result(await query("agents.list"))).toEqual({ data: restAll.body.data, meta: restAll.body.meta })
  })

  it("agents.versions.list", async () => {
    const rest = await t.call("GET", `/api/v1/agents/${agentId}/versions`)
    const trpc = result(await query("agents.versions.list", { id: agentId }))
    expect(trpc).toEqual({ data: rest.body.data, meta: rest.body.meta })
    expect(trpc.data.map((v: any) => v.version)).toEqual(["1.1.0", "1.0.0"])
  })

  it("workspaces.get and workspaces.list", async () => {
    const rest = await t.call("GET", `/api/v1/workspaces/${t.workspaceId}`)
    expect(result(await query("workspaces.get", { id: t.workspaceId }))).toEqual(rest.body.data)
    const restList = await t.call("GET", "/api/v1/workspaces")
    const trpcList = result(await query("workspaces.list", {}))
    expect(trpcList).toEqual({ data: restList.body.data, meta: restList.body.meta })
    expect(trpcList.data.map((w: any) => w.id)).toEqual(expect.arrayContaining([t.workspaceId, other.id]))
  })

  it("apiKeys.list and apiKeys.get, without key values", async () => {
    const restList = await t.call("GET", "/api/v1/api-keys?limit=100")
    const trpcList = result(await query("apiKeys.list", { limit: 100 }))
    expect(trpcList).toEqual({ data: restList.body.data, meta: restList.body.meta })
    expect(JSON.stringify(trpcList)).not.toContain(t.key)
    const id = restList.body.data[0].id
    const rest = await t.call("GET", `/api/v1/api-keys/${id}`)
    expect(result(await query("apiKeys.get", { id }))).toEqual(rest.body.data)
  })

  it("as an agent key, seeing what REST shows it", async () => {
    const rest = await t.call("GET", "/api/v1/agents", { key: agentKey })
    const trpc = result(await query("agents.list", {}, agentKey))
    expect(trpc).toEqual({ data: rest.body.data, meta: rest.body.meta })
    expect(trpc.data.map((a: any) => a.id)).toEqual([agentId])
  })
})

describe("mutations act as REST does", () => {
  it("agents.create, agents.update, agents.versions.create and agents.delete", async () => {
    const name = unique("trpc-made")
    const before = (await eventTypes()).length
    const created = result(await mutation("agents.create", { name, labels: ["t"] }))
    expect(created).toMatchObject({ id: expect.stringMatching(/^agt_/), name, labels: ["t"], status: "active" })
    expect((await t.call("GET", `/api/v1/agents/${created.id}`)).body.data).toEqual(created)
    const updated = result(await mutation("agents.update", { id: created.id, description: "via trpc" }))
    expect(updated.description).toBe("via trpc")
    expect((await t.call("GET", `/api/v1/agents/${created.id}`)).body.data).toEqual(updated)
    const version = result(await mutation("agents.versions.create", { id: created.id, version: "3.0.0" }))
    expect(version).toMatchObject({ agentId: created.id, version: "3.0.0" })
    expect((await t.call("GET", `/api/v1/agents/${created.id}`)).body.data.currentVersion).toBe("3.0.0")
    const gone = result(await mutation("agents.delete", { id: created.id }))
    expect(gone.status).toBe("deregistered")
    expect((await t.call("GET", `/api/v1/agents/${created.id}`)).body.data.status).toBe("deregistered")
    expect((await eventTypes()).slice(before)).toEqual([
      "agent.registered",
      "agent.updated",
      "agent.updated",
      "agent.deregistered",
    ])
  })

  it("apiKeys.create returns a working key once; apiKeys.revoke stops it", async () => {
    const created = result(
      await mutation("apiKeys.create", { name: unique("trpc-key"), type: "workspace", scopes: ["agents:read"] }),
    )
    expect(created.apiKey).toMatch(/^svc_ws_live_[0-9A-Za-z]{38,}$/)
    expect((await t.call("GET", "/api/v1/agents", { key: created.apiKey })).status).toBe(200)
    const got = result(await query("apiKeys.get", { id: created.id }))
    expect(got.apiKey).toBeUndefined()
    const revoked = result(await mutation("apiKeys.revoke", { id: created.id }))
    expect(revoked.status).toBe("revoked")
    expect((await t.call("GET", "/api/v1/agents", { key: created.apiKey })).status).toBe(401)
  })

  it("apiKeys.rotate returns a new working key", async () => {
    const created = result(
      await mutation("apiKeys.create", { name: unique("trpc-rot"), type: "workspace", scopes: ["agents:read"] }),
    )
    const rotated = result(await mutation("apiKeys.rotate", { id: created.id, overlapSeconds: 0 }))
    expect(rotated.id).not.toBe(created.id)
    expect((await t.call("GET", "/api/v1/agents", { key: rotated.apiKey })).status).toBe(200)
    expect((await t.call("GET", "/api/v1/agents", { key: created.apiKey })).status).toBe(401)
  })

  it("workspaces.update", async () => {
    const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("trpc-ws") } })
    const id = ws.body.data.workspace.id
    const updated = result(await mutation("workspaces.update", { id, guardDefault: "deny" }))
    expect(updated.guardDefault).toBe("deny")
    expect((await t.call("GET", `/api/v1/workspaces/${id}`)).body.data).toEqual(updated)
  })
})

describe("errors carry REST's code", () => {
  it("404 for a missing agent, key and workspace", async () => {
    sameError(
      await t.call("GET", "/api/v1/agents/agt_00000000000000000000000000"),
      await query("agents.get", { id: "agt_00000000000000000000000000" }),
      404,
      "AGENT_NOT_FOUND",
    )
    sameError(
      await t.call("GET", "/api/v1/api-keys/key_00000000000000000000000000"),
      await query("apiKeys.get", { id: "key_00000000000000000000000000" }),
      404,
      "API_KEY_NOT_FOUND",
    )
    sameError(
      await t.call("GET", "/api/v1/workspaces/ws_00000000000000000000000000"),
      await query("workspaces.get", { id: "ws_00000000000000000000000000" }),
      404,
      "WORKSPACE_NOT_FOUND",
    )
  })

  it("404 for another workspace's agent", async () => {
    sameError(
      await t.call("GET", `/api/v1/agents/${agentId}`, { key: other.key }),
      await query("agents.get", { id: agentId }, other.key),
      404,
      "AGENT_NOT_FOUND",
    )
  })

  it("401 without a credential, with garbage and with a revoked key", async () => {
    for (const key of [null, "garbage", revokedKey]) {
      sameError(
        await t.call("GET", `/api/v1/agents/${agentId}`, { key }),
        await query("agents.get", { id: agentId }, key),
        401,
        "UNAUTHORIZED",
      )
      sameError(
        await t.call("POST", "/api/v1/agents", { body: { name: "nope" }, key }),
        await mutation("agents.create", { name: "nope" }, key),
        401,
        "UNAUTHORIZED",
      )
    }
  })

  it("403 for a missing scope, naming it", async () => {
    const key = await t.createKey({ type: "workspace", scopes: SCOPES.filter((s) => s !== "agents:write") })
    const name = unique("no-scope")
    const rest = await t.call("POST", "/api/v1/agents", { body: { name }, key })
    const trpc = await mutation("agents.create", { name }, key)
    sameError(rest, trpc, 403, "FORBIDDEN")
    expect(trpc.body.error.data.apiError.details).toEqual({ field: "scope", issue: "requires agents:write" })
  })

  it("403 for an agent key reaching outside its agent", async () => {
    const otherAgent = await t.call("POST", "/api/v1/agents", { body: { name: unique("outside") } })
    sameError(
      await t.call("GET", `/api/v1/agents/${otherAgent.body.data.id}`, { key: agentKey }),
      await query("agents.get", { id: otherAgent.body.data.id }, agentKey),
      403,
      "FORBIDDEN",
    )
  })

  it("422 naming the same field", async () => {
    const name = unique("bad-labels")
    const rest = await t.call("POST", "/api/v1/agents", { body: { name, labels: ["ok", "NOT OK"] } })
    const trpc = await mutation("agents.create", { name, labels: ["ok", "NOT OK"] })
    sameError(rest, trpc, 422, "VALIDATION_ERROR")
    expect(trpc.body.error.data.apiError.details.field).toBe("labels[1]")
    const keyBody = { name: "k", type: "agent", agentId, scopes: ["agents:read", "workspaces:admin"] }
    const restKey = await t.call("POST", "/api/v1/api-keys", { body: keyBody })
    const trpcKey = await mutation("apiKeys.create", keyBody)
    sameError(restKey, trpcKey, 422, "VALIDATION_ERROR")
    expect(trpcKey.body.error.data.apiError.details.field).toBe("scopes[1]")
    const restNul = await t.call("POST", "/api/v1/agents", { rawBody: '{"name":"a\\u0000"}' })
    const trpcNul = await t.call("POST", "/trpc/agents.create", { rawBody: '{"name":"a\\u0000"}' })
    sameError(restNul, trpcNul, 422, "VALIDATION_ERROR")
  })

  it("409 for a duplicate name, and no event for either failure", async () => {
    const name = unique("dup")
    await t.call("POST", "/api/v1/agents", { body: { name } })
    const before = (await eventTypes()).length
    sameError(
      await t.call("POST", "/api/v1/agents", { body: { name } }),
      await mutation("agents.create", { name }),
      409,
      "CONFLICT",
    )
    expect((await eventTypes()).length).toBe(before)
  })

  it("404 NOT_FOUND for an unknown procedure", async () => {
    const res = await query("agents.nope", {})
    expect(res.status).toBe(404)
    expect(res.body.error.data.apiError.code).toBe("NOT_FOUND")
  })
})
