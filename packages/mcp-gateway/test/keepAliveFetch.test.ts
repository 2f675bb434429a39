/**
 * The gateway's fetch for the SDK (keepAliveFetch.ts): one warm connection reused, answers as the SDK reads them,
 * aborts, streams, and never a truncated body taken for a whole one.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { keepAliveFetch } from "../src/keepAliveFetch.ts"

let server: Server
let base: string
let connections = 0
const routes = new Map<string, (req: IncomingMessage, res: ServerResponse, body: string) => void>()

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = ""
    req.on("data", (c: Buffer) => {
      body += c.toString("utf8")
    })
    req.on("end", () => routes.get(req.url ?? "")?.(req, res, body))
  })
  server.on("connection", () => connections++)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

routes.set("/echo", (req, res, body) => {
  res.writeHead(201, { "content-type": "application/json", "x-request-id": "req_1" })
  res.end(JSON.stringify({ method: req.method, auth: req.headers.authorization, body }))
})
routes.set("/empty", (_req, res) => {
  res.writeHead(204)
  res.end()
})
routes.set("/slow", () => {})
routes.set("/cut", (_req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": "100" })
  res.write('{"ok":tr')
  setTimeout(() => res.destroy(), 20)
})
routes.set("/stream", (_req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream" })
  res.write("data: one\n\n")
  routes.set("/stream-end", (_r, done) => {
    res.end("data: two\n\n")
    done.writeHead(204)
    done.end()
  })
})

describe("keepAliveFetch", () => {
  it("sends the request as given and answers status, headers and body; the connection is reused", async () => {
    const { fetch, close } = keepAliveFetch()
    try {
      const before = connections
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${base}/echo`, {
          method: "POST",
          headers: { authorization: "Bearer t", "content-type": "application/json" },
          body: '{"a":"é"}',
        })
        expect(res.status).toBe(201)
        expect(res.ok).toBe(true)
        expect(res.headers.get("x-request-id")).toBe("req_1")
        expect(JSON.parse(await res.text())).toEqual({ method: "POST", auth: "Bearer t", body: '{"a":"é"}' })
      }
      expect(connections - before).toBe(1)
      const empty = await fetch(new URL(`${base}/empty`), { method: "DELETE" })
      expect(empty.status).toBe(204)
      expect(await empty.text()).toBe("")
    } finally {
      close()
    }
  })

  it("rejects with the signal's reason when aborted, before or while waiting", async () => {
    const { fetch, close } = keepAliveFetch()
    try {
      const reason = new Error("stop")
      await expect(fetch(`${base}/echo`, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason)
      const controller = new AbortController()
      const pending = fetch(`${base}/slow`, { signal: controller.signal })
      setTimeout(() => controller.abort(reason), 20)
      await expect(pending).rejects.toBe(reason)
    } finally {
      close()
    }
  })

  it("rejects an answer cut off before its end instead of returning part of it", async () => {
    const { fetch, close } = keepAliveFetch()
    try {
      await expect(fetch(`${base}/cut`)).rejects.toThrow()
    } finally {
      close()
    }
  })

  it("hands an event stream over as it arrives", async () => {
    const { fetch, close } = keepAliveFetch()
    try {
      const res = await fetch(`${base}/stream`, { headers: { accept: "text/event-stream" } })
      const reader = res.body!.getReader()
      const first = await reader.read()
      expect(new TextDecoder().decode(first.value)).toBe("data: one\n\n")
      await fetch(`${base}/stream-end`)
      let rest = ""
      for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value)
      expect(rest).toBe("data: two\n\n")
    } finally {
      close()
    }
  })
})
