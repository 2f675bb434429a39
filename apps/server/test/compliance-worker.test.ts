import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer, unique } from "./helpers.ts"

// The report worker is woken by the request itself (a notification), not only by its poll: with the poll an
// hour apart, a requested report is still generated.

let t: TestServer
beforeAll(async () => {
  t = await startTestServer({ compliancePollMs: 3_600_000 })
})
afterAll(async () => t?.close())

describe("the compliance report worker", () => {
  it("starts a requested report when it is requested, not at its next poll", async () => {
    const made = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("ws") } })
    expect(made.status, JSON.stringify(made.body)).toBe(201)
    const key = made.body.data.apiKey.apiKey as string
    const from = new Date(Date.now() - 60_000).toISOString()
    await new Promise((r) => setTimeout(r, 5))
    const to = new Date().toISOString()
    for (let n = 0; n < 2; n++) {
      const requested = await t.call("POST", "/api/v1/compliance/reports", {
        key,
        body: { framework: "soc2", from, to },
      })
      expect(requested.status, JSON.stringify(requested.body)).toBe(202)
      const id = requested.body.data.id as string
      await expect
        .poll(async () => (await t.call("GET", `/api/v1/compliance/reports/${id}`, { key })).body.data.status, {
          timeout: 30_000,
          interval: 100,
        })
        .toBe("ready")
    }
  })
})
