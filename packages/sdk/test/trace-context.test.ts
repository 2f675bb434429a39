/** The SDK sends the caller's W3C trace context (AgentGovOptions.traceContext) with every request (issue 34). */
import { describe, expect, it } from "vitest"
import { AgentGov } from "../src/index.ts"

const capture = () => {
  const seen: Array<Headers> = []
  const fetch = async (_input: string | URL | Request, init?: RequestInit) => {
    seen.push(new Headers(init?.headers))
    return new Response(JSON.stringify({ ok: true, data: [], meta: { cursor: null, hasMore: false } }), {
      status: 200,
      headers: { "content-type": "application/json" },
    })
  }
  return { seen, fetch }
}

describe("traceContext", () => {
  it("sends traceparent and tracestate read at each request, and nothing without one", async () => {
    let n = 0
    const { seen, fetch } = capture()
    const client = new AgentGov({
      apiKey: "svc_ws_test_x",
      baseUrl: "http://127.0.0.1:1",
      fetch,
      traceContext: () => ({
        traceparent: `00-${"a".repeat(31)}${++n}-${"b".repeat(16)}-01`,
        tracestate: "vendor=1",
      }),
    })
    await client.agents.list().page()
    await client.agents.list().page()
    expect(seen.map((h) => h.get("traceparent"))).toEqual([
      `00-${"a".repeat(31)}1-${"b".repeat(16)}-01`,
      `00-${"a".repeat(31)}2-${"b".repeat(16)}-01`,
    ])
    expect(seen[0]!.get("tracestate")).toBe("vendor=1")

    const plain = capture()
    const without = new AgentGov({ apiKey: "svc_ws_test_x", baseUrl: "http://127.0.0.1:1", fetch: plain.fetch })
    await without.agents.list().page()
    const quiet = new AgentGov({
      apiKey: "svc_ws_test_x",
      baseUrl: "http://127.0.0.1:1",
      fetch: plain.fetch,
      traceContext: () => undefined,
    })
    await quiet.agents.list().page()
    expect(plain.seen.map((h) => h.get("traceparent"))).toEqual([null, null])
  })
})
