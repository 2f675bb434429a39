import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer } from "./helpers.ts"

/**
 * The gateway's events are system events an agent reports (the catalog's `reportedBy: "agent"`): an
 * agent-bound credential may ingest them for its own agent, with data that matches their schema; nobody else
 * may, and the rest of the `mcp.*` namespace stays closed, so that `mcp.*` subscribers only ever receive
 * what the catalog describes.
 */

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
})
afterAll(() => t.close())

const ingest = (events: Array<Record<string, unknown>>, key?: string) =>
  t.call("POST", "/api/v1/events/ingest", { body: { events }, ...(key ? { key } : {}) })

const called = (agentId: string) => ({
  agentId,
  server: "files",
  tool: "read",
  action: "mcp.files.read",
  guardEventId: "evt_x",
  durationMs: 3,
  isError: false,
  contentItems: 1,
  resultBytes: 20,
  redactions: [],
})

const agentWithKey = async (name: string) => {
  const id = (await t.call("POST", "/api/v1/agents", { body: { name } })).body.data.id as string
  const key = await t.createKey({ type: "agent", agentId: id, scopes: ["events:write", "events:read"] })
  return { id, key }
}

describe("mcp.* events on POST /events/ingest", () => {
  it("an agent key reports mcp.tool.called for its own agent", async () => {
    const a = await agentWithKey("reported-ok")
    const res = await ingest([{ type: "mcp.tool.called", data: called(a.id) }], a.key)
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const stored = await t.call("GET", `/api/v1/events/${res.body.data.events[0].id}`)
    expect(stored.body.data).toMatchObject({ type: "mcp.tool.called", agentId: a.id, data: called(a.id) })
  })

  it("refuses them from a workspace key, for another agent, or with data off the schema, storing nothing", async () => {
    const a = await agentWithKey("reported-mine")
    const other = await agentWithKey("reported-other")
    const before = await t.chainLength()

    const workspace = await ingest([{ type: "mcp.tool.called", agentId: a.id, data: called(a.id) }])
    expect(workspace.status).toBe(403)
    expect(workspace.body.error.details.field).toBe("events[0].type")

    const envelopeOther = await ingest([{ type: "mcp.tool.called", agentId: other.id, data: called(other.id) }], a.key)
    expect(envelopeOther.status).toBe(403)

    const dataOther = await ingest([{ type: "mcp.tool.called", data: called(other.id) }], a.key)
    expect(dataOther.status).toBe(422)
    expect(dataOther.body.error.details.field).toBe("events[0].data")

    for (const data of [{}, { ...called(a.id), durationMs: -1 }, { ...called(a.id), isError: "no" }]) {
      const bad = await ingest([{ type: "mcp.tool.called", data }], a.key)
      expect(bad.status, JSON.stringify(data)).toBe(422)
      expect(bad.body.error.details.field).toBe("events[0].data")
    }
    const denied = await ingest([{ type: "mcp.tool.denied", data: { ...called(a.id), reason: "because" } }], a.key)
    expect(denied.status).toBe(422)

    // The namespace beyond the catalog's names stays the system's.
    const namespace = await ingest([{ type: "mcp.tool.forged", data: {} }], a.key)
    expect(namespace.status).toBe(422)
    expect(namespace.body.error.message).toContain("namespace")

    expect(await t.chainLength()).toBe(before)
  })
})
