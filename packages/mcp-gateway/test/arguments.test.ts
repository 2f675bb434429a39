import type { AgentGov } from "@agentgov/sdk"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Sanitizer } from "../src/sanitizer.ts"
import {
  clientFor,
  connect,
  eventsOf,
  newAgent,
  policyFor,
  startTestServer,
  stopChildren,
  type TestServer,
  textOf,
} from "./helpers.ts"

/**
 * Credentials in a call's arguments do not reach the service: the guard's context (which the service records in
 * `policy.evaluated` and shows approvers in the approval it creates) carries them redacted, as a result would be,
 * while the tool server is sent the arguments as they are.
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

const STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
const PASSWORD = "correct-horse-battery"
const GITHUB = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"

describe("a call's arguments", () => {
  it("reach the approval and the trail redacted, and the tool server as they are", async () => {
    const { agentId, apiKey, server } = await newAgent(admin, "mcp-args")
    await policyFor(admin, agentId, [{ id: "big", effect: "require_approval", actions: [`mcp.${server}.wire_money`] }])
    const args = {
      amount: 5000,
      api_key: STRIPE,
      credentials: { password: PASSWORD },
      note: `pay with ${GITHUB}`,
      callback: "https://hooks.example.com/paid",
    }
    const c = await connect("stdio", {
      url: t.url,
      apiKey,
      server,
      flags: ["--allowed-hosts", "docs.example.com"],
    })
    try {
      const call = c.client.callTool({ name: "wire_money", arguments: args })
      let pending: Awaited<ReturnType<typeof admin.approvals.get>> | undefined
      while (pending === undefined) {
        ;[pending] = await admin.approvals.list({ agentId, status: "pending" } as never).toArray(1)
        if (pending === undefined) await new Promise((r) => setTimeout(r, 50))
      }
      const shown = JSON.stringify(pending.context)
      for (const secret of [STRIPE, PASSWORD, GITHUB]) expect(shown).not.toContain(secret)
      expect(pending.context).toMatchObject({
        arguments: {
          amount: 5000,
          api_key: "[REDACTED:secret_assignment]",
          credentials: { password: "[REDACTED:secret_assignment]" },
          note: "pay with [REDACTED:github_token]",
          // Policies may read a call's hosts: the result allowlist does not apply to arguments.
          callback: "https://hooks.example.com/paid",
        },
      })
      await admin.approvals.decide(pending.id, { decision: "approved", reason: "operator" })
      // The approval lets the call through: the second guard's context, redacted the same way, matches it.
      expect(textOf(await call)).toBe("wire_money done")
      expect(c.calls()).toEqual([`wire_money ${JSON.stringify(args)}`])
      const evaluated = await eventsOf(admin, agentId, "policy.evaluated", 2)
      for (const secret of [STRIPE, PASSWORD, GITHUB]) expect(JSON.stringify(evaluated)).not.toContain(secret)
      expect(c.stderr()).toContain('redacted from the arguments of "wire_money" sent to agentgov')
    } finally {
      await c.close()
    }
  }, 30_000)

  it("that differ only in a redacted secret need an approval each (the approval binds a digest of the values)", async () => {
    const { agentId, apiKey, server } = await newAgent(admin, "mcp-args-digest")
    await policyFor(admin, agentId, [{ id: "big", effect: "require_approval", actions: [`mcp.${server}.wire_money`] }])
    const pendingOnes = async (n: number) => {
      for (;;) {
        const pending = await admin.approvals.list({ agentId, status: "pending" } as never).toArray(10)
        if (pending.length >= n) return pending
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    const c = await connect("stdio", { url: t.url, apiKey, server })
    try {
      const first = { amount: 5, password: "1111" }
      const second = { password: "2222", amount: 5 }
      const call = c.client.callTool({ name: "wire_money", arguments: first })
      call.catch(() => {}) // settled below; a refusal while this test waits must fail the test, not the run
      const [approved] = await pendingOnes(1)
      // The same values in another key order are the same call: it waits for the same approval.
      const again = c.client.callTool({ name: "wire_money", arguments: { password: "1111", amount: 5 } })
      // Another password: a second approval, although both show the approver the same redacted arguments.
      const other = c.client.callTool({ name: "wire_money", arguments: second })
      // Settled from now on: the call refused for a used approval may be refused before the other approval is decided.
      const settled = Promise.allSettled([call, again, other])
      await eventsOf(admin, agentId, "policy.evaluated", 3)
      const pending = await admin.approvals.list({ agentId, status: "pending" } as never).toArray(10)
      expect(pending).toHaveLength(2)
      const [denied] = pending.filter((p) => p.id !== approved!.id)
      for (const p of pending) {
        expect(p.context.arguments).toEqual({ amount: 5, password: "[REDACTED:secret_assignment]" })
        expect(p.context.argumentsDigest).toMatch(/^[0-9a-f]{64}$/)
        // Nothing else the approver sees holds a password (the digest is hex: it holds "1111" or "2222" once in ~500).
        const { argumentsDigest: _digest, ...shown } = p.context
        expect(JSON.stringify(shown)).not.toMatch(/1111|2222/)
      }
      expect(denied!.context.argumentsDigest).not.toBe(approved!.context.argumentsDigest)
      await admin.approvals.decide(approved!.id, { decision: "approved" })
      await admin.approvals.decide(denied!.id, { decision: "denied" })
      const outcomes = await settled
      // One call per approval: the first of the two waiting for it runs, the other is asked again (and times out or
      // is refused); the call with the other password was denied and never reached the server.
      expect(c.calls()).toHaveLength(1)
      expect([`wire_money ${JSON.stringify(first)}`, `wire_money {"password":"1111","amount":5}`]).toContain(
        c.calls()[0],
      )
      expect(outcomes[2]).toMatchObject({ status: "rejected" })
      expect(String((outcomes[2] as PromiseRejectedResult).reason)).toContain("not granted")
    } finally {
      await c.close()
    }
  }, 60_000)

  it("are redacted by the result's rules, without its URL allowlist or content blocks", () => {
    const sanitizer = new Sanitizer({ allowedHosts: ["docs.example.com"] })
    const { value, redactions } = sanitizer.redactArguments({
      content: [{ type: "image", data: "password=hunter2hunter2" }],
      url: "https://evil.example.net/x",
      DB_PASSWORD: "hunter2hunter2",
    })
    expect(value).toEqual({
      content: [{ type: "image", data: "[REDACTED:secret_assignment]" }],
      url: "https://evil.example.net/x",
      DB_PASSWORD: "[REDACTED:secret_assignment]",
    })
    expect(redactions).toEqual([{ kind: "credential", rule: "secret_assignment", count: 2 }])
  })

  it("redact a secret-named key's value whatever its length (a 4-digit password is still one)", () => {
    const { value, redactions } = new Sanitizer().redactArguments({
      password: "1234",
      pin: { api_key: "k", client_secret: "abcdefg" },
      DB_PASSWORD: "x",
      passwordless: "",
      note: "short",
    })
    expect(value).toEqual({
      password: "[REDACTED:secret_assignment]",
      pin: { api_key: "[REDACTED:secret_assignment]", client_secret: "[REDACTED:secret_assignment]" },
      DB_PASSWORD: "[REDACTED:secret_assignment]",
      // Nothing to hide in an empty value.
      passwordless: "",
      note: "short",
    })
    expect(redactions).toEqual([{ kind: "credential", rule: "secret_assignment", count: 4 }])
    // In a result too.
    expect(new Sanitizer().sanitize({ structuredContent: { password: "hunter2" } }).value).toEqual({
      structuredContent: { password: "[REDACTED:secret_assignment]" },
    })
  })
})
