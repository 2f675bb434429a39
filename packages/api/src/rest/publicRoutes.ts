import { isUtf8 } from "node:buffer"
import { createHash } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { type Badge, NOT_VERIFIED_SVG, renderBadgeSvg } from "@agentgov/domain"
import { ApiError, formatPath } from "../ApiError.ts"
import type { Executor } from "../Executor.ts"
import { propertyTypes } from "../jsonSchema.ts"
import { type Operation, PUBLIC_ACTOR } from "../Operation.ts"
import { bodyOperationQuery, errorBody, findUnstorable, readBody, sendError, sendJson } from "./http.ts"
import { makeRouter } from "./Router.ts"

export interface PublicRoutesOptions {
  readonly operations: ReadonlyArray<Operation>
  readonly executor: Executor
  readonly maxBodyBytes?: number
}

/** Embeddable answers (a README's badge): caches may keep them this long. */
const CACHEABLE = "public, max-age=300"
/** Whether the agent holds its badge *now*: kept shorter. */
const CACHEABLE_STATUS = "public, max-age=60"
const CACHEABLE_MISS = "public, max-age=60"
/** An SVG opened on its own runs nothing and loads nothing, whatever it contains. */
const SVG_HEADERS = {
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
  "x-content-type-options": "nosniff",
  "cross-origin-resource-policy": "cross-origin",
}
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i

const etagOf = (body: string) => `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`

/**
 * Each badge's SVG and ETag, drawn once: the trust module hands out the same badge object while nothing about
 * the agent changed (TrustService's cache), and a README's image is fetched far more often than that.
 */
const drawn = new WeakMap<Badge, { readonly body: string; readonly etag: string }>()
const svgOf = (badge: Badge) => {
  let svg = drawn.get(badge)
  if (svg === undefined) {
    const body = renderBadgeSvg(badge)
    svg = { body, etag: etagOf(body) }
    drawn.set(badge, svg)
  }
  return svg
}

/** Whether an `If-None-Match` names this ETag (or `*`). */
const fresh = (req: IncomingMessage, etag: string) => {
  const given = req.headers["if-none-match"]
  if (typeof given !== "string") return false
  return given
    .split(",")
    .map((t) => t.trim().replace(/^W\//, ""))
    .some((t) => t === etag || t === "*")
}

/** SVG unless JSON is asked for: `?format=json`, or an Accept that prefers JSON to images. */
const wantsSvg = (req: IncomingMessage, format: string | undefined) => {
  if (format !== undefined) return format === "svg"
  const accept = req.headers.accept ?? ""
  return !/application\/(?:[\w.+-]+\+)?json/i.test(accept) || /image\/svg\+xml/i.test(accept.split(",")[0] ?? "")
}

/**
 * The public operations of the catalog over REST (D1: badges and their verification): no credential
 * is read, calls are limited per client address (D10's limit for requests without a valid
 * credential), answers carry Cache-Control and an ETag, and `GET /badge/:agentId` draws the badge
 * as SVG. Answers `false` for a path that is no public operation's, for the REST facade to route.
 */
export const makePublicRoutes = (options: PublicRoutesOptions) => {
  const { executor } = options
  const maxBody = options.maxBodyBytes ?? 64 * 1024
  const publicOps = options.operations.filter((op) => op.public)
  const route = makeRouter(publicOps)
  const queryTypes = new Map(publicOps.map((op) => [op, propertyTypes(op.input)]))

  const send = (
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    body: string,
    type: string,
    requestId: string,
    headers: Record<string, string>,
    etag = etagOf(body),
  ) => {
    if (status === 200 && fresh(req, etag)) {
      res.writeHead(304, { etag, "x-request-id": requestId, ...headers })
      return void res.end()
    }
    res.writeHead(status, {
      "content-type": type,
      "content-length": Buffer.byteLength(body),
      etag,
      "x-request-id": requestId,
      "access-control-allow-origin": "*",
      ...headers,
    })
    res.end(req.method === "HEAD" ? undefined : body)
  }

  return async (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    url: URL,
    requestId: string,
  ): Promise<boolean> => {
    const method = req.method === "HEAD" ? "GET" : (req.method ?? "GET")
    const match = route(method, path)
    if (match.kind === "none") return false
    const admission = await executor.admitPublic(req.socket.remoteAddress, requestId)
    for (const name in admission.headers) res.setHeader(name, admission.headers[name]!)
    if (!admission.result.ok) {
      sendError(res, admission.result.error, requestId)
      return true
    }
    if (match.kind === "method") {
      sendError(
        res,
        new ApiError(405, "METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${url.pathname}`),
        requestId,
        { allow: match.allow.join(", ") },
      )
      return true
    }
    const { op, params } = match

    let raw: Record<string, unknown> = { ...params }
    if (op.method === "POST") {
      const stray = bodyOperationQuery(url)
      if (stray) {
        sendError(res, stray, requestId)
        return true
      }
      const body = await readBody(req, maxBody)
      if (body.kind === "aborted") return true
      if (body.kind === "too_large") {
        sendError(res, new ApiError(413, "PAYLOAD_TOO_LARGE", `body exceeds ${maxBody} bytes`), requestId, {
          connection: "close",
        })
        return true
      }
      const type = req.headers["content-type"]
      if (body.bytes.length > 0 && (!type || !JSON_TYPE.test(type))) {
        sendError(res, new ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as application/json"), requestId)
        return true
      }
      let parsed: unknown = {}
      try {
        if (body.bytes.length > 0) {
          if (!isUtf8(body.bytes)) throw new Error("not UTF-8")
          parsed = JSON.parse(body.bytes.toString("utf8"))
        }
      } catch {
        sendError(res, new ApiError(400, "BAD_REQUEST", "body is not valid UTF-8 JSON"), requestId)
        return true
      }
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        const issue = "must be a JSON object"
        sendError(res, new ApiError(422, "VALIDATION_ERROR", `body ${issue}`, { field: "body", issue }), requestId)
        return true
      }
      const shadowed = Object.keys(params).find((name) => Object.hasOwn(parsed as object, name))
      const unstorable = findUnstorable(parsed)
      if (shadowed !== undefined || unstorable) {
        const field = shadowed ?? (formatPath(unstorable!.path) || "body")
        const issue = shadowed !== undefined ? "is the path parameter, not a body field" : unstorable!.issue
        sendError(res, new ApiError(422, "VALIDATION_ERROR", `${field}: ${issue}`, { field, issue }), requestId)
        return true
      }
      raw = { ...(parsed as Record<string, unknown>), ...params }
    } else {
      const types = queryTypes.get(op)!
      for (const name of new Set(url.searchParams.keys())) {
        const values = url.searchParams.getAll(name)
        if (types[name] !== "string" || name in params || values.length > 1) {
          const issue = types[name] === undefined || name in params ? "unknown parameter" : "given more than once"
          sendError(
            res,
            new ApiError(400, "BAD_REQUEST", `query parameter "${name}": ${issue}`, { field: name, issue }),
            requestId,
          )
          return true
        }
        raw[name] = values[0]
      }
      if (findUnstorable(raw)) {
        const code = op.errors?.find((e) => e.endsWith("_NOT_FOUND")) ?? "NOT_FOUND"
        sendError(res, new ApiError(404, code, `no such record: ${url.pathname}`), requestId)
        return true
      }
    }

    const decoded = executor.decode(op, raw, op.method === "POST" ? 422 : 400)
    if (!decoded.ok) {
      sendError(res, decoded.error, requestId)
      return true
    }
    const svg = op.name === "trust.badge" && wantsSvg(req, (decoded.value as { format?: string }).format)
    const result = await executor.run(op, decoded.value, PUBLIC_ACTOR, requestId)
    const cache =
      op.method === "POST"
        ? "no-store"
        : !result.ok
          ? CACHEABLE_MISS
          : op.name === "trust.badgeStatus"
            ? CACHEABLE_STATUS
            : CACHEABLE
    // Caches must keep the SVG and the JSON of one URL apart.
    const vary: Record<string, string> = op.name === "trust.badge" ? { vary: "Accept" } : {}
    if (svg) {
      if (result.ok) {
        const svg = svgOf(result.value as Badge)
        send(
          req,
          res,
          200,
          svg.body,
          "image/svg+xml; charset=utf-8",
          requestId,
          { "cache-control": cache, ...vary, ...SVG_HEADERS },
          svg.etag,
        )
      } else if (result.error.status === 404)
        // An embedded image never breaks: the grey badge, alike for every agent without one.
        send(req, res, 404, NOT_VERIFIED_SVG, "image/svg+xml; charset=utf-8", requestId, {
          "cache-control": cache,
          ...vary,
          ...SVG_HEADERS,
        })
      else sendJson(res, result.error.status, errorBody(result.error), requestId, result.error.headers ?? {})
      return true
    }
    if (!result.ok) {
      sendJson(res, result.error.status, errorBody(result.error), requestId, {
        "cache-control": cache,
        "access-control-allow-origin": "*",
        ...vary,
        ...(result.error.headers ?? {}),
      })
      return true
    }
    send(
      req,
      res,
      200,
      JSON.stringify({ ok: true, data: result.value }),
      "application/json; charset=utf-8",
      requestId,
      {
        "cache-control": cache,
        "x-content-type-options": "nosniff",
        ...vary,
      },
    )
    return true
  }
}
