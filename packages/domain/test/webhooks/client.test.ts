import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http"
import { type AddressInfo, createServer as createNetServer } from "node:net"
import { Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectionFailed, parseAllowlist, type Resolver, WebhookClient, WebhookSettings } from "../../src/index.ts"

/** The sender against a real receiver on loopback, with DNS answered by the test. */

let port: number
const got: Array<{ url: string; headers: IncomingHttpHeaders; body: string }> = []
let answer: (res: ServerResponse, url: string) => void = (res) => void res.writeHead(200).end()
const server = createServer((req, res) => {
  let body = ""
  req.on("data", (c) => (body += c))
  req.on("end", () => {
    got.push({ url: req.url ?? "", headers: req.headers, body })
    answer(res, req.url ?? "")
  })
})

let dnsAnswers: Array<Array<string>> = []
let lookups = 0
let lookupGroups: Array<string | undefined> = []
const resolver: Resolver = async (_host, group) => {
  lookups++
  lookupGroups.push(group)
  const next = dnsAnswers.shift() ?? []
  if (next.length === 0) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" })
  return next.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }))
}

const runtime = (allowlist: ReadonlyArray<string>) =>
  ManagedRuntime.make(
    WebhookClient.layer.pipe(
      Layer.provide(
        Layer.succeed(WebhookSettings, {
          timeScale: 1,
          targets: { allowlist: parseAllowlist(allowlist).allowlist },
          resolver,
        }),
      ),
    ),
  )
/** The operator's allowlist names loopback, as a developer's would. */
const loose = runtime(["127.0.0.1"])
const strict = runtime([])
const send = async (rt: typeof loose, url: string, timeoutMs = 5_000, workspaceId = "ws_client_test") =>
  (await rt.runPromise(WebhookClient.useSync((c) => c))).send({
    url,
    headers: { "x-svc-webhook-id": "dlv_t" },
    body: '{"ok":1}',
    timeoutMs,
    workspaceId,
  })

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  port = (server.address() as AddressInfo).port
})
afterAll(async () => {
  await loose.dispose()
  await strict.dispose()
  server.closeAllConnections()
  await new Promise<void>((r) => server.close(() => r()))
})

describe("WebhookClient", () => {
  it("resolves once and connects to the address it checked, whatever DNS says afterwards", async () => {
    // A rebinding DNS: loopback (allowed here) first, then a private address. Only the first answer is used.
    dnsAnswers = [["127.0.0.1"], ["10.0.0.1"], ["10.0.0.1"]]
    lookups = 0
    const outcome = await send(loose, `http://rebind.test:${port}/pinned`)
    expect(outcome).toMatchObject({ success: true, statusCode: 200 })
    expect(lookups).toBe(1)
    const req = got.at(-1)!
    expect(req.url).toBe("/pinned")
    expect(req.headers.host).toBe(`rebind.test:${port}`)
    expect(req.headers["content-type"]).toBe("application/json")
    expect(req.headers["user-agent"]).toMatch(/^agentgov-webhooks\//)
    expect(req.headers["x-svc-webhook-id"]).toBe("dlv_t")
    expect(req.body).toBe('{"ok":1}')
  })

  it("looks the host up on behalf of the delivery's workspace (the resolver shares its turns among workspaces)", async () => {
    dnsAnswers = [["127.0.0.1"]]
    lookupGroups = []
    const outcome = await send(loose, `http://hooks.test:${port}/grouped`, 5_000, "ws_grouped")
    expect(outcome).toMatchObject({ success: true, statusCode: 200 })
    expect(lookupGroups).toEqual(["ws_grouped"])
  })

  it("refuses a host that resolves to a forbidden address and sends nothing", async () => {
    const before = got.length
    dnsAnswers = [["127.0.0.1"]]
    const outcome = await send(strict, `http://sneaky.test:${port}/x`)
    expect(outcome).toMatchObject({
      success: false,
      error: expect.stringMatching(/^refused: sneaky\.test resolves to a loopback address/),
    })
    expect(outcome.statusCode).toBeUndefined()
    dnsAnswers = [["93.184.216.34", "127.0.0.1"]]
    expect((await send(strict, `http://mixed.test:${port}/x`)).error).toMatch(/^refused: /)
    expect((await send(strict, `http://[::ffff:127.0.0.1]:${port}/x`)).error).toMatch(/^refused: /)
    expect(got.length).toBe(before)
  })

  it("reports a host that does not resolve, a redirect it does not follow, and a time-out", async () => {
    dnsAnswers = [[]]
    expect(await send(loose, `http://nowhere.test:${port}/x`)).toMatchObject({
      success: false,
      error: "nowhere.test did not resolve (ENOTFOUND)",
    })
    answer = (res, url) =>
      url === "/moved" ? void res.writeHead(307, { location: "/elsewhere" }).end() : void res.writeHead(200).end()
    const redirected = await send(loose, `http://127.0.0.1:${port}/moved`)
    expect(redirected).toMatchObject({ success: false, statusCode: 307, error: "HTTP 307: redirect not followed" })
    expect(got.some((r) => r.url === "/elsewhere")).toBe(false)
    answer = (res, url) => (url === "/slow" ? undefined : void res.writeHead(200).end())
    const slow = await send(loose, `http://127.0.0.1:${port}/slow`, 300)
    expect(slow).toMatchObject({ success: false, error: connectionFailed(300) })
    expect(slow.responseTimeMs).toBeGreaterThanOrEqual(299)
  })

  it("reports the status only: no body excerpt, no Location, whatever the answer holds", async () => {
    const marker = "SECRET-MARKER-b7f3"
    answer = (res) => void res.writeHead(500, { "x-detail": marker }).end(`internal ${marker} page`)
    const failed = await send(loose, `http://127.0.0.1:${port}/err`)
    expect(failed).toEqual({
      success: false,
      statusCode: 500,
      error: "HTTP 500",
      startedAt: expect.any(Number),
      responseTimeMs: expect.any(Number),
    })
    answer = (res) => void res.writeHead(302, { location: `/internal/${marker}` }).end(marker)
    const moved = await send(loose, `http://127.0.0.1:${port}/moved`)
    expect(JSON.stringify(moved)).not.toContain(marker)
    expect(moved.error).toBe("HTTP 302: redirect not followed")
  })

  it("one report for every failed connection: a closed port, a reset and a time-out read the same", async () => {
    const closed = createNetServer()
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", () => r()))
    const closedPort = (closed.address() as AddressInfo).port
    await new Promise<void>((r) => closed.close(() => r()))
    const resetting = createNetServer((socket) => socket.resetAndDestroy())
    await new Promise<void>((r) => resetting.listen(0, "127.0.0.1", () => r()))
    try {
      const refused = await send(loose, `http://127.0.0.1:${closedPort}/x`, 2_000)
      const reset = await send(loose, `http://127.0.0.1:${(resetting.address() as AddressInfo).port}/x`, 2_000)
      answer = () => undefined
      const silent = await send(loose, `http://127.0.0.1:${port}/silent`, 2_000)
      for (const outcome of [refused, reset, silent]) {
        expect(outcome).toMatchObject({ success: false, error: connectionFailed(2_000) })
        expect(outcome.statusCode).toBeUndefined()
      }
    } finally {
      await new Promise<void>((r) => resetting.close(() => r()))
    }
  })
})

describe("WebhookClient: answers whose body is cut off, endless or hung", () => {
  /** A raw receiver: answers each request's headers as `head` says, then does what `rest` does with the socket. */
  const rawReceiver = async (head: string, rest: (socket: import("node:net").Socket) => void) => {
    const closed: Array<boolean> = []
    const srv = createNetServer((socket) => {
      socket.on("error", () => {})
      socket.on("close", () => closed.push(true))
      let seen = ""
      socket.on("data", (c) => {
        seen += c.toString("latin1")
        if (!seen.includes("\r\n\r\n") || !seen.includes('{"ok":1}')) return
        seen = ""
        socket.write(head)
        rest(socket)
      })
    })
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()))
    return {
      url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/r`,
      closed,
      close: () => new Promise<void>((r) => srv.close(() => r())),
    }
  }

  it("a 2xx whose body stops short and the connection closes or resets is the 2xx: the status decides", async () => {
    const cut = await rawReceiver("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", (s) => s.end("partial"))
    const reset = await rawReceiver("HTTP/1.1 204 No Content\r\n\r\n", (s) => s.resetAndDestroy())
    const cutReset = await rawReceiver("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", (s) =>
      s.write("partial", () => s.resetAndDestroy()),
    )
    try {
      expect(await send(loose, cut.url, 2_000)).toMatchObject({ success: true, statusCode: 200 })
      expect(await send(loose, reset.url, 2_000)).toMatchObject({ success: true, statusCode: 204 })
      expect(await send(loose, cutReset.url, 2_000)).toMatchObject({ success: true, statusCode: 200 })
    } finally {
      await Promise.all([cut.close(), reset.close(), cutReset.close()])
    }
  })

  it("an answer whose body hangs is recorded with its status at the time-out, and its connection is closed", async () => {
    const hung = await rawReceiver("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", (s) => s.write("partial"))
    const hungError = await rawReceiver("HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n", (s) =>
      s.write("3\r\nabc\r\n"),
    )
    try {
      // A time-out long enough for a loaded machine to get the headers in.
      const [ok, busy] = await Promise.all([send(loose, hung.url, 2_000), send(loose, hungError.url, 2_000)])
      expect(ok).toMatchObject({ success: true, statusCode: 200 })
      expect(ok.error).toBeUndefined()
      expect(ok.responseTimeMs).toBeGreaterThanOrEqual(1_999)
      expect(busy).toMatchObject({ success: false, statusCode: 503, error: "HTTP 503" })
      // Neither socket is left open (nor put back in the pool) with the rest of its body pending.
      await expect.poll(() => hung.closed.length + hungError.closed.length, { timeout: 10_000 }).toBe(2)
    } finally {
      await Promise.all([hung.close(), hungError.close()])
    }
  })

  it("reads at most 64 KiB of an endless answer, then closes the connection", async () => {
    let written = 0
    const endless = await rawReceiver("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", (s) => {
      const chunk = `4000\r\n${"x".repeat(0x4000)}\r\n`
      const pump = () => {
        while (!s.destroyed && written < 64 * 1024 * 1024) {
          written += 0x4000
          if (!s.write(chunk)) return void s.once("drain", pump)
        }
      }
      pump()
    })
    try {
      expect(await send(loose, endless.url, 5_000)).toMatchObject({ success: true, statusCode: 200 })
      await expect.poll(() => endless.closed.length, { timeout: 10_000 }).toBe(1)
      expect(written).toBeLessThan(64 * 1024 * 1024)
    } finally {
      await endless.close()
    }
  })

  it("an answer whose headers never end, or are too large, is no answer", async () => {
    const trickle = await rawReceiver("HTTP/1.1 200 OK\r\n", (s) => {
      const t = setInterval(() => (s.destroyed ? clearInterval(t) : s.write("x-a: b\r\n")), 50)
      s.on("close", () => clearInterval(t))
    })
    const huge = await rawReceiver(`HTTP/1.1 200 OK\r\nx-big: ${"a".repeat(200_000)}\r\n\r\n`, () => {})
    try {
      const slow = await send(loose, trickle.url, 500)
      expect(slow).toMatchObject({ success: false, error: connectionFailed(500) })
      expect(slow.statusCode).toBeUndefined()
      const big = await send(loose, huge.url, 2_000)
      expect(big).toMatchObject({ success: false, error: connectionFailed(2_000) })
      expect(big.statusCode).toBeUndefined()
    } finally {
      await Promise.all([trickle.close(), huge.close()])
    }
  })
})
