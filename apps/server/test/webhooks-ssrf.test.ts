import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer, unique } from "./helpers.ts"
import { eventually, type Receiver, startReceiver } from "./webhooks-support.ts"

/**
 * SSRF protection in a production-like configuration (as with DATABASE_URL: loopback is not
 * allowed), with the operator's allowlist naming 127.0.0.2. Refused at registration and at
 * delivery; `test` workspaces may target loopback.
 */

let t: TestServer
let r: Receiver
let allowed: Receiver
let testWorkspace: { id: string; key: string }

beforeAll(async () => {
  t = await startTestServer({ webhookAllowLoopback: false, webhookAllowlist: ["127.0.0.2", "*.allowed.example"] })
  r = await startReceiver()
  allowed = await startReceiver("127.0.0.2")
  const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("ssrf-test"), environment: "test" } })
  expect(ws.status, JSON.stringify(ws.body)).toBe(201)
  testWorkspace = { id: ws.body.data.workspace.id, key: ws.body.data.apiKey.apiKey }
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

  it("a test workspace may target loopback, and its events are delivered there", async () => {
    const res = await t.call("POST", "/api/v1/webhooks", {
      body: { url: `${r.url}?w=testws`, events: ["ssrf.test"] },
      key: testWorkspace.key,
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const ingest = await t.call("POST", "/api/v1/events/ingest", {
      body: { events: [{ type: "ssrf.test", data: {} }] },
      key: testWorkspace.key,
    })
    expect(ingest.status).toBe(201)
    await r.waitFor((all) => all.some((x) => x.url === "/hook?w=testws"), 10_000, "the test workspace's delivery")
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
