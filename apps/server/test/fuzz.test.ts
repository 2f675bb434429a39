/**
 * Property test over every endpoint (decisions D1, D2): whatever a client sends, the server never
 * answers 5xx, always answers in the JSON envelope with the status/code pairs of D2, and always
 * carries X-Request-Id.
 *
 * Requests go through node:http rather than fetch so that the fuzz can send what fetch refuses or
 * rewrites: GET with a body, raw `..` and malformed percent escapes in the path, odd header values.
 *
 * The seed is random; fast-check prints it with the counterexample on failure. Replay a failure with
 * `FUZZ_SEED=<seed> npm test -- test/fuzz.test.ts`.
 */
import { Agent as HttpAgent, type IncomingHttpHeaders, request } from "node:http"
import { type Operation, operations } from "@agentgov/api"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer } from "./helpers.ts"

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Date.now() ^ (Math.random() * 0x7fffffff)
const params = <T>(numRuns: number): fc.Parameters<T> => ({ numRuns, seed: SEED, verbose: 1 })

let t: TestServer
let base: URL
const agent = new HttpAgent({ keepAlive: true, maxSockets: 4 })

/** Ids of real records the fuzz may read, change, rotate or delete (never the bootstrap key's). */
const pool = { agents: [] as Array<string>, keys: [] as Array<string>, workspaces: [] as Array<string> }

beforeAll(async () => {
  t = await startTestServer()
  base = new URL(t.url)
  pool.workspaces.push(t.workspaceId)
  for (let i = 0; i < 4; i++) {
    const a = await t.call("POST", "/api/v1/agents", {
      body: { name: `fuzz-target-${i}`, labels: ["fuzz"], metadata: { i } },
    })
    expect(a.status).toBe(201)
    pool.agents.push(a.body.data.id)
    const k = await t.call("POST", "/api/v1/api-keys", {
      body: {
        name: `fuzz-key-${i}`,
        type: i % 2 ? "agent" : "workspace",
        agentId: i % 2 ? a.body.data.id : undefined,
        scopes: ["agents:read"],
      },
    })
    expect(k.status).toBe(201)
    pool.keys.push(k.body.data.id)
  }
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: "fuzz-other" } })
  expect(ws.status).toBe(201)
  pool.workspaces.push(ws.body.data.workspace.id)
})

afterAll(async () => {
  agent.destroy()
  await t?.close()
})

// ---------------------------------------------------------------------------------------------
// Sending raw requests

interface Req {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string>
  /** A string is sent as UTF-8; a byte array as is. */
  readonly body?: string | Uint8Array | undefined
  /** Whether `authorization` holds the bootstrap key in a form the server must accept. */
  readonly validCredential: boolean
}

interface Res {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly text: string
}

const send = (r: Req): Promise<Res> =>
  new Promise((resolve, reject) => {
    const body =
      r.body === undefined ? undefined : typeof r.body === "string" ? Buffer.from(r.body, "utf8") : Buffer.from(r.body)
    const headers: Record<string, string> = { ...r.headers }
    if (body !== undefined) headers["content-length"] = String(body.length)
    const req = request(
      { host: base.hostname, port: base.port, method: r.method, path: r.path, headers, agent },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () =>
          resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }),
        )
        res.on("error", reject)
      },
    )
    req.on("error", reject)
    req.end(body)
  })

// ---------------------------------------------------------------------------------------------
// The property

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const CODE = /^[A-Z][A-Z0-9_]*$/
/** The error code D2 fixes for a status (409 and 429 aside, where the code names the conflict). */
const codeFor: Record<number, (code: string) => boolean> = {
  400: (c) => c === "BAD_REQUEST",
  401: (c) => c === "UNAUTHORIZED",
  403: (c) => c === "FORBIDDEN",
  404: (c) => c.endsWith("NOT_FOUND"),
  405: (c) => c === "METHOD_NOT_ALLOWED",
  409: (c) => CODE.test(c),
  413: (c) => c === "PAYLOAD_TOO_LARGE",
  415: (c) => c === "UNSUPPORTED_MEDIA_TYPE",
  422: (c) => c === "VALIDATION_ERROR",
  429: (c) => c === "RATE_LIMITED",
}

/**
 * Catalog routes as the server's router matches them (after URL normalisation and prefix stripping):
 * the first path that matches decides, literal segments before parameters (`/events/ingest` before `/events/:id`).
 */
const routes = [...new Set(operations.map((op) => op.path))]
  .sort((a, b) => (a.match(/:/g)?.length ?? 0) - (b.match(/:/g)?.length ?? 0))
  .map((path) => ({
    pattern: new RegExp(`^${path.replace(/:[A-Za-z]+/g, "[^/]+")}/?$`),
    ops: operations.filter((op) => op.path === path),
  }))
const routeOf = (rawPath: string) => {
  let pathname: string
  try {
    pathname = new URL(rawPath, "http://local").pathname
  } catch {
    return { pathname: undefined, prefixed: undefined, ops: [] }
  }
  const prefix = ["/api/v1", "/v1"].find((p) => pathname === p || pathname.startsWith(`${p}/`))
  const rest = prefix === undefined ? undefined : pathname.slice(prefix.length) || "/"
  const ops = rest === undefined ? [] : (routes.find((r) => r.pattern.test(rest))?.ops ?? [])
  return { pathname, prefixed: rest, ops }
}

const stats = { total: 0, byClass: new Map<string, number>() }

const checkResponse = (r: Req, res: Res): void => {
  stats.total++
  const cls = `${Math.floor(res.status / 100)}xx`
  stats.byClass.set(cls, (stats.byClass.get(cls) ?? 0) + 1)
  stats.byClass.set(String(res.status), (stats.byClass.get(String(res.status)) ?? 0) + 1)

  const where = `${r.method} ${r.path.slice(0, 200)} → ${res.status} ${res.text.slice(0, 300)}`
  expect(res.status, where).toBeLessThan(500)
  const requestId = res.headers["x-request-id"]
  expect(typeof requestId === "string" && REQUEST_ID.test(requestId), `X-Request-Id missing: ${where}`).toBe(true)
  const sentId = r.headers["x-request-id"]
  // A sane id is echoed (one with surrounding whitespace may be replaced: the parser keeps it in the value).
  if (sentId !== undefined && REQUEST_ID.test(sentId)) expect(requestId, where).toBe(sentId)

  if (r.method === "HEAD") {
    expect(res.text, where).toBe("")
    return
  }

  const { pathname, prefixed, ops } = routeOf(r.path)
  if (pathname === "/trpc" || pathname?.startsWith("/trpc/")) {
    checkTrpc(res, where)
    return
  }
  if (r.method === "GET" && (prefixed === "/reference" || prefixed === "/docs")) {
    expect(res.status, where).toBe(200)
    expect(res.headers["content-type"], where).toMatch(/^text\/html/)
    return
  }

  // The public badge (D13): an image unless JSON is asked for, and a cache may be told it still holds it.
  const publicOp = ops.find((o) => o.method === r.method && o.public)
  if (publicOp !== undefined && res.status === 304) {
    expect(res.text, where).toBe("")
    return
  }
  if (publicOp?.name === "trust.badge" && res.headers["content-type"]?.startsWith("image/svg+xml")) {
    expect([200, 404], where).toContain(res.status)
    expect(res.text.startsWith("<svg "), where).toBe(true)
    return
  }

  expect(res.headers["content-type"], where).toMatch(/^application\/json/)
  let body: any
  try {
    body = JSON.parse(res.text)
  } catch {
    throw new Error(`body is not JSON: ${where}`)
  }
  if (r.method === "GET" && prefixed === "/openapi.json") {
    expect(res.status, where).toBe(200)
    expect(body.openapi, where).toBe("3.1.0")
    return
  }
  // RFC 7517's own format, not the envelope: verifiers read `keys` from it.
  if (r.method === "GET" && pathname === "/.well-known/jwks.json") {
    expect(res.status, where).toBe(200)
    expect(Array.isArray(body.keys) && body.keys.length > 0, where).toBe(true)
    return
  }
  expect(body !== null && typeof body === "object" && !Array.isArray(body), where).toBe(true)

  if (res.status >= 200 && res.status < 300) {
    expect(body.ok, where).toBe(true)
    expect("data" in body, where).toBe(true)
    expect(
      Object.keys(body).every((k) => k === "ok" || k === "data" || k === "meta"),
      where,
    ).toBe(true)
    const op = ops.find((o) => o.method === r.method)
    if (op?.paginated) {
      expect(Array.isArray(body.data), where).toBe(true)
      expect(body.meta, where).toEqual({ cursor: body.meta.cursor, hasMore: body.meta.hasMore })
      expect(body.meta.cursor === null || typeof body.meta.cursor === "string", where).toBe(true)
      expect(typeof body.meta.hasMore, where).toBe("boolean")
    }
    return
  }

  // 4xx
  expect(Object.keys(body).sort(), where).toEqual(["error", "ok"])
  expect(body.ok, where).toBe(false)
  const error = body.error
  expect(typeof error?.code, where).toBe("string")
  expect(typeof error.message, where).toBe("string")
  expect(error.code, where).toMatch(CODE)
  expect(
    Object.keys(error).every((k) => k === "code" || k === "message" || k === "details"),
    where,
  ).toBe(true)
  if (error.details !== undefined) {
    expect(Object.keys(error.details).sort(), where).toEqual(["field", "issue"])
    expect(typeof error.details.field, where).toBe("string")
    expect(typeof error.details.issue, where).toBe("string")
  }
  const expected = codeFor[res.status]
  expect(expected, `unexpected status: ${where}`).toBeDefined()
  expect(expected!(error.code), `status ${res.status} with code ${error.code}: ${where}`).toBe(true)
  if (res.status === 422) expect(typeof error.details?.field, `422 without details.field: ${where}`).toBe("string")
  if (res.status === 405) expect(res.headers.allow, `405 without Allow: ${where}`).toBeTruthy()

  // D1: every catalog operation needs a credential, and the REST facade checks it first, before the
  // path, query or body are looked at; a valid one is never refused. Public ones (badges) read none.
  const op = ops.find((o) => o.method === r.method)
  if (op?.public) expect(res.status, `a public operation asked for a credential: ${where}`).not.toBe(401)
  else if (op !== undefined) {
    if (r.validCredential) expect(res.status, `a valid credential was refused: ${where}`).not.toBe(401)
    else expect(res.status, `an invalid credential got past authentication: ${where}`).toBe(401)
  }
}

const checkTrpc = (res: Res, where: string): void => {
  let body: any
  try {
    body = JSON.parse(res.text)
  } catch {
    throw new Error(`tRPC body is not JSON: ${where}`)
  }
  const items = Array.isArray(body) ? body : [body]
  for (const item of items) {
    if (item !== null && typeof item === "object" && "result" in item) {
      expect(item.result !== null && typeof item.result === "object" && "data" in item.result, where).toBe(true)
      continue
    }
    expect(typeof item?.error?.message, where).toBe("string")
    expect(typeof item.error.code, where).toBe("number")
    const api = item.error.data?.apiError
    expect(typeof api?.code, `tRPC error without data.apiError: ${where}`).toBe("string")
    expect(api.code, where).toMatch(CODE)
    expect(typeof api.message, where).toBe("string")
    expect(item.error.data.httpStatus, where).toBeLessThan(500)
  }
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Header-safe text: node:http accepts \t, printable ASCII and Latin-1 in header values. */
const headerText = (maxLength: number) =>
  fc.string({
    unit: fc
      .oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }))
      .map((c) => String.fromCharCode(c)),
    maxLength,
  })

/** Percent-encodes as UTF-8, lone surrogates included (as the WTF-8 bytes a hostile client could send). */
const encodeLoose = (s: string): string => {
  let out = ""
  for (const ch of s) {
    const cp = ch.codePointAt(0)!
    if (/[A-Za-z0-9\-._~!$&'()*+,;=:@]/.test(ch)) out += ch
    else if (cp >= 0xd800 && cp <= 0xdfff)
      out += [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`)
        .join("")
    else out += encodeURIComponent(ch)
  }
  return out
}

/** A path segment, already in the form sent on the wire. */
const segment = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...["agt", "key", "ws"].map((p) => `${p}_01m7xnz8y6mvb1mm22txyk7he3`)) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 40 }).map(encodeLoose) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }).map(encodeLoose) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "..",
      ".",
      "%00",
      "a%00b",
      "%",
      "%zz",
      "%2F",
      "%2e%2e",
      "%2E",
      "%C0%80",
      "%FF",
      "%ED%A0%80",
      "%EF%BF%BF",
      "%F0%9F%98%80",
      "%E2%80%AE",
      "%5C",
      "%20",
      "+",
      "*",
      ";",
      ":id",
      "{id}",
      "null",
      "undefined",
      "0",
      "-1",
      "1e400",
      "__proto__",
      "constructor",
      "evaluate",
      "verify",
      "rotate",
      "versions",
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 256, max: 6000 }).map((n) => "a".repeat(n)) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 300 }).map((n) => encodeLoose("é😀\u0000".repeat(n))) },
)

/** Real ids of the resource a path names, so that a fair share of requests find their record. */
const poolFor = (path: string): Array<string> =>
  path.startsWith("/agents")
    ? pool.agents
    : path.startsWith("/api-keys")
      ? pool.keys
      : path.startsWith("/workspaces")
        ? pool.workspaces
        : []

const idParam = (path = "") =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...(poolFor(path).length ? poolFor(path) : pool.agents)) },
    { weight: 2, arbitrary: fc.constantFrom(...pool.agents, ...pool.keys, ...pool.workspaces) },
    { weight: 4, arbitrary: segment },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...pool.agents, ...pool.keys), segment).map(([a, b]) => a + b) },
  )

/** Every query parameter some operation declares, and a few no operation does. */
const QUERY_NAMES = [
  ...new Set(
    operations
      .filter((op) => op.method === "GET" || op.method === "DELETE")
      .flatMap((op) => Object.keys((op.input as unknown as { fields?: Record<string, unknown> }).fields ?? {}))
      .filter((f) => f !== "id"),
  ),
  "id",
  "__proto__",
  "include",
]
const EDGE_TIMES = [
  "+275760-09-13T00:00:00.000Z",
  "-271821-04-20T00:00:00.000Z",
  "0000-01-01T00:00:00.000Z",
  "1969-12-31T23:59:59.999Z",
  "2026-02-30T00:00:00Z",
  "9999-12-31T23:59:59.999Z",
]
const queryValue = fc.oneof(
  fc.constantFrom(
    "1",
    "25",
    "100",
    "0",
    "101",
    "-1",
    "1.5",
    "1e2",
    "99999999999999999999999",
    "NaN",
    "true",
    "",
    "%00",
    "%",
    "%zz",
    "active",
    "revoked",
    "deregistered",
    "fuzz",
    "dj0xOmFndF94",
    "v1:agt_x",
    "%ED%A0%80",
    "agent.*",
    "*",
    "9007199254740993",
    ...EDGE_TIMES.map(encodeURIComponent),
  ),
  fc.string({ unit: "binary", maxLength: 30 }).map(encodeLoose),
  fc.integer().map(String),
)
const queryString = fc.oneof(
  { weight: 8, arbitrary: fc.constant("") },
  {
    weight: 5,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.oneof(fc.constantFrom(...QUERY_NAMES), fc.string({ unit: "binary", maxLength: 8 }).map(encodeLoose)),
          queryValue,
        ),
        { maxLength: 4 },
      )
      .map((pairs) => (pairs.length ? `?${pairs.map(([k, v]) => `${k}=${v}`).join("&")}` : "")),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "?",
      "?&&",
      "?=x",
      "?limit",
      "?limit=1&limit=2",
      "?a=%",
      "?#frag",
      "?cursor=%00&limit=2",
    ),
  },
)

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "APPLICATION/JSON",
  "application/vnd.api+json",
  "application/merge-patch+json",
  "application/jsonx",
  "application/json;charset=latin1",
  "text/plain",
  "text/json",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/octet-stream",
  "",
  ";",
  "application/",
  "*/*",
]

const validAuthorization = () =>
  fc.constantFrom(`Bearer ${t.key}`, `bearer ${t.key}`, `BEARER   ${t.key}`, `Bearer ${t.key}  `)
const invalidAuthorization = () => {
  const k = t.key
  const flipped = k.slice(0, -1) + (k.endsWith("A") ? "B" : "A")
  return fc.oneof(
    fc.constantFrom(
      undefined,
      "",
      "Bearer",
      "Bearer ",
      `Basic ${Buffer.from("u:p").toString("base64")}`,
      `Token ${k}`,
      k,
      `Bearer ${flipped}`,
      `Bearer ${k.slice(0, -6)}`,
      `Bearer ${k}x`,
      `Bearer ${k} ${k}`,
      `Bearer ${k}, Bearer ${k}`,
      "Bearer svc_ws_live_",
      "Bearer svc_ag_sk_test_0000000000000000000000000000000000000000",
      "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
      `Bearer ${"x".repeat(4000)}`,
      "Bearer null",
      "Bearer é",
    ),
    headerText(60).map((s) => `Bearer ${s}`),
    fc.stringMatching(/^[A-Za-z0-9]{32,44}$/).map((s) => `Bearer svc_ws_live_${s}`),
    headerText(80),
  )
}

const SCOPE_NAMES = [
  "agents:read",
  "agents:write",
  "apikeys:read",
  "apikeys:write",
  "workspaces:read",
  "workspaces:write",
  "workspaces:admin",
  "guard:evaluate",
  "policies:evaluate",
  "events:read",
  "nope",
  "agents:*",
  "",
]

const anyJson = fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.jsonValue({ maxDepth: 2, stringUnit: "binary" }))
/** Objects shaped like the real inputs, with a fair chance of each field having the wrong type. */
const shapedBody = () =>
  fc
    .record(
      {
        name: fc.oneof(
          fc.string({ minLength: 1, maxLength: 30 }),
          fc.string({ minLength: 195, maxLength: 210 }),
          anyJson,
        ),
        description: fc.oneof(fc.string({ maxLength: 40 }), fc.constant(null), anyJson),
        labels: fc.oneof(
          fc.array(fc.stringMatching(/^[a-z0-9][a-z0-9_.:/-]{0,10}$/), { maxLength: 5 }),
          fc.array(fc.string(), { maxLength: 3 }),
          anyJson,
        ),
        metadata: fc.oneof(fc.dictionary(fc.string({ maxLength: 8 }), anyJson, { maxKeys: 5 }), anyJson),
        version: fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), anyJson),
        type: fc.oneof(fc.constantFrom("workspace", "agent", "WORKSPACE"), anyJson),
        agentId: fc.oneof(fc.constantFrom(...pool.agents), fc.string({ maxLength: 12 }), anyJson),
        scopes: fc.oneof(fc.subarray(SCOPE_NAMES), anyJson),
        expiresAt: fc.oneof(
          fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4e12) }).map((d) => d.toISOString()),
          fc.constantFrom(
            "2020-01-01",
            "tomorrow",
            "2099-12-31T23:59:59.999Z",
            "Tue, 01 Jan 2030 00:00:00 GMT",
            ...EDGE_TIMES,
          ),
          anyJson,
        ),
        overlapSeconds: fc.oneof(fc.integer({ min: -5, max: 3_000_000 }), fc.double(), anyJson),
        environment: fc.oneof(fc.constantFrom("live", "test", "prod"), anyJson),
        plan: fc.oneof(fc.constantFrom("free", "pro", "enterprise", "gold"), anyJson),
        guardDefault: fc.oneof(fc.constantFrom("allow", "deny", "maybe"), anyJson),
        id: fc.oneof(fc.constantFrom(...pool.agents), fc.string({ maxLength: 5 })),
        events: fc.oneof(
          fc.array(
            fc.record(
              {
                type: fc.oneof(
                  fc.constantFrom("deploy.started", "agent.registered", "x", "a.b.c", "UPPER.case", ""),
                  anyJson,
                ),
                agentId: fc.oneof(fc.constantFrom(...pool.agents), fc.constant(null), anyJson),
                data: fc.oneof(fc.dictionary(fc.string({ maxLength: 8 }), anyJson, { maxKeys: 4 }), anyJson),
                occurredAt: fc.oneof(
                  fc.constantFrom("2026-01-01T00:00:00.000Z", "yesterday", "1970-01-01T00:00:00Z", ...EDGE_TIMES),
                  anyJson,
                ),
              },
              { requiredKeys: ["type", "data"] },
            ),
            { maxLength: 4 },
          ),
          fc.constant(Array.from({ length: 101 }, (_, i) => ({ type: "bulk.event", data: { i } }))),
          anyJson,
        ),
        extra: anyJson,
      },
      { requiredKeys: [] },
    )
    .map((o) => JSON.stringify(o))

let unique = 0
/** Well-typed values per input field name, so that a fair share of requests succeed and reach the store. */
const validField: Record<string, () => fc.Arbitrary<unknown>> = {
  name: () => fc.string({ unit: "grapheme", minLength: 1, maxLength: 12 }).map((s) => `${s}-${unique++}`),
  description: () => fc.string({ unit: "grapheme", maxLength: 40 }),
  labels: () => fc.array(fc.stringMatching(/^[a-z0-9][a-z0-9_.:/-]{0,10}$/), { maxLength: 4 }),
  metadata: () =>
    fc.dictionary(
      fc.string({ maxLength: 8 }).filter((k) => !k.includes("\u0000")),
      fc.jsonValue({ maxDepth: 2 }).filter((v) => !JSON.stringify(v).includes("\\u0000")),
      { maxKeys: 4 },
    ),
  version: () => fc.string({ minLength: 1, maxLength: 8 }).map((s) => `${s}-${unique++}`),
  type: () => fc.constant("workspace"),
  scopes: () => fc.subarray(["agents:read", "agents:write", "apikeys:read", "events:read"], { minLength: 1 }),
  overlapSeconds: () => fc.integer({ min: 0, max: 86400 }),
  plan: () => fc.constantFrom("free", "pro", "enterprise"),
  guardDefault: () => fc.constantFrom("allow", "deny"),
  environment: () => fc.constantFrom("live", "test"),
  expiresAt: () => fc.constantFrom("2099-01-01T00:00:00.000Z", "2030-06-01T12:00:00Z", "2040-02-29T23:59:59.999+01:00"),
  events: () =>
    fc.array(
      fc
        .record({
          type: fc.stringMatching(/^[a-z]{1,8}\.[a-z]{1,8}$/).map((s) => `fuzz.${s}`),
          data: validField.metadata!(),
          occurredAt: fc.constantFrom(undefined, "2026-01-01T00:00:00.000Z", ...EDGE_TIMES),
        })
        .map((e) => JSON.parse(JSON.stringify(e))),
      { minLength: 1, maxLength: 3 },
    ),
}

/** A body built from the fields the operation's input declares, each well typed (path parameters left out). */
const bodyFor = (op: Operation) => {
  const fields = Object.keys((op.input as unknown as { fields?: Record<string, unknown> }).fields ?? {}).filter(
    (f) => !op.path.includes(`:${f}`) && validField[f] !== undefined,
  )
  const model = Object.fromEntries(fields.map((f) => [f, validField[f]!()]))
  return fc
    .oneof({ weight: 3, arbitrary: fc.record(model) }, { weight: 1, arbitrary: fc.record(model, { requiredKeys: [] }) })
    .map((o) => JSON.stringify(o))
}

const nested = (depth: number, open: string, close: string) => open.repeat(depth) + close.repeat(depth)
const bodyArb = (op?: Operation) =>
  fc.oneof(
    { weight: op ? 16 : 0, arbitrary: op ? bodyFor(op) : fc.constant(undefined) },
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 3, arbitrary: anyJson.map((v) => JSON.stringify(v)) },
    { weight: 5, arbitrary: shapedBody() },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 120 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 5000 }).map((d) => nested(d, "[", "]")) },
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: 1, max: 3000 })
        .map((d) => `{"name":"deep","metadata":${nested(d, '{"a":', "}").replace(/\{"a":\}/, "{}")}}`),
    },
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: 20, max: 3000 })
        .map((d) => `{"name":"deep-arr","metadata":{"x":${nested(d, "[", "]")}}}`),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '{"name":"n1","metadata":{"x":1e400}}',
        '{"name":"n2","metadata":{"x":-1e400}}',
        '{"name":"n3","metadata":{"x":1e-400}}',
        '{"name":"n4","metadata":{"x":123456789012345678901234567890}}',
        '{"name":"n5","metadata":{"x":-0,"y":0.1,"z":1e21}}',
        '{"events":[{"type":"fuzz.huge","data":{"x":1e400}}]}',
        '{"events":[{"type":"fuzz.tiny","data":{"x":-1e400,"y":1e-400}}]}',
        '{"events":[{"type":"fuzz.nul","data":{"\\u0000":1}}]}',
        '{"events":[{"type":"fuzz.surrogate","data":{"s":"\\udc00"}}]}',
        '{"overlapSeconds":1e400}',
        '{"overlapSeconds":-0}',
        '{"limit":1e400}',
        '{"name":1e400}',
        '{"name":"a\\u0000b"}',
        '{"name":"\\ud800"}',
        '{"name":"x","metadata":{"\\udfff":1}}',
        '{"name":"x","labels":["\\u0000"]}',
        '{"name":"x","description":"\\udbff\\udbff"}',
        '{"version":"\\u0000"}',
        '{"name":"ok","metadata":{"k":"\\ud83d\\ude00"}}',
        '{"__proto__":{"admin":true},"name":"proto"}',
        '{"constructor":{"prototype":{}},"name":"ctor"}',
        '{"name":"dup","name":"dup2"}',
        "",
        " ",
        "\t\n",
        "null",
        "[]",
        "1",
        '"str"',
        "true",
        "{",
        '{"a":',
        "{'a':1}",
        "\u00ef\u00bb\u00bf{}",
        "\ufeff{}",
        '{"name":"x"}garbage',
        "NaN",
        '{"name":"x",}',
      ),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        new Uint8Array([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
        new Uint8Array([0xc0, 0x80]),
      ),
    },
    { weight: 1, arbitrary: fc.constant(`{"name":"big","description":"${"x".repeat(70_000)}"}`) },
  )

/** Headers; `authorization` is set apart so that shrinking cannot drop a credential the case counts as valid. */
const headersArb = (credential: fc.Arbitrary<string | undefined>) =>
  fc
    .tuple(
      credential,
      fc.record(
        {
          "content-type": fc.oneof(
            { weight: 10, arbitrary: fc.constant("application/json") },
            { weight: 1, arbitrary: fc.constant(undefined) },
            { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
            { weight: 1, arbitrary: headerText(30) },
          ),
          "idempotency-key": fc.oneof(
            { weight: 3, arbitrary: fc.constant(undefined) },
            { weight: 2, arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,40}$/) },
            {
              weight: 1,
              arbitrary: fc.constantFrom("", " ", "has space", "é", "x".repeat(256), "fixed-key-1", "fixed-key-2"),
            },
            { weight: 1, arbitrary: headerText(50) },
          ),
          "x-request-id": fc.oneof(
            fc.constant(undefined),
            fc.stringMatching(/^[A-Za-z0-9._:-]{1,20}$/),
            headerText(40),
            fc.constant("y".repeat(200)),
          ),
          accept: fc.constantFrom(undefined, "text/html", "application/xml", "*/*"),
        },
        { requiredKeys: [] },
      ),
    )
    .map(
      ([authorization, h]) =>
        Object.fromEntries(Object.entries({ ...h, authorization }).filter(([, v]) => v !== undefined)) as Record<
          string,
          string
        >,
    )

const METHODS = ["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS"] as const

/** A request aimed at one catalog operation's path, with any method, query, headers and body. */
const catalogRequest = () =>
  fc
    .record({
      op: fc.constantFrom(...operations),
      prefix: fc.constantFrom("/api/v1", "/v1"),
      trailing: fc.oneof(
        { weight: 8, arbitrary: fc.constant("") },
        { weight: 2, arbitrary: fc.constant("/") },
        { weight: 1, arbitrary: fc.constantFrom("//", "/extra", "/.", "/..") },
      ),
      method: fc.oneof(
        { weight: 4, arbitrary: fc.constant("op") },
        { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
      ),
      query: queryString,
      valid: fc.boolean(),
    })
    .chain(({ op, prefix, trailing, method, query, valid }) =>
      fc
        .record({
          id: idParam(op.path),
          headers: headersArb(valid ? validAuthorization() : invalidAuthorization()),
          body: bodyArb(op),
        })
        .map(({ id, headers, body }): Req => {
          const m = method === "op" ? op.method : method
          return {
            method: m,
            path: `${prefix}${op.path.replace(/:[A-Za-z]+/g, () => id)}${trailing}${query}`,
            headers,
            body: m === "HEAD" ? undefined : body,
            validCredential: valid,
          }
        }),
    )

/** A request to a path built at random under the API prefixes, the tRPC mount and elsewhere. */
const randomPathRequest = () =>
  fc
    .record({
      prefix: fc.constantFrom("/api/v1", "/v1", "/trpc", "/trpc/", "/api", "/api/v2", "", "/API/V1", "/.well-known"),
      segments: fc.array(
        fc.oneof(
          segment,
          fc.constantFrom(
            "agents",
            "api-keys",
            "workspaces",
            "versions",
            "rotate",
            "openapi.json",
            "reference",
            "docs",
            "agents.list",
            "agents.get",
            "apiKeys.create",
            "workspaces.create",
            "agents.list,agents.get",
            "jwks.json",
            "healthz",
            "readyz",
          ),
        ),
        { maxLength: 4 },
      ),
      query: fc.oneof(
        queryString,
        fc.constantFrom("?batch=1&input=%7B%7D", "?input=%7B", "?input=%22%5Cu0000%22", "?batch=1", "?input=null"),
      ),
      method: fc.constantFrom(...METHODS),
      valid: fc.boolean(),
    })
    .chain(({ prefix, segments, query, method, valid }) =>
      fc.record({ headers: headersArb(valid ? validAuthorization() : invalidAuthorization()), body: bodyArb() }).map(
        ({ headers, body }): Req => ({
          method,
          // A request target must start with "/": what Node's parser refuses is tested apart, below.
          path:
            `${prefix}${prefix.endsWith("/") || segments.length === 0 ? "" : "/"}${segments.join("/")}`.replace(
              /^(?!\/)/,
              "/",
            ) + query,
          headers,
          body: method === "HEAD" ? undefined : body,
          validCredential: valid,
        }),
      ),
    )

// ---------------------------------------------------------------------------------------------

describe("every endpoint, fuzzed", () => {
  it("catalog paths: any method, id, query, headers and body get an envelope, never a 5xx", async () => {
    const before = { ...Object.fromEntries(stats.byClass) }
    await fc.assert(
      fc.asyncProperty(catalogRequest(), async (r) => checkResponse(r, await send(r))),
      params(300),
    )
    // The generators must reach every stage: successes, and refusals at each check.
    const seen = (k: string) => (stats.byClass.get(k) ?? 0) - (before[k] ?? 0)
    // The seed in each message: a coverage miss is replayed like a counterexample (FUZZ_SEED, above). Successes
    // per 300 runs ranged 14-27 over seeds (15 failed one CI run in ~20): 8 still fails a generator that stops
    // reaching the handlers, without failing on a seed's luck.
    expect(seen("2xx"), `seed ${SEED}: ${JSON.stringify(Object.fromEntries(stats.byClass))}`).toBeGreaterThanOrEqual(8)
    for (const status of ["400", "401", "404", "405", "422"])
      expect(seen(status), `seed ${SEED}: no ${status} seen`).toBeGreaterThan(0)
  }, 120_000)

  it("random paths under /api/v1, /v1, /trpc and elsewhere get an envelope, never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(randomPathRequest(), async (r) => checkResponse(r, await send(r))),
      params(150),
    )
  }, 120_000)

  it("the bootstrap credential still works after the fuzz (the fuzz never revoked it)", async () => {
    const res = await t.call("GET", "/api/v1/agents?limit=1")
    expect(res.status).toBe(200)
  })
})

/**
 * Cases the fuzz has found, replayed on every run so that each stays visible on its own (the
 * property stops at its first counterexample). Cases for operations the catalog lacks are left out.
 */
const KNOWN_CASES: Array<{
  readonly route: string
  readonly method: string
  readonly path: string
  readonly body?: string
  /** Sent without a credential: the answer must be 401 whatever the path holds. */
  readonly anonymous?: boolean
}> = [
  { route: "GET /agents/:id", method: "GET", path: "/api/v1/agents/%00" },
  { route: "GET /agents/:id", method: "GET", path: "/api/v1/agents/%00", anonymous: true },
  { route: "DELETE /workspaces/:id", method: "DELETE", path: "/v1/workspaces/a%00", anonymous: true },
  { route: "GET /agents/:id/versions", method: "GET", path: "/v1/agents/a%00b/versions" },
  { route: "GET /api-keys/:id", method: "GET", path: "/api/v1/api-keys/%00" },
  { route: "GET /workspaces/:id", method: "GET", path: "/api/v1/workspaces/%00" },
  { route: "GET /events/:id", method: "GET", path: "/api/v1/events/%00" },
  { route: "GET /agents", method: "GET", path: "/api/v1/agents?namePrefix=%00" },
  { route: "GET /api-keys", method: "GET", path: "/api/v1/api-keys?agentId=%00" },
  { route: "GET /events", method: "GET", path: "/api/v1/events?agentId=%00" },
  { route: "GET /events", method: "GET", path: "/api/v1/events?type=%00" },
  {
    route: "GET /events",
    method: "GET",
    path: `/api/v1/events?since=${encodeURIComponent("+275760-09-13T00:00:00.000Z")}`,
  },
  {
    route: "POST /api-keys",
    method: "POST",
    path: "/api/v1/api-keys",
    body: JSON.stringify({
      name: "far",
      type: "workspace",
      scopes: ["agents:read"],
      expiresAt: "+275760-09-13T00:00:00.000Z",
    }),
  },
  {
    route: "POST /events/ingest",
    method: "POST",
    path: "/api/v1/events/ingest",
    body: JSON.stringify({ events: [{ type: "fuzz.year.zero", data: {}, occurredAt: "0000-01-01T00:00:00.000Z" }] }),
  },
  {
    route: "POST /events/ingest",
    method: "POST",
    path: "/api/v1/events/ingest",
    body: '{"events":[{"type":"fuzz.huge","data":{"x":1e400}}]}',
  },
]

describe("cases the fuzz found, replayed", () => {
  const catalogRoutes = new Set(operations.map((op) => `${op.method} ${op.path}`))
  const cases = KNOWN_CASES.filter((c) => catalogRoutes.has(c.route))
  it("covers at least the routes of the foundation", () => {
    expect(cases.length).toBeGreaterThanOrEqual(8)
  })
  it.each(
    cases.map((c) => ({
      ...c,
      name: `${c.anonymous ? "anonymous " : ""}${c.method} ${c.path}${c.body ? ` ${c.body}` : ""}`,
    })),
  )("$name", async (c) => {
    const headers: Record<string, string> = c.anonymous ? {} : { authorization: `Bearer ${t.key}` }
    if (c.body !== undefined) headers["content-type"] = "application/json"
    const r: Req = { method: c.method, path: c.path, headers, body: c.body, validCredential: !c.anonymous }
    const res = await send(r)
    checkResponse(r, res)
    if (c.anonymous) expect(res.status).toBe(401)
  })
})

describe("what a client stores comes back unchanged", () => {
  it("agent metadata round-trips exactly through create and get", async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(
          fc.string({ unit: "grapheme", maxLength: 10 }).filter((s) => !s.includes("\u0000")),
          fc
            .oneof(fc.jsonValue({ maxDepth: 4 }), fc.jsonValue({ maxDepth: 3, stringUnit: "grapheme" }))
            .filter((v) => !JSON.stringify(v).includes("\\u0000")),
          { maxKeys: 6 },
        ),
        async (metadata) => {
          const sent = JSON.parse(JSON.stringify(metadata)) // what the server can see: -0 is 0 on the wire
          const created = await t.call("POST", "/api/v1/agents", { body: { name: `roundtrip-${n++}`, metadata } })
          expect(created.status, JSON.stringify(created.body)).toBe(201)
          expect(created.body.data.metadata).toStrictEqual(sent)
          const got = await t.call("GET", `/api/v1/agents/${created.body.data.id}`)
          expect(got.status).toBe(200)
          expect(got.body.data.metadata).toStrictEqual(sent)
        },
      ),
      params(40),
    )
  }, 120_000)

  it("a number outside the double range is refused, not silently stored as null", async () => {
    for (const [i, text] of ["1e400", "-1e400"].entries()) {
      const res = await t.call("POST", "/api/v1/agents", { rawBody: `{"name":"huge-${i}","metadata":{"x":${text}}}` })
      expect(res.status, `${text}: ${JSON.stringify(res.body)}`).toBeLessThan(500)
      if (res.status === 201)
        expect(res.body.data.metadata, `${text} was stored as ${JSON.stringify(res.body.data.metadata)}`).not.toEqual({
          x: null,
        })
      else expect(res.body.error.code).toBe("VALIDATION_ERROR")
    }
  })
})

describe("requests Node's HTTP parser refuses", () => {
  it("a request target over the header limit still gets the envelope and X-Request-Id", async () => {
    const r: Req = {
      method: "GET",
      path: `/api/v1/agents/${"a".repeat(20_000)}`,
      headers: { authorization: `Bearer ${t.key}` },
      validCredential: true,
    }
    const res = await send(r)
    expect(res.status).toBeGreaterThanOrEqual(400)
    expect(res.status).toBeLessThan(500)
    expect(res.headers["x-request-id"], "431 without X-Request-Id").toMatch(REQUEST_ID)
    expect(JSON.parse(res.text || "null")?.ok, `body: ${JSON.stringify(res.text)}`).toBe(false)
  })

  it("a request target that is not a path still gets the envelope and X-Request-Id", async () => {
    const res = await send({
      method: "GET",
      path: "?limit=1",
      headers: { authorization: `Bearer ${t.key}` },
      validCredential: true,
    })
    expect(res.status).toBe(400)
    expect(res.headers["x-request-id"], "400 without X-Request-Id").toMatch(REQUEST_ID)
    expect(JSON.parse(res.text || "null")?.error?.code, `body: ${JSON.stringify(res.text)}`).toBe("BAD_REQUEST")
  })
})
