import { EVENT_ALIASES, SCOPES, SYSTEM_EVENTS } from "@agentgov/domain"
import { resolve, toJsonSchema } from "./jsonSchema.ts"
import type { Operation } from "./Operation.ts"

type Json = Record<string, any>

const COMMON_ERRORS: Record<string, string> = {
  "400": "Malformed JSON, bad query parameters or a bad cursor (BAD_REQUEST)",
  "401": "Missing, invalid, revoked or expired credential (UNAUTHORIZED)",
  "403": "Missing scope, or outside the credential's agent (FORBIDDEN)",
  "413": "Body too large (PAYLOAD_TOO_LARGE)",
  "415": "Body not sent as application/json (UNSUPPORTED_MEDIA_TYPE)",
  "422": "Body failed its schema (VALIDATION_ERROR, `details.field` names the field)",
  "429": "Rate limit exceeded (RATE_LIMITED, `Retry-After`)",
  "500": "Internal error (INTERNAL_ERROR)",
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
  readonly serverUrl?: string
}

/** The OpenAPI 3.1 document of every operation in the catalog. */
export const buildOpenApi = (operations: ReadonlyArray<Operation>, options: OpenApiOptions = {}): Json => {
  const components: Record<string, Json> = { ErrorEnvelope: errorEnvelope }
  const schemaOf = (s: Parameters<typeof toJsonSchema>[0]) => {
    const { schema, definitions } = toJsonSchema(s)
    Object.assign(components, definitions)
    return { schema, definitions }
  }

  const paths: Record<string, Json> = {}
  for (const op of operations) {
    const pathParams = [...op.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!)
    const openapiPath = `/api/v1${op.path.replace(/:([A-Za-z]+)/g, "{$1}")}`
    const input = schemaOf(op.input)
    const inputObject = resolve(input.schema, input.definitions)
    const props: Record<string, Json> = inputObject.properties ?? {}
    const required: Array<string> = inputObject.required ?? []

    const parameters: Array<Json> = pathParams.map((name) => ({
      name,
      in: "path",
      required: true,
      schema: { type: "string" },
      description: props[name]?.description,
    }))
    let requestBody: Json | undefined
    const bodyProps = Object.fromEntries(Object.entries(props).filter(([k]) => !pathParams.includes(k)))
    const bodyRequired = required.filter((k) => !pathParams.includes(k))
    if (op.method === "GET" || op.method === "DELETE") {
      for (const [name, schema] of Object.entries(bodyProps)) {
        parameters.push({
          name,
          in: "query",
          required: bodyRequired.includes(name),
          schema,
          description: schema.description,
        })
      }
    } else {
      requestBody = {
        required: bodyRequired.length > 0,
        content: {
          "application/json": {
            schema: { type: "object", properties: bodyProps, required: bodyRequired, additionalProperties: false },
          },
        },
      }
    }
    parameters.push({
      name: "X-Request-Id",
      in: "header",
      required: false,
      schema: { type: "string" },
      description: "echoed; generated when absent",
    })
    if (op.method === "POST") {
      parameters.push({
        name: "Idempotency-Key",
        in: "header",
        required: false,
        schema: { type: "string", maxLength: 255 },
        description: op.ignoresIdempotencyKey
          ? "accepted and not used: every call mints a new token (a replay would have to store a bearer token)"
          : "the same key, body and credential (a token counts as its key) within 24 h replays the first response; another body or credential is 409 IDEMPOTENCY_KEY_REUSED",
      })
    }

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
        content: { "application/json": { schema: success } },
      },
    }
    const errorCodes = new Set(["400", "401", "403", "429", "500"])
    if (op.method === "POST" || op.method === "PATCH") for (const c of ["413", "415", "422"]) errorCodes.add(c)
    if (op.errors?.some((e) => e.endsWith("_NOT_FOUND"))) errorCodes.add("404")
    if (op.errors?.includes("VALIDATION_ERROR")) errorCodes.add("422")
    const specific = (op.errors ?? []).filter((e) => !e.endsWith("_NOT_FOUND") && e !== "VALIDATION_ERROR")
    if (specific.length > 0 || op.method === "POST") errorCodes.add("409")
    for (const code of [...errorCodes].sort()) {
      const description =
        code === "404"
          ? (op.errors ?? []).filter((e) => e.endsWith("_NOT_FOUND")).join(", ")
          : code === "409"
            ? ["CONFLICT", ...specific, ...(op.method === "POST" ? ["IDEMPOTENCY_KEY_REUSED"] : [])].join(", ")
            : code === "422" && op.method === "GET"
              ? "A parameter is well-formed but names what does not exist yet, e.g. a sequence beyond the chain (VALIDATION_ERROR, `details.field` names it)"
              : COMMON_ERRORS[code]!
      responses[code] = {
        description,
        content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
      }
    }

    paths[openapiPath] ??= {}
    paths[openapiPath][op.method.toLowerCase()] = {
      operationId: op.name,
      summary: op.summary,
      description: [
        op.description,
        op.scope === null
          ? `Any valid API key. Also served under \`/v1${op.path}\`.`
          : `Requires scope \`${op.scope}\`. Also served under \`/v1${op.path}\`.`,
      ]
        .filter(Boolean)
        .join("\n\n"),
      tags: [op.tag],
      security: [{ bearer: [] }],
      "x-scope": op.scope,
      parameters,
      ...(requestBody ? { requestBody } : {}),
      responses,
    }
  }

  paths["/api/v1/events/stream"] = {
    get: {
      operationId: "events.stream",
      summary: "Live event stream (server-sent events)",
      description:
        "Each message: `id:` the event id, `data:` JSON `{type, payload}` where payload is the event. `Last-Event-ID` (header, or `lastEventId` query) resumes after that event without gap or duplicate. A comment heartbeat every 10 s. A client that stops reading is disconnected.\n\nThe credential is checked for as long as the stream is open: once its API key (or the key an SDK token came from) is revoked, its workspace deleted, or the key or token expires, the stream sends `event: error` with `data:` the 401 error envelope and ends (within 5 s, on every instance). Open streams are limited per API key (an SDK token counts against its key) and per workspace by plan, on each server instance; beyond, 429 `RATE_LIMITED` with `Retry-After` (a hint: a slot frees when one of those streams closes).\n\nRequires scope `events:read`. Also served under `/v1/events/stream`.",
      tags: ["Events"],
      security: [{ bearer: [] }],
      "x-scope": "events:read",
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
        "200": { description: "the stream", content: { "text/event-stream": { schema: { type: "string" } } } },
        "400": {
          description: COMMON_ERRORS["400"]!,
          content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
        },
        "401": {
          description: COMMON_ERRORS["401"]!,
          content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
        },
        "403": {
          description: COMMON_ERRORS["403"]!,
          content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
        },
        "429": {
          description: `${COMMON_ERRORS["429"]!}, or too many open streams for the key or the workspace`,
          content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
        },
      },
    },
  }
  const events = buildWebhooks(schemaOf)
  Object.assign(components, events.schemas, { WebhookDeliveryMetadata: deliveryMetadata })

  paths["/healthz"] = {
    get: {
      operationId: "health.live",
      summary: "Liveness",
      security: [],
      tags: ["Service"],
      responses: { "200": { description: "alive" } },
    },
  }
  paths["/readyz"] = {
    get: {
      operationId: "health.ready",
      summary: "Readiness: the store answers",
      security: [],
      tags: ["Service"],
      responses: { "200": { description: "ready" }, "503": { description: "not ready" } },
    },
  }

  return {
    openapi: "3.1.0",
    info: {
      title: options.title ?? "agentgov API",
      version: options.version ?? "1.0.0",
      description:
        "Governance for autonomous software agents. Every response is an envelope: `{ok: true, data, meta?}` or `{ok: false, error: {code, message, details?}}`. Lists are newest first with cursor pagination (`limit` 1..100, default 25; `cursor` from `meta.cursor`). `webhooks` documents every system event: the body delivered for it, with its `data` schema (`components.schemas.EventData_<name with dots as underscores>`).",
    },
    servers: [{ url: options.serverUrl ?? "/" }],
    tags: [...new Set(operations.map((o) => o.tag))]
      .map((name): Json => ({ name }))
      .concat([
        { name: "Service" },
        { name: "Webhook events", description: "The system's events, as delivered to webhooks (signed POSTs)." },
      ]),
    paths,
    webhooks: events.webhooks,
    components: {
      schemas: components,
      parameters: WEBHOOK_HEADERS,
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: `An API key (\`svc_ws_…\`, \`svc_ag_sk_…\`). Scopes: ${SCOPES.join(", ")}.`,
        },
      },
    },
  }
}
