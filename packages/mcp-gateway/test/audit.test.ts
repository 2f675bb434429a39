import type { AgentGov, AgentRuntime } from "@agentgov/sdk"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js"
import { afterEach, describe, expect, it } from "vitest"
import { DefinitionStore } from "../src/DefinitionStore.ts"
import { Gateway } from "../src/Gateway.ts"
import { Sanitizer } from "../src/sanitizer.ts"
import { Upstream } from "../src/Upstream.ts"

/**
 * What the audit trail holds for a call (third pass, 2026-11-29): an MCP client, the gateway, its Upstream and a
 * tool server of the SDK, in process; the service is a stand-in that allows everything and keeps what it is told.
 */

const token = (claims: object) => `e30.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig`
const AWS = "AKIAIOSFODNN7EXAMPLE"

const closers: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

type Handler = (name: string, args: Record<string, unknown> | undefined) => Promise<unknown>

const harness = async (
  handler: Handler,
  options: { callTimeoutMs?: number; approval?: boolean | "approved-then-refused" } = {},
) => {
  const tracked: Array<{ type: string; data: Record<string, unknown> }> = []
  const contexts: Array<{ arguments: Record<string, unknown> }> = []
  const calls: Array<{ name: string; args: unknown }> = []
  const tools: Array<Tool> = ["run", "login"].map((name) => ({ name, inputSchema: { type: "object" } }))
  const upstream = new Upstream({
    name: "ops",
    ...(options.callTimeoutMs ? { callTimeoutMs: options.callTimeoutMs } : {}),
    transport: () => {
      const [ours, theirs] = InMemoryTransport.createLinkedPair()
      const server = new Server({ name: "ops", version: "1.0.0" }, { capabilities: { tools: {} } })
      server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
      server.setRequestHandler(CallToolRequestSchema, async (request) => {
        calls.push({ name: request.params.name, args: request.params.arguments })
        return (await handler(request.params.name, request.params.arguments)) as never
      })
      void server.connect(theirs)
      return ours
    },
  })
  await upstream.start()
  const agent = {
    guard: async (_action: string, context: { arguments: Record<string, unknown> }, o: { approvalId?: string }) => {
      contexts.push(context)
      if (o.approvalId !== undefined) throw new Error("approval apr_1 was already used")
      return options.approval
        ? { allowed: false, decision: "require_approval", approvalId: "apr_1", reasons: [], eventId: "evt_1" }
        : { allowed: true, decision: "allow", reasons: [], eventId: "evt_1" }
    },
    // As the SDK's: an approval nobody decides, until the caller's signal aborts the wait with its reason.
    waitForApproval: (_id: string, o: { signal?: AbortSignal }) =>
      options.approval === "approved-then-refused"
        ? Promise.resolve({ id: "apr_1", status: "approved" })
        : new Promise((_resolve, reject) => o.signal?.addEventListener("abort", () => reject(o.signal!.reason))),
    track: (event: { type: string; data: Record<string, unknown> }) => tracked.push(event),
  } as unknown as AgentRuntime
  const service = { tokens: { create: async () => ({ token: token({ agentId: "agt_1" }) }) } } as unknown as AgentGov
  const gateway = new Gateway({
    server: "ops",
    upstream,
    client: service,
    agent,
    sanitizer: new Sanitizer(),
    store: new DefinitionStore(undefined),
    hideDenied: false,
  })
  const [down, up] = InMemoryTransport.createLinkedPair()
  await gateway.createServer().connect(up)
  const client = new Client({ name: "test", version: "1.0.0" })
  await client.connect(down)
  closers.push(async () => {
    await client.close()
    await upstream.close()
  })
  return { client, tracked, contexts, calls }
}

const refusal = (call: Promise<unknown>) =>
  call.then(
    () => {
      throw new Error("the call was not refused")
    },
    (e: unknown) => {
      expect(e).toBeInstanceOf(McpError)
      return e as McpError
    },
  )

describe("a call forwarded to the server that fails there", () => {
  it("is recorded as mcp.tool.called with isError, whether the server errs or hangs past the timeout", async () => {
    const h = await harness(
      async (_name, args) => {
        if (args?.how === "error") throw new McpError(ErrorCode.InternalError, `disk full, key ${AWS}`)
        if (args?.how === "hang") return new Promise(() => {})
        return { content: [{ type: "text", text: "ok" }] }
      },
      { callTimeoutMs: 300 },
    )
    const failed = await refusal(h.client.callTool({ name: "run", arguments: { how: "error" } }))
    expect(failed.message).toContain("[REDACTED:aws_access_key]")
    const late = await refusal(h.client.callTool({ name: "run", arguments: { how: "hang" } }))
    expect(late.code).toBe(ErrorCode.RequestTimeout)
    expect(h.calls).toHaveLength(2)
    // Both reached the server (which may have acted): the trail says so, as a failed call.
    await expect.poll(() => h.tracked.filter((e) => e.type === "mcp.tool.called").length, { timeout: 10_000 }).toBe(2)
    const called = h.tracked.filter((e) => e.type === "mcp.tool.called").map((e) => e.data)
    for (const data of called)
      expect(data).toMatchObject({
        server: "ops",
        tool: "run",
        action: "mcp.ops.run",
        guardEventId: "evt_1",
        isError: true,
        contentItems: 0,
      })
    expect(called[0]!.redactions).toEqual([{ kind: "credential", rule: "aws_access_key", count: 1 }])
    expect(h.tracked.some((e) => e.type === "mcp.result.redacted")).toBe(true)
    expect(JSON.stringify(h.tracked)).not.toContain(AWS)
  })
})

describe("a call the client cancels while it waits for an approval", () => {
  it("is not sent, and not recorded as refused for an outage that did not happen", async () => {
    const h = await harness(async () => ({ content: [{ type: "text", text: "ok" }] }), { approval: true })
    const controller = new AbortController()
    const call = h.client.callTool({ name: "run", arguments: {} }, undefined, { signal: controller.signal })
    // Handled from the start: if the poll fails, the harness's close rejects the call while nothing awaits it yet.
    const refused = expect(call).rejects.toThrow(/pressed stop/)
    await expect.poll(() => h.contexts.length, { timeout: 10_000 }).toBe(1)
    controller.abort(new Error("the user pressed stop"))
    await refused
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(h.calls).toEqual([])
    expect(h.tracked.map((e) => [e.type, e.data.reason])).toEqual([])
  })
})

describe("an approved call the guard then refuses to decide on", () => {
  it("is refused as the guard's error (-32010 guard_error), not an internal error, and not sent", async () => {
    const h = await harness(async () => ({ content: [{ type: "text", text: "ok" }] }), {
      approval: "approved-then-refused",
    })
    const error = await refusal(h.client.callTool({ name: "run", arguments: {} }))
    expect(error.code).toBe(-32010)
    expect(error.data).toEqual({ reason: "guard_error", approvalId: "apr_1" })
    expect(error.message).toContain("already used")
    expect(h.calls).toEqual([])
  })
})
