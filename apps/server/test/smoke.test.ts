import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer } from "./helpers.ts"

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
})
afterAll(async () => t?.close())

describe("a fresh server", () => {
  it("registers an agent with the bootstrap key and lists it", async () => {
    const created = await t.call("POST", "/api/v1/agents", { body: { name: "smoke-agent" } })
    expect(created.status).toBe(201)
    expect(created.body.data.id).toMatch(/^agt_/)
    const listed = await t.call("GET", "/v1/agents")
    expect(listed.status).toBe(200)
    expect(listed.body.data.map((a: { name: string }) => a.name)).toEqual(["smoke-agent"])
    expect(listed.body.meta).toEqual({ cursor: null, hasMore: false })
    expect(listed.headers.get("x-request-id")).toMatch(/^req_/)
  })
})
