/**
 * The OpenAPI document the server serves (D1: GET /api/v1/openapi.json, public): a valid OpenAPI 3.1
 * document by an independent validator, listing every operation of the catalog, rendered in the
 * reference page, and true to the server: real responses validate against the documented schemas.
 */
import { operations } from "@agentgov/api"
import { SYSTEM_EVENTS, type SystemEventName } from "@agentgov/domain"
import { Validator } from "@seriousme/openapi-schema-validator"
import Ajv2020Module from "ajv/dist/2020.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer } from "./helpers.ts"

type Json = Record<string, any>

let t: TestServer
let doc: Json

beforeAll(async () => {
  t = await startTestServer()
  const res = await t.call("GET", "/api/v1/openapi.json", { key: null })
  expect(res.status).toBe(200)
  doc = res.body
})
afterAll(async () => t?.close())

/** `/agents/:id/versions` → `/agents/{id}/versions`: the document's path, under its servers `/api/v1` and `/v1`. */
const docPath = (path: string) => path.replace(/:([A-Za-z]+)/g, "{$1}")
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

describe("the OpenAPI document", () => {
  it("is public JSON with X-Request-Id, the same under /v1", async () => {
    const res = await t.call("GET", "/api/v1/openapi.json", { key: null })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(res.headers.get("x-request-id")).toBeTruthy()
    const short = await t.call("GET", "/v1/openapi.json", { key: null })
    expect(short.status).toBe(200)
    expect(short.body).toEqual(res.body)
  })

  it("is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)", async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/)
    const validator = new Validator()
    const result = await validator.validate(structuredClone(doc))
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined()
    expect(result.valid).toBe(true)
    expect(validator.version).toBe("3.1")
  })

  it("the validator is not a rubber stamp: it rejects a broken copy", async () => {
    const broken = structuredClone(doc)
    const [firstPath] = Object.keys(broken.paths)
    const op = Object.values(broken.paths[firstPath!] as Json)[0] as Json
    delete op.responses
    op.parameters = [{ name: "x", in: "nowhere" }]
    const result = await new Validator().validate(broken)
    expect(result.valid).toBe(false)
  })

  it("serves the API at /api/v1 and its alias /v1", () => {
    expect(doc.servers.map((s: Json) => new URL(s.url).pathname)).toEqual(["/api/v1", "/v1"])
  })

  it("lists every operation of the catalog at its path, method and operationId", () => {
    expect(operations.length).toBeGreaterThan(0)
    for (const op of operations) {
      const item = doc.paths[docPath(op.path)]
      expect(item, `no path ${docPath(op.path)} for ${op.name}`).toBeDefined()
      const documented = item[op.method.toLowerCase()]
      expect(documented, `no ${op.method} ${docPath(op.path)} for ${op.name}`).toBeDefined()
      expect(documented.operationId).toBe(op.name)
      // Every path parameter is declared, in: path, required.
      for (const [, name] of op.path.matchAll(/:([A-Za-z]+)/g)) {
        const p = (documented.parameters ?? []).find((x: Json) => x.name === name && x.in === "path")
        expect(p, `${op.name}: path parameter ${name}`).toMatchObject({ required: true })
      }
      // The documented success status is the one the operation answers with.
      expect(Object.keys(documented.responses)).toContain(String(op.successStatus ?? 200))
      // Credentialed operations say so; public ones (D1: badges) need none.
      expect(documented.security).toEqual(op.public ? [] : [{ bearer: [] }])
    }
  })

  it("gives every documented operation a unique operationId", () => {
    const ids: Array<string> = []
    for (const item of Object.values(doc.paths as Json)) {
      for (const [method, op] of Object.entries(item as Json)) {
        if (!METHODS.includes(method)) continue
        expect(typeof op.operationId).toBe("string")
        ids.push(op.operationId)
      }
    }
    expect(ids.length).toBeGreaterThanOrEqual(operations.length)
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([])
  })
})

describe("the event catalog in the document", () => {
  const dataComponent = (name: string) => `EventData_${name.replaceAll(".", "_")}`

  it("has a webhook for every system event name, and only those", () => {
    expect(Object.keys(doc.webhooks ?? {}).sort()).toEqual(Object.keys(SYSTEM_EVENTS).sort())
  })

  it("the validator checks the webhooks too: it rejects a broken one", async () => {
    const broken = structuredClone(doc)
    const op = broken.webhooks["agent.registered"].post
    delete op.responses
    op.parameters = [{ name: "x", in: "nowhere" }]
    const result = await new Validator().validate(broken)
    expect(result.valid).toBe(false)
  })

  it("each webhook POSTs the spec's envelope with that event's type and data schema", () => {
    for (const [name, def] of Object.entries(SYSTEM_EVENTS)) {
      const op = doc.webhooks[name]?.post
      expect(op, name).toBeDefined()
      expect(op.summary, name).toContain(def.description)
      expect(op["x-emitted-by"], name).toBe(def.emittedBy)
      const body = op.requestBody?.content?.["application/json"]?.schema
      expect(body?.required, name).toEqual(["id", "type", "timestamp", "workspaceId", "data", "metadata"])
      expect(body.properties.type, name).toEqual({ const: name })
      expect(body.properties.data, name).toEqual({ $ref: `#/components/schemas/${dataComponent(name)}` })
      // The component is the catalog's schema: an object with exactly the catalog's fields.
      const data = doc.components.schemas[dataComponent(name)]
      expect(data?.type, name).toBe("object")
      expect(Object.keys(data.properties).sort(), name).toEqual(Object.keys(def.data.fields).sort())
      const signature = op.parameters.find((p: Json) => p.$ref === "#/components/parameters/WebhookSignature")
      expect(signature, name).toBeDefined()
    }
    expect(doc.components.parameters.WebhookSignature).toMatchObject({ name: "X-SVC-Webhook-Signature", in: "header" })
  })

  it("the data schemas hold real events and refuse wrong ones (ajv)", async () => {
    const agent = await t.call("POST", "/api/v1/agents", { body: { name: "webhook-schema-agent" } })
    expect(agent.status).toBe(201)
    await t.call("PATCH", `/api/v1/agents/${agent.body.data.id}`, { body: { labels: ["z"] } })
    const events = await t.call("GET", "/api/v1/events?limit=100")
    expect(events.status).toBe(200)
    const system = (events.body.data as Array<Json>).filter((e) => Object.hasOwn(SYSTEM_EVENTS, e.type))
    expect(new Set(system.map((e) => e.type))).toContain("agent.registered")
    for (const event of system) {
      validate({ $ref: `#/components/schemas/${dataComponent(event.type)}` }, event.data, `${event.type} data`)
    }
    const check = makeAjv().compile(withDefs({ $ref: `#/components/schemas/${dataComponent("agent.registered")}` }))
    expect(check({ agentId: "agt_1", agentName: "a", trustScore: 400 })).toBe(true)
    expect(check({ agentId: "agt_1", agentName: "a" })).toBe(false)
    expect(check({ agentId: "agt_1", agentName: "a", trustScore: 1001 })).toBe(false)
    const name: SystemEventName = "apikey.revoked"
    const revoked = makeAjv().compile(withDefs({ $ref: `#/components/schemas/${dataComponent(name)}` }))
    expect(revoked({ keyId: "k", name: "n", prefix: "p", reason: "bored" })).toBe(false)
  })
})

describe("the reference page", () => {
  it("is public HTML 200 mentioning every operation's path and id", async () => {
    const res = await t.call("GET", "/api/v1/reference", { key: null })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^text\/html/)
    expect(res.headers.get("x-request-id")).toBeTruthy()
    const html = String(res.body)
    expect(html).toMatch(/^<!doctype html>/i)
    for (const op of operations) {
      expect(html, op.name).toContain(`<code>/api/v1${docPath(op.path)}</code>`)
      expect(html, op.name).toContain(`id="${op.name}"`)
    }
    // It links the machine-readable document.
    expect(html).toContain('href="/api/v1/openapi.json"')
  })

  it("shows for every operation an example request (curl and the SDK call) and its example response", async () => {
    const html = String((await t.call("GET", "/api/v1/reference", { key: null })).body)
    /** The section of one operation, up to the next. */
    const section = (id: string) => {
      const start = html.indexOf(`<section id="${id}">`)
      expect(start, id).toBeGreaterThan(0)
      return html.slice(start, html.indexOf("</section>", start))
    }
    const htmlText = (s: string) =>
      s
        .replaceAll("&quot;", '"')
        .replaceAll("&#39;", "'")
        .replaceAll("&lt;", "<")
        .replaceAll("&gt;", ">")
        .replaceAll("&amp;", "&")
    // The service's own paths too: a curl call and an example response each.
    for (const id of ["events.stream", "health.live", "health.ready", "keys.jwks"]) {
      expect(htmlText(section(id)), id).toMatch(/curl -X GET "\$AGENTGOV_URL\//)
    }
    for (const id of ["health.live", "health.ready", "keys.jwks"])
      expect(section(id), id).toContain("<b>Response 200</b>")
    expect(htmlText(section("events.stream"))).toContain("agentgov.events.stream(")
    for (const op of operations) {
      const text = htmlText(section(op.name))
      // The path with a sample id (`agt_example`) for each parameter.
      const path = op.path.replaceAll("/", "\\/").replace(/:[A-Za-z]+/g, "[a-z]*_?example")
      expect(text, op.name).toMatch(new RegExp(`curl -X ${op.method} "\\$AGENTGOV_URL\\/api\\/v1${path}[?"]`))
      expect(text, op.name).toContain(`await agentgov.${op.name}(`)
      expect(text, op.name).toMatch(
        new RegExp(`Response ${op.successStatus ?? 200}</b></p><pre class="sample">\\{\\n  "ok": true`),
      )
      // The documented example body is the one in the curl call.
      const body = operationById(op.name).op.requestBody?.content["application/json"].example
      if (body !== undefined) expect(text, op.name).toContain(`-d '${JSON.stringify(body)}'`)
    }
  })

  it("the example bodies are accepted by the documented schemas, and the example responses match theirs (ajv)", () => {
    for (const op of operations) {
      const { op: documented } = operationById(op.name)
      const request = documented.requestBody?.content["application/json"]
      if (request) validate(request.schema, request.example, `${op.name} example body`)
      const success = documented.responses[String(op.successStatus ?? 200)].content["application/json"]
      validate(success.schema, success.example, `${op.name} example response`)
    }
  })
})

// ---------------------------------------------------------------------------------------------
// Conformance: real responses against the documented schemas

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/ // D3

const makeAjv = () => {
  const Ajv2020 = Ajv2020Module.default
  const ajv = new Ajv2020({ strict: true, allErrors: true, strictTypes: false })
  ajv.addFormat("date-time", TIMESTAMP)
  return ajv
}

/** A documented schema with `#/components/schemas/X` refs resolved through `$defs`. */
const withDefs = (schema: Json): Json => {
  const rewrite = (v: unknown): any =>
    Array.isArray(v)
      ? v.map(rewrite)
      : v && typeof v === "object"
        ? Object.fromEntries(
            Object.entries(v).map(([k, x]) => [
              k,
              k === "$ref" && typeof x === "string" ? x.replace("#/components/schemas/", "#/$defs/") : rewrite(x),
            ]),
          )
        : v
  return { ...rewrite(schema), $defs: rewrite(doc.components?.schemas ?? {}) }
}

const operationById = (operationId: string): { path: string; method: string; op: Json } => {
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      if ((op as Json).operationId === operationId) return { path, method, op: op as Json }
    }
  }
  throw new Error(`operation ${operationId} is not documented`)
}

const validate = (schema: Json, value: unknown, what: string) => {
  const ajv = makeAjv()
  const check = ajv.compile(withDefs(schema))
  const ok = check(value)
  expect(ok, `${what}: ${ajv.errorsText(check.errors)}\n${JSON.stringify(value).slice(0, 600)}`).toBe(true)
}

/** The headers the server sets on its answers that a client reads: each must be documented where it is sent. */
const ANSWER_HEADERS = [
  "x-request-id",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "retry-after",
  "idempotent-replayed",
]

/** The error codes a documented error answer names (its description lists them: `CONFLICT, AGENT_REVOKED`). */
const documentedCodes = (response: Json): Array<string> =>
  response.description.match(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{4,}\b/g) ?? []

/**
 * A real answer against its operation's documentation: a documented status and media type, a body matching
 * the schema, an error code the documented answer names, and the headers it carries documented for it (and
 * the documented required ones present).
 */
const checkAnswer = (operationId: string, res: { status: number; headers: Headers; body: any }) => {
  const { op } = operationById(operationId)
  const documented = op.responses[String(res.status)]
  expect(
    documented,
    `${operationId} answered ${res.status}, which it does not document: ${JSON.stringify(res.body)}`,
  ).toBeDefined()
  const type = (res.headers.get("content-type") ?? "").split(";")[0]!
  // A 304 has no body (RFC 9110 15.4.5).
  if (res.status !== 304)
    expect(Object.keys(documented.content ?? {}), `${operationId} ${res.status} answered ${type}`).toContain(type)
  if (type === "application/json") {
    const schema = documented.content[type].schema
    expect(schema, `${operationId} ${res.status} has no JSON schema`).toBeDefined()
    validate(schema, res.body, `${operationId} ${res.status} response`)
  }
  if (res.status >= 400 && type === "application/json")
    expect(documentedCodes(documented), `${operationId} ${res.status}: ${JSON.stringify(res.body)}`).toContain(
      res.body.error.code,
    )
  const headers = Object.fromEntries(
    Object.entries((documented.headers ?? {}) as Json).map(([name, h]) => [
      name.toLowerCase(),
      typeof h.$ref === "string" ? doc.components.headers[h.$ref.split("/").pop()!] : h,
    ]),
  )
  for (const name of ANSWER_HEADERS) {
    if (res.headers.get(name) !== null)
      expect(headers[name], `${operationId} ${res.status} sends ${name}, undocumented`).toBeDefined()
  }
  for (const [name, header] of Object.entries(headers)) {
    if (header.required) expect(res.headers.get(name), `${operationId} ${res.status} lacks ${name}`).not.toBeNull()
  }
}

/** Calls an operation the way its documentation says, and checks request and response against it. */
const callDocumented = async (
  operationId: string,
  params: Record<string, string> = {},
  body?: Json,
  query = "",
  options: { headers?: Record<string, string>; key?: string | null } = {},
): Promise<{ status: number; body: any; headers: Headers }> => {
  const { path, method, op } = operationById(operationId)
  const url = `/api/v1${path.replace(/\{([A-Za-z]+)\}/g, (_, name) => encodeURIComponent(params[name]!))}${query}`
  if (body !== undefined) {
    const requestSchema = op.requestBody?.content?.["application/json"]?.schema
    expect(requestSchema, `${operationId} documents no request body`).toBeDefined()
    validate(requestSchema, body, `${operationId} request body`)
  }
  // Every header sent is a documented parameter of the operation.
  for (const name of Object.keys(options.headers ?? {})) {
    const declared = (op.parameters ?? []).some((p: Json) => p.in === "header" && p.name.toLowerCase() === name)
    expect(declared, `${operationId} documents no header ${name}`).toBe(true)
  }
  const res = await t.call(method.toUpperCase(), url, {
    ...(body === undefined ? {} : { body }),
    ...(options.headers ? { headers: options.headers } : {}),
    ...(options.key !== undefined ? { key: options.key } : {}),
  })
  checkAnswer(operationId, res)
  return res
}

describe("real responses match the documented schemas", () => {
  it("the schema check is not a rubber stamp: a wrong body fails it", () => {
    const { op } = operationById("agents.get")
    const schema = withDefs(op.responses["200"].content["application/json"].schema)
    const check = makeAjv().compile(schema)
    expect(check({ ok: true, data: { id: "agt_x" } })).toBe(false)
    expect(check({ ok: false, data: {} })).toBe(false)
    const fmt = makeAjv().compile({ type: "string", format: "date-time" })
    expect(fmt("2026-01-01T00:00:00Z")).toBe(false) // D3: milliseconds are required
    expect(fmt("2026-01-01T00:00:00.000Z")).toBe(true)
  })

  it("documents the free-form JSON inputs as the objects the server accepts, with their descriptions", async () => {
    const agentId = (await t.call("POST", "/api/v1/agents", { body: { name: "openapi-json-objects" } })).body.data.id
    /** The documented schema at `path` (property names; "items" for an array's), through `$ref`s. */
    const schemaAt = (schema: Json, path: ReadonlyArray<string>): Json => {
      const deref = (s: Json): Json =>
        typeof s.$ref === "string" ? deref(doc.components.schemas[s.$ref.split("/").pop()!]) : s
      return path.reduce((s, name) => deref(name === "items" ? s.items : s.properties[name]), deref(schema))
    }
    // Operation, the field's place in the documented schema, the field the server's 422 names, a body with it.
    const cases: Array<[string, ReadonlyArray<string>, string, (value: unknown) => Json]> = [
      [
        "events.ingest",
        ["events", "items", "data"],
        "events[0].data",
        (data) => ({ events: [{ type: "doc.checked", data }] }),
      ],
      ["guard.evaluate", ["context"], "context", (context) => ({ agentId, action: "doc.check", context })],
      ["policies.evaluate", ["context"], "context", (context) => ({ agentId, action: "doc.check", context })],
      ["approvals.create", ["context"], "context", (context) => ({ agentId, action: "doc.check", context })],
      ["agents.create", ["metadata"], "metadata", (metadata) => ({ name: `openapi-${Date.now()}`, metadata })],
    ]
    for (const [operationId, fieldPath, field, body] of cases) {
      const { path, method, op } = operationById(operationId)
      const requestSchema = op.requestBody.content["application/json"].schema
      const documented = schemaAt(requestSchema, fieldPath)
      expect(documented.type, `${operationId}.${field}`).toBe("object")
      expect(documented.description, `${operationId}.${field} has a description`).toMatch(/\w/)
      const check = makeAjv().compile(withDefs(requestSchema))
      for (const value of [[1], null, "text", 3]) {
        expect(check(body(value)), `${operationId} documents ${field}: ${JSON.stringify(value)}`).toBe(false)
        const res = await t.call(method.toUpperCase(), `/api/v1${path}`, { body: body(value) })
        expect(res.status, `${operationId} with ${field}: ${JSON.stringify(value)}`).toBe(422)
        expect(res.body.error.details.field).toBe(field)
      }
      expect(check(body({ nested: { list: [1, "two"] } })), `${operationId} documents ${field} as an object`).toBe(true)
    }
  })

  it("agents, versions, workspaces and API keys: create, get, list, update, rotate, revoke, delete", async () => {
    const created = await callDocumented(
      "agents.create",
      {},
      {
        name: "conformance-agent",
        description: "checks the document",
        labels: ["team:a", "x"],
        metadata: { nested: { list: [1, 2.5, "three", null, true] } },
      },
    )
    expect(created.status).toBe(201)
    const agentId = created.body.data.id as string

    expect((await callDocumented("agents.get", { id: agentId })).status).toBe(200)
    const listed = await callDocumented("agents.list", {}, undefined, "?limit=1")
    expect(listed.status).toBe(200)
    expect(listed.body.data).toHaveLength(1)
    expect((await callDocumented("agents.update", { id: agentId }, { description: null, labels: ["y"] })).status).toBe(
      200,
    )
    expect(
      (await callDocumented("agents.versions.create", { id: agentId }, { version: "1.0.0", metadata: { a: 1 } }))
        .status,
    ).toBe(201)
    expect((await callDocumented("agents.versions.list", { id: agentId })).status).toBe(200)

    expect((await callDocumented("workspaces.get", { id: t.workspaceId })).status).toBe(200)
    expect((await callDocumented("workspaces.list")).status).toBe(200)
    expect((await callDocumented("workspaces.update", { id: t.workspaceId }, { guardDefault: "allow" })).status).toBe(
      200,
    )
    const ws = await callDocumented(
      "workspaces.create",
      {},
      { name: "conformance-ws", environment: "test", plan: "pro" },
    )
    expect(ws.status).toBe(201)
    expect((await callDocumented("workspaces.delete", { id: ws.body.data.workspace.id })).status).toBe(200)

    const key = await callDocumented(
      "apiKeys.create",
      {},
      { name: "conformance-key", type: "workspace", scopes: ["agents:read"] },
    )
    expect(key.status).toBe(201)
    const agentKey = await callDocumented(
      "apiKeys.create",
      {},
      {
        name: "conformance-agent-key",
        type: "agent",
        agentId,
        scopes: ["agents:read"],
        expiresAt: "2099-01-01T00:00:00.000Z",
      },
    )
    expect(agentKey.status).toBe(201)
    expect((await callDocumented("apiKeys.list")).status).toBe(200)
    expect((await callDocumented("apiKeys.get", { id: key.body.data.id })).status).toBe(200)
    const rotated = await callDocumented("apiKeys.rotate", { id: key.body.data.id }, { overlapSeconds: 60 })
    expect(rotated.status).toBe(201)
    expect((await callDocumented("apiKeys.revoke", { id: rotated.body.data.id })).status).toBe(200)

    expect((await callDocumented("agents.delete", { id: agentId })).status).toBe(200)
    // The deregistered agent, with its timestamps filled in, still matches.
    expect((await callDocumented("agents.get", { id: agentId })).status).toBe(200)
  })

  it("policies: a valid document and a patch pass the documented request schemas and the server", async () => {
    const created = await callDocumented(
      "policies.create",
      {},
      {
        name: "conformance-policy",
        description: "checks the document",
        target: { labels: ["team:a"] },
        rules: [
          {
            id: "no-drop",
            effect: "deny",
            actions: ["db.drop"],
            when: { any: [{ not: { field: "context.env", op: "eq", value: "dev" } }, { cel: "context.size > 3" }] },
            enforce: { type: "warning" },
          },
          { id: "ask", effect: "require_approval", actions: ["pay.*"], approval: { timeoutSeconds: 600 } },
        ],
      },
    )
    expect(created.status).toBe(201)
    const id = created.body.data.id as string
    const patch = { description: null, target: null, enabled: false, mode: "monitor" }
    expect((await callDocumented("policies.update", { id }, patch)).status).toBe(200)
    expect((await callDocumented("policies.get", { id })).status).toBe(200)
    // The documented schemas refuse what the server refuses.
    const { op } = operationById("policies.create")
    const check = makeAjv().compile(withDefs(op.requestBody.content["application/json"].schema))
    expect(check({ name: "x", rules: [] })).toBe(false)
    expect(check({ rules: [{ id: "a", effect: "allow", actions: ["x"] }] })).toBe(false)
    const update = makeAjv().compile(
      withDefs(operationById("policies.update").op.requestBody.content["application/json"].schema),
    )
    expect(update({ enabled: "yes" })).toBe(false)
    expect(update({ mode: "sometimes" })).toBe(false)
    expect((await callDocumented("policies.delete", { id })).status).toBe(200)
  })

  it("an unknown body field: the documented schemas refuse it, as the server does (strict input, 422)", async () => {
    const agentId = (await t.call("POST", "/api/v1/agents", { body: { name: "strict-input-agent" } })).body.data.id
    const rule = { id: "r", effect: "allow", actions: ["x"] }
    const policyId = (await t.call("POST", "/api/v1/policies", { body: { name: "strict-input", rules: [rule] } })).body
      .data.id
    const cases: Array<[string, string, string, Json]> = [
      ["agents.create", "POST", "/api/v1/agents", { name: "strict-typo", lables: ["a"] }],
      ["policies.create", "POST", "/api/v1/policies", { name: "strict-typo", rules: [rule], mdoe: "monitor" }],
      ["policies.create", "POST", "/api/v1/policies", { name: "strict-typo-2", rules: [{ ...rule, efect: "deny" }] }],
      ["policies.update", "PATCH", `/api/v1/policies/${policyId}`, { enabeld: false }],
      ["guard.evaluate", "POST", "/api/v1/guard", { agentId, action: "x", contxt: {} }],
      ["agents.update", "PATCH", `/api/v1/agents/${agentId}`, { labels: ["a"], extra: 1 }],
    ]
    for (const [operationId, method, path, body] of cases) {
      const schema = operationById(operationId).op.requestBody.content["application/json"].schema
      expect(makeAjv().compile(withDefs(schema))(body), `${operationId} documents ${JSON.stringify(body)}`).toBe(false)
      const res = await t.call(method, path, { body })
      expect(res.status, `${operationId} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).toBe(422)
    }
    // Free-form objects stay free-form.
    const metadata = operationById("agents.create").op.requestBody.content["application/json"].schema
    expect(makeAjv().compile(withDefs(metadata))({ name: "m", metadata: { any: { thing: 1 } } })).toBe(true)
  })

  it("error responses are documented for their operation and match the error envelope", async () => {
    expect((await callDocumented("agents.get", { id: "agt_missing" })).status).toBe(404)
    expect((await callDocumented("apiKeys.get", { id: "key_missing" })).status).toBe(404)
    expect((await callDocumented("workspaces.get", { id: "ws_missing" })).status).toBe(404)
    expect((await callDocumented("agents.list", {}, undefined, "?limit=0")).status).toBe(400)
    expect((await callDocumented("agents.versions.list", { id: "agt_missing" })).status).toBe(404)
    const taken = await t.call("POST", "/api/v1/agents", { body: { name: "taken-name" } })
    expect(taken.status).toBe(201)
    expect((await callDocumented("agents.create", {}, { name: "taken-name" })).status).toBe(409)
    // A body the request schema already refuses: the server says 422, documented.
    const { op } = operationById("agents.create")
    const res = await t.call("POST", "/api/v1/agents", { body: { name: 42 } })
    expect(res.status).toBe(422)
    expect(op.responses["422"]).toBeDefined()
    validate(op.responses["422"].content["application/json"].schema, res.body, "agents.create 422")
    const anonymous = await t.call("GET", "/api/v1/agents", { key: null })
    expect(anonymous.status).toBe(401)
    validate(operationById("agents.list").op.responses["401"].content["application/json"].schema, anonymous.body, "401")
    expect((await callDocumented("agents.list", {}, undefined, "", { key: null })).status).toBe(401)
  })

  it("an error's code is one its documented answer names (the check is not a rubber stamp)", async () => {
    const documented = operationById("apiKeys.create").op.responses["409"]
    expect(documentedCodes(documented)).toEqual(expect.arrayContaining(["CONFLICT", "IDEMPOTENCY_KEY_REUSED"]))
    expect(() =>
      checkAnswer("agents.get", {
        status: 404,
        headers: new Headers({ "content-type": "application/json" }),
        body: { ok: false, error: { code: "POLICY_NOT_FOUND", message: "x" } },
      }),
    ).toThrow()
    // No agent key while a revocation of its agent is in force: 409 AGENT_REVOKED, documented.
    const agentId = (await t.call("POST", "/api/v1/agents", { body: { name: "revoked-key-agent" } })).body.data.id
    const revocation = await t.call("POST", "/api/v1/enforcement", {
      body: { agentId, type: "revocation", reason: "leaked key" },
    })
    expect(revocation.status).toBe(201)
    const refused = await callDocumented(
      "apiKeys.create",
      {},
      { name: "after-revocation", type: "agent", agentId, scopes: ["agents:read"] },
    )
    expect([refused.status, refused.body.error.code]).toEqual([409, "AGENT_REVOKED"])
  })

  it("every answer documents X-Request-Id and the rate-limit headers, a 429 Retry-After", () => {
    const names = (response: Json) => Object.keys(response.headers ?? {}).map((n) => n.toLowerCase())
    for (const op of [...operations.map((o) => o.name), "events.stream"]) {
      for (const [status, response] of Object.entries(operationById(op).op.responses as Json)) {
        // A 503 comes before routing and rate limits: the server is starting.
        const expected =
          status === "503"
            ? ["x-request-id"]
            : ["x-request-id", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]
        if (status === "429" || status === "503") expected.push("retry-after")
        expect(names(response), `${op} ${status}`).toEqual(expect.arrayContaining(expected))
      }
    }
    for (const op of ["health.live", "health.ready", "keys.jwks"])
      for (const [status, response] of Object.entries(operationById(op).op.responses as Json))
        expect(names(response), `${op} ${status}`).toContain("x-request-id")
    for (const [name, header] of Object.entries(doc.components.headers as Json))
      expect(header.schema, name).toBeDefined()
  })

  it("every credentialed POST documents Idempotency-Key; a replay is documented, and a reused key's 409", async () => {
    for (const op of operations.filter((o) => o.method === "POST" && !o.public)) {
      const header = (operationById(op.name).op.parameters ?? []).find((p: Json) => p.name === "Idempotency-Key")
      expect(header, op.name).toMatchObject({ in: "header", required: false })
      const responses = operationById(op.name).op.responses
      if (!op.ignoresIdempotencyKey) {
        expect(documentedCodes(responses["409"]), op.name).toContain("IDEMPOTENCY_KEY_REUSED")
        expect(Object.keys(responses[String(op.successStatus ?? 200)].headers), op.name).toContain(
          "Idempotent-Replayed",
        )
      }
    }
    const key = `openapi-idem-${Date.now()}`
    const body = { name: `idem-${key}` }
    const first = await callDocumented("agents.create", {}, body, "", { headers: { "idempotency-key": key } })
    expect(first.status).toBe(201)
    const replay = await callDocumented("agents.create", {}, body, "", { headers: { "idempotency-key": key } })
    expect([replay.status, replay.headers.get("idempotent-replayed")]).toEqual([201, "true"])
    expect(replay.body).toEqual(first.body)
    const reused = await callDocumented("agents.create", {}, { name: `other-${key}` }, "", {
      headers: { "idempotency-key": key },
    })
    expect([reused.status, reused.body.error.code]).toEqual([409, "IDEMPOTENCY_KEY_REUSED"])
    const malformed = await callDocumented("agents.create", {}, body, "", { headers: { "idempotency-key": "a b" } })
    expect(malformed.status).toBe(400)
    // A public POST has no credential to bind a key to: it documents neither the header nor a 409 for it.
    const verify = operationById("trust.verifyBadge").op
    expect((verify.parameters ?? []).some((p: Json) => p.name === "Idempotency-Key")).toBe(false)
    expect(verify.responses["409"]).toBeUndefined()
  })

  it("a query parameter an operation does not document is 400 on every operation, and nothing runs", async () => {
    for (const op of operations) {
      const { path, method, op: documented } = operationById(op.name)
      const query = (documented.parameters ?? []).filter((p: Json) => p.in === "query" && p.required)
      const search = new URLSearchParams({
        ...Object.fromEntries(query.map((p: Json) => [p.name, "1"])),
        dryRun: "true",
      })
      const url = `/api/v1${path.replace(/\{[A-Za-z]+\}/g, "example")}?${search}`
      const body = documented.requestBody?.content["application/json"].example
      const res = await t.call(method.toUpperCase(), url, {
        ...(body !== undefined ? { body } : {}),
        ...(op.public ? { key: null } : {}),
      })
      expect([res.status, res.body?.error?.details?.field], `${op.name}: ${JSON.stringify(res.body)}`).toEqual([
        400,
        "dryRun",
      ])
      checkAnswer(op.name, res)
    }
    const name = `dry-run-${Date.now()}`
    expect((await t.call("POST", "/api/v1/agents?dryRun=true", { body: { name } })).status).toBe(400)
    expect((await t.call("GET", `/api/v1/agents?namePrefix=${name}`)).body.data).toEqual([])
  })

  it("a dashboard session that admits nothing is answered as documented, and counted like a bad key", async () => {
    // The test server is on loopback over http: the session cookie is `agentgov_session` (no `__Host-`).
    const cookie = { cookie: "agentgov_session=not-a-session" }
    const refused = [
      ["agents.create", await t.call("POST", "/api/v1/agents", { key: null, headers: cookie, body: { name: "x" } })],
      ["agents.list", await t.call("GET", "/api/v1/agents", { key: null, headers: cookie })],
    ] as const
    expect(refused.map(([, res]) => [res.status, res.body.error.code])).toEqual([
      [403, "CSRF_FAILED"],
      [401, "UNAUTHORIZED"],
    ])
    for (const [operationId, res] of refused) {
      checkAnswer(operationId, res)
      expect(res.headers.get("x-ratelimit-limit"), operationId).not.toBeNull()
    }
  })

  it("public badges: every answer is documented, the SVG one too, and an id the store cannot hold", async () => {
    const agentId = (await t.call("POST", "/api/v1/agents", { body: { name: "openapi-badge-agent" } })).body.data.id
    for (const format of ["svg", "json"]) {
      const res = await t.call("GET", `/api/v1/badge/${agentId}?format=${format}`, { key: null })
      expect(res.status, format).toBe(404)
      checkAnswer("trust.badge", res)
    }
    for (const id of [agentId, "agt_missing", "a\u0000b"]) {
      const status = await callDocumented("trust.badgeStatus", { agentId: id }, undefined, "", { key: null })
      expect(status.status, id).toBeLessThan(500)
      expect((await callDocumented("trust.badgeData", { agentId: id }, undefined, "", { key: null })).status).toBe(404)
    }
    expect((await callDocumented("agents.get", { id: "a\u0000b" })).status).toBe(404)
    // A current ETag: 304, documented.
    const first = await t.call("GET", `/api/v1/badge/${agentId}/verify`, { key: null })
    const etag = first.headers.get("etag")
    expect(etag).toBeTruthy()
    const again = await callDocumented("trust.badgeStatus", { agentId }, undefined, "", {
      key: null,
      headers: { "if-none-match": etag! },
    })
    expect(again.status).toBe(304)
  })

  it.runIf(operations.some((op) => op.name === "events.list"))("events: ingest, list, get, verify", async () => {
    const ingested = await callDocumented(
      "events.ingest",
      {},
      { events: [{ type: "conformance.checked", data: { n: 1 } }] },
    )
    expect(ingested.status).toBe(201)
    const listed = await callDocumented("events.list", {}, undefined, "?limit=5")
    expect(listed.status).toBe(200)
    expect(listed.body.data.length).toBeGreaterThan(0)
    expect((await callDocumented("events.get", { id: listed.body.data[0].id })).status).toBe(200)
    expect((await callDocumented("events.verify", {}, {})).status).toBe(200)
  })
})
