import type { AgentGov, AgentRuntime } from "@agentgov/sdk"
import { describe, expect, it } from "vitest"
import { DefinitionStore } from "../src/DefinitionStore.ts"
import { Gateway } from "../src/Gateway.ts"
import { Sanitizer } from "../src/sanitizer.ts"
import type { Upstream } from "../src/Upstream.ts"

/**
 * What the gateway reports while the service cannot tell it its agent (the token exchange fails): kept, in
 * order, and sent once the agent is known, not dropped.
 */

const token = (claims: object) => `e30.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig`

describe("events reported before the agent is known", () => {
  it("wait for the service and are sent, in order, once it answers", async () => {
    let reachable = false
    const tracked: Array<{ type: string; data: Record<string, unknown> }> = []
    const client = {
      tokens: {
        create: async () => {
          if (!reachable) throw new Error("connect ECONNREFUSED")
          return { token: token({ agentId: "agt_1" }) }
        },
      },
    } as unknown as AgentGov
    const agent = {
      guard: async () => ({
        allowed: false,
        decision: "deny",
        reasons: [{ code: "SERVICE_UNAVAILABLE", message: "agentgov could not be reached" }],
        eventId: null,
      }),
      track: (event: { type: string; data: Record<string, unknown> }) => tracked.push(event),
    } as unknown as AgentRuntime
    const upstream = {
      listTools: async () => [{ name: "delete_files", inputSchema: { type: "object" } }],
    } as unknown as Upstream
    const logged: Array<string> = []
    const gateway = new Gateway({
      server: "files",
      upstream,
      client,
      agent,
      sanitizer: new Sanitizer(),
      store: new DefinitionStore(undefined),
      hideDenied: false,
      log: (line) => logged.push(line),
    })
    for (const _ of [1, 2]) {
      const refused = await gateway.callTool("delete_files", {}).then(
        () => undefined,
        (e: { code: number }) => e,
      )
      expect(refused?.code).toBe(-32012)
    }
    expect(tracked).toEqual([])

    reachable = true
    await expect.poll(() => tracked.length, { timeout: 15_000, interval: 100 }).toBe(2)
    expect(tracked.map((e) => [e.type, e.data.agentId, e.data.tool])).toEqual([
      ["mcp.tool.denied", "agt_1", "delete_files"],
      ["mcp.tool.denied", "agt_1", "delete_files"],
    ])
    expect(logged.some((l) => /event\(s\) wait for the service/.test(l))).toBe(true)
  })
})
