import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SLACK_CHANNEL, SLACK_TOKEN, type SlackFake, startSlackFake } from "./slackFake.ts"

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
    }).then((r) => r.json())

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
})
