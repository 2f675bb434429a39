/**
 * The event catalog is the contract of the event stream and the webhooks: every system event the
 * service emits today has `data` that decodes with its catalog schema, with no field the schema
 * does not declare, and every event name implemented today is emitted by some operation.
 */
import { ApiKeyService, ApprovalService, SYSTEM_EVENTS, type SystemEventName } from "@agentgov/domain"
import { Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer, unique } from "./helpers.ts"
import { eventually, type Receiver, startReceiver } from "./webhooks-support.ts"

/** The event names some operation emits today; the others belong to features not built yet. */
const IMPLEMENTED: ReadonlyArray<SystemEventName> = [
  "agent.registered",
  "agent.updated",
  "agent.deregistered",
  "workspace.created",
  "workspace.updated",
  "workspace.deleted",
  "apikey.created",
  "apikey.revoked",
  "apikey.rotated",
  "policy.created",
  "policy.updated",
  "policy.deleted",
  "policy.evaluated",
  "policy.denied",
  "policy.violated",
  "approval.requested",
  "approval.decided",
  "enforcement.created",
  "enforcement.updated",
  "enforcement.appealed",
  "enforcement.resolved",
  "agent.suspended",
  "webhook.created",
  "webhook.updated",
  "webhook.secret.rotated",
  "webhook.deleted",
  "webhook.redelivered",
  "webhook.disabled",
]

interface SeenEvent {
  readonly id: string
  readonly type: string
  readonly agentId: string | null
  readonly data: Record<string, unknown>
}

const schemaOf = (type: string) =>
  Object.hasOwn(SYSTEM_EVENTS, type) ? SYSTEM_EVENTS[type as SystemEventName].data : undefined

/** Decodes strictly: a field the catalog does not declare is an error. */
const decodeStrict = (type: string, data: unknown) =>
  Schema.decodeUnknownSync(schemaOf(type)!)(data, { onExcessProperty: "error" })

let t: TestServer
/** Answers 410 Gone: the worker disables the webhook at its first attempt (`webhook.disabled`). */
let gone: Receiver
/** Every event of the workspaces the test touched. */
const seen: Array<SeenEvent> = []

/** Every event of a workspace through `GET /events`, page by page (newest first). */
const listAll = async (key: string): Promise<Array<SeenEvent>> => {
  const out: Array<SeenEvent> = []
  let cursor: string | null = null
  for (let page = 0; page < 100; page++) {
    const query: string = cursor === null ? "?limit=7" : `?limit=7&cursor=${encodeURIComponent(cursor)}`
    const res = await t.call("GET", `/api/v1/events${query}`, { key })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    out.push(...res.body.data)
    if (!res.body.meta.hasMore) return out
    cursor = res.body.meta.cursor
  }
  throw new Error("more than 100 pages of events")
}

beforeAll(async () => {
  t = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
  gone = await startReceiver()
  gone.answer = () => 410
  const call = async (method: string, path: string, body?: unknown, key?: string, status = 200) => {
    const res = await t.call(method, `/api/v1${path}`, { body, key })
    expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBe(status)
    return res.body.data
  }

  // A workspace of its own (workspace.created, apikey.created of its initial key), updated field by field.
  const created = await call("POST", "/workspaces", { name: unique("catalog"), environment: "test" }, undefined, 201)
  const ws = created.workspace.id as string
  const key = created.apiKey.apiKey as string
  await call("PATCH", `/workspaces/${ws}`, { name: unique("catalog-renamed") }, key)
  await call("PATCH", `/workspaces/${ws}`, { guardDefault: "deny" }, key)
  await call("PATCH", `/workspaces/${ws}`, { plan: "pro", name: unique("catalog-again") }) // plan: the admin key

  // Agents: register, update every field, two versions, an agent key, deregister (revokes the key).
  const agent = (await call("POST", "/agents", { name: unique("agent"), labels: ["a"] }, key, 201)).id as string
  await call(
    "PATCH",
    `/agents/${agent}`,
    { name: unique("agent-renamed"), description: "d", labels: ["b"], metadata: { m: 1 } },
    key,
  )
  await call("PATCH", `/agents/${agent}`, { description: null }, key)
  await call("POST", `/agents/${agent}/versions`, { version: "1.0.0" }, key, 201)
  await call("POST", `/agents/${agent}/versions`, { version: "1.1.0" }, key, 201)
  await call("POST", "/api-keys", { name: "bound", type: "agent", agentId: agent, scopes: ["agents:read"] }, key, 201)
  await call("DELETE", `/agents/${agent}`, undefined, key)

  // API keys: create, rotate with an overlap and without, revoke, and expire (recorded by the sweep).
  const spec = { name: "catalog key", type: "workspace", scopes: ["agents:read", "events:read"] }
  const first = (await call("POST", "/api-keys", spec, key, 201)).id as string
  const second = (await call("POST", `/api-keys/${first}/rotate`, { overlapSeconds: 60 }, key, 201)).id as string
  const third = (await call("POST", `/api-keys/${second}/rotate`, { overlapSeconds: 0 }, key, 201)).id as string
  await call("DELETE", `/api-keys/${third}`, undefined, key)
  const expiresAt = new Date(Date.now() + 1000).toISOString()
  await call("POST", "/api-keys", { ...spec, name: "expiring", expiresAt }, key, 201)
  await new Promise((r) => setTimeout(r, 1100))
  await t.server.runtime.runPromise(ApiKeyService.use((s) => s.revokeExpired) as any)

  // Governance: a policy through its versions, guard decisions of every kind, approvals decided and
  // expired, enforcement through appeal and resolution.
  const actor = (await call("POST", "/agents", { name: unique("governed") }, key, 201)).id as string
  const policy = (
    await call(
      "POST",
      "/policies",
      {
        name: unique("catalog-policy"),
        rules: [
          { id: "deny-rm", effect: "deny", actions: ["fs.rm"], reason: "never" },
          { id: "ask", effect: "require_approval", actions: ["deploy.*"] },
          { id: "ok", effect: "allow", actions: ["fs.read"] },
        ],
      },
      key,
      201,
    )
  ).id as string
  await call(
    "POST",
    "/policies",
    { name: unique("watch"), mode: "monitor", rules: [{ id: "w", effect: "deny", actions: ["fs.read"] }] },
    key,
    201,
  )
  await call("PATCH", `/policies/${policy}`, { description: "v2" }, key)
  await call("POST", "/guard", { agentId: actor, action: "fs.read" }, key)
  await call("POST", "/guard", { agentId: actor, action: "fs.rm" }, key)
  const asked = await call("POST", "/guard", { agentId: actor, action: "deploy.prod", context: { v: 1 } }, key)
  await call("POST", `/approvals/${asked.approvalId}/decide`, { decision: "approved", reason: "fine" }, key)
  await call(
    "POST",
    "/guard",
    { agentId: actor, action: "deploy.prod", context: { v: 1 }, approvalId: asked.approvalId },
    key,
  )
  const explicit = await call("POST", "/approvals", { agentId: actor, action: "x.y", timeoutSeconds: 1 }, key, 201)
  await new Promise((r) => setTimeout(r, 1100))
  await t.server.runtime.runPromise(ApprovalService.use((s) => s.expireDue) as any)
  expect((await call("GET", `/approvals/${explicit.id}`, undefined, key)).status).toBe("expired")
  const warning = await call("POST", "/enforcement", { agentId: actor, type: "warning", reason: "careful" }, key, 201)
  await call("PATCH", `/enforcement/${warning.id}`, { reason: "more careful" }, key)
  const suspension = await call(
    "POST",
    "/enforcement",
    { agentId: actor, type: "suspension", reason: "stop" },
    key,
    201,
  )
  await call("POST", `/enforcement/${suspension.id}/appeal`, { reason: "please" }, key)
  await call("PATCH", `/enforcement/${suspension.id}`, { resolution: "overturned" }, key)
  await call("DELETE", `/policies/${policy}`, undefined, key)

  // Webhooks: register, change, rotate, delete; and one the worker disables (its endpoint answers 410).
  const hook = (await call("POST", "/webhooks", { url: gone.url, events: ["catalog.never"] }, key, 201)).id as string
  await call("PATCH", `/webhooks/${hook}`, { url: `${gone.url}?v=2`, description: "d", enabled: false }, key)
  await call("PATCH", `/webhooks/${hook}`, { events: ["badge.*"], retryPolicy: "extended", enabled: true }, key)
  await call("POST", `/webhooks/${hook}/rotate`, { overlapSeconds: 0 }, key)
  await call("DELETE", `/webhooks/${hook}`, undefined, key)
  const doomedHook = (await call("POST", "/webhooks", { url: gone.url, events: ["agent.registered"] }, key, 201)).id
  await call("POST", "/agents", { name: unique("hooked") }, key, 201)
  await eventually(async () => {
    const w = await call("GET", `/webhooks/${doomedHook}`, undefined, key)
    return w.enabled ? undefined : w
  })
  await call("PATCH", `/webhooks/${doomedHook}`, { enabled: true }, key)
  await call("POST", `/webhooks/${doomedHook}/redeliver`, { since: "2020-01-01T00:00:00.000Z" }, key)
  aliasCheck = async () => {
    const byAlias = await t.call("GET", "/api/v1/events?type=enforcement.issued&limit=100", { key })
    const byName = await t.call("GET", "/api/v1/events?type=enforcement.created&limit=100", { key })
    return { byAlias: byAlias.body.data, byName: byName.body.data }
  }

  seen.push(...(await listAll(key)), ...(await listAll(t.key)))

  // A deleted workspace: workspace.deleted is recorded in its own chain, which no key can read any
  // more (its keys are revoked with it), so that chain is read from the store.
  const doomed = await call("POST", "/workspaces", { name: unique("doomed"), plan: "enterprise" }, undefined, 201)
  await call(
    "POST",
    "/api-keys",
    { name: "extra", type: "workspace", scopes: ["agents:read"] },
    doomed.apiKey.apiKey,
    201,
  )
  await call("DELETE", `/workspaces/${doomed.workspace.id}`)
  const rows = (await t.server.runtime.runPromise(
    SqlClient.SqlClient.use(
      (sql) => sql`SELECT id, type, agent_id, data FROM events
        WHERE workspace_id = ${doomed.workspace.id} ORDER BY sequence`,
    ) as any,
  )) as ReadonlyArray<{ id: string; type: string; agent_id: string | null; data: any }>
  expect(rows.map((r) => r.type)).toContain("workspace.deleted")
  seen.push(...rows.map((r) => ({ id: r.id, type: r.type, agentId: r.agent_id, data: r.data })))
})
afterAll(async () => {
  await t?.close()
  await gone?.close()
})
let aliasCheck: () => Promise<{ byAlias: Array<{ id: string }>; byName: Array<{ id: string }> }>

describe("the event catalog", () => {
  it("has a data schema, a description and an emitter for every system event name", () => {
    for (const [name, def] of Object.entries(SYSTEM_EVENTS)) {
      expect(Schema.isSchema(def.data), name).toBe(true)
      expect(def.description.length, name).toBeGreaterThan(0)
      expect(def.emittedBy.length, name).toBeGreaterThan(0)
      const json = Schema.toJsonSchemaDocument(def.data).schema as Record<string, any>
      expect(json.type, name).toBe("object")
      expect(Object.keys(json.properties ?? {}).length, name).toBeGreaterThan(0)
    }
  })

  it("the strict decode is not a rubber stamp: an undeclared, a missing or a mistyped field fails", () => {
    const good = { agentId: "agt_1", agentName: "a", trustScore: 400 }
    expect(decodeStrict("agent.registered", good)).toEqual(good)
    expect(() => decodeStrict("agent.registered", { ...good, extra: 1 })).toThrow(/extra/)
    expect(() => decodeStrict("agent.registered", { agentId: "agt_1", agentName: "a" })).toThrow(/trustScore/)
    expect(() => decodeStrict("agent.registered", { ...good, trustScore: "400" })).toThrow()
    expect(() => decodeStrict("apikey.revoked", { keyId: "k", name: "n", prefix: "p", reason: "bored" })).toThrow()
  })

  it("every system event emitted decodes with its catalog schema, with no undeclared field", () => {
    const system = seen.filter((e) => schemaOf(e.type) !== undefined)
    expect(system.length).toBeGreaterThan(20)
    for (const event of system) {
      try {
        decodeStrict(event.type, event.data)
      } catch (error) {
        throw new Error(`${event.type} ${event.id} ${JSON.stringify(event.data)}: ${String(error)}`)
      }
    }
  })

  it("an alias filters as the name it stands for (D7: enforcement.issued)", async () => {
    const { byAlias, byName } = await aliasCheck()
    expect(byName.length).toBe(2)
    expect(byAlias.map((e) => e.id)).toEqual(byName.map((e) => e.id))
  })

  it("every event name implemented today was emitted at least once", () => {
    const types = new Set(seen.map((e) => e.type))
    for (const name of IMPLEMENTED) expect(types.has(name), name).toBe(true)
    // Every name in the list is in the catalog, and nothing outside the catalog looks like a system event.
    for (const name of IMPLEMENTED) expect(Object.hasOwn(SYSTEM_EVENTS, name), name).toBe(true)
    for (const type of types) expect(Object.hasOwn(SYSTEM_EVENTS, type), type).toBe(true)
  })

  it("the optional fields were exercised: each shape of agent.updated, workspace.updated and apikey.revoked", () => {
    const data = (type: string) => seen.filter((e) => e.type === type).map((e) => e.data)
    const agentUpdates = data("agent.updated")
    expect(agentUpdates.some((d) => d.versionId === undefined)).toBe(true)
    expect(agentUpdates.some((d) => d.previousVersion === null)).toBe(true)
    expect(agentUpdates.some((d) => typeof d.previousVersion === "string")).toBe(true)
    const workspaceUpdates = data("workspace.updated")
    for (const field of ["name", "plan", "guardDefault"]) {
      expect(
        workspaceUpdates.some((d) => field in d),
        field,
      ).toBe(true)
    }
    const reasons = new Set(data("apikey.revoked").map((d) => d.reason))
    expect([...reasons].sort()).toEqual(["agent_deregistered", "expired", "revoked", "rotated"])
    // An agent key's events name its agent on the envelope.
    expect(seen.some((e) => e.type === "apikey.created" && e.agentId !== null)).toBe(true)
  })
})
