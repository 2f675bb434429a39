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

  it("keeps an enforcement's thread until it is resolved, then for the store's default time", async () => {
    const state = new Map<string, { value: string; ttlMs: number | undefined }>()
    const log = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} }
    const client = new WebClient(SLACK_TOKEN, { slackApiUrl: fake.url, logLevel: LogLevel.ERROR })
    const ctx = {
      client,
      settings: { token: SLACK_TOKEN, channel: SLACK_CHANNEL, apiUrl: fake.url },
      severity: "warning",
      dashboardUrl: "https://agentgov.example",
      state: {
        get: (k: string) => state.get(k)?.value,
        set: (k: string, v: string, o?: { ttlMs?: number }) => state.set(k, { value: v, ttlMs: o?.ttlMs }),
        delete: (k: string) => state.delete(k),
      },
      log,
      attempt: 1,
      signal: new AbortController().signal,
      deliveryId: "d1",
    } as unknown as Parameters<typeof slack.deliver>[1]
    const data = { enforcementId: "enf_1", agentId: "agt_1", type: "suspension" as const, reason: "r" }
    const key = "slack:thread:enforcement:enf_1"
    expect(await slack.deliver(sampleEvent("enforcement.created", { data }), ctx)).toMatchObject({ outcome: "ok" })
    // in force for as long as anyone likes: an appeal months later still replies in its thread
    expect(state.get(key)?.ttlMs).toBe(Number.POSITIVE_INFINITY)
    const thread = state.get(key)!.value
    expect(await slack.deliver(sampleEvent("enforcement.appealed", { data }), ctx)).toMatchObject({ outcome: "ok" })
    expect(state.get(key)).toEqual({ value: thread, ttlMs: Number.POSITIVE_INFINITY })
    const resolved = sampleEvent("enforcement.resolved", { data: { ...data, resolution: "upheld" } })
    expect(await slack.deliver(resolved, ctx)).toMatchObject({ outcome: "ok" })
    expect(state.get(key)).toEqual({ value: thread, ttlMs: undefined })
    expect(fake.messages.at(-1)!.threadTs).toBe(JSON.parse(thread).ts)
    // an approval's thread takes the default (it is decided or expires within 30 days)
    const approval = { approvalId: "apr_2", agentId: "agt_1", action: "deploy" }
    expect(await slack.deliver(sampleEvent("approval.requested", { data: approval }), ctx)).toMatchObject({
      outcome: "ok",
    })
    expect(state.get("slack:thread:approval:apr_2")?.ttlMs).toBeUndefined()
  })
})
