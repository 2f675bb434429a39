import type { IncomingMessage } from "node:http"
import type { SessionRequest } from "../Executor.ts"

/** The value of cookie `name` in a Cookie header, or undefined. The first one wins, as browsers send the most specific first. */
export const cookieOf = (header: string | undefined, name: string): string | undefined => {
  if (!header) return undefined
  for (const part of header.split(";")) {
    const eq = part.indexOf("=")
    if (eq < 0) continue
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

const one = (v: string | Array<string> | undefined) => (Array.isArray(v) ? v[0] : v)

/**
 * A dashboard request's session credential, when it has no Authorization header and carries the session
 * cookie `cookieName`; undefined otherwise (a bearer credential always takes precedence).
 */
export const sessionRequestOf = (req: IncomingMessage, cookieName: string | undefined): SessionRequest | undefined => {
  if (cookieName === undefined || req.headers.authorization !== undefined) return undefined
  const secret = cookieOf(req.headers.cookie, cookieName)
  if (secret === undefined) return undefined
  return {
    secret,
    method: req.method ?? "GET",
    csrfToken: one(req.headers["x-csrf-token"]),
    origin: one(req.headers.origin),
    workspaceId: one(req.headers["x-agentgov-workspace"]),
    address: req.socket.remoteAddress,
  }
}
