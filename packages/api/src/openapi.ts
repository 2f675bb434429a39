import { EVENT_ALIASES, SCOPES, SYSTEM_EVENTS } from "@agentgov/domain"
import { type Schema, SchemaAST } from "effect"
import { exampleOf } from "./examples.ts"
import { canonicalJson, objectFields, omitProperties, referencedSchemas, resolve, toJsonSchema } from "./jsonSchema.ts"
import { honoursIdempotencyKey, type Operation } from "./Operation.ts"
import { BODY_SCHEMA } from "./operations/common.ts"

type Json = Record<string, any>

const COMMON_ERRORS: Record<string, string> = {
  "400": "Malformed JSON, bad query parameters or a bad cursor (BAD_REQUEST)",
  "401": "Missing, invalid, revoked or expired credential (UNAUTHORIZED)",
  "403":
    "Missing scope, or outside the credential's agent (FORBIDDEN); with the dashboard's session cookie, a missing or wrong `X-CSRF-Token` (CSRF_FAILED) or a workspace the person is no member of (NOT_A_MEMBER)",
  "413": "Body too large (PAYLOAD_TOO_LARGE)",
  "415": "Body not sent as application/json (UNSUPPORTED_MEDIA_TYPE)",
  "422": "Body failed its schema (VALIDATION_ERROR, `details.field` names the field)",
  "429": "Rate limit exceeded (RATE_LIMITED, `Retry-After`)",
  "500": "Internal error (INTERNAL_ERROR)",
  "503":
    "The server is starting and routes nothing yet (NOT_READY, `Retry-After`), or its database cannot serve now: out of reach, or a lock held elsewhere for too long (STORE_UNAVAILABLE, `Retry-After`)",
}

const errorEnvelope: Json = {
  type: "object",
  required: ["ok", "error"],
  properties: {
    ok: { const: false },
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", description: "UPPER_SNAKE error code; resource-specific for 404s (`AGENT_NOT_FOUND`)" },
        message: { type: "string" },
        details: {
          type: "object",
          properties: { field: { type: "string" }, issue: { type: "string" } },
          required: ["field", "issue"],
        },
      },
    },
  },
}

/** The component holding a system event's `data` schema: `agent.registered` → `EventData_agent_registered`. */
export const eventDataComponent = (name: string) => `EventData_${name.replaceAll(".", "_")}`

const WEBHOOK_HEADERS: Record<string, Json> = {
  WebhookId: {
    name: "X-SVC-Webhook-Id",
    in: "header",
    required: true,
    schema: { type: "string" },
    description: "the delivery id (`dlv_…`)",
  },
  WebhookTimestamp: {
    name: "X-SVC-Webhook-Timestamp",
    in: "header",
    required: true,
    schema: { type: "string", pattern: "^[0-9]+$" },
    description: "Unix time in seconds",
  },
  WebhookSignature: {
    name: "X-SVC-Webhook-Signature",
    in: "header",
    required: true,
    schema: { type: "string", pattern: "^v1=[0-9a-f]{64}( v1=[0-9a-f]{64})*$" },
    description:
      "`v1=` + lowercase hex HMAC-SHA256 of `<X-SVC-Webhook-Id>.<X-SVC-Webhook-Timestamp>.<raw body>`, keyed with the UTF-8 bytes of the endpoint's secret; during a secret's rotation one `v1=` per secret, space-separated (accept when any matches); compare in constant time, answer 401 when none does",
  },
  LegacySignature: {
    name: "X-SVC-Signature",
    in: "header",
    required: false,
    schema: { type: "string", pattern: "^[0-9a-f]{64}$" },
    description: "legacy form: lowercase hex HMAC-SHA256 of the raw body alone",
  },
}

const deliveryMetadata: Json = {
  type: "object",
  required: ["deliveryId", "webhookId", "attempt"],
  properties: {
    deliveryId: { type: "string", description: "`dlv_…`, also in `X-SVC-Webhook-Id`" },
    webhookId: { type: "string", description: "`whk_…`" },
    attempt: { type: "integer", minimum: 1, description: "attempt number, starting at 1" },
  },
}

/**
 * OpenAPI 3.1 `webhooks`: one entry per system event name, the POST the service makes to a
 * subscribed endpoint, its body the event envelope (spec: id, type, timestamp, workspaceId, data,
 * metadata) with that event's `data` schema from the catalog in `components.schemas`.
 */
const buildWebhooks = (schemaOf: (s: Parameters<typeof toJsonSchema>[0]) => { schema: Json }) => {
  const schemas: Record<string, Json> = {}
  const webhooks: Record<string, Json> = {}
  const aliasesOf = (name: string) => Object.keys(EVENT_ALIASES).filter((a) => EVENT_ALIASES[a] === name)
  for (const [name, def] of Object.entries(SYSTEM_EVENTS)) {
    const component = eventDataComponent(name)
    schemas[component] = {
      ...schemaOf(def.data).schema,
      description: `The \`data\` of \`${name}\`: ${def.description}.`,
    }
    const aliases = aliasesOf(name)
    webhooks[name] = {
      post: {
        operationId: `webhook.${name}`,
        summary: `${name}: ${def.description}`,
        description: [
          `Emitted by ${def.emittedBy}. Delivered to every enabled webhook subscribed to \`${name}\`, a matching \`prefix.*\`, or \`*\`; also on \`GET /events/stream\` and in \`GET /events\`.`,
          aliases.length > 0
            ? `Subscribing as ${aliases.map((a) => `\`${a}\``).join(", ")} (alias) is the same; the delivered \`type\` is \`${name}\`.`
            : "",
          "Receivers should ignore fields they do not know: fields may be added.",
        ]
          .filter(Boolean)
          .join("\n\n"),
        tags: ["Webhook events"],
        "x-emitted-by": def.emittedBy,
        security: [{ webhookSignature: [] }],
        parameters: Object.keys(WEBHOOK_HEADERS).map((k) => ({ $ref: `#/components/parameters/${k}` })),
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["id", "type", "timestamp", "workspaceId", "data", "metadata"],
                properties: {
                  id: { type: "string", description: "the event id (`evt_…`); de-duplicate by it" },
                  type: { const: name },
                  timestamp: {
                    type: "string",
                    format: "date-time",
                    description: "when the event was recorded, ISO 8601 UTC with milliseconds",
                  },
                  workspaceId: { type: "string" },
                  data: { $ref: `#/components/schemas/${component}` },
                  metadata: { $ref: "#/components/schemas/WebhookDeliveryMetadata" },
                },
              },
            },
          },
        },
        responses: {
          "2XX": { description: "delivered: any 2xx answer is success; answer 200" },
          "410": { description: "Gone: the webhook is disabled at once" },
          default: {
            description:
              "any other answer, or none within the time-out, is a failed attempt, retried per the webhook's `retryPolicy`; when every attempt fails the webhook is disabled",
          },
        },
      },
    }
  }
  return { schemas, webhooks }
}

export interface OpenApiOptions {
  readonly title?: string
  readonly version?: string
  /** The service's public origin (`https://gov.example.com`); the servers are under it. */
  readonly serverUrl?: string
}

/** Every tag's description: a tag the catalog uses without one here is an error, so a new one gets one. */
const TAG_DESCRIPTIONS: Record<string, string> = {
  Workspaces: "Workspaces: the unit of isolation, with their settings, plan and environment.",
  People:
    "Users, their memberships in workspaces with a role (owner, admin, member, viewer: each a fixed scope set), and invitations.",
  OAuth:
    "Third-party apps (OAuth 2.0 clients) registered per workspace, and the grants people gave them. The protocol endpoints live at /oauth (see /.well-known/oauth-authorization-server).",
  Agents: "Registered agents, their versions, labels and metadata.",
  "API keys": "Workspace and agent API keys: create, rotate (with an overlap) and revoke.",
  Tokens: "Short-lived SDK tokens (signed JWTs) exchanged for an API key.",
  Events: "The hash-chained event log: ingest, list, verify, checkpoints and proofs, export.",
  Overview: "A workspace at a glance, counted workspace-wide: what the dashboard's overview shows.",
  Policies: "Policy documents and the guard that evaluates actions against them.",
  Enforcement: "Enforcements against agents (suspensions, throttles, revocations) and their appeals.",
  Approvals: "Human approvals requested by `require_approval` rules.",
  Trust:
    "Trust scores (0–1000, six tiers), reputation history, operator adjustments, and the public, signed badges that strangers verify.",
  Webhooks: "Webhook endpoints subscribed to events, their deliveries and secrets.",
  Compliance:
    "Compliance reports (EU AI Act, GDPR, SOC 2) pinned to signed audit checkpoints, and agent certifications.",
  Content:
    "Content protection: register texts and images with fingerprints and an invisible watermark, scan candidates for copies, and send takedown notices.",
  Service: "Liveness, readiness and the public signing keys: no credential.",
  "Webhook events": "The system's events, as delivered to webhooks (signed POSTs).",
}

/** The headers of answers (D2, D10), in `components.headers`. */
const RESPONSE_HEADERS: Record<string, Json> = {
  RequestId: {
    description:
      "the request's id (the caller's `X-Request-Id` when it is sane, else a fresh one); quote it in reports",
    required: true,
    schema: { type: "string" },
  },
  RateLimitLimit: {
    description:
      "requests allowed per window by the most restrictive applicable limit (D10); the three rate-limit headers are on every answer unless the operator turned rate limiting off",
    required: false,
    schema: { type: "integer", minimum: 1 },
  },
  RateLimitRemaining: {
    description: "requests left in the window of that limit",
    required: false,
    schema: { type: "integer", minimum: 0 },
  },
  RateLimitReset: {
    description: "Unix time in seconds at which that limit is back to its full allowance",
    required: false,
    schema: { type: "integer", minimum: 0 },
  },
  RetryAfter: {
    description: "seconds to wait before trying again",
    required: true,
    schema: { type: "integer", minimum: 0 },
  },
  IdempotentReplayed: {
    description:
      "`true` when this is the stored answer to an earlier request with the same `Idempotency-Key` (nothing ran again)",
    required: false,
    schema: { const: "true" },
  },
}
const headerRef = (name: keyof typeof RESPONSE_HEADERS): Json => ({ $ref: `#/components/headers/${name}` })
/** Every answer of the REST facade: its request id and the rate-limit headers (D10: every response). */
const API_HEADERS: Json = {
  "X-Request-Id": headerRef("RequestId"),
  "X-RateLimit-Limit": headerRef("RateLimitLimit"),
  "X-RateLimit-Remaining": headerRef("RateLimitRemaining"),
  "X-RateLimit-Reset": headerRef("RateLimitReset"),
}
/** The service's own paths (health, JWKS) are not rate limited: their answers carry the request id only. */
const REQUEST_ID_HEADER: Json = { "X-Request-Id": headerRef("RequestId") }
/** Headers of one answer of the REST facade, by status: a 429 adds `Retry-After`. */
const apiHeaders = (status: string): Json =>
  status === "429"
    ? { ...API_HEADERS, "Retry-After": headerRef("RetryAfter") }
    : // Answered before any routing or rate limit (apps/server/src/server.ts).
      status === "503"
      ? { ...REQUEST_ID_HEADER, "Retry-After": headerRef("RetryAfter") }
      : API_HEADERS

/** `Idempotency-Key` (D2) on a POST that stores its answer under the key. */
const IDEMPOTENCY_KEY_PARAMETER: Json = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7e]+$" },
  description:
    "Makes a retry safe (Stripe semantics): the same key with the same request within 24 h answers the first response again, with `Idempotent-Replayed: true`; with another request or credential, 409 `IDEMPOTENCY_KEY_REUSED`. 1–255 printable ASCII characters, else 400.",
}

const errorResponse = (description: string, headers?: Json): Json => ({
  description,
  ...(headers ? { headers } : {}),
  content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
})

const JWKS_SCHEMA: Json = {
  type: "object",
  required: ["keys"],
  properties: {
    keys: {
      type: "array",
      items: {
        type: "object",
        required: ["kty", "crv", "x", "kid"],
        properties: {
          kty: { const: "OKP" },
          crv: { const: "Ed25519" },
          x: { type: "string", description: "the public key, base64url" },
          kid: { type: "string", description: "the `kid` in a token's or a checkpoint's header" },
          alg: { const: "EdDSA" },
          use: { const: "sig" },
        },
        additionalProperties: true,
      },
    },
  },
  additionalProperties: true,
}

/** `opaque id with prefix \`agt_\`` in a record's `id` → `agt_example`: a path parameter's sample value. */
const sampleId = (record: Json | undefined, components: Record<string, Json>): string => {
  const described = record ? (objectFields(record, components).properties.id?.description ?? "") : ""
  return `${/prefix `([a-z]+_)`/.exec(described)?.[1] ?? ""}example`
}

/** A `curl` call, one option a line. */
const curlSample = (method: string, url: string, options: { auth: boolean; body?: unknown }): string =>
  [
    `curl -X ${method} "${url}"`,
    ...(options.auth ? ['  -H "Authorization: Bearer $AGENTGOV_API_KEY"'] : []),
    ...(options.body !== undefined
      ? ['  -H "Content-Type: application/json"', `  -d '${JSON.stringify(options.body)}'`]
      : []),
  ].join(" \\\n")

/**
 * An operation's call with sample values, as `curl` and as the SDK's method (`@agentgov/sdk`: the
 * operation's name on the client; path parameters, then the query or body object, or the body
 * field the operation names in `sdkArgument`).
 */
const codeSamples = (
  op: Operation,
  path: string,
  parameters: ReadonlyArray<Json>,
  requestBody: Json | undefined,
  record: Json | undefined,
  components: Record<string, Json>,
): Array<Json> => {
  const id = sampleId(record, components)
  const pathArgs = parameters.filter((p) => p.in === "path").map((p) => p.name as string)
  const query = Object.fromEntries(
    parameters.filter((p) => p.in === "query" && p.required).map((p) => [p.name, exampleOf(p.schema, components)]),
  )
  const body = requestBody?.content["application/json"].example as Json | undefined
  const url = `$AGENTGOV_URL/api/v1${path.replace(/\{[A-Za-z]+\}/g, id)}${
    Object.keys(query).length > 0 ? `?${new URLSearchParams(query as Record<string, string>)}` : ""
  }`
  const curl = curlSample(op.method, url, { auth: !op.public, body })
  const input = body ?? query
  const args = [
    ...pathArgs.map(() => JSON.stringify(id)),
    ...(op.sdkArgument ? [JSON.stringify(input[op.sdkArgument])] : []),
    ...(!op.sdkArgument && Object.keys(input).length > 0 ? [JSON.stringify(input)] : []),
  ]
  return [
    { lang: "Shell", label: "curl", source: curl },
    {
      lang: "TypeScript",
      label: "SDK",
      source: `const result = await agentgov.${op.name}(${args.join(", ")})`,
    },
  ]
}

/** The OpenAPI 3.1 document of every operation in the catalog. */
export const buildOpenApi = (operations: ReadonlyArray<Operation>, options: OpenApiOptions = {}): Json => {
  const components: Record<string, Json> = { ErrorEnvelope: errorEnvelope }
  // Definitions come from one effect document per schema: one name must mean one schema across them all.
  const inputNames = new Set<string>()
  const schemaOf = (s: Parameters<typeof toJsonSchema>[0], strict = false) => {
    let { schema, definitions } = toJsonSchema(s, { strict })
    // An input is strict (an unknown field is 422) where an answer is open: a named schema documented
    // both ways is `<name>Input` on the input side. Renaming changes the schemas that refer to it: repeat.
    for (let round = 0; strict && round < 10; round++) {
      const differing = Object.keys(definitions).filter(
        (name) =>
          name in components &&
          !inputNames.has(name) &&
          canonicalJson(components[name]) !== canonicalJson(definitions[name]),
      )
      if (differing.length === 0) break
      let text = JSON.stringify({ schema, definitions })
      for (const name of differing) {
        text = text.replaceAll(`"#/components/schemas/${name}"`, `"#/components/schemas/${name}Input"`)
      }
      const renamed = JSON.parse(text) as { schema: Json; definitions: Record<string, Json> }
      schema = renamed.schema
      definitions = Object.fromEntries(
        Object.entries(renamed.definitions).map(([name, d]) => [differing.includes(name) ? `${name}Input` : name, d]),
      )
    }
    for (const [name, definition] of Object.entries(definitions)) {
      if (name in components && canonicalJson(components[name]) !== canonicalJson(definition))
        throw new Error(`OpenAPI: two different schemas are named ${name}; give one another identifier`)
      components[name] = definition
      if (strict) inputNames.add(name)
    }
    return { schema, definitions }
  }
  // Answers and events first: they keep the plain names, inputs take `<name>Input` where they differ.
  for (const op of operations) schemaOf(op.output)
  for (const def of Object.values(SYSTEM_EVENTS)) schemaOf(def.data)

  const records = new Map(
    operations
      .filter((o) => o.method === "GET" && /^\/[^/]+\/:id$/.test(o.path))
      .map((o) => [o.path.split("/")[1]!, schemaOf(o.output).schema]),
  )
  const paths: Record<string, Json> = {}
  for (const op of operations) {
    const pathParams = [...op.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!)
    const openapiPath = op.path.replace(/:([A-Za-z]+)/g, "{$1}")
    const input = schemaOf(op.input, true)
    const { properties: props, required } = objectFields(input.schema, components)

    const parameters: Array<Json> = pathParams.map((name) => ({
      name,
      in: "path",
      required: true,
      schema: { type: "string" },
      description: props[name]?.description,
    }))
    let requestBody: Json | undefined
    if (op.method === "GET" || op.method === "DELETE") {
      for (const [name, schema] of Object.entries(props)) {
        if (pathParams.includes(name)) continue
        parameters.push({
          name,
          in: "query",
          required: required.includes(name),
          schema,
          description: schema.description,
        })
      }
    } else {
      // The named body schema the input declares (`idAnd`), else the input less its path parameters.
      const declared = SchemaAST.resolve(op.input.ast)?.[BODY_SCHEMA] as Schema.Top | undefined
      const body = declared ? schemaOf(declared, true).schema : omitProperties(input.schema, pathParams, components)
      const fields = objectFields(body, components)
      // A body is a JSON object (the REST facade refuses anything else), also with no fields (effect
      // says `{not: {type: "null"}}` for `Struct({})`).
      const untyped = Object.keys(fields.properties).length === 0 && resolve(body, components).type === undefined
      const schema = untyped ? { type: "object", additionalProperties: true } : body
      requestBody = {
        required: fields.required.length > 0,
        content: { "application/json": { schema, example: exampleOf(schema, components) } },
      }
    }
    // D2: a POST takes an Idempotency-Key; a public one (no credential to bind it to) and one that runs every call
    // (an SDK token) only check its form.
    const honoursKey = honoursIdempotencyKey(op)
    if (op.method === "POST" && !op.public)
      parameters.push(
        honoursKey
          ? IDEMPOTENCY_KEY_PARAMETER
          : {
              ...IDEMPOTENCY_KEY_PARAMETER,
              description:
                "Checked (1–255 printable ASCII characters, else 400) and not used: every call runs and answers afresh.",
            },
      )
    const output = schemaOf(op.output).schema
    const success = op.paginated
      ? {
          type: "object",
          required: ["ok", "data", "meta"],
          properties: {
            ok: { const: true },
            data: resolve(output, components).properties?.data ?? { type: "array" },
            meta: {
              type: "object",
              required: ["cursor", "hasMore"],
              properties: { cursor: { type: ["string", "null"] }, hasMore: { type: "boolean" } },
            },
          },
        }
      : { type: "object", required: ["ok", "data"], properties: { ok: { const: true }, data: output } }

    const responses: Json = {
      [String(op.successStatus ?? 200)]: {
        description: "Success",
        headers: honoursKey ? { ...API_HEADERS, "Idempotent-Replayed": headerRef("IdempotentReplayed") } : API_HEADERS,
        content: {
          "application/json": { schema: success, example: exampleOf(success, components) },
          ...Object.fromEntries(
            Object.entries(op.alternateContent ?? {}).map(([type, description]) => [
              type,
              { schema: { type: "string", format: "binary", description } },
            ]),
          ),
        },
      },
    }
    // A badge's image: the same record, drawn (rest/publicRoutes.ts).
    if (op.name === "trust.badge")
      responses["200"].content["image/svg+xml"] = {
        schema: { type: "string", description: "the badge as an SVG image, the JWS in its `<metadata>`" },
      }
    const errorCodes = new Set(op.public ? ["400", "429", "500", "503"] : ["400", "401", "403", "429", "500", "503"])
    if (op.method === "POST" || op.method === "PATCH") for (const c of ["413", "415", "422"]) errorCodes.add(c)
    // A path id the store could not hold names nothing: the REST facade answers the operation's first
    // `_NOT_FOUND` code, or `NOT_FOUND` (rest/RestHandler.ts, rest/publicRoutes.ts).
    const notFound = (op.errors ?? []).filter((e) => e.endsWith("_NOT_FOUND"))
    if (notFound.length > 0 || pathParams.length > 0) errorCodes.add("404")
    if (op.errors?.includes("VALIDATION_ERROR")) errorCodes.add("422")
    const specific = (op.errors ?? []).filter((e) => !e.endsWith("_NOT_FOUND") && e !== "VALIDATION_ERROR")
    if (specific.length > 0 || honoursKey) errorCodes.add("409")
    for (const code of [...errorCodes].sort()) {
      const description =
        code === "404"
          ? (notFound.length > 0 ? notFound : ["NOT_FOUND"]).join(", ")
          : code === "409"
            ? ["CONFLICT", ...specific, ...(honoursKey ? ["IDEMPOTENCY_KEY_REUSED"] : [])].join(", ")
            : code === "422" && op.method === "GET"
              ? "A parameter is well-formed but names what does not exist yet, e.g. a sequence beyond the chain (VALIDATION_ERROR, `details.field` names it)"
              : COMMON_ERRORS[code]!
      responses[code] = errorResponse(description, apiHeaders(code))
    }
    // A badge's image never breaks: without a badge, `GET /badge/:agentId` as SVG is a grey "not verified" badge.
    if (op.name === "trust.badge")
      responses["404"].content["image/svg+xml"] = {
        schema: { type: "string", description: 'a grey "not verified" badge, alike for every agent without one' },
      }
    // Public reads carry an ETag and answer a matching `If-None-Match` with 304 (rest/publicRoutes.ts).
    if (op.public && op.method === "GET") {
      responses["304"] = { description: "Not modified: the `If-None-Match` ETag is current", headers: API_HEADERS }
      parameters.push({
        name: "If-None-Match",
        in: "header",
        required: false,
        schema: { type: "string" },
        description: "the `ETag` of an earlier answer: 304 while it is current",
      })
    }

    paths[openapiPath] ??= {}
    paths[openapiPath][op.method.toLowerCase()] = {
      operationId: op.name,
      summary: op.summary,
      description: [
        op.description,
        op.public
          ? `No credential. Also served under \`/v1${op.path}\`.`
          : op.scope === null
            ? `Any valid API key. Also served under \`/v1${op.path}\`.`
            : `Requires scope \`${op.scope}\`${op.orScope ? ` or \`${op.orScope}\`` : ""}. Also served under \`/v1${op.path}\`.`,
      ]
        .filter(Boolean)
        .join("\n\n"),
      tags: [op.tag],
      security: op.public ? [] : [{ bearer: [] }],
      "x-scope": op.scope,
      parameters,
      ...(requestBody ? { requestBody } : {}),
      responses,
      // `:id` names the record of the path's first segment (`/agents/:id/versions`: an agent).
      "x-codeSamples": codeSamples(
        op,
        openapiPath,
        parameters,
        requestBody,
        records.get(op.path.split("/")[1]!),
        components,
      ),
    }
  }

  paths["/events/stream"] = {
    get: {
      operationId: "events.stream",
      summary: "Live event stream (server-sent events)",
      description:
        "Each message: `id:` the event id, `data:` JSON `{type, payload}` where payload is the event. `Last-Event-ID` (header, or `lastEventId` query) resumes after that event without gap or duplicate. A comment heartbeat every 10 s. A client that stops reading is disconnected.\n\nThe credential is checked for as long as the stream is open: once its API key (or the key an SDK token came from) is revoked, its workspace deleted, or the key or token expires, the stream sends `event: error` with `data:` the 401 error envelope and ends (within 5 s, on every instance). Open streams are limited per API key (an SDK token counts against its key) and per workspace by plan, on each server instance; beyond, 429 `RATE_LIMITED` with `Retry-After` (a hint: a slot frees when one of those streams closes).\n\nRequires scope `events:read`. Also served under `/v1/events/stream`.",
      tags: ["Events"],
      security: [{ bearer: [] }],
      "x-scope": "events:read",
      "x-codeSamples": [
        {
          lang: "Shell",
          label: "curl",
          source: `${curlSample("GET", "$AGENTGOV_URL/api/v1/events/stream?types=policy.*", { auth: true })} \\\n  -N`,
        },
        {
          lang: "TypeScript",
          label: "SDK",
          source:
            'const result = agentgov.events.stream({ types: ["policy.*"] }) // for await (const event of result) …',
        },
      ],
      parameters: [
        {
          name: "types",
          in: "query",
          required: false,
          schema: { type: "string" },
          description: "comma-separated names, exact, `prefix.*` or `*`",
        },
        { name: "agentId", in: "query", required: false, schema: { type: "string" } },
        { name: "lastEventId", in: "query", required: false, schema: { type: "string" } },
        { name: "Last-Event-ID", in: "header", required: false, schema: { type: "string" } },
      ],
      responses: {
        "200": {
          description: "the stream",
          headers: API_HEADERS,
          content: { "text/event-stream": { schema: { type: "string" } } },
        },
        "400": errorResponse(COMMON_ERRORS["400"]!, apiHeaders("400")),
        "401": errorResponse(COMMON_ERRORS["401"]!, apiHeaders("401")),
        "403": errorResponse(COMMON_ERRORS["403"]!, apiHeaders("403")),
        "429": errorResponse(
          `${COMMON_ERRORS["429"]!}, or too many open streams for the key or the workspace`,
          apiHeaders("429"),
        ),
      },
    },
  }
  const events = buildWebhooks(schemaOf)
  Object.assign(components, events.schemas, { WebhookDeliveryMetadata: deliveryMetadata })

  // The service's own paths are at the origin, not under the API's prefix.
  const origin = options.serverUrl ?? ""
  const atOrigin = [{ url: origin || "/", description: "the service's origin" }]
  const withExample = (schema: Json): Json => ({ schema, example: exampleOf(schema, components) })
  const healthResponse = (status: string): Json => ({
    type: "object",
    required: ["ok", "data"],
    properties: {
      ok: { const: true },
      data: { type: "object", required: ["status"], properties: { status: { const: status } } },
    },
  })
  paths["/healthz"] = {
    servers: atOrigin,
    get: {
      operationId: "health.live",
      "x-codeSamples": [
        { lang: "Shell", label: "curl", source: curlSample("GET", "$AGENTGOV_URL/healthz", { auth: false }) },
      ],
      summary: "Liveness",
      description: "Answers while the process serves requests, whatever its role.",
      security: [],
      tags: ["Service"],
      responses: {
        "200": {
          description: "alive",
          headers: REQUEST_ID_HEADER,
          content: { "application/json": withExample(healthResponse("ok")) },
        },
      },
    },
  }
  paths["/readyz"] = {
    servers: atOrigin,
    get: {
      operationId: "health.ready",
      "x-codeSamples": [
        { lang: "Shell", label: "curl", source: curlSample("GET", "$AGENTGOV_URL/readyz", { auth: false }) },
      ],
      summary: "Readiness: the store answers",
      security: [],
      tags: ["Service"],
      responses: {
        "200": {
          description: "ready",
          headers: REQUEST_ID_HEADER,
          content: { "application/json": withExample(healthResponse("ready")) },
        },
        "503": errorResponse("not ready: the store does not answer (NOT_READY)", REQUEST_ID_HEADER),
      },
    },
  }
  paths["/.well-known/jwks.json"] = {
    servers: [...atOrigin, { url: `${origin}/api/v1` }, { url: `${origin}/v1` }],
    get: {
      operationId: "keys.jwks",
      "x-codeSamples": [
        {
          lang: "Shell",
          label: "curl",
          source: curlSample("GET", "$AGENTGOV_URL/.well-known/jwks.json", { auth: false }),
        },
      ],
      summary: "The public signing keys (JWKS, RFC 7517)",
      description:
        "The Ed25519 keys that sign SDK tokens and chain checkpoints, by `kid`; a retired key stays listed while anything it signed may still be checked. Cacheable for 5 minutes.",
      security: [],
      tags: ["Service"],
      responses: {
        "200": {
          description: "the key set",
          headers: REQUEST_ID_HEADER,
          content: { "application/json": withExample(JWKS_SCHEMA) },
        },
        "404": errorResponse("this instance runs the worker role only (NOT_FOUND)", REQUEST_ID_HEADER),
      },
    },
  }

  const usedTags = [...new Set(operations.map((o) => o.tag)), "Service", "Webhook events"]
  for (const name of usedTags) {
    if (!TAG_DESCRIPTIONS[name]) throw new Error(`OpenAPI: tag ${name} has no description in TAG_DESCRIPTIONS`)
  }

  const document = {
    openapi: "3.1.0",
    info: {
      title: options.title ?? "agentgov API",
      version: options.version ?? "1.0.0",
      description:
        "Governance for autonomous software agents. Every response is an envelope: `{ok: true, data, meta?}` or `{ok: false, error: {code, message, details?}}`. Lists are newest first with cursor pagination (`limit` 1..100, default 25; `cursor` from `meta.cursor`). `webhooks` documents every system event: the body delivered for it, with its `data` schema (`components.schemas.EventData_<name with dots as underscores>`).",
      // The repository's LICENSE (docs/decisions.md, Build and runtime).
      license: { name: "MIT", identifier: "MIT" },
    },
    servers: [
      { url: `${origin}/api/v1`, description: "the API" },
      { url: `${origin}/v1`, description: "the same API under its short alias" },
    ],
    tags: usedTags.map((name) => ({ name, description: TAG_DESCRIPTIONS[name]! })),
    paths,
    webhooks: events.webhooks,
    components: {
      schemas: components,
      parameters: WEBHOOK_HEADERS,
      headers: RESPONSE_HEADERS,
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: `An API key (\`svc_ws_…\`, \`svc_ag_sk_…\`). Scopes: ${SCOPES.join(", ")}.`,
        },
        webhookSignature: {
          type: "apiKey",
          in: "header",
          name: "X-SVC-Webhook-Signature",
          description:
            "How a receiver authenticates a delivery: the HMAC-SHA256 signature over `<X-SVC-Webhook-Id>.<X-SVC-Webhook-Timestamp>.<raw body>` with the endpoint's secret (see the header parameters).",
        },
      },
    },
  }
  // A GET's input becomes query parameters, not a schema: its definition, referenced by nothing, goes.
  const used = referencedSchemas({ paths, webhooks: events.webhooks }, components)
  for (const name of Object.keys(components)) if (!used.has(name)) delete components[name]
  return document
}
