import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { startTestServer, type TestServer } from "../../../apps/server/test/helpers.ts"
import { AgentGov, type AgentGovOptions, type FetchLike } from "../src/index.ts"

export { startTestServer, type TestServer }

/** What the proxy saw of one request, and what it did with it. */
export interface ProxiedRequest {
  readonly n: number
  readonly method: string
  readonly path: string
  readonly idempotencyKey: string | undefined
  readonly authorization: string | undefined
  readonly body: string
  /** The status the client got. */
  status: number
  /** Whether the request reached the real server. */
  forwarded: boolean
  /** Date.now() when the proxy received it. */
  readonly receivedAt: number
}

/**
 * What the proxy does with a request:
 * - `pass`: forward it and relay the answer;
 * - `{status, headers?}`: answer this without forwarding (the server never sees it);
 * - `{afterForward: status}`: forward it (the server does the work), then answer this status
 *   instead of the server's answer (with `headers`, and `body` instead of an error envelope) — the
 *   client sees a failure for work that was done;
 * - `hang`: never answer (until the proxy closes).
 */
export type Fault =
  | "pass"
  | "hang"
  | { readonly status: number; readonly headers?: Readonly<Record<string, string>>; readonly body?: string }
  | { readonly afterForward: number; readonly headers?: Readonly<Record<string, string>>; readonly body?: string }

export interface FaultProxy {
  readonly url: string
  readonly requests: Array<ProxiedRequest>
  close(): Promise<void>
}

const CODES: Record<number, string> = {
  429: "RATE_LIMITED",
  500: "INTERNAL_ERROR",
  502: "BAD_GATEWAY",
  503: "SERVICE_UNAVAILABLE",
}
const envelope = (status: number) =>
  JSON.stringify({ ok: false, error: { code: CODES[status] ?? "INTERNAL_ERROR", message: `injected ${status}` } })

/**
 * A node:http proxy in front of the real server that fails the requests `decide` picks. Streams
 * (SSE) are piped through untouched.
 */
export const startProxy = async (
  target: string,
  decide: (request: ProxiedRequest) => Fault = () => "pass",
): Promise<FaultProxy> => {
  const requests: Array<ProxiedRequest> = []
  const upstream = new URL(target)
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks)
    const record: ProxiedRequest = {
      n: requests.length + 1,
      method: req.method ?? "GET",
      path: req.url ?? "/",
      idempotencyKey: req.headers["idempotency-key"] as string | undefined,
      authorization: req.headers.authorization,
      body: body.toString("utf8"),
      status: 0,
      forwarded: false,
      receivedAt: Date.now(),
    }
    requests.push(record)
    const fault = decide(record)
    if (fault === "hang") return
    if (fault !== "pass" && "status" in fault) {
      record.status = fault.status
      res.writeHead(fault.status, {
        "content-type": "application/json",
        "x-request-id": `req_proxy_${record.n}`,
        ...fault.headers,
      })
      res.end(fault.body ?? envelope(fault.status))
      return
    }
    record.forwarded = true
    const headers = { ...req.headers, host: upstream.host }
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers },
      (up) => {
        if (fault !== "pass" && "afterForward" in fault) {
          up.resume()
          up.on("end", () => {
            record.status = fault.afterForward
            res.writeHead(fault.afterForward, { "content-type": "application/json", ...fault.headers })
            res.end(fault.body ?? envelope(fault.afterForward))
          })
          return
        }
        record.status = up.statusCode ?? 0
        res.writeHead(up.statusCode ?? 502, up.headers)
        up.pipe(res)
      },
    )
    forward.on("error", () => res.destroy())
    res.on("close", () => forward.destroy())
    forward.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** A fetch that records every request's method, path and status (instrumentation, not a fake). */
export const recordingFetch = () => {
  const calls: Array<{ method: string; path: string; status: number }> = []
  const fetchImpl: FetchLike = async (input, init) => {
    const res = await fetch(input, init)
    calls.push({ method: init?.method ?? "GET", path: new URL(String(input)).pathname, status: res.status })
    return res
  }
  return { calls, fetch: fetchImpl }
}

/** A client of the test server; retries start fast so that tests do not sleep through backoff. */
export const clientFor = (url: string, apiKey: string, options: Partial<AgentGovOptions> = {}) =>
  new AgentGov({ apiKey, baseUrl: url, ...options })

let counter = 0
/** A name no other test of this run uses. */
export const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++counter}`

/** A loopback port nothing listens on: connections are refused at once. */
export const closedPort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
