import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { LogLevel, WebClient } from "@slack/web-api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { slack } from "../src/connector.ts"
import { SLACK_CHANNEL, SLACK_TOKEN, type SlackFake, startSlackFake, TOMBSTONE_TEXT, visibleText } from "./slackFake.ts"

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

describe("slack: a follow-up whose thread's first message was deleted in Slack", () => {
  let fake: SlackFake
  beforeAll(async () => {
    fake = await startSlackFake()
  })
  afterAll(() => fake.close())

  const context = () => {
    const state = new Map<string, { value: string; ttlMs: number | undefined }>()
    const warnings: Array<string> = []
    const log = { info: () => {}, warn: (m: string) => warnings.push(m), error: () => {}, debug: () => {} }
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
    return { state, warnings, ctx, rootOf: (key: string) => JSON.parse(state.get(key)!.value).ts as string }
  }
  const byTs = (ts: string) => fake.messages.find((m) => m.ts === ts)!

  // Slack documents no chat.postMessage error for a reply to a deleted message and is seen to post it at the top
  // level; clients report `thread_not_found` too. chat.update of it answers `message_not_found` (documented).
  for (const replies of ["unthread", "thread_not_found"] as const)
    describe(`(a reply to it: ${replies})`, () => {
      it("posts an approval's decision as a new message that says so, the thread's new first message", async () => {
        const { state, ctx, rootOf } = context()
        const data = { approvalId: `apr_del_${replies}`, agentId: "agt_1", action: "deploy.production" }
        const key = `slack:thread:approval:${data.approvalId}`
        expect(await slack.deliver(sampleEvent("approval.requested", { data }), ctx)).toMatchObject({ outcome: "ok" })
        const first = rootOf(key)
        fake.deleteMessage(first, replies)
        const decided = sampleEvent("approval.decided", { data: { ...data, decision: "approved", decidedBy: "usr_1" } })
        expect(await slack.deliver(decided, ctx)).toMatchObject({ outcome: "ok" })
        const root = byTs(rootOf(key))
        expect(root.ts).not.toBe(first)
        expect(root.threadTs).toBeUndefined()
        expect(root.deleted).toBeUndefined()
        expect(visibleText(root)).toContain("Approved: deploy.production")
        expect(visibleText(root)).toContain("deleted in Slack")
        // the text fallback (notifications, screen readers) says so too, right under the title
        expect(root.text.split("\n")[1]).toContain("deleted in Slack")
        expect(root.attachments[0].fallback.split("\n")[1]).toContain("deleted in Slack")
        // one message for the decision, nothing left of the request's copy
        const decisions = fake.messages.filter((m) => visibleText(m).includes("approval.decided"))
        expect(decisions.filter((m) => visibleText(m).includes(data.approvalId))).toEqual([root])
        expect(state.has(`${key}:message`)).toBe(false)
        expect(state.get(key)!.ttlMs).toBeUndefined()
        // the next event of the approval replies under the new first message
        expect(await slack.deliver(decided, ctx)).toMatchObject({ outcome: "ok" })
        expect(fake.messages.at(-1)!.threadTs).toBe(root.ts)
      })

      it("posts an enforcement's follow-ups, then its resolution, under a new first message", async () => {
        const { state, ctx, rootOf } = context()
        const data = { enforcementId: `enf_del_${replies}`, agentId: "agt_1", type: "suspension" as const, reason: "r" }
        const key = `slack:thread:enforcement:${data.enforcementId}`
        expect(await slack.deliver(sampleEvent("enforcement.created", { data }), ctx)).toMatchObject({ outcome: "ok" })
        const first = rootOf(key)
        fake.deleteMessage(first, replies)
        // still in force: the new first message is kept until the resolution, as the first was
        expect(await slack.deliver(sampleEvent("enforcement.appealed", { data }), ctx)).toMatchObject({ outcome: "ok" })
        const root = byTs(rootOf(key))
        expect(root.ts).not.toBe(first)
        expect(root.threadTs).toBeUndefined()
        expect(visibleText(root)).toContain("enforcement.appealed")
        expect(visibleText(root)).toContain("deleted in Slack")
        expect(root.text.split("\n")[1]).toContain("deleted in Slack")
        expect(state.get(key)!.ttlMs).toBe(Number.POSITIVE_INFINITY)
        const resolved = sampleEvent("enforcement.resolved", { data: { ...data, resolution: "upheld" } })
        expect(await slack.deliver(resolved, ctx)).toMatchObject({ outcome: "ok" })
        expect(fake.messages.at(-1)!.threadTs).toBe(root.ts)
        expect(state.get(key)).toEqual({
          value: JSON.stringify({ channel: SLACK_CHANNEL, ts: root.ts }),
          ttlMs: undefined,
        })

        // and when the new first message goes too, the resolution itself takes its place
        const other = { ...data, enforcementId: `enf_del2_${replies}` }
        const key2 = `slack:thread:enforcement:${other.enforcementId}`
        expect(await slack.deliver(sampleEvent("enforcement.created", { data: other }), ctx)).toMatchObject({
          outcome: "ok",
        })
        fake.deleteMessage(rootOf(key2), replies)
        const resolved2 = sampleEvent("enforcement.resolved", { data: { ...other, resolution: "overturned" } })
        expect(await slack.deliver(resolved2, ctx)).toMatchObject({ outcome: "ok" })
        const root2 = byTs(rootOf(key2))
        expect(root2.threadTs).toBeUndefined()
        expect(visibleText(root2)).toContain("enforcement.resolved")
        expect(visibleText(root2)).toContain("deleted in Slack")
        expect(root2.text).toContain("deleted in Slack")
        expect(state.get(key2)!.ttlMs).toBeUndefined()
      })
    })
})

describe("slack: a first message deleted while its thread had replies (Slack's placeholder)", () => {
  let fake: SlackFake
  beforeAll(async () => {
    fake = await startSlackFake()
  })
  afterAll(() => fake.close())

  const context = () => {
    const state = new Map<string, { value: string; ttlMs: number | undefined }>()
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
      log: { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} },
      attempt: 1,
      signal: new AbortController().signal,
      deliveryId: "d1",
    } as unknown as Parameters<typeof slack.deliver>[1]
    return { state, client, ctx, rootOf: (key: string) => JSON.parse(state.get(key)!.value).ts as string }
  }
  const byTs = (ts: string) => fake.messages.find((m) => m.ts === ts)!
  /** Someone answers in the thread, as people do under an approval. */
  const replyIn = (ts: string) =>
    fetch(`${fake.url}chat.postMessage`, {
      method: "POST",
      headers: { authorization: `Bearer ${SLACK_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ channel: SLACK_CHANNEL, text: "looking at it", thread_ts: ts }),
    }).then((r) => r.json() as Promise<any>)

  it("posts the approval's card again with its outcome, and the decision replies under it", async () => {
    const { state, ctx, rootOf } = context()
    const data = { approvalId: "apr_tomb_1", agentId: "agt_1", action: "deploy.production" }
    const key = `slack:thread:approval:${data.approvalId}`
    expect(await slack.deliver(sampleEvent("approval.requested", { data }), ctx)).toMatchObject({ outcome: "ok" })
    const first = rootOf(key)
    expect((await replyIn(first)).message.thread_ts).toBe(first)
    fake.deleteMessage(first)
    expect(byTs(first)).toMatchObject({ deleted: "tombstone", text: TOMBSTONE_TEXT, user: "USLACKBOT" })

    const decided = sampleEvent("approval.decided", { data: { ...data, decision: "approved", decidedBy: "usr_1" } })
    expect(await slack.deliver(decided, ctx)).toMatchObject({ outcome: "ok" })
    // Slack's placeholder is left as it is
    expect(byTs(first)).toMatchObject({ text: TOMBSTONE_TEXT, updates: [] })
    // a new card in the channel: the request, its outcome, and why it is there, in the blocks and the text fallback
    const card = byTs(rootOf(key))
    expect(card.ts).not.toBe(first)
    expect(card.threadTs).toBeUndefined()
    expect(visibleText(card)).toContain("Approval needed: deploy.production")
    expect(visibleText(card)).toContain("Approved: deploy.production")
    expect(card.text).toContain("Approved: deploy.production")
    expect(card.text).toContain("deleted in Slack")
    expect(visibleText(card)).toContain("deleted in Slack")
    // the decision replies under it, as under an updated card
    const reply = fake.messages.at(-1)!
    expect(reply.threadTs).toBe(card.ts)
    expect(visibleText(reply)).toContain("approval.decided")
    expect(JSON.parse(state.get(key)!.value)).toEqual({ channel: SLACK_CHANNEL, ts: card.ts, reposted: true })
    expect(state.has(`${key}:message`)).toBe(false)
  })

  it("a decision retried after the new card was posted updates that card, never posts a third", async () => {
    const { ctx, client, rootOf } = context()
    const data = { approvalId: "apr_tomb_2", agentId: "agt_1", action: "deploy.staging" }
    const key = `slack:thread:approval:${data.approvalId}`
    expect(await slack.deliver(sampleEvent("approval.requested", { data }), ctx)).toMatchObject({ outcome: "ok" })
    const first = rootOf(key)
    await replyIn(first)
    fake.deleteMessage(first)
    // the decision's reply fails once (a network failure), after the new card was posted
    let failed = false
    const flaky = {
      chat: {
        update: (a: any) => client.chat.update(a),
        postMessage: async (a: any) => {
          if (a.thread_ts !== undefined && !failed) {
            failed = true
            throw new Error("socket hang up")
          }
          return client.chat.postMessage(a)
        },
      },
    }
    const decided = sampleEvent("approval.decided", { data: { ...data, decision: "denied", decidedBy: "usr_1" } })
    expect(await slack.deliver(decided, { ...ctx, client: flaky as any })).toMatchObject({ outcome: "retry" })
    const card = byTs(rootOf(key))
    expect(card.ts).not.toBe(first)
    const before = fake.messages.length
    expect(await slack.deliver(decided, ctx)).toMatchObject({ outcome: "ok" })
    // one more message only (the decision's reply); the card was updated, keeping its note
    expect(fake.messages.length).toBe(before + 1)
    expect(rootOf(key)).toBe(card.ts)
    expect(card.updates).toHaveLength(1)
    expect(card.text).toContain("deleted in Slack")
    expect(fake.messages.at(-1)!.threadTs).toBe(card.ts)
  })

  it("keeps replying to an enforcement's thread under the placeholder: the thread is still there", async () => {
    const { state, ctx, rootOf } = context()
    const data = { enforcementId: "enf_tomb_1", agentId: "agt_1", type: "suspension" as const, reason: "r" }
    const key = `slack:thread:enforcement:${data.enforcementId}`
    expect(await slack.deliver(sampleEvent("enforcement.created", { data }), ctx)).toMatchObject({ outcome: "ok" })
    const first = rootOf(key)
    await replyIn(first)
    fake.deleteMessage(first)
    expect(await slack.deliver(sampleEvent("enforcement.appealed", { data }), ctx)).toMatchObject({ outcome: "ok" })
    const appealed = fake.messages.at(-1)!
    expect(appealed.threadTs).toBe(first)
    expect(visibleText(appealed)).not.toContain("deleted in Slack")
    expect(rootOf(key)).toBe(first)
    expect(state.get(key)!.ttlMs).toBe(Number.POSITIVE_INFINITY)
  })
})
