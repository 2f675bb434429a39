import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SLACK_CHANNEL, SLACK_TOKEN, type SlackFake, startSlackFake, TOMBSTONE_TEXT } from "./slackFake.ts"

describe("the Slack fake", () => {
  let fake: SlackFake
  beforeAll(async () => {
    fake = await startSlackFake()
  })
  afterAll(() => fake.close())
  const post = (body: Record<string, unknown>) =>
    fetch(`${fake.url}chat.postMessage`, {
      method: "POST",
      headers: { authorization: `Bearer ${SLACK_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ channel: SLACK_CHANNEL, ...body }),
    }).then((r) => r.json() as Promise<any>)

  it("notes a mention where Slack parses one (text, mrkdwn), not in plain_text, which Slack shows as is", async () => {
    const header = { type: "header", text: { type: "plain_text", text: "agent <!here> registered" } }
    const button = { type: "actions", elements: [{ type: "button", text: { type: "plain_text", text: "<!channel>" } }] }
    expect(await post({ text: "fallback", attachments: [{ blocks: [header, button] }] })).toMatchObject({ ok: true })
    expect(fake.pings).toEqual([])
    const section = { type: "section", text: { type: "mrkdwn", text: "ship <!everyone>" } }
    const context = { type: "context", elements: [{ type: "mrkdwn", text: "<@U0123ABC>" }] }
    expect(await post({ text: "<!here>", attachments: [{ blocks: [section, context] }] })).toMatchObject({ ok: true })
    expect(fake.pings.sort()).toEqual(["<!everyone>", "<!here>", "<@U0123ABC>"])
  })

  it("answers for a deleted message as Slack does: message_not_found to chat.update and chat.delete", async () => {
    const call = (method: string, body: Record<string, unknown>) =>
      fetch(`${fake.url}${method}`, {
        method: "POST",
        headers: { authorization: `Bearer ${SLACK_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ channel: SLACK_CHANNEL, ...body }),
      }).then((r) => r.json())
    const threaded = await post({ text: "threaded" })
    const reply = await post({ text: "reply", thread_ts: threaded.ts })
    expect(reply.message.thread_ts).toBe(threaded.ts)
    // a message without replies is gone once deleted (one with replies: the next test)
    const root = await post({ text: "root" })
    expect(await call("chat.delete", { ts: root.ts })).toMatchObject({ ok: true })
    expect(await call("chat.update", { ts: root.ts, text: "x" })).toEqual({ ok: false, error: "message_not_found" })
    expect(await call("chat.delete", { ts: root.ts })).toEqual({ ok: false, error: "message_not_found" })
    // no documented error for a reply to it: posted in the channel, its answer's message without thread_ts
    const orphan = await post({ text: "late reply", thread_ts: root.ts })
    expect(orphan).toMatchObject({ ok: true })
    expect(orphan.message.thread_ts).toBeUndefined()
    expect(fake.messages.find((m) => m.ts === orphan.ts)!.threadTs).toBeUndefined()
    // or, as clients also report, thread_not_found
    const other = await post({ text: "root 2" })
    fake.deleteMessage(other.ts, "thread_not_found")
    expect(await post({ text: "reply", thread_ts: other.ts })).toEqual({ ok: false, error: "thread_not_found" })
  })

  it("keeps a deleted message's thread when it had replies: Slack's placeholder, Slackbot's, its thread open", async () => {
    const call = (method: string, body: Record<string, unknown>) =>
      fetch(`${fake.url}${method}`, {
        method: "POST",
        headers: { authorization: `Bearer ${SLACK_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ channel: SLACK_CHANNEL, ...body }),
      }).then((r) => r.json())
    const root = await post({ text: "root" })
    await post({ text: "reply", thread_ts: root.ts })
    expect(await call("chat.delete", { ts: root.ts })).toMatchObject({ ok: true })
    expect(fake.messages.find((m) => m.ts === root.ts)).toMatchObject({
      deleted: "tombstone",
      user: "USLACKBOT",
      text: TOMBSTONE_TEXT,
      attachments: [],
    })
    // documented: "Authenticated user does not have permission to update/delete this message"
    expect(await call("chat.update", { ts: root.ts, text: "x" })).toEqual({ ok: false, error: "cant_update_message" })
    expect(await call("chat.delete", { ts: root.ts })).toEqual({ ok: false, error: "cant_delete_message" })
    // replies still go in its thread
    const late = await post({ text: "late reply", thread_ts: root.ts })
    expect(late.message.thread_ts).toBe(root.ts)
    // deleted as someone in the channel would, whatever is asked of a reply to a message without any
    const other = await post({ text: "root 2" })
    await post({ text: "reply", thread_ts: other.ts })
    fake.deleteMessage(other.ts, "thread_not_found")
    expect((await post({ text: "reply 2", thread_ts: other.ts })).message.thread_ts).toBe(other.ts)
  })
})
