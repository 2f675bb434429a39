import { createHmac, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/**
 * Test support for the webhook suites: a real receiver on loopback that checks
 * signatures with node:crypto itself (never the service's code), and small
 * helpers for calling child servers (childServer.ts) and waiting.
 */

export interface Received {
  /** The request target: path and query. */
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly raw: string
  readonly body: any
  /** Epoch ms of arrival. */
  readonly at: number
  /** Epoch ms the answer was sent; undefined while the request hangs or waits for it. */
  answeredAt?: number
}

/** What the receiver answers: a status, a status with headers (and a body), or nothing at all (it hangs). */
export type Answer =
  | number
  | { readonly status: number; readonly headers: Record<string, string>; readonly body?: string }
  /** The status after a pause: a receiver that is slow but answers. */
  | { readonly status: number; readonly afterMs: number }
  | "hang"

export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  /** Sets what the next requests get; the default answers 200. */
  answer: (r: Received) => Answer
  readonly waitFor: (predicate: (all: ReadonlyArray<Received>) => boolean, ms?: number, what?: string) => Promise<void>
  readonly close: () => Promise<void>
}

/** A receiver on `host` (any loopback address: 127.0.0.2 serves the allowlist tests). */
export const startReceiver = async (host = "127.0.0.1"): Promise<Receiver> => {
  const received: Array<Received> = []
  const hanging = new Set<ServerResponse>()
  const listeners = new Set<() => void>()
  const receiver: Receiver = {
    url: "",
    received,
    answer: () => 200,
    waitFor: (predicate, ms = 20_000, what = "webhook requests") =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!predicate(received)) return
          clearTimeout(timer)
          listeners.delete(check)
          resolve()
        }
        const timer = setTimeout(() => {
          listeners.delete(check)
          reject(new Error(`timed out waiting for ${what}; received ${received.length}`))
        }, ms)
        listeners.add(check)
        check()
      }),
    close: async () => {
      for (const res of hanging) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8")
      let body: unknown
      try {
        body = JSON.parse(raw)
      } catch {
        body = undefined
      }
      const r: Received = { url: req.url ?? "", headers: req.headers, raw, body, at: Date.now() }
      received.push(r)
      const answer = receiver.answer(r)
      res.on("finish", () => {
        r.answeredAt = Date.now()
        for (const l of [...listeners]) l()
      })
      if (answer === "hang") hanging.add(res)
      else if (typeof answer === "number") res.writeHead(answer).end("ok")
      else if ("afterMs" in answer) {
        hanging.add(res)
        setTimeout(() => {
          hanging.delete(res)
          if (!res.destroyed) res.writeHead(answer.status).end("ok")
        }, answer.afterMs)
      } else res.writeHead(answer.status, answer.headers).end(answer.body ?? "ok")
      for (const l of [...listeners]) l()
    })
  })
  await new Promise<void>((r) => server.listen(0, host, () => r()))
  ;(receiver as { url: string }).url = `http://${host}:${(server.address() as AddressInfo).port}/hook`
  return receiver
}

const hmacHex = (secret: string, content: string) =>
  createHmac("sha256", Buffer.from(secret, "utf8")).update(content, "utf8").digest("hex")

const sameHex = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

/**
 * The spec's check, as a receiver does it: `X-SVC-Webhook-Signature` holds a
 * `v1=` HMAC-SHA256 over `id.timestamp.body` with the secret (any of the
 * space-separated signatures may match).
 */
export const signedWith = (r: Received, secret: string): boolean => {
  const id = r.headers["x-svc-webhook-id"]
  const ts = r.headers["x-svc-webhook-timestamp"]
  const header = r.headers["x-svc-webhook-signature"]
  if (typeof id !== "string" || typeof ts !== "string" || typeof header !== "string") return false
  const expected = `v1=${hmacHex(secret, `${id}.${ts}.${r.raw}`)}`
  return header.split(" ").some((sig) => sameHex(sig, expected))
}

/** The legacy form: `X-SVC-Signature` is the hex HMAC of the raw body alone. */
export const legacySignedWith = (r: Received, secret: string): boolean => {
  const header = r.headers["x-svc-signature"]
  return typeof header === "string" && sameHex(header, hmacHex(secret, r.raw))
}

/** A JSON call to a server with a bearer key. */
export const call = async (
  base: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any }> => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  try {
    return { status: res.status, body: JSON.parse(text) }
  } catch {
    return { status: res.status, body: text }
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Polls `f` until it returns a value that is not undefined, or fails after `ms`. */
export const eventually = async <A>(f: () => Promise<A | undefined>, ms = 20_000, what = "a condition"): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}
