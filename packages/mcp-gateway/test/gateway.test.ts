import { request } from "node:http"
import { join } from "node:path"
import type { AgentGov } from "@agentgov/sdk"
import { tempDir } from "@agentgov/testing/tempDir"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { GATEWAY_ERRORS } from "../src/errors.ts"
import {
  clientFor,
  closedPort,
  connect,
  eventsOf,
  type Mode,
  mcpError,
  newAgent,
  policyFor,
  startTestServer,
  stopChildren,
  type TestServer,
  textOf,
} from "./helpers.ts"

/**
 * The gateway end to end: a real agentgov server, the gateway's CLI, the test tool server, and the MCP SDK's
 * client, over stdio and over Streamable HTTP.
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

/** Decides the agent's first pending approval as soon as it appears, like an operator would. */
const operator = async (agentId: string, decision: "approved" | "denied") => {
  for (;;) {
    const [pending] = await admin.approvals.list({ agentId, status: "pending" } as never).toArray(1)
    if (pending) return admin.approvals.decide(pending.id, { decision, reason: "operator" })
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe.each<Mode>(["stdio", "http"])("over %s", (mode) => {
  it("allow: forwards the call and records mcp.tool.called with the guard's event", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [{ id: "ok", effect: "allow", actions: [`mcp.${a.server}.echo`] }])
    const c = await connect(mode, { url: t.url, ...a })
    try {
      const result = await c.client.callTool({ name: "echo", arguments: { text: "hello" } })
      expect(textOf(result)).toBe("hello")
      expect(c.calls()).toEqual(['echo {"text":"hello"}'])
      const [called] = await eventsOf(admin, a.agentId, "mcp.tool.called")
      expect(called!.data).toMatchObject({
        agentId: a.agentId,
        server: a.server,
        tool: "echo",
        action: `mcp.${a.server}.echo`,
        isError: false,
        contentItems: 1,
        redactions: [],
      })
      const guard = await admin.events.get((called!.data as { guardEventId: string }).guardEventId)
      expect(guard.type).toBe("policy.evaluated")
      expect(guard.data).toMatchObject({ action: `mcp.${a.server}.echo`, decision: "allow" })
    } finally {
      await c.close()
    }
  })

  it("deny: answers an MCP error, never forwards, records mcp.tool.denied; the tool is hidden from tools/list", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [
      { id: "never", effect: "deny", actions: [`mcp.${a.server}.delete_*`], reason: "no deleting" },
    ])
    const c = await connect(mode, { url: t.url, ...a })
    try {
      const names = (await c.client.listTools()).tools.map((x) => x.name)
      expect(names).toContain("echo")
      expect(names).not.toContain("delete_everything")
      const error = await mcpError(c.client.callTool({ name: "delete_everything", arguments: {} }))
      expect(error.code).toBe(GATEWAY_ERRORS.denied)
      expect(error.message).toBe('MCP error -32010: "delete_everything" was denied by policy: no deleting')
      expect(error.data).toMatchObject({ reason: "policy_denied" })
      // Another spelling is no tool of the server's (its names are case-sensitive), though it would run this one.
      const unknown = await mcpError(c.client.callTool({ name: "Delete_Everything", arguments: {} }))
      expect(unknown.code).toBe(GATEWAY_ERRORS.unknownTool)
      expect(unknown.data).toEqual({ reason: "unknown_tool" })
      const [denied] = await eventsOf(admin, a.agentId, "mcp.tool.denied")
      expect(denied!.data).toMatchObject({ tool: "delete_everything", reason: "policy_denied" })
      expect(c.calls()).toEqual([])
      expect(await admin.events.list({ type: "mcp.tool.called", agentId: a.agentId }).toArray()).toEqual([])
    } finally {
      await c.close()
    }
  })

  it("a conditional deny keeps the tool listed and decides each call on its arguments", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [
      {
        id: "secret",
        effect: "deny",
        actions: [`mcp.${a.server}.echo`],
        when: { field: "context.arguments.text", op: "eq", value: "secret" },
      },
    ])
    const c = await connect(mode, { url: t.url, ...a })
    try {
      expect((await c.client.listTools()).tools.map((x) => x.name)).toContain("echo")
      expect(textOf(await c.client.callTool({ name: "echo", arguments: { text: "fine" } }))).toBe("fine")
      expect((await mcpError(c.client.callTool({ name: "echo", arguments: { text: "secret" } }))).code).toBe(
        GATEWAY_ERRORS.denied,
      )
      expect(c.calls()).toEqual(['echo {"text":"fine"}'])
    } finally {
      await c.close()
    }
  })

  it("require_approval: waits, and forwards once an operator approves while the call waits", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [
      { id: "big", effect: "require_approval", actions: [`mcp.${a.server}.wire_money`] },
    ])
    const c = await connect(mode, { url: t.url, ...a })
    try {
      const call = c.client.callTool({ name: "wire_money", arguments: { amount: 5000 } })
      const decided = await operator(a.agentId, "approved")
      expect(textOf(await call)).toBe("wire_money done")
      expect(c.calls()).toEqual(['wire_money {"amount":5000}'])
      const [called] = await eventsOf(admin, a.agentId, "mcp.tool.called")
      expect(called!.data).toMatchObject({ tool: "wire_money", approvalId: decided.id })
    } finally {
      await c.close()
    }
  })

  it("require_approval: refuses when the operator denies, and records why", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [
      { id: "big", effect: "require_approval", actions: [`mcp.${a.server}.wire_money`] },
    ])
    const c = await connect(mode, { url: t.url, ...a })
    try {
      const call = mcpError(c.client.callTool({ name: "wire_money", arguments: { amount: 9000 } }))
      const decided = await operator(a.agentId, "denied")
      expect((await call).code).toBe(GATEWAY_ERRORS.approvalNotGranted)
      const [denied] = await eventsOf(admin, a.agentId, "mcp.tool.denied")
      expect(denied!.data).toMatchObject({ tool: "wire_money", reason: "approval_denied", approvalId: decided.id })
      expect(c.calls()).toEqual([])
    } finally {
      await c.close()
    }
  })

  it("require_approval: refuses when nobody decides within the approval timeout", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [
      { id: "big", effect: "require_approval", actions: [`mcp.${a.server}.wire_money`] },
    ])
    const c = await connect(mode, { url: t.url, ...a, flags: ["--approval-timeout", "1"] })
    try {
      const error = await mcpError(c.client.callTool({ name: "wire_money", arguments: { amount: 1 } }))
      expect(error.code).toBe(GATEWAY_ERRORS.approvalNotGranted)
      const [denied] = await eventsOf(admin, a.agentId, "mcp.tool.denied")
      expect(denied!.data).toMatchObject({ reason: "approval_timeout" })
      expect(c.calls()).toEqual([])
    } finally {
      await c.close()
    }
  })

  it("require_approval: an approval granted after the gateway gave up lets the same call through when asked again", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [
      { id: "big", effect: "require_approval", actions: [`mcp.${a.server}.wire_money`] },
    ])
    const c = await connect(mode, { url: t.url, ...a, flags: ["--approval-timeout", "1"] })
    try {
      const error = await mcpError(c.client.callTool({ name: "wire_money", arguments: { amount: 7 } }))
      expect(error.data).toMatchObject({ reason: "approval_timeout" })
      const approvalId = (error.data as { approvalId: string }).approvalId
      expect(error.message).toContain(`${approvalId} is still pending`)
      // The approver decides late, while nothing waits.
      await admin.approvals.decide(approvalId, { decision: "approved" })
      // Another call is not this one: it needs its own approval.
      const other = await mcpError(c.client.callTool({ name: "wire_money", arguments: { amount: 8 } }))
      expect((other.data as { approvalId: string }).approvalId).not.toBe(approvalId)
      // The same call again goes ahead on that approval, once, with no new request.
      expect(textOf(await c.client.callTool({ name: "wire_money", arguments: { amount: 7 } }))).toBe("wire_money done")
      expect(c.calls()).toEqual(['wire_money {"amount":7}'])
      expect((await admin.approvals.get(approvalId)).usedAt).not.toBeNull()
      const [called] = await eventsOf(admin, a.agentId, "mcp.tool.called")
      expect(called!.data).toMatchObject({ tool: "wire_money", approvalId })
      const all = await admin.approvals.list({ agentId: a.agentId, status: "all" } as never).toArray(10)
      expect(all.map((x) => x.id).sort()).toEqual(
        [approvalId, (other.data as { approvalId: string }).approvalId].sort(),
      )
      // Used up: asked a third time, the call needs a new approval.
      const third = await mcpError(c.client.callTool({ name: "wire_money", arguments: { amount: 7 } }))
      expect(third.data).toMatchObject({ reason: "approval_timeout" })
      expect((third.data as { approvalId: string }).approvalId).not.toBe(approvalId)
      expect(c.calls()).toHaveLength(1)
    } finally {
      await c.close()
    }
  })

  it("redacts credentials and URLs to hosts not allowlisted from results, and records the finding", async () => {
    const a = await newAgent(admin)
    const c = await connect(mode, { url: t.url, ...a, flags: ["--allowed-hosts", "docs.example.com"] })
    try {
      const text = textOf(await c.client.callTool({ name: "read_config", arguments: {} }))
      expect(text).not.toContain("AKIAIOSFODNN7EXAMPLE")
      expect(text).not.toContain("ghp_")
      expect(text).not.toContain("evil.example.net")
      expect(text).toContain("[REDACTED:aws_access_key]")
      expect(text).toContain("https://docs.example.com/x")
      const [redacted] = await eventsOf(admin, a.agentId, "mcp.result.redacted")
      expect((redacted!.data as { redactions: unknown }).redactions).toEqual(
        expect.arrayContaining([
          { kind: "credential", rule: "aws_access_key", count: 1 },
          { kind: "credential", rule: "github_token", count: 1 },
          { kind: "url", rule: "evil.example.net", count: 1 },
        ]),
      )
      const [called] = await eventsOf(admin, a.agentId, "mcp.tool.called")
      expect(JSON.stringify(called!.data)).not.toContain("AKIA")
    } finally {
      await c.close()
    }
  })

  it("sanitises all of a result (structured content under any key, _meta) and the server's own errors", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [{ id: "ok", effect: "allow", actions: [`mcp.${a.server}.*`] }])
    const c = await connect(mode, { url: t.url, ...a })
    try {
      const result = await c.client.callTool({ name: "read_structured", arguments: {} })
      const seen = JSON.stringify(result)
      for (const secret of ["ghp_", "hunter2", "AKIA"]) expect(seen).not.toContain(secret)
      expect(result.structuredContent).toEqual({
        data: { token: "[REDACTED:github_token]" },
        env: "[REDACTED:secret_assignment]",
        password: "[REDACTED:secret_assignment]",
      })
      expect(result._meta).toEqual({ debug: { data: "[REDACTED:aws_access_key]" } })
      const [redacted] = await eventsOf(admin, a.agentId, "mcp.result.redacted")
      expect((redacted!.data as { redactions: unknown }).redactions).toEqual(
        expect.arrayContaining([
          { kind: "credential", rule: "github_token", count: 1 },
          { kind: "credential", rule: "secret_assignment", count: 2 },
          { kind: "credential", rule: "aws_access_key", count: 1 },
        ]),
      )

      const error = await mcpError(c.client.callTool({ name: "fail_secret", arguments: {} }))
      const told = JSON.stringify({ message: error.message, data: error.data })
      for (const secret of ["hunter2", "AKIA", "S3cr3t"]) expect(told).not.toContain(secret)
      expect(error.message).toContain("connect failed: [REDACTED:secret_assignment]")
      expect(error.data).toEqual({ dsn: "postgres://app:[REDACTED:url_credentials]@db.internal:5432/app" })
    } finally {
      await c.close()
    }
  })

  it("a tool listed twice is listed once and flagged: a pinned copy beside a changed one does not hide the change", async () => {
    const a = await newAgent(admin)
    const store = join(tempDir("mcp-store-"), "definitions.json")
    const first = await connect(mode, { url: t.url, ...a, store })
    try {
      await first.client.listTools()
    } finally {
      await first.close()
    }
    await policyFor(admin, a.agentId, [
      { id: "ok", effect: "allow", actions: [`mcp.${a.server}.*`] },
      {
        id: "flagged",
        effect: "deny",
        actions: [`mcp.${a.server}.*`],
        when: { field: "context.definition.flagged", op: "eq", value: true },
      },
    ])
    const second = await connect(mode, { url: t.url, ...a, store, toolEnv: { TOOL_SERVER_VARIANT: "duplicate" } })
    try {
      const listed = (await second.client.listTools()).tools.filter((x) => x.name === "weather")
      expect(listed).toHaveLength(1)
      const error = await mcpError(second.client.callTool({ name: "weather", arguments: { text: "Paris" } }))
      expect(error.code).toBe(GATEWAY_ERRORS.denied)
      expect(second.calls()).toEqual([])
      const [flagged] = await eventsOf(admin, a.agentId, "mcp.definition.flagged")
      expect((flagged!.data as { findings: Array<{ kind: string }> }).findings.map((f) => f.kind)).toEqual(
        expect.arrayContaining(["instructions", "definition_changed", "duplicate_name"]),
      )
    } finally {
      await second.close()
    }
  })

  it("flags a rug pull and poisoned definitions, and a policy can refuse flagged tools", async () => {
    const a = await newAgent(admin)
    const store = join(tempDir("mcp-store-"), "definitions.json")
    const first = await connect(mode, { url: t.url, ...a, store })
    try {
      expect((await first.client.listTools()).tools.map((x) => x.name)).toContain("weather")
    } finally {
      await first.close()
    }
    await policyFor(admin, a.agentId, [
      {
        id: "flagged",
        effect: "deny",
        actions: [`mcp.${a.server}.*`],
        when: { field: "context.definition.flagged", op: "eq", value: true },
      },
    ])
    const second = await connect(mode, { url: t.url, ...a, store, toolEnv: { TOOL_SERVER_VARIANT: "changed" } })
    try {
      await second.client.listTools()
      const flagged = await eventsOf(admin, a.agentId, "mcp.definition.flagged", 2)
      const byTool = Object.fromEntries(flagged.map((e) => [(e.data as { tool: string }).tool, e.data as any]))
      expect(byTool.weather.findings.map((f: { kind: string }) => f.kind)).toEqual(
        expect.arrayContaining(["instructions", "definition_changed"]),
      )
      expect(byTool.weather.firstSeenHash).not.toBe(byTool.weather.definitionHash)
      expect(byTool.notes.findings.map((f: { kind: string }) => f.kind)).toContain("hidden_unicode")
      expect((await mcpError(second.client.callTool({ name: "weather", arguments: { text: "x" } }))).code).toBe(
        GATEWAY_ERRORS.denied,
      )
      expect(textOf(await second.client.callTool({ name: "echo", arguments: { text: "still fine" } }))).toBe(
        "still fine",
      )
      expect(second.calls()).toEqual(['echo {"text":"still fine"}'])
    } finally {
      await second.close()
    }
  })

  it("refuses every call when agentgov cannot be reached (fail closed), and forwards nothing", async () => {
    const a = await newAgent(admin)
    const c = await connect(mode, { url: `http://127.0.0.1:${await closedPort()}`, ...a })
    try {
      expect((await c.client.listTools()).tools.map((x) => x.name)).toContain("echo")
      const error = await mcpError(c.client.callTool({ name: "echo", arguments: { text: "x" } }))
      expect(error.code).toBe(GATEWAY_ERRORS.serviceUnavailable)
      expect(c.calls()).toEqual([])
    } finally {
      await c.close()
    }
  })

  it("50 calls in flight: each decided and recorded once", async () => {
    const a = await newAgent(admin)
    const c = await connect(mode, { url: t.url, ...a })
    let closed = false
    try {
      const texts = Array.from({ length: 50 }, (_, i) => `call-${i}`)
      const results = await Promise.all(texts.map((text) => c.client.callTool({ name: "echo", arguments: { text } })))
      expect(results.map(textOf)).toEqual(texts)
      // closed first: the gateway sends every event it queued before it exits, so a second record of a
      // call would be in the counts below
      closed = true
      await c.close()
      const called = await eventsOf(admin, a.agentId, "mcp.tool.called", 50)
      const evaluated = await eventsOf(admin, a.agentId, "policy.evaluated", 50)
      expect(called).toHaveLength(50)
      expect(evaluated).toHaveLength(50)
      const guardIds = called.map((e) => (e.data as { guardEventId: string }).guardEventId)
      expect(new Set(guardIds)).toEqual(new Set(evaluated.map((e) => e.id)))
      expect(c.calls().sort()).toEqual(texts.map((text) => `echo ${JSON.stringify({ text })}`).sort())
    } finally {
      if (!closed) await c.close()
    }
    // 50 guard calls and their events on a loaded machine
  }, 60_000)
})

describe("the wrapped server (stdio)", () => {
  it("does not inherit the gateway's agent key", async () => {
    const a = await newAgent(admin)
    const c = await connect("stdio", { url: t.url, ...a })
    try {
      expect(textOf(await c.client.callTool({ name: "whoami", arguments: {} }))).toBe("AGENTGOV_API_KEY=unset")
    } finally {
      await c.close()
    }
  })

  it("a crash mid-call is a clear MCP error, and the server is restarted", async () => {
    const a = await newAgent(admin)
    const c = await connect("stdio", { url: t.url, ...a })
    try {
      const error = await mcpError(c.client.callTool({ name: "crash", arguments: {} }))
      expect(error.code).toBe(GATEWAY_ERRORS.upstreamUnavailable)
      expect(error.message).toContain("restarting")
      let text: string | undefined
      for (let i = 0; i < 100 && text === undefined; i++) {
        text = await c.client.callTool({ name: "echo", arguments: { text: "back" } }).then(textOf, async (e) => {
          expect(e.code).toBe(GATEWAY_ERRORS.upstreamUnavailable)
          await new Promise((r) => setTimeout(r, 100))
          return undefined
        })
      }
      expect(text).toBe("back")
    } finally {
      await c.close()
    }
  })
})

describe("a server whose tool list does not end", () => {
  it.each(["endless", "looping"])(
    "%s pages: tools/list is a clear error, and a call is refused with it, not forwarded",
    async (variant) => {
      const a = await newAgent(admin)
      await policyFor(admin, a.agentId, [{ id: "ok", effect: "allow", actions: [`mcp.${a.server}.*`] }])
      const c = await connect("stdio", { url: t.url, ...a, toolEnv: { TOOL_SERVER_VARIANT: variant } })
      try {
        const error = await mcpError(c.client.listTools())
        expect(error.code).toBe(GATEWAY_ERRORS.upstreamUnavailable)
        expect(error.message).toContain("listed tools without end")
        // The gateway is not stuck, and calls nothing it could not list and scan.
        const refused = await mcpError(c.client.callTool({ name: "echo", arguments: { text: "still here" } }))
        expect(refused.code).toBe(GATEWAY_ERRORS.upstreamUnavailable)
        expect(refused.message).toContain('"echo" was not called: the gateway could not list the tools')
        expect(refused.data).toEqual({ reason: "upstream_tool_list_unbounded" })
        expect(c.calls()).toEqual([])
      } finally {
        await c.close()
      }
    },
  )
})

describe("the HTTP listener on loopback", () => {
  /** A raw POST to the gateway with the given Host and Origin: what a DNS-rebinding web page would send. */
  const post = (url: string, headers: Record<string, string | Array<string>>) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const u = new URL(url)
      const body = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "echo", arguments: { text: "rebound" } },
      })
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "content-length": Buffer.byteLength(body),
            ...headers,
          },
        },
        (res) => {
          let text = ""
          res.on("data", (c: Buffer) => {
            text += c.toString("utf8")
          })
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }))
        },
      )
      req.on("error", reject)
      req.end(body)
    })

  it("refuses a request named for another host or sent from a web page (DNS rebinding), and calls nothing", async () => {
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [{ id: "ok", effect: "allow", actions: [`mcp.${a.server}.echo`] }])
    const c = await connect("http", { url: t.url, ...a })
    try {
      const port = new URL(c.url!).port
      for (const headers of [
        { host: `evil.example:${port}` } as Record<string, string>,
        { host: `evil.example:${port}`, origin: `http://evil.example:${port}` },
        { host: `127.0.0.1:${port}`, origin: "https://evil.example" },
      ]) {
        const res = await post(c.url!, headers)
        expect(res.status, JSON.stringify(headers)).toBe(403)
      }
      expect(c.calls()).toEqual([])
      // The gateway's own clients (no Origin, or a loopback one) still reach it.
      const ok = await post(c.url!, { host: `localhost:${port}`, origin: "http://localhost:6274" })
      expect(ok.status, ok.body).toBe(200)
      expect(c.calls()).toEqual(['echo {"text":"rebound"}'])
    } finally {
      await c.close()
    }
  })

  it("with a token, answers one Authorization header with it, and refuses repeated ones whichever comes first", async () => {
    // Node keeps only the first of repeated Authorization lines; a proxy in front may have acted on another.
    const a = await newAgent(admin)
    await policyFor(admin, a.agentId, [{ id: "ok", effect: "allow", actions: [`mcp.${a.server}.echo`] }])
    const token = "a-long-random-gateway-token"
    const c = await connect("http", { url: t.url, ...a, httpToken: token })
    try {
      const host = `127.0.0.1:${new URL(c.url!).port}`
      for (const authorization of [
        [`Bearer ${token}`, "Bearer wrong"],
        ["Bearer wrong", `Bearer ${token}`],
        [`Bearer ${token}`, `Bearer ${token}`],
        `Bearer ${token}, Bearer wrong`,
        "Bearer wrong",
      ]) {
        const res = await post(c.url!, { host, authorization })
        expect(res.status, JSON.stringify(authorization)).toBe(401)
      }
      expect(c.calls()).toEqual([])
      const ok = await post(c.url!, { host, authorization: `Bearer ${token}` })
      expect(ok.status, ok.body).toBe(200)
      expect(c.calls()).toEqual(['echo {"text":"rebound"}'])
    } finally {
      await c.close()
    }
  })
})
