import { fileURLToPath } from "node:url"
import { describeConnectorContract, useConnectorRig, waitFor } from "@agentgov/connector-testing"
import { beforeAll, describe, expect, it } from "vitest"
import { slack } from "../src/connector.ts"
import { SLACK_CHANNEL, SLACK_TOKEN, startSlackFake, visibleText } from "./slackFake.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-slack.js", import.meta.url))
const env = (fake: { url: string }) => ({ SLACK_BOT_TOKEN: SLACK_TOKEN, SLACK_CHANNEL, SLACK_API_URL: fake.url })

describeConnectorContract({ definition: slack, bin, startFake: startSlackFake, env })

describe("slack: threads, updates and mentions, from real approvals and enforcements", () => {
  const rig = useConnectorRig({
    definition: slack,
    startFake: startSlackFake,
    env,
    events: ["approval.*", "enforcement.*", "agent.*"],
  })
  let agentId: string
  let deciderKey: string
  beforeAll(async () => {
    const agent = await rig.agentgov.t.call("POST", "/api/v1/agents", { body: { name: "deploy-bot @channel" } })
    expect(agent.status, JSON.stringify(agent.body)).toBe(201)
    agentId = agent.body.data.id
    deciderKey = await rig.agentgov.t.createKey({
      type: "workspace",
      name: "decider",
      scopes: ["approvals:read", "approvals:manage"],
    })
  })

  const messageNaming = (type: string) => rig.fake.messages.find((m) => visibleText(m).includes(type))

  it("updates an approval's message when it is decided, and replies in its thread", async () => {
    const requested = await rig.agentgov.t.call("POST", "/api/v1/approvals", {
      body: { agentId, action: "deploy.production", reason: "<!channel> ship it now @here, cc <@U0123ABC>" },
    })
    expect(requested.status, JSON.stringify(requested.body)).toBe(201)
    await waitFor(() => messageNaming("approval.requested") !== undefined, "the approval's message")
    const root = messageNaming("approval.requested")!
    expect(root.threadTs).toBeUndefined()
    expect(visibleText(root)).toContain("Approval needed: deploy.production")
    expect(visibleText(root)).toContain(`https://gov.example.com/approvals/${requested.body.data.id}`)

    const decided = await rig.agentgov.t.call("POST", `/api/v1/approvals/${requested.body.data.id}/decide`, {
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
    const created = await rig.agentgov.t.call("POST", "/api/v1/enforcement", {
      body: { agentId, type: "suspension", reason: "spent 10x its budget" },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const id = created.body.data.id as string
    const resolved = await rig.agentgov.t.call("PATCH", `/api/v1/enforcement/${id}`, {
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
    expect(rig.fake.pings).toEqual([])
    const all = rig.fake.messages.map(visibleText).join("\n")
    expect(all).toContain("&lt;!channel&gt;")
    expect(all).toContain("&lt;@U0123ABC&gt;")
    expect(all).not.toMatch(/@(channel|here)\b/)
    expect(all).toContain("@\u200bchannel")
    // every request says so too
    for (const r of rig.fake.requests) expect(new URLSearchParams(r.raw).get("link_names") ?? "false").toBe("false")
  })
})
