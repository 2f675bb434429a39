import type { IncomingMessage, ServerResponse } from "node:http"

/**
 * The few pages the server renders itself, outside the dashboard: the OAuth consent and the first-run link's
 * confirmation. Plain HTML with no script, and the form bodies they post.
 */

const MAX_FORM_BYTES = 16 * 1024

export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** No framing (clickjacking of the consent), no caching, no Referer (the authorization URL stays here). */
export const PAGE_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy":
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' https: http:; frame-ancestors 'none'",
}

export const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
  `<title>${escapeHtml(title)}</title><style>body{font:16px system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}` +
  `button{font:inherit;padding:.5rem 1rem;margin-right:.5rem}code{background:#eee;padding:0 .2rem}</style></head>` +
  `<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`

/** Answers with one of these pages (a HEAD gets the headers alone: node:http sends no body for it). */
export const sendPage = (
  res: ServerResponse,
  status: number,
  title: string,
  body: string,
  headers: Readonly<Record<string, string>> = {},
) => {
  res.writeHead(status, { ...PAGE_HEADERS, ...headers })
  res.end(page(title, body))
}

export const readForm = async (req: IncomingMessage): Promise<Record<string, string> | undefined> => {
  const chunks: Array<Buffer> = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_FORM_BYTES) return undefined
    chunks.push(chunk as Buffer)
  }
  const text = Buffer.concat(chunks).toString("utf8")
  const type = String(req.headers["content-type"] ?? "")
    .split(";")[0]!
    .trim()
    .toLowerCase()
  if (type === "application/json") {
    try {
      const parsed = JSON.parse(text)
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined
      return Object.fromEntries(Object.entries(parsed).filter(([, v]) => typeof v === "string")) as Record<
        string,
        string
      >
    } catch {
      return undefined
    }
  }
  if (type !== "application/x-www-form-urlencoded") return undefined
  const params = new URLSearchParams(text)
  const out: Record<string, string> = {}
  for (const [k, v] of params) {
    // A parameter sent twice is refused (RFC 6749 3.1, 3.2): which one counts would be ambiguous.
    if (k in out) return undefined
    out[k] = v
  }
  return out
}

/**
 * Whether a form POST came from a page of another site (or a sibling subdomain). `Sec-Fetch-Site`, which every
 * current browser sends, decides when present; else `Origin`, but not `null`: our pages are served with
 * `Referrer-Policy: no-referrer`, under which a browser posts their forms with `Origin: null`, so that value proves
 * nothing either way. A client that is no browser sends neither, and no other site's page can drive it.
 */
export const postedFromElsewhere = (req: IncomingMessage, publicOrigin: string): boolean => {
  const site = req.headers["sec-fetch-site"]
  if (site !== undefined) return site !== "same-origin"
  const origin = req.headers.origin
  return origin !== undefined && origin !== "null" && origin !== publicOrigin
}
