import type { AgentGov } from "@agentgov/sdk"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  clientFor,
  connect,
  newAgent,
  policyFor,
  startTestServer,
  stopChildren,
  type TestServer,
  textOf,
} from "./helpers.ts"

/**
 * JSON-RPC batches over the gateway's Streamable HTTP listener. Two requests of one batch with the same id could
 * not be told apart by their answers (JSON-RPC 2.0 matches an answer to its request by id; MCP: "the request ID
 * MUST NOT have been previously used by the requestor within the same session"), so such a batch is refused
 * whole: -32600 Invalid Request, HTTP 400, and nothing of it runs.
 */

let t: TestServer
let admin: AgentGov

beforeAll(async () => {
  t = await startTestServer()
  admin = clientFor(t.url, t.key)
})
afterAll(async () => {
  await stopChildren()
  await t.close()
})

const call = (id: unknown, text: string) => ({
  jsonrpc: "2.0",
  ...(id === undefined ? {} : { id }),
  method: "tools/call",
  params: { name: "echo", arguments: { text } },
})

const post = async (url: string, body: unknown, contentType = "application/json") => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": contentType, accept: "application/json, text/event-stream" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, text, json: text === "" ? undefined : (JSON.parse(text) as unknown) }
}

describe("a batch over HTTP", () => {
  it("with an id used twice is refused whole and runs nothing; distinct ids run each", async () => {
    const { agentId, apiKey, server } = await newAgent(admin, "mcp-batch")
    await policyFor(admin, agentId, [{ id: "ok", effect: "allow", actions: [`mcp.${server}.echo`] }])
    const c = await connect("http", { url: t.url, apiKey, server })
    try {
      for (const batch of [
        [call(1, "first"), call(1, "second")],
        [call("a", "first"), call(2, "other"), call("a", "second")],
      ]) {
        const refused = await post(c.url!, batch)
        expect(refused.status, refused.text).toBe(400)
        expect(refused.json).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } })
        expect((refused.json as { error: { message: string } }).error.message).toMatch(/more than once/)
      }
      expect(c.calls()).toEqual([])

      // A notification has no id, and 1 and "1" are two ids: both batches run every request.
      const ok = await post(c.url!, [call(1, "one"), call("1", "string one"), call(undefined, "notification")])
      expect(ok.status, ok.text).toBe(200)
      const answers = ok.json as Array<{ id: unknown; result: unknown }>
      expect(answers.map((a) => [a.id, textOf(a.result)]).sort()).toEqual([
        [1, "one"],
        ["1", "string one"],
      ])
      expect(c.calls().sort()).toEqual(['echo {"text":"one"}', 'echo {"text":"string one"}'])

      // What the transport refused before still is, with the same answers.
      const notJson = await post(c.url!, "{not json")
      expect(notJson.status).toBe(400)
      expect(notJson.json).toMatchObject({ error: { code: -32700 } })
      const single = await post(c.url!, call(7, "single"))
      expect(single.status).toBe(200)
      expect(textOf((single.json as { result: unknown }).result)).toBe("single")
    } finally {
      await c.close()
    }
  }, 30_000)
})
