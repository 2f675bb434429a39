import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer, unique } from "./helpers.ts"

let t: TestServer
let other: { id: string; key: string }

const agentsNamed = async (name: string) =>
  (await t.query<{ id: string }>((sql) => sql`SELECT id FROM agents WHERE name = ${name}`)).map((r) => r.id)
const registeredEvents = async (name: string) =>
  (
    await t.query<{ n: number }>(
      (sql) =>
        sql`SELECT count(*)::int AS n FROM events WHERE type = 'agent.registered' AND data->>'agentName' = ${name}`,
    )
  )[0]!.n
const eventCount = async () =>
  (
    await t.query<{ n: number }>(
      (sql) => sql`SELECT count(*)::int AS n FROM events WHERE workspace_id = ${t.workspaceId}`,
    )
  )[0]!.n

/** A raw request with a chunked body (no Content-Length), for the streaming size limit. */
const chunked = (path: string, chunks: ReadonlyArray<string>) =>
  new Promise<{ status: number; body: any; headers: Record<string, unknown> }>((resolve, reject) => {
    const req = request(
      `${t.url}${path}`,
      {
        method: "POST",
        headers: {
          authorization: `Bearer ${t.key}`,
          "content-type": "application/json",
          "transfer-encoding": "chunked",
        },
      },
      (res) => {
        let text = ""
        res.on("data", (c) => {
          text += c
        })
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text), headers: res.headers }))
      },
    )
    req.on("error", reject)
    for (const c of chunks) req.write(c)
    req.end()
  })

beforeAll(async () => {
  t = await startTestServer()
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: "envelope-other" } })
  other = { id: ws.body.data.workspace.id, key: ws.body.data.apiKey.apiKey }
})
afterAll(async () => t?.close())

describe("envelope", () => {
  it("wraps success in {ok, data} and lists in {ok, data, meta}, as JSON", async () => {
    const created = await t.call("POST", "/api/v1/agents", { body: { name: unique("env") } })
    expect(created.status).toBe(201)
    expect(Object.keys(created.body).sort()).toEqual(["data", "ok"])
    expect(created.body.ok).toBe(true)
    expect(created.headers.get("content-type")).toMatch(/^application\/json/)
    const listed = await t.call("GET", "/api/v1/agents?limit=1")
    expect(Object.keys(listed.body).sort()).toEqual(["data", "meta", "ok"])
    expect(Object.keys(listed.body.meta).sort()).toEqual(["cursor", "hasMore"])
    const failed = await t.call("GET", "/api/v1/agents/agt_missing")
    expect(Object.keys(failed.body).sort()).toEqual(["error", "ok"])
    expect(failed.body.ok).toBe(false)
    expect(failed.headers.get("content-type")).toMatch(/^application\/json/)
  })
})

describe("405 Method Not Allowed", () => {
  it.each([
    ["PUT", "/api/v1/agents", ["GET", "HEAD", "POST"]],
    ["DELETE", "/api/v1/agents", ["GET", "HEAD", "POST"]],
    ["PUT", "/api/v1/agents/agt_x", ["DELETE", "GET", "HEAD", "PATCH"]],
    ["POST", "/api/v1/agents/agt_x", ["DELETE", "GET", "HEAD", "PATCH"]],
    ["PATCH", "/api/v1/api-keys", ["GET", "HEAD", "POST"]],
    ["GET", "/api/v1/api-keys/key_x/rotate", ["POST"]],
    ["DELETE", "/v1/agents/agt_x/versions", ["GET", "HEAD", "POST"]],
    ["POST", "/api/v1/openapi.json", ["GET", "HEAD"]],
  ])("%s %s answers 405 with Allow", async (method, path, allowed) => {
    const res = await t.call(method, path, { body: method === "GET" ? undefined : {} })
    expectError(res, 405, "METHOD_NOT_ALLOWED")
    const allow = (res.headers.get("allow") ?? "")
      .split(",")
      .map((m) => m.trim())
      .filter(Boolean)
    expect(allow.sort()).toEqual(allowed)
    expect(res.headers.get("x-request-id")).toMatch(/^req_/)
  })
})

describe("HEAD", () => {
  it("answers a GET route's HEAD as its GET, headers and no body, and counts nothing twice", async () => {
    const get = await fetch(`${t.url}/api/v1/agents?limit=1`, { headers: { authorization: `Bearer ${t.key}` } })
    const getBody = await get.text()
    const head = await fetch(`${t.url}/api/v1/agents?limit=1`, {
      method: "HEAD",
      headers: { authorization: `Bearer ${t.key}` },
    })
    expect(head.status).toBe(200)
    expect(await head.text()).toBe("")
    expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"))
    expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(getBody)))
    expect(head.headers.get("x-ratelimit-limit")).toBe(get.headers.get("x-ratelimit-limit"))
    // Without a credential, the same 401 as GET's (its body left out).
    const anonymous = await fetch(`${t.url}/api/v1/agents`, { method: "HEAD" })
    expect(anonymous.status).toBe(401)
  })
})

describe("empty query parameters", () => {
  it.each([
    "/api/v1/approvals?status=",
    "/api/v1/enforcement?status=",
    "/api/v1/enforcement?agentId=",
    "/api/v1/events?agentId=",
    "/api/v1/events?type=",
    "/api/v1/events?type=,",
    "/api/v1/agents?limit=",
  ])("%s is a 400 naming the parameter, not a filter that means all or nothing", async (path) => {
    const res = await t.call("GET", path)
    const name = path.split("?")[1]!.split("=")[0]!
    expectError(res, 400, "BAD_REQUEST", name)
    expect(res.body.error.message).toContain("is empty")
  })
})

describe("415 Unsupported Media Type", () => {
  it.each(["text/plain", "application/x-www-form-urlencoded", "application/xml", "multipart/form-data; boundary=x"])(
    "refuses a %s body and creates nothing",
    async (type) => {
      const name = unique("media")
      const res = await t.call("POST", "/api/v1/agents", {
        rawBody: JSON.stringify({ name }),
        headers: { "content-type": type },
      })
      expectError(res, 415, "UNSUPPORTED_MEDIA_TYPE")
      expect(await agentsNamed(name)).toEqual([])
    },
  )

  it("refuses a PATCH body without a JSON content type", async () => {
    const agent = await t.call("POST", "/api/v1/agents", { body: { name: unique("media") } })
    const res = await t.call("PATCH", `/api/v1/agents/${agent.body.data.id}`, {
      rawBody: '{"description":"x"}',
      headers: { "content-type": "text/plain" },
    })
    expectError(res, 415, "UNSUPPORTED_MEDIA_TYPE")
    expect((await t.call("GET", `/api/v1/agents/${agent.body.data.id}`)).body.data.description).toBeNull()
  })

  it.each(["application/json; charset=utf-8", "APPLICATION/JSON", "application/merge-patch+json"])(
    "accepts %s",
    async (type) => {
      const name = unique("media-ok")
      const res = await t.call("POST", "/api/v1/agents", {
        rawBody: JSON.stringify({ name }),
        headers: { "content-type": type },
      })
      expect(res.status).toBe(201)
      expect(await agentsNamed(name)).toEqual([res.body.data.id])
    },
  )
})

describe("413 Payload Too Large", () => {
  it("refuses a body over maxBodyBytes (64 KiB) and creates nothing", async () => {
    const name = unique("big")
    const res = await t.call("POST", "/api/v1/agents", {
      body: { name, metadata: { blob: "x".repeat(70 * 1024) } },
    })
    expectError(res, 413, "PAYLOAD_TOO_LARGE")
    expect(res.headers.get("x-request-id")).toBeTruthy()
    expect(await agentsNamed(name)).toEqual([])
  })

  it("refuses an oversized chunked body that declares no length", async () => {
    const name = unique("big-chunked")
    const head = `{"name":"${name}","metadata":{"blob":"`
    const chunks = [head, ...Array.from({ length: 70 }, () => "y".repeat(1024)), '"}}']
    const res = await chunked("/api/v1/agents", chunks)
    expect(res.status).toBe(413)
    expect(res.body.error.code).toBe("PAYLOAD_TOO_LARGE")
    expect(await agentsNamed(name)).toEqual([])
  })

  it("answers tRPC's oversized body with 413 too, in both forms, and creates nothing", async () => {
    const name = unique("big-trpc")
    for (const batch of [false, true]) {
      const input = { name, metadata: { blob: "x".repeat(70 * 1024) } }
      const res = await t.call("POST", `/trpc/agents.create${batch ? "?batch=1" : ""}`, {
        rawBody: JSON.stringify(batch ? { 0: input } : input),
      })
      expect(res.status, JSON.stringify(res.body)).toBe(413)
      const error = (Array.isArray(res.body) ? res.body[0] : res.body).error
      expect(error.data.httpStatus).toBe(413)
      expect(error.data.apiError.code).toBe("PAYLOAD_TOO_LARGE")
    }
    expect(await agentsNamed(name)).toEqual([])
  })

  it("reads a body of exactly maxBodyBytes (and then validates it)", async () => {
    const name = unique("edge")
    const skeleton = JSON.stringify({ name, metadata: { blob: "" } })
    const body = JSON.stringify({ name, metadata: { blob: "z".repeat(64 * 1024 - skeleton.length) } })
    expect(Buffer.byteLength(body)).toBe(64 * 1024)
    const res = await t.call("POST", "/api/v1/agents", { rawBody: body })
    // Within the size limit: the metadata limit (16 KiB) answers, not the body limit.
    expectError(res, 422, "VALIDATION_ERROR", "metadata")
  })
})

describe("unknown routes", () => {
  it.each(["/api/v1/nope", "/api/v1/agents/agt_x/nope", "/nope", "/api/v2/agents", "/v1", "/api/v1"])(
    "GET %s answers 404 NOT_FOUND in the envelope",
    async (path) => {
      const res = await t.call("GET", path)
      expectError(res, 404, "NOT_FOUND")
      expect(res.headers.get("x-request-id")).toMatch(/^req_/)
    },
  )

  it("answers 404 NOT_FOUND without a credential too", async () => {
    expectError(await t.call("POST", "/api/v1/nothing-here", { body: {}, key: null }), 404, "NOT_FOUND")
  })
})

describe("X-Request-Id", () => {
  it("is on every response, success or failure, REST, tRPC and health", async () => {
    const responses = [
      await t.call("GET", "/api/v1/agents"),
      await t.call("POST", "/api/v1/agents", { body: { name: unique("rid") } }),
      await t.call("POST", "/api/v1/agents", { body: {} }),
      await t.call("POST", "/api/v1/agents", { rawBody: "{" }),
      await t.call("GET", "/api/v1/agents", { key: null }),
      await t.call("GET", "/api/v1/agents", { key: "garbage" }),
      await t.call("GET", "/api/v1/workspaces/ws_missing"),
      await t.call("PUT", "/api/v1/agents"),
      await t.call("GET", "/nope"),
      await t.call("GET", "/healthz"),
      await t.call("GET", "/readyz"),
      await t.call("GET", "/api/v1/openapi.json"),
      await t.call("GET", "/trpc/agents.list"),
      await t.call("GET", "/trpc/agents.list", { key: null }),
    ]
    const ids = responses.map((r) => r.headers.get("x-request-id"))
    for (const [i, id] of ids.entries()) expect(id, `response ${i}`).toMatch(/^req_[A-Za-z0-9_-]{8,}$/)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("echoes a sane incoming id, on success and on failure", async () => {
    const ok = await t.call("GET", "/api/v1/agents", { headers: { "x-request-id": "client-42.a:b_c" } })
    expect(ok.headers.get("x-request-id")).toBe("client-42.a:b_c")
    const failed = await t.call("GET", "/api/v1/agents", { key: null, headers: { "x-request-id": "trace-1" } })
    expect(failed.status).toBe(401)
    expect(failed.headers.get("x-request-id")).toBe("trace-1")
    const trpc = await t.call("GET", "/trpc/agents.list", { headers: { "x-request-id": "trpc-trace-7" } })
    expect(trpc.headers.get("x-request-id")).toBe("trpc-trace-7")
  })

  it.each(["has space", "x".repeat(129), "<script>", "a;b", "a,b", "a/b"])(
    "replaces an insane incoming id (%j) with its own",
    async (given) => {
      const res = await t.call("GET", "/api/v1/agents", { headers: { "x-request-id": given } })
      expect(res.status).toBe(200)
      const id = res.headers.get("x-request-id")
      expect(id).not.toBe(given)
      expect(id).toMatch(/^req_[A-Za-z0-9_-]{8,}$/)
    },
  )
})

describe("/v1 and /api/v1", () => {
  it("answer the same for the same operation", async () => {
    const created = await t.call("POST", "/v1/agents", { body: { name: unique("short"), labels: ["x"] } })
    expect(created.status).toBe(201)
    const id = created.body.data.id
    const long = await t.call("GET", `/api/v1/agents/${id}`)
    const short = await t.call("GET", `/v1/agents/${id}`)
    expect(short.status).toBe(200)
    expect(short.body).toEqual(long.body)
    expect(long.body.data).toEqual(created.body.data)
    const listLong = await t.call("GET", "/api/v1/agents?label=x")
    const listShort = await t.call("GET", "/v1/agents?label=x")
    expect(listShort.body).toEqual(listLong.body)
    const wsLong = await t.call("GET", `/api/v1/workspaces/${t.workspaceId}`)
    const wsShort = await t.call("GET", `/v1/workspaces/${t.workspaceId}`)
    expect(wsShort.body).toEqual(wsLong.body)
  })

  it("fail the same", async () => {
    const pairs: Array<[string, string, Record<string, unknown>]> = [
      ["GET", "/agents/agt_missing", {}],
      ["GET", "/agents?limit=0", {}],
      ["POST", "/agents", { body: { labels: ["BAD"] } }],
      ["GET", "/agents", { key: null }],
      ["PUT", "/agents", {}],
      ["POST", "/agents", { rawBody: "{" }],
    ]
    for (const [method, path, options] of pairs) {
      const long = await t.call(method, `/api/v1${path}`, options)
      const short = await t.call(method, `/v1${path}`, options)
      expect(short.status, `${method} ${path}`).toBe(long.status)
      const { message: _long, ...longError } = long.body.error
      const { message: _short, ...shortError } = short.body.error
      expect(shortError, `${method} ${path}`).toEqual(longError)
      expect(short.status).toBeGreaterThanOrEqual(400)
    }
  })
})

describe("Idempotency-Key", () => {
  it("replays the first response for the same key and body, creating one record", async () => {
    const name = unique("idem")
    const key = unique("idem-key")
    const body = { name, labels: ["a"] }
    const first = await t.call("POST", "/api/v1/agents", { body, headers: { "idempotency-key": key } })
    expect(first.status).toBe(201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    const second = await t.call("POST", "/api/v1/agents", { body, headers: { "idempotency-key": key } })
    expect(second.status).toBe(201)
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    expect(second.body).toEqual(first.body)
    expect(second.headers.get("x-request-id")).not.toBe(first.headers.get("x-request-id"))
    expect(await agentsNamed(name)).toEqual([first.body.data.id])
    expect(await registeredEvents(name)).toBe(1)
  })

  it("answers 409 IDEMPOTENCY_KEY_REUSED for the same key with another body, and creates nothing", async () => {
    const key = unique("idem-key")
    const first = await t.call("POST", "/api/v1/agents", {
      body: { name: unique("idem") },
      headers: { "idempotency-key": key },
    })
    expect(first.status).toBe(201)
    const name = unique("idem-other")
    const before = await eventCount()
    const res = await t.call("POST", "/api/v1/agents", { body: { name }, headers: { "idempotency-key": key } })
    expectError(res, 409, "IDEMPOTENCY_KEY_REUSED")
    expect(await agentsNamed(name)).toEqual([])
    expect(await eventCount()).toBe(before)
  })

  it("answers 409 for the same key on another operation", async () => {
    const key = unique("idem-key")
    const agent = await t.call("POST", "/api/v1/agents", {
      body: { name: unique("idem") },
      headers: { "idempotency-key": key },
    })
    expect(agent.status).toBe(201)
    const res = await t.call("POST", `/api/v1/agents/${agent.body.data.id}/versions`, {
      body: { version: "1" },
      headers: { "idempotency-key": key },
    })
    expectError(res, 409, "IDEMPOTENCY_KEY_REUSED")
    expect((await t.call("GET", `/api/v1/agents/${agent.body.data.id}/versions`)).body.data).toEqual([])
  })

  it("keeps keys per workspace", async () => {
    const key = unique("idem-key")
    const body = { name: unique("idem-shared") }
    const mine = await t.call("POST", "/api/v1/agents", { body, headers: { "idempotency-key": key } })
    const theirs = await t.call("POST", "/api/v1/agents", { body, headers: { "idempotency-key": key }, key: other.key })
    expect(mine.status).toBe(201)
    expect(theirs.status).toBe(201)
    expect(theirs.headers.get("idempotent-replayed")).toBeNull()
    expect(theirs.body.data.workspaceId).toBe(other.id)
    expect(theirs.body.data.id).not.toBe(mine.body.data.id)
  })

  it("keeps a key to its credential: another one reusing it gets 409, never the first answer", async () => {
    const key = unique("idem-key")
    const body = { name: unique("idem-cred") }
    const mine = await t.call("POST", "/api/v1/agents", { body, headers: { "idempotency-key": key } })
    expect(mine.status).toBe(201)
    const second = await t.createKey({ type: "workspace", scopes: ["agents:read", "agents:write"] })
    const before = await eventCount()
    const theirs = await t.call("POST", "/api/v1/agents", { body, headers: { "idempotency-key": key }, key: second })
    expectError(theirs, 409, "IDEMPOTENCY_KEY_REUSED")
    expect(JSON.stringify(theirs.body)).not.toContain(mine.body.data.id)
    expect(await eventCount()).toBe(before)
    // A token acts as its key: the key's retry through a token it minted still replays.
    const token = (await t.call("POST", "/api/v1/tokens")).body.data.token as string
    const retried = await t.call("POST", "/api/v1/agents", { body, headers: { "idempotency-key": key }, key: token })
    expect(retried.headers.get("idempotent-replayed")).toBe("true")
    expect(retried.body).toEqual(mine.body)
  })

  it("mints a new SDK token for every call: a key is accepted, no token is stored or replayed", async () => {
    const key = unique("idem-key")
    const first = await t.call("POST", "/api/v1/tokens", { headers: { "idempotency-key": key } })
    const second = await t.call("POST", "/api/v1/tokens", { headers: { "idempotency-key": key } })
    expect([first.status, second.status]).toEqual([201, 201])
    expect(second.headers.get("idempotent-replayed")).toBeNull()
    expect(second.body.data.token).not.toBe(first.body.data.token)
    const stored = await t.query<{ n: number }>(
      (sql) => sql`SELECT count(*)::int AS n FROM idempotency_keys WHERE key = ${key}`,
    )
    expect(stored[0]!.n).toBe(0)
    expectError(
      await t.call("POST", "/api/v1/tokens", { headers: { "idempotency-key": "has space" } }),
      400,
      "BAD_REQUEST",
      "Idempotency-Key",
    )
  })

  it("does not keep a failed request: the key stays usable", async () => {
    const taken = await t.call("POST", "/api/v1/agents", { body: { name: unique("idem-taken") } })
    const key = unique("idem-key")
    const dup = { name: taken.body.data.name }
    expectError(
      await t.call("POST", "/api/v1/agents", { body: dup, headers: { "idempotency-key": key } }),
      409,
      "CONFLICT",
    )
    const again = await t.call("POST", "/api/v1/agents", { body: dup, headers: { "idempotency-key": key } })
    expectError(again, 409, "CONFLICT")
    expect(again.headers.get("idempotent-replayed")).toBeNull()
    const fresh = await t.call("POST", "/api/v1/agents", {
      body: { name: unique("idem-after") },
      headers: { "idempotency-key": key },
    })
    expect(fresh.status).toBe(201)
  })

  it("creates exactly one record for concurrent identical requests with one key", async () => {
    const name = unique("idem-race")
    const key = unique("idem-key")
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        t.call("POST", "/api/v1/agents", { body: { name }, headers: { "idempotency-key": key } }),
      ),
    )
    for (const r of results) expect(r.status, JSON.stringify(r.body)).toBe(201)
    const ids = new Set(results.map((r) => r.body.data.id))
    expect(ids.size).toBe(1)
    expect(results.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1)
    expect(await agentsNamed(name)).toEqual([...ids])
    expect(await registeredEvents(name)).toBe(1)
  })

  it.each([["x".repeat(256)], ["has space"], [""]])("refuses a malformed key %j with 400", async (key) => {
    const name = unique("idem-bad")
    const res = await t.call("POST", "/api/v1/agents", { body: { name }, headers: { "idempotency-key": key } })
    expectError(res, 400, "BAD_REQUEST", "Idempotency-Key")
    expect(await agentsNamed(name)).toEqual([])
  })
})

describe("operations that take no fields", () => {
  it.each([
    ["/api/v1/tokens", "scopes", { scopes: ["agents:read"] }],
    ["/api/v1/events/verify", "bogus", { bogus: 1 }],
  ])("POST %s refuses a body field (%s) with 422 instead of ignoring it", async (path, field, body) => {
    const before = await eventCount()
    expectError(await t.call("POST", path, { body }), 422, "VALIDATION_ERROR", field)
    expect(await eventCount()).toBe(before)
    expect((await t.call("POST", path, { body: {} })).status).toBeLessThan(300)
  })
})

describe("strings a database cannot keep", () => {
  it.each([
    ["a NUL in a value", JSON.stringify({ name: "a\u0000b" }), "name"],
    ["an escaped NUL in a value", '{"name":"a\\u0000b"}', "name"],
    ["an unpaired high surrogate", '{"name":"x\\ud800"}', "name"],
    ["an unpaired low surrogate", '{"name":"\\udc00y"}', "name"],
    ["a NUL in an array item", '{"name":"ok","labels":["fine","\\u0000"]}', "labels[1]"],
    ["a NUL in a nested value", '{"name":"ok","metadata":{"a":{"b":"\\u0000"}}}', "metadata.a.b"],
  ])("answers %s with 422, not 500, and creates nothing", async (_, rawBody, field) => {
    const before = await eventCount()
    const res = await t.call("POST", "/api/v1/agents", { rawBody })
    expectError(res, 422, "VALIDATION_ERROR", field)
    expect(await eventCount()).toBe(before)
  })

  it("answers a NUL or a lone surrogate in an object key with 422", async () => {
    for (const rawBody of ['{"name":"ok","metadata":{"k\\u0000":1}}', '{"name":"ok","metadata":{"\\ud83d":1}}']) {
      const res = await t.call("POST", "/api/v1/agents", { rawBody })
      expect(res.status, rawBody).toBe(422)
      expect(res.body.error.code).toBe("VALIDATION_ERROR")
    }
  })

  it("answers deeply nested JSON with 422", async () => {
    let deep: unknown = "leaf"
    for (let i = 0; i < 40; i++) deep = { d: deep }
    const res = await t.call("POST", "/api/v1/agents", { body: { name: unique("deep"), metadata: deep } })
    expectError(res, 422, "VALIDATION_ERROR")
  })

  it("answers NUL in PATCH, key and workspace bodies with 422", async () => {
    const agent = await t.call("POST", "/api/v1/agents", { body: { name: unique("nul") } })
    expectError(
      await t.call("PATCH", `/api/v1/agents/${agent.body.data.id}`, { rawBody: '{"description":"\\u0000"}' }),
      422,
      "VALIDATION_ERROR",
      "description",
    )
    expectError(
      await t.call("POST", "/api/v1/api-keys", {
        rawBody: '{"name":"k\\u0000","type":"workspace","scopes":["agents:read"]}',
      }),
      422,
      "VALIDATION_ERROR",
      "name",
    )
    expectError(
      await t.call("POST", "/api/v1/workspaces", { rawBody: '{"name":"\\ud800"}' }),
      422,
      "VALIDATION_ERROR",
      "name",
    )
  })

  it.each([
    ["/api/v1/agents/agt_%00", "AGENT_NOT_FOUND"],
    ["/api/v1/agents/agt_%00/versions", "AGENT_NOT_FOUND"],
    ["/api/v1/api-keys/key_%00", "API_KEY_NOT_FOUND"],
    ["/api/v1/workspaces/ws_%00", "WORKSPACE_NOT_FOUND"],
  ])("answers a NUL in the path id of GET %s with 404 %s, not 500", async (path, code) => {
    expectError(await t.call("GET", path), 404, code)
  })

  it.each([
    ["/api/v1/agents?namePrefix=a%00", "namePrefix"],
    ["/api/v1/api-keys?agentId=agt_%00", "agentId"],
  ])("answers a NUL in the query of GET %s with 400, not 500", async (path, field) => {
    expectError(await t.call("GET", path), 400, "BAD_REQUEST", field)
  })
})

describe("bytes and values that would be stored as something never sent", () => {
  const send = (path: string, body: Uint8Array | string, contentType = "application/json") =>
    fetch(`${t.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": contentType },
      body,
    }).then(async (res) => ({ status: res.status, headers: res.headers, body: (await res.json()) as any }))

  it("refuses a body that is not UTF-8 with 400, and stores nothing", async () => {
    const name = unique("latin")
    const before = await eventCount()
    const bytes = Buffer.concat([Buffer.from(`{"name":"${name}caf`), Buffer.from([0xe9]), Buffer.from('"}')])
    expectError(await send("/api/v1/agents", bytes), 400, "BAD_REQUEST")
    expect(await agentsNamed(`${name}caf\ufffd`)).toEqual([])
    const ingest = Buffer.concat([
      Buffer.from('{"events":[{"type":"tool.utf8","data":{"note":"'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}}]}'),
    ])
    expectError(await send("/api/v1/events/ingest", ingest), 400, "BAD_REQUEST")
    expect(await eventCount()).toBe(before)
  })

  it("refuses a JSON body declared in another charset with 415", async () => {
    const name = unique("charset")
    const res = await send("/api/v1/agents", JSON.stringify({ name }), "application/json; charset=latin1")
    expectError(res, 415, "UNSUPPORTED_MEDIA_TYPE")
    expect(await agentsNamed(name)).toEqual([])
    expect((await send("/api/v1/agents", JSON.stringify({ name }), "application/json; charset=UTF-8")).status).toBe(201)
  })

  it("answers a NUL in a stream query parameter with 400 naming it, not 500", async () => {
    for (const name of ["lastEventId", "agentId"]) {
      const res = await fetch(`${t.url}/api/v1/events/stream?${name}=a%00b`, {
        headers: { authorization: `Bearer ${t.key}` },
      })
      expectError({ status: res.status, headers: res.headers, body: await res.json() }, 400, "BAD_REQUEST", name)
    }
  })

  it("answers 405 to anything but GET on /healthz and /readyz", async () => {
    for (const path of ["/healthz", "/readyz"]) {
      const res = await fetch(`${t.url}${path}`, { method: "POST", body: "x" })
      expectError({ status: res.status, headers: res.headers, body: await res.json() }, 405, "METHOD_NOT_ALLOWED")
      expect(res.headers.get("allow")).toBe("GET, HEAD")
      expect((await fetch(`${t.url}${path}`)).status).toBe(200)
    }
  })

  it("refuses another list's cursor, or a forged one, with 400 naming cursor", async () => {
    const forged = Buffer.from("v1:zzz_notanid").toString("base64url")
    const policyCursor = Buffer.from("v1:pol_01kabcdefghjkmnpqrstvwxyz0").toString("base64url")
    for (const path of ["/api/v1/agents", "/api/v1/api-keys", "/api/v1/policies", "/api/v1/webhooks"]) {
      for (const cursor of path === "/api/v1/policies" ? [forged] : [forged, policyCursor])
        expectError(await t.call("GET", `${path}?cursor=${cursor}`), 400, "BAD_REQUEST", "cursor")
    }
  })

  it("refuses inverted ranges, and names the parameter that was sent", async () => {
    expectError(
      await t.call("GET", "/api/v1/events?fromSequence=10&toSequence=5"),
      422,
      "VALIDATION_ERROR",
      "fromSequence",
    )
    const since = "2026-01-02T00:00:00.000Z"
    const until = "2026-01-01T00:00:00.000Z"
    expectError(await t.call("GET", `/api/v1/events?since=${since}&until=${until}`), 422, "VALIDATION_ERROR", "since")
    expectError(await t.call("GET", "/api/v1/events/export?toSequence=99999999"), 422, "VALIDATION_ERROR", "toSequence")
    expectError(
      await t.call("GET", "/api/v1/events/proofs/consistency?fromSize=5&toSize=2"),
      422,
      "VALIDATION_ERROR",
      "fromSize",
    )
    expectError(
      await t.call("GET", "/api/v1/events/proofs/consistency?fromSize=1&toSize=99999999"),
      404,
      "CHECKPOINT_NOT_FOUND",
      "toSize",
    )
  })
})
