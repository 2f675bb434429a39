import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import {
  type Agentgov,
  describeConnectorContract,
  type InProcess,
  runInProcess,
  startAgentgov,
  waitFor,
} from "@agentgov/connector-testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { slack } from "../src/connector.ts"
import { SLACK_CHANNEL, SLACK_TOKEN, type SlackFake, startSlackFake, visibleText } from "./slackFake.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-slack.js", import.meta.url))
const env = (fake: { url: string }) => ({ SLACK_BOT_TOKEN: SLACK_TOKEN, SLACK_CHANNEL, SLACK_API_URL: fake.url })

describeConnectorContract({ definition: slack, bin, startFake: startSlackFake, env })

describe("slack: threads, updates and mentions, from real approvals and enforcements", () => {
  let agentgov: Agentgov
  let fake: SlackFake
  let connector: InProcess
  let dataDir: string
  let agentId: string
  let deciderKey: string
  const secret = "whsec_slack_threads_0123456789abcdef"

  beforeAll(async () => {
    agentgov = await startAgentgov()
    fake = await startSlackFake()
    dataDir = mkdtempSync(join(tmpdir(), "agentgov-slack-threads-"))
    connector = await runInProcess(slack, {
      ...env(fake),
      AGENTGOV_WEBHOOK_SECRET: secret,
      AGENTGOV_CONNECTOR_DATA_DIR: dataDir,
      AGENTGOV_DASHBOARD_URL: "https://gov.example.com",
    })
    await agentgov.subscribe(`${connector.url}/webhooks`, ["approval.*", "enforcement.*", "agent.*"], secret)
    const agent = await agentgov.t.call("POST", "/api/v1/agents", { body: { name: "deploy-bot @channel" } })
    expect(agent.status, JSON.stringify(agent.body)).toBe(201)
    agentId = agent.body.data.id
    deciderKey = await agentgov.t.createKey({
      type: "workspace",
      name: "decider",
      scopes: ["approvals:read", "approvals:manage"],
    })
  })
  afterAll(async () => {
    await connector?.running.close()
    await fake?.close()
    await agentgov?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const messageNaming = (type: string) => fake.messages.find((m) => visibleText(m).includes(type))

  it("updates an approval's message when it is decided, and replies in its thread", async () => {
    const requested = await agentgov.t.call("POST", "/api/v1/approvals", {
      body: { agentId, action: "deploy.production", reason: "<!channel> ship it now @here, cc <@U0123ABC>" },
    })
    expect(requested.status, JSON.stringify(requested.body)).toBe(201)
    await waitFor(() => messageNaming("approval.requested") !== undefined, "the approval's message")
    const root = messageNaming("approval.requested")!
    expect(root.threadTs).toBeUndefined()
    expect(visibleText(root)).toContain("Approval needed: deploy.production")
    expect(visibleText(root)).toContain(`https://gov.example.com/approvals/${requested.body.data.id}`)

    const decided = await agentgov.t.call("POST", `/api/v1/approvals/${requested.body.data.id}/decide`, {
      body: { decision: "approved", reason: "checked the diff" },
      key: deciderKey,
    })
    expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    await waitFor(() => messageNaming("approval.decided") !== undefined, "the decision's reply")
    const reply = messageNaming("approval.decided")!
    expect(reply.threadTs).toBe(root.ts)
    expect(root.updates).toHaveLength(1)
    expect(visibleText(root)).toContain("Approved: deploy.production")
    // the original request is still there, now with its outcome
    expect(visibleText(root)).toContain("Approval needed: deploy.production")
  })

  it("threads an enforcement's follow-ups under its first message", async () => {
    const created = await agentgov.t.call("POST", "/api/v1/enforcement", {
      body: { agentId, type: "suspension", reason: "spent 10x its budget" },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const id = created.body.data.id as string
    const resolved = await agentgov.t.call("PATCH", `/api/v1/enforcement/${id}`, {
      body: { resolution: "overturned", note: "budget alarm misfired" },
    })
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200)
    await waitFor(
      () => ["enforcement.created", "agent.suspended", "enforcement.resolved"].every((t) => messageNaming(t)),
      "the enforcement's three messages",
    )
    const root = messageNaming("enforcement.created")!
    expect(root.threadTs).toBeUndefined()
    expect(messageNaming("agent.suspended")!.threadTs).toBe(root.ts)
    expect(messageNaming("enforcement.resolved")!.threadTs).toBe(root.ts)
    expect(visibleText(root)).toContain("Suspension issued")
  })

  it("never lets event text ping anyone", async () => {
    await waitFor(() => messageNaming("agent.registered") !== undefined, "the agent's message")
    expect(fake.pings).toEqual([])
    const all = fake.messages.map(visibleText).join("\n")
    expect(all).toContain("&lt;!channel&gt;")
    expect(all).toContain("&lt;@U0123ABC&gt;")
    expect(all).not.toMatch(/@(channel|here)\b/)
    expect(all).toContain("@\u200bchannel")
    // every request says so too
    for (const r of fake.requests) expect(new URLSearchParams(r.raw).get("link_names") ?? "false").toBe("false")
  })
})
