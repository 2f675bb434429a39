import { SCOPES } from "@agentgov/domain"
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
        description:
          "the same key and body within 24 h replays the first response; another body is 409 IDEMPOTENCY_KEY_REUSED",
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
    const specific = (op.errors ?? []).filter((e) => !e.endsWith("_NOT_FOUND"))
    if (specific.length > 0 || op.method === "POST") errorCodes.add("409")
    for (const code of [...errorCodes].sort()) {
      const description =
        code === "404"
          ? (op.errors ?? []).filter((e) => e.endsWith("_NOT_FOUND")).join(", ")
          : code === "409"
            ? ["CONFLICT", ...specific, ...(op.method === "POST" ? ["IDEMPOTENCY_KEY_REUSED"] : [])].join(", ")
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
      description: [op.description, `Requires scope \`${op.scope}\`. Also served under \`/v1${op.path}\`.`]
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
        "Each message: `id:` the event id, `data:` JSON `{type, payload}` where payload is the event. `Last-Event-ID` (header, or `lastEventId` query) resumes after that event without gap or duplicate. A comment heartbeat every 10 s. A client that stops reading is disconnected.\n\nRequires scope `events:read`. Also served under `/v1/events/stream`.",
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
      },
    },
  }
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
        "Governance for autonomous software agents. Every response is an envelope: `{ok: true, data, meta?}` or `{ok: false, error: {code, message, details?}}`. Lists are newest first with cursor pagination (`limit` 1..100, default 25; `cursor` from `meta.cursor`).",
    },
    servers: [{ url: options.serverUrl ?? "/" }],
    tags: [...new Set(operations.map((o) => o.tag))].map((name) => ({ name })).concat([{ name: "Service" }]),
    paths,
    components: {
      schemas: components,
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
