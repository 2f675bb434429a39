import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { LogLevel, WebClient } from "@slack/web-api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { slack } from "../src/connector.ts"
import { SLACK_CHANNEL, SLACK_TOKEN, type SlackFake, startSlackFake } from "./slackFake.ts"

describe("slack: what the app keeps of an approval", () => {
  let fake: SlackFake
  beforeAll(async () => {
    fake = await startSlackFake()
  })
  afterAll(() => fake.close())

  it("forgets the request's copy once the decision has updated its message (the thread is kept)", async () => {
    const state = new Map<string, string>()
    const log = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} }
    const client = new WebClient(SLACK_TOKEN, { slackApiUrl: fake.url, logLevel: LogLevel.ERROR })
    const ctx = {
      client,
      settings: { token: SLACK_TOKEN, channel: SLACK_CHANNEL, apiUrl: fake.url },
      severity: "warning",
      dashboardUrl: "https://agentgov.example",
      state: {
        get: (k: string) => state.get(k),
        set: (k: string, v: string) => state.set(k, v),
        delete: (k: string) => state.delete(k),
      },
      log,
      attempt: 1,
      signal: new AbortController().signal,
      deliveryId: "d1",
    } as unknown as Parameters<typeof slack.deliver>[1]
    const data = { approvalId: "apr_1", agentId: "agt_1", action: "deploy.production", reason: "r".repeat(2000) }
    const requested = sampleEvent("approval.requested", { data })
    expect(await slack.deliver(requested, ctx)).toMatchObject({ outcome: "ok" })
    expect(state.get("slack:thread:approval:apr_1:message")).toBeDefined()
    const decided = sampleEvent("approval.decided", { data: { ...data, decision: "approved", decidedBy: "usr_1" } })
    expect(await slack.deliver(decided, ctx)).toMatchObject({ outcome: "ok" })
    expect(fake.messages[0]!.updates).toHaveLength(1)
    expect([...state.keys()]).toEqual(["slack:thread:approval:apr_1"])
    // a redelivered decision still replies in the thread
    expect(await slack.deliver(decided, ctx)).toMatchObject({ outcome: "ok" })
    expect(fake.messages.at(-1)!.threadTs).toBe(fake.messages[0]!.ts)
  })
})
