import { mintKey, SCOPES } from "@agentgov/domain"
import { Effect } from "effect"
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
/** A second workspace and its all-scope key. */
let other: { id: string; key: string }
/** Keys without workspaces:admin: one in the bootstrap workspace, one in `other`. */
let member: string
let otherMember: string
let revokedKey: string
let agentKey: string

const events = (workspaceId: string) =>
  t.query<{ type: string; data: any }>(
    (sql) => sql`SELECT type, data FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
  )
const eventCount = async (workspaceId = t.workspaceId) => (await events(workspaceId)).length
const workspaceCount = async () =>
  (await t.query<{ n: number }>((sql) => sql`SELECT count(*)::int AS n FROM workspaces`))[0]!.n

const createWorkspace = async (spec: Record<string, unknown> = {}) => {
  const res = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("ws"), ...spec } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return {
    workspace: res.body.data.workspace,
    key: res.body.data.apiKey.apiKey as string,
    apiKey: res.body.data.apiKey,
  }
}

beforeAll(async () => {
  t = await startTestServer()
  creds = await credentialFixtures(t)
  const created = await createWorkspace({ name: "workspaces-other" })
  other = { id: created.workspace.id, key: created.key }
  member = await t.createKey({ type: "workspace", scopes: ["workspaces:read", "workspaces:write"] })
  otherMember = await t.createKey({ type: "workspace", scopes: ["workspaces:read", "workspaces:write"] }, other.key)
  const revoked = await t.call("POST", "/api/v1/api-keys", {
    body: { name: "to revoke", type: "workspace", scopes: [...SCOPES] },
  })
  revokedKey = revoked.body.data.apiKey
  await t.call("DELETE", `/api/v1/api-keys/${revoked.body.data.id}`)
  const agent = await t.call("POST", "/api/v1/agents", { body: { name: "workspaces-agent" } })
  agentKey = await t.createKey({ type: "agent", agentId: agent.body.data.id, scopes: ["agents:read"] })
})
afterAll(async () => t?.close())

describe("POST /workspaces", () => {
  it("creates a workspace with defaults and returns its first key (every scope but workspaces:admin) once", async () => {
    const name = unique("acme")
    const res = await t.call("POST", "/api/v1/workspaces", { body: { name } })
    expect(res.status).toBe(201)
    const { workspace, apiKey } = res.body.data
    expect(workspace).toEqual({
      id: expect.stringMatching(/^ws_[0-9a-z]{26}$/),
      name,
      environment: "live",
      plan: "free",
      guardDefault: "allow",
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
    })
    expect(apiKey).toMatchObject({
      id: expect.stringMatching(/^key_/),
      type: "workspace",
      agentId: null,
      environment: "live",
      status: "active",
      apiKey: expect.stringMatching(/^svc_ws_live_[0-9A-Za-z]{38,}$/),
    })
    // A tenant's first key must not administer other tenants: only the operator's bootstrap key has workspaces:admin.
    expect([...apiKey.scopes].sort()).toEqual(SCOPES.filter((s) => s !== "workspaces:admin").sort())
    // The new key belongs to the new workspace.
    const own = await t.call("GET", `/api/v1/workspaces/${workspace.id}`, { key: apiKey.apiKey })
    expect(own.status).toBe(200)
    expect(own.body.data).toEqual(workspace)
    const keys = await t.call("GET", "/api/v1/api-keys", { key: apiKey.apiKey })
    expect(keys.body.data.map((k: any) => k.id)).toEqual([apiKey.id])
    expect(JSON.stringify(keys.body)).not.toContain(apiKey.apiKey)
    const byAdmin = await t.call("GET", `/api/v1/workspaces/${workspace.id}`)
    expect(byAdmin.body.data).toEqual(workspace)
    const listed = await t.call("GET", "/api/v1/workspaces?limit=100")
    expect(listed.body.data[0]).toEqual(workspace)
  })

  it("starts the new workspace's own audit chain with workspace.created and apikey.created", async () => {
    const { workspace, apiKey } = await createWorkspace({ plan: "pro" })
    const chain = await events(workspace.id)
    expect(chain.map((e) => e.type)).toEqual(["workspace.created", "apikey.created"])
    expect(chain[0]!.data).toEqual({
      workspaceId: workspace.id,
      name: workspace.name,
      environment: "live",
      plan: "pro",
    })
    expect(chain[1]!.data).toMatchObject({ keyId: apiKey.id, type: "workspace" })
    expect(JSON.stringify(chain)).not.toContain(apiKey.apiKey)
  })

  it("takes environment, plan and guardDefault; a test workspace mints _test_ keys", async () => {
    const { workspace, apiKey } = await createWorkspace({
      environment: "test",
      plan: "enterprise",
      guardDefault: "deny",
    })
    expect(workspace).toMatchObject({ environment: "test", plan: "enterprise", guardDefault: "deny" })
    expect(apiKey.environment).toBe("test")
    expect(apiKey.apiKey).toMatch(/^svc_ws_test_[0-9A-Za-z]{38,}$/)
    expect((await t.call("GET", `/api/v1/workspaces/${workspace.id}`, { key: apiKey.apiKey })).status).toBe(200)
  })

  it("answers malformed JSON with 400", async () => {
    const before = await workspaceCount()
    expectError(await t.call("POST", "/api/v1/workspaces", { rawBody: "{'name': 'x'}" }), 400, "BAD_REQUEST")
    expect(await workspaceCount()).toBe(before)
  })

  it.each([
    ["a missing name", {}, "name"],
    ["an empty name", { name: "" }, "name"],
    ["a name over 200 characters", { name: "w".repeat(201) }, "name"],
    ["a name with a terminal escape sequence", { name: "acme\u001b]0;owned\u0007" }, "name"],
    ["a name with a newline", { name: "acme\nplan: enterprise" }, "name"],
    ["a name with a bidirectional override", { name: "acme\u202e" }, "name"],
    ["a blank name", { name: " \t " }, "name"],
    ["an unknown environment", { name: "x", environment: "prod" }, "environment"],
    ["an unknown plan", { name: "x", plan: "gold" }, "plan"],
    ["an unknown guardDefault", { name: "x", guardDefault: "maybe" }, "guardDefault"],
    ["an unknown field", { name: "x", region: "eu" }, "region"],
  ])("refuses %s with 422 naming the field and creates nothing", async (_, body, field) => {
    const before = await workspaceCount()
    expectError(await t.call("POST", "/api/v1/workspaces", { body }), 422, "VALIDATION_ERROR", field)
    expect(await workspaceCount()).toBe(before)
  })
})

describe("GET /workspaces", () => {
  it("shows a credential without workspaces:admin its own workspace only", async () => {
    const mine = await t.call("GET", "/api/v1/workspaces", { key: member })
    expect(mine.status).toBe(200)
    expect(mine.body.data.map((w: any) => w.id)).toEqual([t.workspaceId])
    expect(mine.body.meta).toEqual({ cursor: null, hasMore: false })
    const theirs = await t.call("GET", "/api/v1/workspaces", { key: otherMember })
    expect(theirs.body.data.map((w: any) => w.id)).toEqual([other.id])
  })

  it("shows workspaces:admin every workspace, newest first, paged without duplicates or gaps", async () => {
    for (let i = 0; i < 3; i++) await createWorkspace()
    const all = await t.call("GET", "/api/v1/workspaces?limit=100")
    expect(all.status).toBe(200)
    const ids: Array<string> = all.body.data.map((w: any) => w.id)
    expect(ids.length).toBeGreaterThanOrEqual(5)
    expect(ids).toContain(t.workspaceId)
    expect(ids).toContain(other.id)
    expect([...ids].sort().reverse()).toEqual(ids)
    expect(ids.at(-1)).toBe(t.workspaceId) // the bootstrap workspace is the oldest
    const seen: Array<string> = []
    const hasMore: Array<boolean> = []
    let cursor: string | null = null
    do {
      const res: ApiResponse = await t.call(
        "GET",
        `/api/v1/workspaces?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      )
      expect(res.status).toBe(200)
      expect(res.body.data.length).toBeLessThanOrEqual(2)
      seen.push(...res.body.data.map((w: any) => w.id))
      hasMore.push(res.body.meta.hasMore)
      cursor = res.body.meta.cursor
    } while (cursor !== null && hasMore.length < 100)
    expect(seen).toEqual(ids)
    expect(hasMore.at(-1)).toBe(false)
    expect(hasMore.slice(0, -1).every(Boolean)).toBe(true)
  })

  it.each([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=abc", "limit"],
    ["cursor=bm9wZQ", "cursor"],
    ["name=default", "name"],
  ])("refuses ?%s with 400", async (q, field) => {
    expectError(await t.call("GET", `/api/v1/workspaces?${q}`), 400, "BAD_REQUEST", field)
  })
})

describe("GET /workspaces/:id", () => {
  it("returns the caller's workspace", async () => {
    const res = await t.call("GET", `/api/v1/workspaces/${t.workspaceId}`, { key: member })
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ id: t.workspaceId, name: "default", environment: "live" })
  })

  it("answers 404 WORKSPACE_NOT_FOUND for an unknown id", async () => {
    expectError(await t.call("GET", "/api/v1/workspaces/ws_00000000000000000000000000"), 404, "WORKSPACE_NOT_FOUND")
    expectError(
      await t.call("GET", "/api/v1/workspaces/ws_00000000000000000000000000", { key: member }),
      404,
      "WORKSPACE_NOT_FOUND",
    )
  })

  it("answers a query parameter with 400", async () => {
    expectError(await t.call("GET", `/api/v1/workspaces/${t.workspaceId}?verbose=1`), 400, "BAD_REQUEST", "verbose")
  })
})

describe("PATCH /workspaces/:id", () => {
  it("renames, records workspace.updated naming the change, and GET reflects it", async () => {
    const { workspace } = await createWorkspace()
    const name = unique("renamed")
    const res = await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, { body: { name } })
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual({ ...workspace, name, updatedAt: expect.stringMatching(ISO_MS) })
    expect(Date.parse(res.body.data.updatedAt)).toBeGreaterThanOrEqual(Date.parse(workspace.updatedAt))
    expect((await t.call("GET", `/api/v1/workspaces/${workspace.id}`)).body.data).toEqual(res.body.data)
    const last = (await events(workspace.id)).at(-1)!
    expect(last.type).toBe("workspace.updated")
    expect(last.data).toEqual({ workspaceId: workspace.id, changes: ["name"], name })
  })

  it("lets workspaces:write change guardDefault of its own workspace", async () => {
    const { workspace, key } = await createWorkspace()
    const writer = await t.createKey({ type: "workspace", scopes: ["workspaces:write", "workspaces:read"] }, key)
    const res = await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, {
      body: { guardDefault: "deny" },
      key: writer,
    })
    expect(res.status).toBe(200)
    expect(res.body.data.guardDefault).toBe("deny")
    expect((await t.call("GET", `/api/v1/workspaces/${workspace.id}`, { key: writer })).body.data.guardDefault).toBe(
      "deny",
    )
  })

  it("refuses a plan change without workspaces:admin with 403 naming the scope, and changes nothing", async () => {
    const { workspace, key } = await createWorkspace()
    const writer = await t.createKey({ type: "workspace", scopes: ["workspaces:write", "workspaces:read"] }, key)
    const before = await eventCount(workspace.id)
    const res = await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, {
      body: { plan: "enterprise", name: "sneaky" },
      key: writer,
    })
    expectError(res, 403, "FORBIDDEN")
    expect(res.body.error.details).toEqual({ field: "scope", issue: "requires workspaces:admin" })
    const after = await t.call("GET", `/api/v1/workspaces/${workspace.id}`)
    expect(after.body.data).toEqual(workspace)
    expect(await eventCount(workspace.id)).toBe(before)
    // Sending the current plan is no change, so it needs no admin.
    const same = await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, { body: { plan: "free" }, key: writer })
    expect(same.status).toBe(200)
    expect(same.body.data).toEqual(workspace)
    expect(await eventCount(workspace.id)).toBe(before)
  })

  it("lets workspaces:admin change the plan", async () => {
    const { workspace } = await createWorkspace()
    const res = await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, { body: { plan: "pro" } })
    expect(res.status).toBe(200)
    expect(res.body.data.plan).toBe("pro")
    expect((await t.call("GET", `/api/v1/workspaces/${workspace.id}`)).body.data.plan).toBe("pro")
    expect((await events(workspace.id)).at(-1)!.data).toEqual({
      workspaceId: workspace.id,
      changes: ["plan"],
      plan: "pro",
    })
  })

  it("records nothing for a patch equal to the workspace", async () => {
    const { workspace } = await createWorkspace()
    const before = await eventCount(workspace.id)
    const res = await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, {
      body: { name: workspace.name, guardDefault: "allow" },
    })
    expect(res.status).toBe(200)
    expect(res.body.data).toEqual(workspace)
    expect(await eventCount(workspace.id)).toBe(before)
  })

  it("answers 400 to malformed JSON and 422 naming the field; environment is fixed", async () => {
    const { workspace } = await createWorkspace()
    const path = `/api/v1/workspaces/${workspace.id}`
    const before = await eventCount(workspace.id)
    expectError(await t.call("PATCH", path, { rawBody: '{"name": }' }), 400, "BAD_REQUEST")
    expectError(await t.call("PATCH", path, { body: { environment: "test" } }), 422, "VALIDATION_ERROR", "environment")
    expectError(await t.call("PATCH", path, { body: { name: "" } }), 422, "VALIDATION_ERROR", "name")
    expectError(await t.call("PATCH", path, { body: { plan: "gold" } }), 422, "VALIDATION_ERROR", "plan")
    expectError(await t.call("PATCH", path, { body: { guardDefault: true } }), 422, "VALIDATION_ERROR", "guardDefault")
    expect((await t.call("GET", path)).body.data).toEqual(workspace)
    expect(await eventCount(workspace.id)).toBe(before)
  })

  it("refuses a name a terminal or a log would act on with 422, and stores names in NFC", async () => {
    const { workspace, key } = await createWorkspace()
    const path = `/api/v1/workspaces/${workspace.id}`
    const before = await eventCount(workspace.id)
    // A tenant's own key names its workspace, and the operator's CLI prints the name.
    for (const name of ["x\u001b[2J", "x\u0085", "x\u2066", "trailing "])
      expectError(await t.call("PATCH", path, { body: { name }, key }), 422, "VALIDATION_ERROR", "name")
    expect((await t.call("GET", path)).body.data).toEqual(workspace)
    expect(await eventCount(workspace.id)).toBe(before)
    const renamed = await t.call("PATCH", path, { body: { name: "Cafe\u0301" }, key })
    expect(renamed.body.data.name).toBe("Caf\u00e9")
    // The same name sent precomposed is no change.
    const same = await t.call("PATCH", path, { body: { name: "Caf\u00e9" }, key })
    expect(same.body.data).toEqual(renamed.body.data)
    expect(await eventCount(workspace.id)).toBe(before + 1)
    const created = await createWorkspace({ name: "Cafe\u0301 2" })
    expect(created.workspace.name).toBe("Caf\u00e9 2")
  })

  it("refuses an id in the body, which is not a field of the patch, with 422", async () => {
    const { workspace } = await createWorkspace()
    const res = await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, { body: { id: other.id, name: "moved" } })
    expectError(res, 422, "VALIDATION_ERROR", "id")
    expect((await t.call("GET", `/api/v1/workspaces/${workspace.id}`)).body.data).toEqual(workspace)
  })

  it("answers 404 WORKSPACE_NOT_FOUND for an unknown id", async () => {
    expectError(
      await t.call("PATCH", "/api/v1/workspaces/ws_00000000000000000000000000", { body: { name: "x" } }),
      404,
      "WORKSPACE_NOT_FOUND",
    )
  })
})

describe("DELETE /workspaces/:id", () => {
  it("deletes another workspace, revokes its keys at once, and it disappears", async () => {
    const { workspace, key, apiKey } = await createWorkspace()
    const second = await t.createKey({ type: "workspace", scopes: ["agents:read"] }, key)
    expect((await t.call("GET", "/api/v1/agents", { key: second })).status).toBe(200)
    const res = await t.call("DELETE", `/api/v1/workspaces/${workspace.id}`)
    expect(res.status).toBe(200)
    expect(res.body.data).toMatchObject({ id: workspace.id, name: workspace.name })
    expectError(await t.call("GET", `/api/v1/workspaces/${workspace.id}`, { key }), 401, "UNAUTHORIZED")
    expectError(await t.call("GET", "/api/v1/agents", { key: second }), 401, "UNAUTHORIZED")
    expectError(await t.call("GET", `/api/v1/workspaces/${workspace.id}`), 404, "WORKSPACE_NOT_FOUND")
    const listed = await t.call("GET", "/api/v1/workspaces?limit=100")
    expect(listed.body.data.map((w: any) => w.id)).not.toContain(workspace.id)
    const keys = await t.query<{ id: string; status: string; revoked_reason: string }>(
      (sql) => sql`SELECT id, status, revoked_reason FROM api_keys WHERE workspace_id = ${workspace.id}`,
    )
    expect(keys).toHaveLength(2)
    expect(keys.map((k) => k.id)).toContain(apiKey.id)
    expect(keys.every((k) => k.status === "revoked" && k.revoked_reason === "workspace_deleted")).toBe(true)
    const last = (await events(workspace.id)).at(-1)!
    expect(last.type).toBe("workspace.deleted")
    expect(last.data).toEqual({ workspaceId: workspace.id, name: workspace.name, revokedKeys: 2 })
    expectError(await t.call("DELETE", `/api/v1/workspaces/${workspace.id}`), 404, "WORKSPACE_NOT_FOUND")
    expectError(
      await t.call("PATCH", `/api/v1/workspaces/${workspace.id}`, { body: { name: "zombie" } }),
      404,
      "WORKSPACE_NOT_FOUND",
    )
  })

  it("deregisters the workspace's agents: no badge is served or signed for them any more", async () => {
    const { workspace, key } = await createWorkspace()
    const agent = (await t.call("POST", "/api/v1/agents", { body: { name: unique("trusted") }, key })).body.data
    const gone = (await t.call("POST", "/api/v1/agents", { body: { name: unique("gone") }, key })).body.data
    expect((await t.call("DELETE", `/api/v1/agents/${gone.id}`, { key })).status).toBe(200)
    await t.query((sql) => sql`UPDATE agents SET trust_score = 900 WHERE id = ${agent.id}`)
    const badge = await t.call("GET", `/api/v1/trust/badges/${agent.id}`, { key: null })
    expect(badge.status, JSON.stringify(badge.body)).toBe(200)
    expect((await t.call("DELETE", `/api/v1/workspaces/${workspace.id}`)).status).toBe(200)
    expectError(await t.call("GET", `/api/v1/trust/badges/${agent.id}`, { key: null }), 404, "BADGE_NOT_FOUND")
    // A badge issued before is still the service's signature, but what it shows no longer holds.
    const checked = await t.call("POST", `/api/v1/badge/${agent.id}/verify`, {
      key: null,
      body: { badge: badge.body.data.signature },
    })
    expect(checked.body.data).toMatchObject({ valid: true, current: false })
    const status = await t.call("GET", `/api/v1/badge/${agent.id}/verify`, { key: null })
    expect(status.body.data).toMatchObject({ valid: false, reason: "no_badge" })
    const rows = await t.query<{ id: string; status: string }>(
      (sql) => sql`SELECT id, status FROM agents WHERE workspace_id = ${workspace.id} ORDER BY id`,
    )
    expect(rows.map((r) => r.status)).toEqual(["deregistered", "deregistered"])
    // Each agent ended is recorded, once, before the workspace's deletion, which stays the chain's last event.
    const chain = await events(workspace.id)
    expect(chain.slice(-2).map((e) => [e.type, e.data.agentId ?? null])).toEqual([
      ["agent.deregistered", agent.id],
      ["workspace.deleted", null],
    ])
    expect(chain.filter((e) => e.type === "agent.deregistered" && e.data.agentId === gone.id)).toHaveLength(1)
  })

  it("refuses to let a credential delete its own workspace with 409 WORKSPACE_IN_USE", async () => {
    const before = await eventCount()
    expectError(await t.call("DELETE", `/api/v1/workspaces/${t.workspaceId}`), 409, "WORKSPACE_IN_USE")
    expect(await eventCount()).toBe(before)
    expect((await t.call("GET", `/api/v1/workspaces/${t.workspaceId}`)).status).toBe(200)
    // A tenant's own key cannot delete workspaces at all: it lacks workspaces:admin.
    const { workspace, key } = await createWorkspace()
    expectError(await t.call("DELETE", `/api/v1/workspaces/${workspace.id}`, { key }), 403, "FORBIDDEN")
    expect((await t.call("GET", `/api/v1/workspaces/${workspace.id}`, { key })).status).toBe(200)
  })

  it("answers 404 WORKSPACE_NOT_FOUND for an unknown id", async () => {
    expectError(await t.call("DELETE", "/api/v1/workspaces/ws_00000000000000000000000000"), 404, "WORKSPACE_NOT_FOUND")
  })

  it("closes the chain: writes that waited for the deletion's chain head append nothing after workspace.deleted", async () => {
    const { workspace, key } = await createWorkspace()
    const id = workspace.id
    // This process now knows the chain's head: the next ingest takes the one-statement path.
    const warm = await t.call("POST", "/api/v1/events/ingest", {
      key,
      body: { events: [{ type: "custom.warm", data: {} }] },
    })
    expect(warm.status, JSON.stringify(warm.body)).toBe(201)
    const agent = await t.call("POST", "/api/v1/agents", { key, body: { name: "raced-the-deletion" } })
    expect(agent.status, JSON.stringify(agent.body)).toBe(201)
    // The guard's caches warm (the agent, the workspace's rules): its next decision goes straight to the append.
    const decided = await t.call("POST", "/v1/guard", {
      key,
      body: { agentId: agent.body.data.id, action: "files.read" },
    })
    expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    // Held open in the middle of the deletion: the workspace row stays locked by this transaction, so the deletion
    // stops at its last step (marking the workspace deleted), after it appended workspace.deleted, holding the head.
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    let held!: () => void
    const holding = new Promise<void>((resolve) => (held = resolve))
    const hold = t.query((sql) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SELECT 1 FROM workspaces WHERE id = ${id} FOR NO KEY UPDATE`
          held()
          yield* Effect.promise(() => released)
          return []
        }),
      ),
    )
    const waitingOn = async (statement: string) =>
      (
        await t.query<{ n: number }>(
          (sql) => sql`SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ${`%${statement}%`}`,
        )
      )[0]!.n
    const until = async (what: string, check: () => Promise<boolean>) => {
      for (let i = 0; i < 1_000; i++) {
        if (await check()) return
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      throw new Error(`never: ${what}`)
    }
    try {
      await holding
      const deletion = t.call("DELETE", `/api/v1/workspaces/${id}`)
      await until("the deletion waits", async () => (await waitingOn("UPDATE workspaces SET deleted_at")) === 1)
      // A second deletion waits for the first's keys; the ingest (with a key to claim) for its chain head, and a
      // guard call's decision behind it, in the workspace's group commit.
      const again = t.call("DELETE", `/api/v1/workspaces/${id}`)
      const ingest = t.call("POST", "/api/v1/events/ingest", {
        key,
        headers: { "idempotency-key": "raced-the-deletion" },
        body: { events: [{ type: "custom.late", data: { n: 1 } }] },
      })
      await until("the ingest waits", async () => (await waitingOn("UPDATE chain_heads")) === 1)
      // The second deletion waits on a lock the first holds (its agents' or keys' rows): three waiting in all.
      await until("the second deletion waits", async () => (await waitingOn("")) === 3)
      const guard = t.call("POST", "/v1/guard", { key, body: { agentId: agent.body.data.id, action: "files.read" } })
      // Time for the guard call to reach the group commit's queue (its caches are warm): answered before the
      // deletion commits, it would be a 200 with its decision recorded, which the chain below would show.
      await new Promise((resolve) => setTimeout(resolve, 300))
      release()
      await hold
      expect((await deletion).status).toBe(200)
      // Neither wrote anything, and each is answered as the deleted workspace's credentials are.
      expectError(await ingest, 401, "UNAUTHORIZED")
      expectError(await guard, 401, "UNAUTHORIZED")
      expectError(await again, 404, "WORKSPACE_NOT_FOUND")
    } finally {
      release()
      await hold
    }
    const chain = await events(id)
    expect(chain.at(-1)!.type).toBe("workspace.deleted")
    expect(chain.filter((e) => e.type === "workspace.deleted")).toHaveLength(1)
    expect(chain.some((e) => e.type === "custom.late")).toBe(false)
    // The warming call's decision only.
    expect(chain.filter((e) => e.type === "policy.evaluated")).toHaveLength(1)
    const claimed = await t.query(
      (sql) => sql`SELECT 1 FROM idempotency_keys WHERE workspace_id = ${id} AND key = 'raced-the-deletion'`,
    )
    expect(claimed).toHaveLength(0)
  })
})

interface Endpoint {
  readonly method: string
  readonly path: (id: string) => string
  readonly body?: () => unknown
  readonly scope: string
  /** Whether a non-admin key of another workspace reaches the id (404 expected). */
  readonly crossWorkspace: boolean
}

const endpoints: ReadonlyArray<Endpoint> = [
  {
    method: "POST",
    path: () => "/api/v1/workspaces",
    body: () => ({ name: unique("sec") }),
    scope: "workspaces:admin",
    crossWorkspace: false,
  },
  { method: "GET", path: () => "/api/v1/workspaces", scope: "workspaces:read", crossWorkspace: false },
  { method: "GET", path: (id) => `/api/v1/workspaces/${id}`, scope: "workspaces:read", crossWorkspace: true },
  {
    method: "PATCH",
    path: (id) => `/api/v1/workspaces/${id}`,
    body: () => ({ name: unique("hijack") }),
    scope: "workspaces:write",
    crossWorkspace: true,
  },
  { method: "DELETE", path: (id) => `/api/v1/workspaces/${id}`, scope: "workspaces:admin", crossWorkspace: false },
]

describe.each(endpoints.map((e) => [`${e.method} ${e.path(":id").replace("/api/v1", "")}`, e] as const))(
  "%s security",
  (_, ep) => {
    /** The target is a workspace the bootstrap key may delete: `other`. */
    const refused = async (key: string | null, status: number, code: string, id = other.id) => {
      const before = { count: await workspaceCount(), events: await eventCount(id) }
      const record = (await t.call("GET", `/api/v1/workspaces/${id}`)).body.data
      const res = await t.call(ep.method, ep.path(id), { body: ep.body?.(), key })
      expectError(res, status, code)
      expect({ count: await workspaceCount(), events: await eventCount(id) }).toEqual(before)
      expect((await t.call("GET", `/api/v1/workspaces/${id}`)).body.data).toEqual(record)
      return res
    }

    it("refuses a request without a credential with 401", async () => {
      await refused(null, 401, "UNAUTHORIZED")
    })
    it("refuses a garbage credential with 401", async () => {
      await refused("not-a-key", 401, "UNAUTHORIZED")
    })
    it("refuses a well-formed key with a bad checksum with 401", async () => {
      await refused(tamper(t.key), 401, "UNAUTHORIZED")
    })
    it("refuses a correctly checksummed key it never issued with 401", async () => {
      await refused(mintKey("workspace", "test").key, 401, "UNAUTHORIZED")
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
      await refused(agentKey, 403, "FORBIDDEN")
    })
    if (ep.crossWorkspace) {
      it("answers 404 WORKSPACE_NOT_FOUND to a key of another workspace", async () => {
        await refused(member, 404, "WORKSPACE_NOT_FOUND", other.id)
        await refused(otherMember, 404, "WORKSPACE_NOT_FOUND", t.workspaceId)
      })
    }
  },
)
