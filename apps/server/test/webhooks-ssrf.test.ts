import { type AddressInfo, createServer as createNetServer } from "node:net"
import { connectionFailed } from "@agentgov/domain"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer, unique } from "./helpers.ts"
import { eventually, type Receiver, startReceiver } from "./webhooks-support.ts"

/**
 * SSRF protection, with the operator's allowlist naming 127.0.0.2 (and nothing else on loopback).
 * Non-public targets are refused at registration and at delivery, whatever the workspace's
 * environment or the store; what an allowlisted one answers is never told beyond its status.
 */

let t: TestServer
let r: Receiver
let allowed: Receiver

beforeAll(async () => {
  t = await startTestServer({ webhookAllowlist: ["127.0.0.2", "*.allowed.example"] })
  r = await startReceiver()
  allowed = await startReceiver("127.0.0.2")
})
afterAll(async () => {
  await t?.close()
  await r?.close()
  await allowed?.close()
})

const port = () => new URL(r.url).port

describe("registration", () => {
  it.each([
    "http://127.0.0.1:PORT/hook",
    "http://localhost:PORT/hook",
    "http://127.9.9.9/x",
    "http://[::1]/x",
    "http://2130706433/x",
    "http://0x7f.1/x",
    "http://0.0.0.0/x",
    "http://10.1.2.3/x",
    "http://172.16.0.1/x",
    "http://192.168.1.1/x",
    "http://100.64.0.1/x",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fc00::1]/x",
    "http://[fe80::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://[::ffff:10.0.0.1]/x",
    "http://[64:ff9b::a00:1]/x",
    "http://224.0.0.1/x",
  ])("refuses %s with 422 naming url, storing nothing", async (template) => {
    const url = template.replace("PORT", port())
    const before = await t.call("GET", "/api/v1/webhooks?limit=100")
    const res = await t.call("POST", "/api/v1/webhooks", { body: { url, events: ["*"] } })
    expectError(res, 422, "VALIDATION_ERROR", "url")
    expect(res.body.error.details.issue).toMatch(/loopback|private or reserved/)
    const after = await t.call("GET", "/api/v1/webhooks?limit=100")
    expect(after.body.data).toHaveLength(before.body.data.length)
  })

  it("accepts public addresses, and hosts that do not resolve yet (checked again at each delivery)", async () => {
    for (const url of [
      "http://93.184.216.34/hook",
      "https://[2606:4700::1111]/hook",
      "http://nonexistent.invalid/hook",
    ]) {
      const res = await t.call("POST", "/api/v1/webhooks", { body: { url, events: ["never.happens"] } })
      expect(res.status, `${url}: ${JSON.stringify(res.body)}`).toBe(201)
    }
  })

  it("refuses a PATCH to a private URL, leaving the webhook as it was", async () => {
    const created = await t.call("POST", "/api/v1/webhooks", {
      body: { url: "http://93.184.216.34/hook", events: ["never.happens"] },
    })
    const res = await t.call("PATCH", `/api/v1/webhooks/${created.body.data.id}`, {
      body: { url: "http://192.168.0.10/hook" },
    })
    expectError(res, 422, "VALIDATION_ERROR", "url")
    const got = await t.call("GET", `/api/v1/webhooks/${created.body.data.id}`)
    expect(got.body.data.url).toBe("http://93.184.216.34/hook")
  })

  it("the operator's allowlist admits a non-public address: registered and delivered", async () => {
    const res = await t.call("POST", "/api/v1/webhooks", { body: { url: allowed.url, events: ["ssrf.allowed"] } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const test = await t.call("POST", `/api/v1/webhooks/${res.body.data.id}/test`, {
      body: { eventType: "agent.registered" },
    })
    expect(test.body.data.delivered).toBe(true)
    await t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "ssrf.allowed", data: {} }] } })
    await allowed.waitFor((all) => all.some((x) => x.body?.type === "ssrf.allowed"), 10_000, "the allowed delivery")
  })
})

describe("delivery", () => {
  it("checks the address again at each attempt: a webhook now pointing at loopback is refused, nothing is sent", async () => {
    const created = await t.call("POST", "/api/v1/webhooks", {
      body: { url: "http://93.184.216.34/hook", events: ["ssrf.later"] },
    })
    const id = created.body.data.id as string
    // As if its host's DNS now answered with a loopback address.
    await t.server.runtime.runPromise(
      SqlClient.SqlClient.use((sql) => sql`UPDATE webhooks SET url = ${`${r.url}?w=rebound`} WHERE id = ${id}`),
    )
    const test = await t.call("POST", `/api/v1/webhooks/${id}/test`, { body: { eventType: "agent.registered" } })
    expect(test.body.data).toMatchObject({
      delivered: false,
      delivery: { status: "failed", error: expect.stringMatching(/^refused: .*loopback/) },
    })
    await t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "ssrf.later", data: {} }] } })
    const attempt = await eventually(async () => {
      const w = await t.call("GET", `/api/v1/webhooks/${id}?includeDeliveries=true`)
      return w.body.data.deliveries[0]
    })
    expect(attempt).toMatchObject({ status: "failed", attempt: 1, error: expect.stringMatching(/^refused: /) })
    expect("statusCode" in attempt).toBe(false)
    expect(r.received.filter((x) => x.url === "/hook?w=rebound")).toEqual([])
  })
})

describe("test workspaces, with no allowlist at all", () => {
  let bare: TestServer
  let key: string
  beforeAll(async () => {
    bare = await startTestServer()
    const ws = await bare.call("POST", "/api/v1/workspaces", {
      body: { name: unique("ssrf-test"), environment: "test" },
    })
    expect(ws.status, JSON.stringify(ws.body)).toBe(201)
    key = ws.body.data.apiKey.apiKey
  })
  afterAll(async () => {
    await bare?.close()
  })

  it("refuse loopback at create and update with 422 naming url", async () => {
    for (const url of [r.url, `http://localhost:${port()}/hook`, "http://[::1]/x"])
      expectError(
        await bare.call("POST", "/api/v1/webhooks", { body: { url, events: ["*"] }, key }),
        422,
        "VALIDATION_ERROR",
        "url",
      )
    const created = await bare.call("POST", "/api/v1/webhooks", {
      body: { url: "http://93.184.216.34/hook", events: ["ssrf.never"] },
      key,
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const res = await bare.call("PATCH", `/api/v1/webhooks/${created.body.data.id}`, { body: { url: r.url }, key })
    expectError(res, 422, "VALIDATION_ERROR", "url")
    expect((await bare.call("GET", `/api/v1/webhooks/${created.body.data.id}`, { key })).body.data.url).toBe(
      "http://93.184.216.34/hook",
    )
  })

  it("refuse loopback at delivery: the test send and the queued delivery send nothing", async () => {
    const created = await bare.call("POST", "/api/v1/webhooks", {
      body: { url: "http://93.184.216.34/hook", events: ["ssrf.testws"] },
      key,
    })
    const id = created.body.data.id as string
    await bare.query((sql) => sql`UPDATE webhooks SET url = ${`${r.url}?w=testws`} WHERE id = ${id}`)
    const test = await bare.call("POST", `/api/v1/webhooks/${id}/test`, {
      body: { eventType: "agent.registered" },
      key,
    })
    expect(test.body.data).toMatchObject({
      delivered: false,
      delivery: { status: "failed", error: expect.stringMatching(/^refused: .*loopback/) },
    })
    await bare.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "ssrf.testws", data: {} }] }, key })
    const attempt = await eventually(async () => {
      const w = await bare.call("GET", `/api/v1/webhooks/${id}?includeDeliveries=true`, { key })
      return w.body.data.deliveries[0]
    })
    expect(attempt).toMatchObject({
      status: "failed",
      attempt: 1,
      error: expect.stringMatching(/^refused: .*loopback/),
    })
    expect(r.received.filter((x) => x.url === "/hook?w=testws")).toEqual([])
  })
})

describe("an allowlisted internal endpoint", () => {
  const MARKER = "internal-secret-7c1e5a"

  it("is reported by its status only: its body and headers appear in neither the test result nor the history", async () => {
    const created = await t.call("POST", "/api/v1/webhooks", {
      body: { url: `${allowed.url}?w=marker`, events: ["ssrf.marker"] },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const id = created.body.data.id as string
    allowed.answer = (x) =>
      x.url === "/hook?w=marker"
        ? { status: 500, headers: { "x-detail": MARKER, location: `/${MARKER}` }, body: `db password: ${MARKER}` }
        : 200
    try {
      const test = await t.call("POST", `/api/v1/webhooks/${id}/test`, { body: { eventType: "agent.registered" } })
      expect(test.body.data).toMatchObject({
        delivered: false,
        delivery: { status: "failed", statusCode: 500, error: "HTTP 500" },
      })
      expect(JSON.stringify(test.body)).not.toContain(MARKER)
      await t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "ssrf.marker", data: {} }] } })
      const history = await eventually(async () => {
        const w = await t.call("GET", `/api/v1/webhooks/${id}?includeDeliveries=true`)
        return w.body.data.deliveries.length > 0 ? w.body : undefined
      })
      expect(history.data.deliveries[0]).toMatchObject({ status: "failed", statusCode: 500, error: "HTTP 500" })
      expect(JSON.stringify(history)).not.toContain(MARKER)
    } finally {
      allowed.answer = () => 200
    }
  })

  it("a closed port and a reset connection read the same", async () => {
    const probe = createNetServer()
    await new Promise<void>((ok) => probe.listen(0, "127.0.0.2", () => ok()))
    const closedPort = (probe.address() as AddressInfo).port
    await new Promise<void>((ok) => probe.close(() => ok()))
    const resetting = createNetServer((socket) => socket.resetAndDestroy())
    await new Promise<void>((ok) => resetting.listen(0, "127.0.0.2", () => ok()))
    try {
      const outcomes = []
      for (const p of [closedPort, (resetting.address() as AddressInfo).port]) {
        const created = await t.call("POST", "/api/v1/webhooks", {
          body: { url: `http://127.0.0.2:${p}/hook`, events: ["ssrf.never"] },
        })
        expect(created.status, JSON.stringify(created.body)).toBe(201)
        const test = await t.call("POST", `/api/v1/webhooks/${created.body.data.id}/test`, {
          body: { eventType: "agent.registered" },
        })
        outcomes.push(test.body.data.delivery)
      }
      for (const d of outcomes) {
        expect(d).toMatchObject({ status: "failed", error: connectionFailed(10_000) })
        expect("statusCode" in d).toBe(false)
      }
    } finally {
      await new Promise<void>((ok) => resetting.close(() => ok()))
    }
  })
})
