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
const resolver: Resolver = async () => {
  lookups++
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
const send = async (rt: typeof loose, url: string, timeoutMs = 5_000) =>
  (await rt.runPromise(WebhookClient.useSync((c) => c))).send({
    url,
    headers: { "x-svc-webhook-id": "dlv_t" },
    body: '{"ok":1}',
    timeoutMs,
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
