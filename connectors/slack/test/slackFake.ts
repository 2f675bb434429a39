import { type FakeAnswer, type FakeRequest, startScriptedFake, type VendorFake } from "@agentgov/connector-testing"

/**
 * A fake of Slack's Web API (chat.postMessage, chat.update, chat.delete) on loopback, holding to what Slack
 * documents: errors are HTTP 200 with `{ok: false, error}` (`not_authed`, `invalid_auth`,
 * `channel_not_found`, `message_not_found`, `msg_too_long`, `invalid_blocks`), rate limits are
 * HTTP 429 with `Retry-After` in seconds, and Block Kit's limits are checked (50 blocks, header
 * 150, section 3,000, 10 fields of 2,000, button 75, url 3,000). It also notes every place a real
 * client would have pinged (`<!channel>`, `<!here>`, `<!everyone>`, `<@U…>`).
 *
 * A deleted message (chat.delete, or `deleteMessage` as someone in the channel would): chat.update and
 * chat.delete of its ts answer `message_not_found` ("No message exists with the requested timestamp", their
 * documented error). chat.postMessage documents no error for a `thread_ts` whose message is gone; Slack is seen
 * to post such a reply at the channel's top level, its answer's `message` without `thread_ts` ("unthread", the
 * default), and clients report `thread_not_found` too ("thread_not_found"): `deleteMessage` takes either.
 *
 * A deleted message that has replies is not gone: Slack keeps the thread and shows "This message was deleted." in
 * its place, a message of subtype `tombstone` owned by Slackbot (`USLACKBOT`), same `ts` and `thread_ts`, seen in
 * `conversations.replies` and in the `message_changed`/`message_deleted` events. Replies to it are threaded as
 * before (chat.postMessage with its `thread_ts` works); chat.update of it answers `cant_update_message` and
 * chat.delete `cant_delete_message` (documented: "Authenticated user does not have permission to update/delete
 * this message": it is Slackbot's now).
 */

export const SLACK_TOKEN = "xoxb-1-test-token"
export const SLACK_CHANNEL = "C0AGENTGOV"

export interface SlackMessage {
  readonly channel: string
  readonly ts: string
  readonly threadTs: string | undefined
  text: string
  attachments: Array<any>
  /** Deleted in Slack: how a later reply to it is answered, or Slack's placeholder when it had replies (see above). */
  deleted?: "unthread" | "thread_not_found" | "tombstone"
  /** Who posted it: the bot, or Slackbot once it is a `tombstone`. */
  user: string
  readonly updates: Array<{ text: string; attachments: Array<any> }>
}

export interface SlackFake extends VendorFake {
  readonly messages: Array<SlackMessage>
  /** Strings that would have notified people. */
  readonly pings: Array<string>
  readonly requests: ReadonlyArray<FakeRequest>
  /**
   * Deletes a message as someone in the channel would; `replies` says how a later reply to it is answered. A message
   * with replies becomes Slack's "This message was deleted." placeholder instead, whatever `replies` says.
   */
  deleteMessage(ts: string, replies?: "unthread" | "thread_not_found"): void
}

const ok = (body: Record<string, unknown>): FakeAnswer => ({ status: 200, body: { ok: true, ...body } })
const error = (code: string): FakeAnswer => ({ status: 200, body: { ok: false, error: code } })

const parse = (r: FakeRequest): Record<string, any> => {
  const type = String(r.headers["content-type"] ?? "")
  if (type.includes("application/json")) return JSON.parse(r.raw)
  const out: Record<string, any> = {}
  for (const [k, v] of new URLSearchParams(r.raw)) {
    out[k] = (k === "blocks" || k === "attachments") && v.startsWith("[") ? JSON.parse(v) : v
  }
  return out
}

/** Every string a reader sees in a message: text, headers, sections, fields, context, buttons. */
export const visibleText = (m: { text: string; attachments: Array<any> }): string => {
  const out: Array<string> = [m.text]
  const walk = (block: any) => {
    if (block.text?.text) out.push(block.text.text)
    for (const f of block.fields ?? []) out.push(f.text)
    for (const e of block.elements ?? []) {
      if (typeof e.text === "string") out.push(e.text)
      else if (e.text?.text) out.push(e.text.text)
      if (e.url) out.push(e.url)
    }
  }
  for (const a of m.attachments) for (const b of a.blocks ?? []) walk(b)
  return out.join("\n")
}

/** The strings Slack parses for mentions and links: the message's `text` and every mrkdwn text object. */
export const mrkdwnText = (m: { text: string; attachments: Array<any> }): string => {
  const out: Array<string> = [m.text]
  const take = (t: any) => {
    if (t?.type === "mrkdwn" && typeof t.text === "string") out.push(t.text)
  }
  for (const a of m.attachments)
    for (const b of a.blocks ?? []) {
      take(b.text)
      for (const f of b.fields ?? []) take(f)
      for (const e of b.elements ?? []) take(e.type === "mrkdwn" ? e : e.text)
    }
  return out.join("\n")
}

const blocksProblem = (attachments: Array<any>): string | undefined => {
  for (const a of attachments) {
    const blocks = a.blocks ?? []
    if (blocks.length > 50) return "invalid_attachments"
    for (const b of blocks) {
      if (b.type === "header" && (b.text?.type !== "plain_text" || b.text.text.length > 150))
        return "invalid_attachments"
      if (b.type === "section") {
        if (b.text && (b.text.text.length === 0 || b.text.text.length > 3000)) return "invalid_attachments"
        if ((b.fields ?? []).length > 10 || (b.fields ?? []).some((f: any) => f.text.length > 2000))
          return "invalid_attachments"
      }
      if (b.type === "context" && (b.elements ?? []).length > 10) return "invalid_attachments"
      if (b.type === "actions")
        for (const e of b.elements ?? [])
          if (e.text.text.length > 75 || (e.url ?? "").length > 3000) return "invalid_attachments"
    }
  }
  return undefined
}

/** The bot's user id in the fake's workspace. */
export const SLACK_BOT_USER = "U0AGENTBOT"
/** Slack's placeholder for a deleted message whose thread had replies. */
export const TOMBSTONE_TEXT = "This message was deleted."

const PING = /<!(channel|here|everyone)(\|[^>]*)?>|<@[UW][A-Z0-9]+>|<!subteam\^/g

export const startSlackFake = async (): Promise<SlackFake> => {
  const messages: Array<SlackMessage> = []
  const pings: Array<string> = []
  let seq = 0
  /** Deletes `m`: Slack's placeholder, Slackbot's, when replies hang under it; gone otherwise. */
  const remove = (m: SlackMessage, replies: "unthread" | "thread_not_found") => {
    const hasReplies = messages.some((r) => r !== m && r.threadTs === m.ts && r.deleted === undefined)
    if (!hasReplies) {
      m.deleted = replies
      return
    }
    m.deleted = "tombstone"
    m.user = "USLACKBOT"
    m.text = TOMBSTONE_TEXT
    m.attachments = []
  }
  const answer = (r: FakeRequest): FakeAnswer => {
    const auth = r.headers.authorization
    if (auth === undefined) return error("not_authed")
    if (auth !== `Bearer ${SLACK_TOKEN}`) return error("invalid_auth")
    const body = parse(r)
    const method = r.url.replace(/^\/api\//, "").split("?")[0]
    const text = String(body.text ?? "")
    const attachments = (body.attachments ?? []) as Array<any>
    if (text.length > 40_000) return error("msg_too_long")
    const problem = blocksProblem(attachments)
    if (problem) return error(problem)
    const noteMentions = () => {
      // Slack parses mentions in `text` and in mrkdwn objects only: a plain_text one (a header, a button) is shown as is
      const all = mrkdwnText({ text, attachments })
      for (const m of all.matchAll(PING)) pings.push(m[0])
      if (body.link_names === true || body.link_names === "true" || body.link_names === "1")
        for (const m of all.matchAll(/@(channel|here|everyone)\b/g)) pings.push(m[0])
    }
    if (method === "chat.postMessage") {
      if (body.channel !== SLACK_CHANNEL) return error("channel_not_found")
      let threadTs: string | undefined = body.thread_ts
      if (threadTs !== undefined) {
        const parent = messages.find((m) => m.ts === threadTs)
        if (parent === undefined || parent.deleted === "thread_not_found") return error("thread_not_found")
        if (parent.deleted === "unthread") threadTs = undefined
      }
      noteMentions()
      const ts = `1764000000.${String(++seq).padStart(6, "0")}`
      messages.push({ channel: body.channel, ts, threadTs, text, attachments, user: SLACK_BOT_USER, updates: [] })
      return ok({ channel: body.channel, ts, message: { text, ts, ...(threadTs ? { thread_ts: threadTs } : {}) } })
    }
    const found = () =>
      messages.find((x) => x.ts === body.ts && x.channel === body.channel && (!x.deleted || x.deleted === "tombstone"))
    if (method === "chat.delete") {
      const m = found()
      if (!m) return error("message_not_found")
      if (m.user !== SLACK_BOT_USER) return error("cant_delete_message")
      remove(m, "unthread")
      return ok({ channel: m.channel, ts: m.ts })
    }
    if (method === "chat.update") {
      const m = found()
      if (!m) return error("message_not_found")
      if (m.user !== SLACK_BOT_USER) return error("cant_update_message")
      noteMentions()
      m.updates.push({ text, attachments })
      m.text = text
      m.attachments = attachments
      return ok({ channel: m.channel, ts: m.ts, text })
    }
    return error("unknown_method")
  }
  const { http, attempts, failNext } = await startScriptedFake(answer, {
    rateLimit: (seconds) => ({
      status: 429,
      headers: { "retry-after": String(seconds) },
      body: { ok: false, error: "ratelimited" },
    }),
    refuse: () => error("invalid_auth"),
  })
  return {
    url: `${http.url}/api/`,
    messages,
    pings,
    requests: http.requests,
    deleteMessage: (ts, replies = "unthread") => {
      const m = messages.find((x) => x.ts === ts)
      if (m === undefined) throw new Error(`no message ${ts}`)
      remove(m, replies)
    },
    accepted: () => messages.map((m) => visibleText(m)),
    attempts,
    failNext,
    close: http.close,
  }
}
