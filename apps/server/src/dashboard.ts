import { readFileSync, statSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import { extname, join, resolve, sep } from "node:path"

/** Where `npm run build -w @agentgov/dashboard` (and `npm start`) writes the dashboard. */
export const DASHBOARD_DIST = resolve(import.meta.dirname, "../../dashboard/dist")

/**
 * The dashboard's Content-Security-Policy: scripts, styles, fonts and connections from this origin only (no
 * inline script or style, no eval), images from here or data:/blob: (badge previews, charts), no framing,
 * no plugins, no <base>, forms post only here.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join("; ")

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
}

const SECURITY_HEADERS = {
  "content-security-policy": DASHBOARD_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
}

/**
 * Serves the built dashboard (a single-page app) from `dir`: its files as they are (`/assets/*` are
 * content-hashed, cached for a year), and `index.html` at `/` and at any other path a browser navigates to
 * (Accept: text/html), where the app's own router decides. Everything else, and everything while the
 * dashboard is not built, is left to the caller (the API's 404). Only GET and HEAD.
 */
export const makeDashboard = (dir: string) => {
  const root = resolve(dir)
  let index: { mtimeMs: number; body: Buffer } | undefined

  const indexHtml = (): Buffer | undefined => {
    try {
      const path = join(root, "index.html")
      const { mtimeMs } = statSync(path)
      if (index?.mtimeMs !== mtimeMs) index = { mtimeMs, body: readFileSync(path) }
      return index.body
    } catch {
      return undefined
    }
  }

  const send = (req: IncomingMessage, res: ServerResponse, body: Buffer, type: string, cache: string, id: string) => {
    res.writeHead(200, {
      "content-type": type,
      "content-length": body.length,
      "cache-control": cache,
      "x-request-id": id,
      ...SECURITY_HEADERS,
    })
    res.end(req.method === "HEAD" ? undefined : body)
  }

  /** Answers the request and returns true, or returns false for the caller to answer. */
  return (req: IncomingMessage, res: ServerResponse, path: string, requestId: string): boolean => {
    if (req.method !== "GET" && req.method !== "HEAD") return false
    if (path !== "/" && path !== "/index.html") {
      let decoded: string
      try {
        decoded = decodeURIComponent(path)
      } catch {
        return false
      }
      const file = resolve(root, `.${decoded}`)
      if (file.startsWith(root + sep) && !decoded.includes("\0")) {
        try {
          if (statSync(file).isFile()) {
            const immutable = decoded.startsWith("/assets/")
            send(
              req,
              res,
              readFileSync(file),
              TYPES[extname(file)] ?? "application/octet-stream",
              immutable ? "public, max-age=31536000, immutable" : "public, max-age=300",
              requestId,
            )
            return true
          }
        } catch {
          // not a file of the dashboard's
        }
      }
      // A missing asset is a 404; a page the app routes is its index.
      if (decoded.startsWith("/assets/") || !String(req.headers.accept ?? "").includes("text/html")) return false
    }
    const body = indexHtml()
    if (!body) return false
    send(req, res, body, TYPES[".html"]!, "no-cache", requestId)
    return true
  }
}
