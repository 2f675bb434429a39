import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import { Readable } from "node:stream"
import type { FetchLike } from "@agentgov/sdk"

/** Statuses whose Response may not carry a body (the Fetch standard's null-body statuses). */
const NULL_BODY = new Set([101, 204, 205, 304])

export interface KeepAliveFetch {
  readonly fetch: FetchLike
  /** Closes the idle connections (the gateway is closing). */
  readonly close: () => void
}

/**
 * The gateway's `fetch` for the agentgov SDK: `node:http`/`node:https` requests on a keep-alive agent, so every
 * guard call reuses a warm connection to the service. The global `fetch` (undici) keeps connections alive too,
 * but its WHATWG plumbing (Request, Headers, body streams per request) cost ~170 µs more CPU per request than
 * this on the project's 2-core machine (scratch measurement, 2026-11-27), CPU the gateway spends between
 * receiving a `tools/call` and forwarding it. What the SDK needs of an answer is kept: status, headers, a
 * buffered body, and a streaming one for server-sent events (`waitForApproval`'s event stream).
 * Anything this does not handle (a `Request` object as input) goes to the global `fetch`.
 */
export const keepAliveFetch = (options: { readonly maxSockets?: number } = {}): KeepAliveFetch => {
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 64 }
  const http = new HttpAgent(agentOptions)
  const https = new HttpsAgent(agentOptions)
  const fetch: FetchLike = (input, init) => {
    if (typeof input !== "string" && !(input instanceof URL)) return globalThis.fetch(input, init)
    const url = typeof input === "string" ? new URL(input) : input
    const secure = url.protocol === "https:"
    if (!secure && url.protocol !== "http:") return globalThis.fetch(input, init)
    const signal = init?.signal ?? undefined
    if (signal?.aborted) return Promise.reject(signal.reason)
    const body = init?.body
    if (body !== undefined && body !== null && typeof body !== "string") return globalThis.fetch(input, init)
    const headers: Record<string, string> = {}
    new Headers(init?.headers).forEach((value, name) => {
      headers[name] = value
    })
    if (typeof body === "string") headers["content-length"] = String(Buffer.byteLength(body))
    return new Promise<Response>((resolve, reject) => {
      const onResponse = (res: IncomingMessage) => {
        const status = res.statusCode ?? 0
        const responseHeaders = new Headers()
        for (let i = 0; i < res.rawHeaders.length; i += 2)
          responseHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!)
        if (NULL_BODY.has(status) || init?.method === "HEAD") {
          res.resume()
          return resolve(new Response(null, { status, headers: responseHeaders }))
        }
        if ((res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          // A stream: handed over as it arrives; the caller's signal destroys it.
          return resolve(
            new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, headers: responseHeaders }),
          )
        }
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.once("end", () => {
          signal?.removeEventListener("abort", onAbort)
          resolve(new Response(Buffer.concat(chunks), { status, headers: responseHeaders }))
        })
        res.once("error", fail)
        // Cut off before its end (the connection dropped, or aborted): never a truncated body.
        res.once("close", () => {
          if (!res.complete) fail(new Error("the connection closed before the answer ended"))
        })
      }
      const fail = (error: unknown) => {
        signal?.removeEventListener("abort", onAbort)
        reject(error)
      }
      const req = (secure ? httpsRequest : httpRequest)(
        url,
        { method: init?.method ?? "GET", headers, agent: secure ? https : http },
        onResponse,
      )
      const onAbort = () => req.destroy(signal!.reason instanceof Error ? signal!.reason : new Error("aborted"))
      signal?.addEventListener("abort", onAbort, { once: true })
      req.once("error", fail)
      req.end(body ?? undefined)
    })
  }
  return {
    fetch,
    close: () => {
      http.destroy()
      https.destroy()
    },
  }
}
