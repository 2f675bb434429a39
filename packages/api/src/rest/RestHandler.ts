import { isUtf8 } from "node:buffer"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Actor } from "@agentgov/domain"
import { ApiError, formatPath } from "../ApiError.ts"
import type { Executor, Result } from "../Executor.ts"
import { propertyTypes } from "../jsonSchema.ts"
import { honoursIdempotencyKey, type Operation, RenderedDocument } from "../Operation.ts"
import { sessionRequestOf } from "./cookies.ts"
import {
  authorizationOf,
  bodyOperationQuery,
  errorBody,
  findUnstorable,
  readBody,
  sendError,
  sendJson,
  unknownQueryParameter,
} from "./http.ts"
import { makeRouter } from "./Router.ts"

export interface RestOptions {
  readonly operations: ReadonlyArray<Operation>
  readonly executor: Executor
  /** Largest accepted body; default 1 MiB. */
  readonly maxBodyBytes?: number
  /** The dashboard's session cookie: requests with it and no Authorization header act as the signed-in person. */
  readonly sessionCookie?: string | undefined
  /** Streaming GET endpoints outside the JSON catalog, by path (the SSE stream). */
  readonly streams?: Readonly<
    Record<
      string,
      (
        req: IncomingMessage,
        res: ServerResponse,
        url: URL,
        requestId: string,
        auth: Result<Actor>,
        /** The credential's secret: the session cookie's value for a dashboard request, else the bearer. */
        secret?: string,
      ) => Promise<void>
    >
  >
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i
const CHARSET = /;\s*charset\s*=\s*("?[^;\s]*"?)/i

const badRequest = (message: string, field?: string, issue?: string) =>
  new ApiError(400, "BAD_REQUEST", message, field ? { field, issue: issue ?? message } : undefined)

/** `?status=` from an unset variable: no filter, every filter or none would each be a guess (D2: a 400). */
const emptyParameter = (name: string) =>
  badRequest(`query parameter "${name}" is empty: give a value or leave it out`, name, "is empty")

/** Query string → input fields, coerced by the JSON type each field declares. */
const makeQueryDecoder = (op: Operation) => {
  const types = propertyTypes(op.input)
  return (query: URLSearchParams): Record<string, unknown> | ApiError => {
    const out: Record<string, unknown> = {}
    for (const name of new Set(query.keys())) {
      const values = query.getAll(name)
      const type = types[name]
      if (type === undefined) return unknownQueryParameter(name)
      if (type === "array") {
        const items = values.flatMap((v) => v.split(",")).filter((v) => v !== "")
        if (items.length === 0) return emptyParameter(name)
        out[name] = items
        continue
      }
      if (values.length > 1)
        return badRequest(`query parameter "${name}" given more than once`, name, "given more than once")
      const raw = values[0]!
      if (raw === "") return emptyParameter(name)
      if (type === "integer" || type === "number") {
        out[name] = /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw
      } else if (type === "boolean") {
        out[name] = raw === "true" ? true : raw === "false" ? false : raw
      } else {
        out[name] = raw
      }
    }
    return out
  }
}

/**
 * The REST facade of decision D1–D3: routes `/api/v1/...` (the server strips
 * the prefix), checks in order credential (401), scope (403), media type
 * (415), size (413), JSON (400), schema (422 for bodies, 400 for queries),
 * then runs the operation and answers in the envelope.
 */
export const makeRestHandler = (options: RestOptions) => {
  const { executor } = options
  const maxBody = options.maxBodyBytes ?? 1024 * 1024
  const route = makeRouter(options.operations)
  const queryDecoders = new Map(options.operations.map((op) => [op, makeQueryDecoder(op)]))

  const encode = (op: Operation, value: unknown) => {
    const status = op.successStatus ?? 200
    const body = op.paginated
      ? JSON.stringify({ ok: true, data: (value as any).data, meta: (value as any).meta })
      : JSON.stringify({ ok: true, data: value })
    return { status, body }
  }

  return async (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    url: URL,
    requestId: string,
  ): Promise<void> => {
    const method = req.method ?? "GET"
    // Every response carries the rate-limit headers (D10), so every request is counted,
    // also one to a path or with a method that does not exist.
    const session = req.headers.cookie === undefined ? undefined : sessionRequestOf(req, options.sessionCookie)
    let admission = session
      ? await executor.authenticateSession(session, requestId)
      : await executor.authenticate(authorizationOf(req), req.socket.remoteAddress, requestId)
    // A session cookie that admits nothing (signed out, forged, no CSRF token) counts against the client's address,
    // as a bad API key does (D10): limited, and answered with the rate-limit headers.
    if (session && !admission.result.ok && admission.result.error.status !== 429) {
      const byAddress = await executor.admitPublic(req.socket.remoteAddress, requestId)
      admission = { result: byAddress.result.ok ? admission.result : byAddress.result, headers: byAddress.headers }
    }
    for (const name in admission.headers) res.setHeader(name, admission.headers[name]!)
    if (!admission.result.ok && admission.result.error.status === 429)
      return sendError(res, admission.result.error, requestId)
    const stream = options.streams?.[path]
    if (stream) {
      if (method === "GET") return stream(req, res, url, requestId, admission.result, session?.secret)
      return sendError(
        res,
        new ApiError(405, "METHOD_NOT_ALLOWED", `${method} is not allowed on ${url.pathname}`),
        requestId,
        { allow: "GET" },
      )
    }
    // HEAD is GET without the body (RFC 9110 9.3.2): node:http leaves the body out of a HEAD's answer itself.
    const match = route(method === "HEAD" ? "GET" : method, path)
    if (match.kind === "none")
      return sendError(res, new ApiError(404, "NOT_FOUND", `no route for ${method} ${url.pathname}`), requestId)
    if (match.kind === "method") {
      return sendError(
        res,
        new ApiError(405, "METHOD_NOT_ALLOWED", `${method} is not allowed on ${url.pathname}`),
        requestId,
        {
          allow: match.allow.join(", "),
        },
      )
    }
    const { op, params } = match

    const auth = admission.result
    if (!auth.ok) return sendError(res, auth.error, requestId, { "www-authenticate": 'Bearer realm="agentgov"' })
    const actor = auth.value
    const denied = executor.authorize(op, actor)
    if (denied) return sendError(res, denied, requestId)
    // A path id the store could not even hold names nothing: the resource's 404.
    if (findUnstorable(params)) {
      const code = op.errors?.find((e) => e.endsWith("_NOT_FOUND")) ?? "NOT_FOUND"
      return sendError(res, new ApiError(404, code, `no such record: ${url.pathname}`), requestId)
    }

    let raw: Record<string, unknown>
    let fingerprint: unknown
    if (op.method === "POST" || op.method === "PATCH") {
      // A body operation documents no query parameter: one sent (`?dryRun=true`) would be ignored while the call
      // runs for real, so it is refused like an unknown query parameter of a GET.
      const stray = bodyOperationQuery(url)
      if (stray) return sendError(res, stray, requestId)
      // An operation may take larger bodies than the rest (content uploads); never smaller than the server's.
      const limit = Math.max(maxBody, op.maxBodyBytes ?? 0)
      const body = await readBody(req, limit)
      if (body.kind === "aborted") return
      if (body.kind === "too_large") {
        return sendError(res, new ApiError(413, "PAYLOAD_TOO_LARGE", `body exceeds ${limit} bytes`), requestId, {
          connection: "close",
        })
      }
      let parsed: unknown = {}
      if (body.bytes.length > 0) {
        const type = req.headers["content-type"]
        if (!type || !JSON_TYPE.test(type)) {
          return sendError(
            res,
            new ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as application/json"),
            requestId,
          )
        }
        // JSON travels as UTF-8 (RFC 8259 §8.1): another charset would be decoded as what it is not.
        const charset = CHARSET.exec(type)?.[1]
        if (charset !== undefined && !/^"?utf-?8"?$/i.test(charset)) {
          return sendError(
            res,
            new ApiError(415, "UNSUPPORTED_MEDIA_TYPE", `send the body as UTF-8 JSON, not charset=${charset}`),
            requestId,
          )
        }
        // Bytes that are not UTF-8 would be replaced by U+FFFD: stored (and hashed) as what was never sent.
        if (!isUtf8(body.bytes)) return sendError(res, badRequest("body is not valid UTF-8"), requestId)
        try {
          parsed = JSON.parse(body.bytes.toString("utf8"))
        } catch {
          return sendError(res, badRequest("body is not valid JSON"), requestId)
        }
      }
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        return sendError(
          res,
          new ApiError(422, "VALIDATION_ERROR", "body must be a JSON object", {
            field: "body",
            issue: "must be a JSON object",
          }),
          requestId,
        )
      }
      const unstorable = findUnstorable(parsed)
      if (unstorable) {
        const field = formatPath(unstorable.path) || "body"
        return sendError(
          res,
          new ApiError(422, "VALIDATION_ERROR", `${field}: ${unstorable.issue}`, { field, issue: unstorable.issue }),
          requestId,
        )
      }
      const shadowed = Object.keys(params).find((name) => Object.hasOwn(parsed as object, name))
      if (shadowed !== undefined) {
        const issue = "is the path parameter, not a body field"
        return sendError(
          res,
          new ApiError(422, "VALIDATION_ERROR", `${shadowed}: ${issue}`, { field: shadowed, issue }),
          requestId,
        )
      }
      raw = { ...(parsed as Record<string, unknown>), ...params }
      fingerprint = { op: op.name, params, body: parsed }
    } else {
      const query = queryDecoders.get(op)!(url.searchParams)
      if (query instanceof ApiError) return sendError(res, query, requestId)
      const unstorable = findUnstorable(query)
      if (unstorable) {
        const field = formatPath(unstorable.path)
        return sendError(res, badRequest(`${field}: ${unstorable.issue}`, field, unstorable.issue), requestId)
      }
      raw = { ...query, ...params }
    }

    const decoded = executor.decode(op, raw, op.method === "POST" || op.method === "PATCH" ? 422 : 400)
    if (!decoded.ok) return sendError(res, decoded.error, requestId)

    const idempotencyKey = op.method === "POST" ? req.headers["idempotency-key"] : undefined
    if (idempotencyKey !== undefined && (typeof idempotencyKey !== "string" || !IDEMPOTENCY_KEY.test(idempotencyKey))) {
      return sendError(
        res,
        badRequest("Idempotency-Key must be 1 to 255 printable ASCII characters", "Idempotency-Key"),
        requestId,
      )
    }
    if (typeof idempotencyKey === "string" && honoursIdempotencyKey(op)) {
      const result = await executor.runIdempotent(
        op,
        decoded.value,
        actor,
        idempotencyKey,
        fingerprint,
        (value) => {
          const response = encode(op, value)
          // Rendered once when the replay is the response itself (the guard's case): one JSON.stringify per call.
          return { response, stored: op.redactForReplay ? encode(op, op.redactForReplay(value)) : response }
        },
        requestId,
      )
      if (!result.ok) return sendError(res, result.error, requestId)
      return sendJson(
        res,
        result.value.status,
        result.value.body,
        requestId,
        result.value.replayed ? { "idempotent-replayed": "true" } : {},
      )
    }

    const result = await executor.run(op, decoded.value, actor, requestId)
    if (!result.ok)
      return sendJson(res, result.error.status, errorBody(result.error), requestId, result.error.headers ?? {})
    if (result.value instanceof RenderedDocument) {
      const doc = result.value
      res.writeHead(200, {
        "content-type": doc.contentType,
        "content-length": String(doc.body.length),
        "x-request-id": requestId,
        "x-content-type-options": "nosniff",
        // A rendered page runs nothing and loads nothing: inline styles and its own SVG only.
        "content-security-policy":
          "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'",
        ...(doc.filename ? { "content-disposition": `inline; filename="${doc.filename}"` } : {}),
      })
      return void res.end(doc.body)
    }
    const { status, body } = encode(op, result.value)
    return sendJson(res, status, body, requestId)
  }
}
