import { Agent as HttpAgent, request as httpRequest, STATUS_CODES } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"

/**
 * A small `fetch` for a connector's vendor calls, on `node:http`/`node:https` with keep-alive agents, for the vendor
 * clients that take one (`@slack/web-api`'s `fetch`, `@discordjs/rest`'s `makeRequest`) and for plain calls.
 *
 * Why not the global `fetch`: in a long-running connector, Node's built-in fetch (undici) held ~80 MB more resident
 * memory after a few thousand requests than `node:http` doing the same requests (docs/decisions.md, "Connector apps
 * run from one bundled file"), against a target of 80 MB for the whole process.
 *
 * What it does: one request, no redirects followed (a 3xx is answered as is), the whole answer read into memory (a
 * vendor's answers are small; past `maxResponseBytes` the request fails), the signal honoured while connecting,
 * sending and reading. Bodies: a string, bytes, or `URLSearchParams` (form-encoded); not streams, not `FormData`.
 */

/** The answer: the parts of a fetch `Response` the vendor clients read. */
export interface VendorResponse {
  readonly url: string
  readonly status: number
  readonly statusText: string
  readonly ok: boolean
  readonly headers: VendorHeaders
  /** Always null: the body is read already; use `text()`, `json()` or `arrayBuffer()`. */
  readonly body: null
  readonly bodyUsed: boolean
  readonly text: () => Promise<string>
  readonly json: () => Promise<any>
  readonly arrayBuffer: () => Promise<ArrayBuffer>
}

/** Read-only response headers, with fetch's `Headers` reading methods; names are case-insensitive. */
export interface VendorHeaders extends Iterable<[string, string]> {
  readonly get: (name: string) => string | null
  readonly has: (name: string) => boolean
  readonly entries: () => IterableIterator<[string, string]>
  readonly keys: () => IterableIterator<string>
  readonly values: () => IterableIterator<string>
  readonly forEach: (f: (value: string, name: string) => void) => void
}

export interface VendorRequestInit {
  readonly method?: string
  readonly headers?: Record<string, string | ReadonlyArray<string> | undefined> | Iterable<[string, string]>
  readonly body?: string | Uint8Array | ArrayBuffer | URLSearchParams | null
  readonly signal?: AbortSignal | null
  /** Accepted for `fetch` compatibility; redirects are never followed. */
  readonly redirect?: string
}

export type VendorFetch = (input: string | URL, init?: VendorRequestInit) => Promise<VendorResponse>

export interface VendorFetchOptions {
  /** Sockets per host at once; default 16. */
  readonly maxSockets?: number
  /** Default 10 MB. */
  readonly maxResponseBytes?: number
}

const headersOf = (raw: Record<string, string | Array<string> | undefined>): VendorHeaders => {
  const map = new Map<string, string>()
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue
    map.set(name.toLowerCase(), Array.isArray(value) ? value.join(", ") : value)
  }
  return {
    get: (name) => map.get(name.toLowerCase()) ?? null,
    has: (name) => map.has(name.toLowerCase()),
    entries: () => map.entries(),
    keys: () => map.keys(),
    values: () => map.values(),
    forEach: (f) => {
      for (const [name, value] of map) f(value, name)
    },
    [Symbol.iterator]: () => map.entries(),
  }
}

const abortError = (signal: AbortSignal): Error =>
  signal.reason instanceof Error ? signal.reason : new DOMException("This operation was aborted", "AbortError")

/** A `fetch` of its own keep-alive agents; see the module's comment. */
export const createVendorFetch = (options: VendorFetchOptions = {}): VendorFetch => {
  const maxSockets = options.maxSockets ?? 16
  const maxResponseBytes = options.maxResponseBytes ?? 10 * 1024 * 1024
  const agents = {
    http: new HttpAgent({ keepAlive: true, maxSockets, maxFreeSockets: 4, timeout: 60_000 }),
    https: new HttpsAgent({ keepAlive: true, maxSockets, maxFreeSockets: 4, timeout: 60_000 }),
  }
  return (input, init = {}) =>
    new Promise<VendorResponse>((resolve, reject) => {
      const url = new URL(String(input))
      const signal = init.signal ?? undefined
      if (signal?.aborted) return reject(abortError(signal))
      const headers: Record<string, string> = {}
      const given = init.headers ?? {}
      const pairs: Iterable<[string, unknown]> =
        Symbol.iterator in given ? (given as Iterable<[string, string]>) : Object.entries(given)
      for (const [name, value] of pairs) {
        if (value === undefined) continue
        headers[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : String(value)
      }
      let body: string | Uint8Array | undefined
      const b = init.body
      if (b === null || b === undefined) body = undefined
      else if (typeof b === "string" || b instanceof Uint8Array) body = b
      else if (b instanceof ArrayBuffer) body = new Uint8Array(b)
      else if (b instanceof URLSearchParams) {
        body = b.toString()
        headers["content-type"] ??= "application/x-www-form-urlencoded;charset=UTF-8"
      } else return reject(new TypeError("vendorFetch: the body must be a string, bytes or URLSearchParams"))
      if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body))
      const secure = url.protocol === "https:"
      if (!secure && url.protocol !== "http:")
        return reject(new TypeError(`vendorFetch: unsupported URL ${url.protocol}`))
      const req = (secure ? httpsRequest : httpRequest)(url, {
        method: init.method ?? "GET",
        headers,
        agent: secure ? agents.https : agents.http,
      })
      const onAbort = () => {
        fail(abortError(signal!))
        req.destroy()
      }
      signal?.addEventListener("abort", onAbort, { once: true })
      let settled = false
      const fail = (error: unknown) => {
        signal?.removeEventListener("abort", onAbort)
        if (settled) return
        settled = true
        reject(error)
      }
      req.on("error", fail)
      req.once("response", (res) => {
        const chunks: Array<Buffer> = []
        let size = 0
        res.on("error", fail)
        res.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size <= maxResponseBytes) return void chunks.push(chunk)
          fail(new Error(`vendorFetch: the answer is over ${maxResponseBytes} bytes`))
          req.destroy()
        })
        res.once("close", () => {
          if (!res.complete)
            fail(
              signal?.aborted
                ? abortError(signal)
                : new Error("vendorFetch: the connection closed before the answer ended"),
            )
        })
        res.once("end", () => {
          signal?.removeEventListener("abort", onAbort)
          if (settled) return
          settled = true
          const bytes = Buffer.concat(chunks)
          let used = false
          const take = () => {
            if (used) return Promise.reject(new TypeError("vendorFetch: the body was read already"))
            used = true
            return Promise.resolve(bytes)
          }
          const status = res.statusCode ?? 0
          resolve({
            url: url.href,
            status,
            statusText: res.statusMessage ?? STATUS_CODES[status] ?? "",
            ok: status >= 200 && status < 300,
            headers: headersOf(res.headers),
            body: null,
            get bodyUsed() {
              return used
            },
            text: () => take().then((buf) => buf.toString("utf8")),
            json: () => take().then((buf) => JSON.parse(buf.toString("utf8"))),
            arrayBuffer: () =>
              take().then((buf) => buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer),
          })
        })
      })
      req.end(body)
    })
}
