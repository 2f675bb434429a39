import { createServer, type Server } from "node:http"
import { createServer as createTcpServer, type Server as TcpServer } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { drive, requestBytes } from "../src/load.ts"

/** The load generator is the benchmarks' instrument: it must count what the server answered, no more. */

const servers: Array<Server | TcpServer> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))))
})

const listen = async (server: Server | TcpServer) => {
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("no port")
  return `http://127.0.0.1:${address.port}`
}

describe("drive", () => {
  it("sends each request's bytes and counts every answer once, over keep-alive connections", async () => {
    const seen: Array<{ method: string; path: string; auth: string | undefined; body: string }> = []
    const sockets = new Set<unknown>()
    const server = createServer((req, res) => {
      sockets.add(req.socket)
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8")
        seen.push({ method: req.method!, path: req.url!, auth: req.headers.authorization, body })
        const out = JSON.stringify({ ok: true, n: seen.length })
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) })
        // The answer in two writes, so that the client must join a head and body that arrive apart.
        res.write(out.slice(0, 3))
        setTimeout(() => res.end(out.slice(3)), 1)
      })
    })
    const url = await listen(server)
    const bodies = ['{"a":1}', '{"b":"ü"}']
    const requests = bodies.map((b) => requestBytes(url, "/guard", { authorization: "Bearer t" }, b))
    const load = await drive(url, 3, 200, (i) => requests[i % 2]!)
    expect(load.requests).toBeGreaterThan(3)
    expect(load.requests).toBe(seen.length)
    expect(load.latenciesMs).toHaveLength(load.requests)
    expect(load.latenciesMs.every((ms) => ms > 0)).toBe(true)
    expect(sockets.size).toBe(3)
    expect(seen.every((r) => r.method === "POST" && r.path === "/guard" && r.auth === "Bearer t")).toBe(true)
    expect(seen.slice(0, 2).map((r) => r.body)).toEqual(bodies)
  })

  it("builds a GET without a body", async () => {
    const methods: Array<string> = []
    const url = await listen(
      createServer((req, res) => {
        methods.push(`${req.method} ${req.url} ${req.headers["content-length"] ?? "-"}`)
        res.writeHead(200, { "content-length": 2 }).end("{}")
      }),
    )
    const ping = requestBytes(url, "/v1/ping", {})
    const load = await drive(url, 1, 50, () => ping)
    expect(load.requests).toBe(methods.length)
    expect(new Set(methods)).toEqual(new Set(["GET /v1/ping -"]))
  })

  it("fails on an answer other than 200", async () => {
    let calls = 0
    const url = await listen(
      createServer((_req, res) => {
        calls++
        const status = calls === 5 ? 503 : 200
        res.writeHead(status, { "content-length": 2 }).end("{}")
      }),
    )
    const ping = requestBytes(url, "/", {})
    await expect(drive(url, 1, 5_000, () => ping)).rejects.toThrow("answered HTTP/1.1 503 Service Unavailable")
  })

  it("fails on an answer it cannot delimit, and on a closed connection", async () => {
    const chunked = await listen(
      createServer((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      }),
    )
    await expect(drive(chunked, 1, 1_000, () => requestBytes(chunked, "/", {}))).rejects.toThrow(
      "an answer without Content-Length",
    )
    const closing = await listen(createTcpServer((socket) => socket.once("data", () => socket.destroy())))
    await expect(drive(closing, 1, 1_000, () => requestBytes(closing, "/", {}))).rejects.toThrow(
      "the server closed the connection",
    )
  })
})
