import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createVendorFetch } from "../src/runtime/index.ts"

/** The node:http `fetch` the vendor clients get (Slack's `fetch`, Discord's `makeRequest`, Teams' posts). */

let url = ""
let seen: { method: string; headers: IncomingMessage["headers"]; body: string } | undefined
let handler: (req: IncomingMessage, res: ServerResponse) => void = () => {}
const server = createServer((req, res) => {
  let body = ""
  req.setEncoding("utf8")
  req.on("data", (c: string) => {
    body += c
  })
  req.on("end", () => {
    seen = { method: req.method!, headers: req.headers, body }
    handler(req, res)
  })
})
beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  server.closeAllConnections()
  await new Promise((r) => server.close(r))
})

describe("createVendorFetch", () => {
  const vendorFetch = createVendorFetch({ maxResponseBytes: 1000 })

  it("sends the method, headers and body, and answers status, headers and body as fetch does", async () => {
    handler = (_req, res) =>
      res.writeHead(429, { "Retry-After": "3", "Content-Type": "application/json" }).end('{"ok":false}')
    const res = await vendorFetch(`${url}/api/chat.postMessage`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer xoxb-1" },
      body: '{"text":"hi"}',
    })
    expect(seen).toMatchObject({ method: "POST", body: '{"text":"hi"}' })
    expect(seen!.headers).toMatchObject({ "content-type": "application/json", authorization: "Bearer xoxb-1" })
    expect(seen!.headers["content-length"]).toBe("13")
    expect(res).toMatchObject({ status: 429, ok: false, statusText: "Too Many Requests" })
    expect(res.headers.get("retry-after")).toBe("3")
    expect(res.headers.has("RETRY-AFTER")).toBe(true)
    expect(res.headers.get("x-missing")).toBeNull()
    expect(Object.fromEntries(res.headers.entries())).toMatchObject({ "content-type": "application/json" })
    expect(await res.json()).toEqual({ ok: false })
    expect(res.bodyUsed).toBe(true)
    await expect(res.text()).rejects.toThrow(/read already/)
  })

  it("form-encodes URLSearchParams, and reads bytes", async () => {
    handler = (_req, res) => res.writeHead(200).end(Buffer.from([1, 2, 3]))
    const res = await vendorFetch(url, { method: "POST", body: new URLSearchParams({ channel: "C1", text: "a b" }) })
    expect(seen!.body).toBe("channel=C1&text=a+b")
    expect(seen!.headers["content-type"]).toContain("application/x-www-form-urlencoded")
    expect(res.ok).toBe(true)
    expect([...new Uint8Array(await res.arrayBuffer())]).toEqual([1, 2, 3])
  })

  it("rejects when the signal aborts before the answer, and on an answer over the limit", async () => {
    handler = () => {} // never answers
    const controller = new AbortController()
    const pending = vendorFetch(url, { method: "POST", body: "x", signal: controller.signal })
    setTimeout(() => controller.abort(), 20)
    await expect(pending).rejects.toMatchObject({ name: "AbortError" })
    await expect(vendorFetch(url, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: "AbortError" })
    handler = (_req, res) => res.writeHead(200).end("y".repeat(5000))
    await expect(vendorFetch(url)).rejects.toThrow(/over 1000 bytes/)
  })

  it("refuses bodies it cannot send as they are", async () => {
    await expect(vendorFetch(url, { method: "POST", body: new FormData() as never })).rejects.toThrow(TypeError)
  })
})
