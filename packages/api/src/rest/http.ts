import type { IncomingMessage, ServerResponse } from "node:http"
import { randomId } from "@agentgov/domain"
import { ApiError } from "../ApiError.ts"
import { bearerOf, severalCredentials } from "../Executor.ts"

export { findUnstorable } from "@agentgov/domain"

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** The caller's X-Request-Id when it is sane, else a fresh one. */
export const requestIdOf = (req: IncomingMessage): string => {
  const given = req.headers["x-request-id"]
  return typeof given === "string" && REQUEST_ID.test(given) ? given : `req_${randomId(12).toString("base64url")}`
}

export const sendJson = (
  res: ServerResponse,
  status: number,
  body: string,
  requestId: string,
  headers: Record<string, string> = {},
): void => {
  if (res.headersSent) return
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-request-id": requestId,
    ...headers,
  })
  res.end(body)
}

export const errorBody = (error: ApiError): string => JSON.stringify({ ok: false, error: error.toJSON() })

export const sendError = (
  res: ServerResponse,
  error: ApiError,
  requestId: string,
  headers: Record<string, string> = {},
): void => sendJson(res, error.status, errorBody(error), requestId, { ...headers, ...error.headers })

export type BodyResult =
  | { readonly kind: "ok"; readonly bytes: Buffer }
  | { readonly kind: "too_large" }
  | { readonly kind: "aborted" }

/** Reads the body up to `limit` bytes; past it, stops keeping bytes and reports it too large. */
export const readBody = (req: IncomingMessage, limit: number): Promise<BodyResult> =>
  new Promise((resolve) => {
    const declared = Number(req.headers["content-length"])
    if (Number.isFinite(declared) && declared > limit) {
      req.resume()
      return resolve({ kind: "too_large" })
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let over = false
    req.on("data", (chunk: Buffer) => {
      if (over) return
      size += chunk.length
      if (size > limit) {
        over = true
        chunks.length = 0
        return resolve({ kind: "too_large" })
      }
      chunks.push(chunk)
    })
    req.on("end", () => !over && resolve({ kind: "ok", bytes: Buffer.concat(chunks) }))
    req.on("error", () => resolve({ kind: "aborted" }))
    req.on("aborted", () => resolve({ kind: "aborted" }))
  })

/**
 * The request's Authorization header as the credential checks see it. node:http keeps the first of several and drops
 * the rest; a proxy may read the last, so the two would act on different credentials. Several are joined here
 * (`a, b`), which is never a well-formed `Bearer <credential>`: the request is refused (401), not served.
 */
export const authorizationOf = (req: IncomingMessage): string | undefined => {
  // Read from `rawHeaders`, every line as sent: `headersDistinct` builds an array for every header of the request, on
  // every request (1% of the server's CPU per guard call in a profile at 64 connections), and it and `headers` read
  // only the first `maxHeadersCount` lines (Node answers 431 past 1,000 lines today, so that never split them).
  const raw = req.rawHeaders
  let all: Array<string> | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length !== 13 || name.toLowerCase() !== "authorization") continue
    if (all === undefined) all = [raw[i + 1]!]
    else all.push(raw[i + 1]!)
  }
  return all === undefined ? undefined : all.length === 1 ? all[0] : all.join(", ")
}

/**
 * The credential of the request's one `Authorization: Bearer <credential>` header: undefined when there is none, when
 * there are several (whichever comes first) or when it is not Bearer. For the routes that read the header themselves.
 */
export const bearerOfRequest = (req: IncomingMessage): string | undefined => {
  const authorization = authorizationOf(req)
  return severalCredentials(authorization) ? undefined : bearerOf(authorization)
}

/** A query parameter the route does not take: 400 naming it, `why` after the name when there is more to say. */
export const unknownQueryParameter = (name: string, why?: string): ApiError =>
  new ApiError(400, "BAD_REQUEST", `unknown query parameter "${name}"${why === undefined ? "" : `: ${why}`}`, {
    field: name,
    issue: "unknown parameter",
  })

/** A query parameter sent to an operation that takes its input in the body: a 400 naming it, else undefined. */
export const bodyOperationQuery = (url: URL): ApiError | undefined => {
  // No query, no URLSearchParams: the guard's path reads this on every call.
  if (url.search === "") return undefined
  const [name] = url.searchParams.keys()
  return name === undefined ? undefined : unknownQueryParameter(name, "this operation takes its input in the JSON body")
}
