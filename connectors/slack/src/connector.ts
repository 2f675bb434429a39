import type { AnyWebhookEvent } from "@agentgov/connector-sdk"
import {
  BIDI_CONTROLS,
  type FormattedEvent,
  formatEvent,
  oneLine,
  SEVERITY_STYLE,
  truncate,
} from "@agentgov/connector-sdk/format"
import {
  createVendorFetch,
  type DeliveryResult,
  dead,
  defineConnector,
  ok,
  retry,
  type StateSetOptions,
} from "@agentgov/connector-sdk/runtime"
import { ErrorCode, LogLevel, WebClient } from "@slack/web-api"

/**
 * The Slack connector: each event as a Block Kit message (inside a colour bar for its severity)
 * with a plain-text fallback; follow-ups of one approval or enforcement in the first message's
 * thread; an approval's message updated once it is decided.
 */

// Slack's documented limits (docs.slack.dev, Block Kit reference and chat.postMessage).
const LIMITS = {
  headerText: 150,
  sectionText: 3000,
  fieldText: 2000,
  fields: 10,
  contextText: 3000,
  buttonText: 75,
  url: 3000,
  /** chat.postMessage truncates `text` past 40,000 characters; keep the fallback far shorter. */
  fallback: 4000,
} as const

/** Platform errors worth another try; every other `ok: false` is a refusal (invalid_auth, channel_not_found, …). */
const TRANSIENT = new Set(["internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"])

/**
 * Escapes text for Slack's mrkdwn: `&`, `<` and `>` (so `<!channel>`, `<@U…>` and links in event
 * text are shown, never acted on), breaks `@channel`, `@here` and `@everyone` with a zero-width
 * space so that no client turns them into a ping, and drops bidirectional controls.
 */
export const escapeSlack = (text: string): string =>
  text
    .replace(BIDI_CONTROLS, "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/@(channel|here|everyone)\b/gi, "@\u200b$1")

/** Plain text (header, button): Slack does not parse mentions there, but a bare @channel still reads as one. */
const plainText = (text: string, max: number) =>
  truncate(text.replace(BIDI_CONTROLS, "").replace(/@(channel|here|everyone)\b/gi, "@\u200b$1"), max)

/**
 * The `text` fallback (notifications, screen readers, clients without Block Kit): the title, then the app's own
 * line under the event if there is one (`extra`, already mrkdwn: an approval's outcome, the note that a message
 * follows up a deleted one), the summary on one line (an event's own line breaks would forge a link line), the link.
 * Four lines at most; the event's text is escaped, `extra` is the app's and kept as written (on one line).
 */
export const fallbackText = (m: FormattedEvent, extra?: string): string => {
  const style = SEVERITY_STYLE[m.severity]
  const lines = [
    escapeSlack(`${style.emoji} ${oneLine(m.title)}`),
    extra === undefined ? "" : oneLine(extra).trim(),
    escapeSlack(oneLine(m.summary).trim()),
    m.link ? escapeSlack(`${m.link.label}: ${m.link.url}`) : "",
  ]
  return truncate(lines.filter((l) => l !== "").join("\n"), LIMITS.fallback)
}

/** Block Kit blocks for one formatted event; `decided` adds the decision under an approval. */
export const renderBlocks = (m: FormattedEvent, extra?: string): Array<Record<string, unknown>> => {
  const style = SEVERITY_STYLE[m.severity]
  const blocks: Array<Record<string, unknown>> = [
    {
      type: "header",
      text: { type: "plain_text", text: plainText(`${style.emoji} ${m.title}`, LIMITS.headerText), emoji: true },
    },
  ]
  if (m.summary !== "")
    blocks.push({
      type: "section",
      text: { type: "mrkdwn", text: truncate(escapeSlack(m.summary), LIMITS.sectionText) },
    })
  if (extra !== undefined)
    blocks.push({ type: "section", text: { type: "mrkdwn", text: truncate(extra, LIMITS.sectionText) } })
  const fields = m.fields.slice(0, LIMITS.fields).map((f) => ({
    type: "mrkdwn",
    // a client event's key can be "" or "__": an empty bold reads as two asterisks
    text: truncate(
      `*${escapeSlack(f.label.replace(BIDI_CONTROLS, "").trim() === "" ? "(no name)" : f.label)}*\n${escapeSlack(f.value)}`,
      LIMITS.fieldText,
    ),
  }))
  if (fields.length > 0) blocks.push({ type: "section", fields })
  blocks.push({
    type: "context",
    elements: [
      {
        type: "mrkdwn",
        text: truncate(
          `${style.label} · \`${escapeSlack(m.eventType)}\` · ${escapeSlack(m.timestamp)}`,
          LIMITS.contextText,
        ),
      },
    ],
  })
  if (m.link && m.link.url.length <= LIMITS.url) {
    blocks.push({
      type: "actions",
      elements: [
        {
          type: "button",
          text: { type: "plain_text", text: plainText(m.link.label, LIMITS.buttonText) },
          url: m.link.url,
          action_id: "open_in_agentgov",
        },
      ],
    })
  }
  return blocks
}

/**
 * The message body: fallback text, and the blocks inside an attachment whose colour is the severity's; `extra` (the
 * app's own mrkdwn line) is in both, so that a notification or a screen reader says it too.
 */
export const renderMessage = (m: FormattedEvent, extra?: string) => ({
  text: fallbackText(m, extra),
  attachments: [
    {
      color: SEVERITY_STYLE[m.severity].colour,
      fallback: fallbackText(m, extra),
      blocks: renderBlocks(m, extra),
    },
  ],
})

interface Thread {
  readonly channel: string
  readonly ts: string
  /** An approval's card posted again because its first one could not be updated (see {@link REPOSTED}). */
  readonly reposted?: true
}

const threadKey = (subject: NonNullable<FormattedEvent["subject"]>) => `slack:thread:${subject.kind}:${subject.id}`

/**
 * How long a new thread is kept in the state: an approval's, the store's default (it is decided or expires
 * within 30 days); an enforcement's, until it is resolved (it may stay in force, and be appealed, for as long as
 * anyone likes), then the default.
 */
const threadKept = (event: AnyWebhookEvent): StateSetOptions | undefined =>
  event.type.startsWith("enforcement.") && event.type !== "enforcement.resolved"
    ? { ttlMs: Number.POSITIVE_INFINITY }
    : undefined

/** The error code of a Slack `ok: false` answer, if the failure is one. */
const platformError = (error: unknown): string | undefined =>
  (error as { code?: string }).code === ErrorCode.PlatformError
    ? (error as { data?: { error?: string } }).data?.error
    : undefined

/**
 * A reply's answers when its thread's first message was deleted in Slack. chat.postMessage documents none (Slack
 * is seen to post the reply in the channel instead, handled apart); clients report `thread_not_found`.
 */
const ROOT_GONE = new Set(["thread_not_found", "message_not_found"])

/** Under an event posted in the channel because its thread's first message was deleted. */
const FOLLOWS_DELETED = "_Follows up a message of this thread that was deleted in Slack; later updates reply here._"

/**
 * chat.update's answer when the app may no longer edit the message: documented as "Authenticated user does not have
 * permission to update this message". A first message deleted while its thread had replies is Slack's "This message
 * was deleted." placeholder, Slackbot's, its thread still there; a message another bot posted (the app reinstalled
 * as another bot) answers the same.
 */
const CANT_UPDATE = "cant_update_message"

/** Under an approval's card posted again, with its outcome, because the first could not be updated. */
const REPOSTED =
  "_Posted again with the decision: the first message of this approval was deleted in Slack or can no longer be edited; later updates reply here._"

/** What a Slack client failure means for the queue. */
export const classify = (error: unknown): DeliveryResult => {
  const e = error as {
    code?: string
    retryAfter?: number
    statusCode?: number
    data?: { error?: string }
    message?: string
  }
  switch (e.code) {
    case ErrorCode.RateLimitedError:
      return retry("ratelimited", { afterMs: (e.retryAfter ?? 1) * 1000, pauseAll: true })
    case ErrorCode.PlatformError: {
      const code = e.data?.error ?? "unknown_error"
      return TRANSIENT.has(code) ? retry(code) : dead(code)
    }
    case ErrorCode.HTTPError:
      return (e.statusCode ?? 500) >= 500 || e.statusCode === 408
        ? retry(`HTTP ${e.statusCode}`)
        : dead(`HTTP ${e.statusCode}`)
    default:
      // a 429 whose Retry-After is missing or unreadable: the client gives up on it at once, as a plain error
      if (/^Retry header did not contain a valid timeout/.test(e.message ?? ""))
        return retry("ratelimited (no usable Retry-After)", { pauseAll: true })
      // network failures, time-outs
      return retry(e.message ?? String(error))
  }
}

export const slack = defineConnector({
  name: "slack",
  description: "posts agentgov events to a Slack channel",
  defaultEvents: ["*"],
  settings: {
    token: {
      env: "SLACK_BOT_TOKEN",
      description: "the bot token (xoxb-…) with chat:write, invited to the channel",
      required: true,
      secret: true,
      check: (v) => (/^xox[bp]-/.test(v) ? undefined : "must be a Slack bot token (xoxb-…)"),
    },
    channel: {
      env: "SLACK_CHANNEL",
      description: "the channel id (C…) or name to post in",
      required: true,
    },
    apiUrl: {
      env: "SLACK_API_URL",
      description: "Slack's Web API base URL (a proxy's, or a test fake's)",
      kind: "https",
      default: "https://slack.com/api/",
    },
  },
  setup: (settings) =>
    new WebClient(settings.token, {
      slackApiUrl: settings.apiUrl.endsWith("/") ? settings.apiUrl : `${settings.apiUrl}/`,
      // The durable queue retries for as long as it takes; the client only smooths over a blip,
      // and hands a 429 back at once so that its Retry-After holds every queued message.
      retryConfig: { retries: 2, factor: 2, minTimeout: 250, maxTimeout: 2000 },
      rejectRateLimitedCalls: true,
      timeout: 10_000,
      logLevel: LogLevel.ERROR,
      // node:http rather than the global fetch: ~80 MB less resident memory over thousands of posts (vendorFetch.ts)
      fetch: createVendorFetch() as unknown as typeof fetch,
    }),
  orderingKey: (event) => {
    const subject = formatEvent(event).subject
    return subject && `${subject.kind}:${subject.id}`
  },
  deliver: async (event, { client, settings, severity, dashboardUrl, state, log }) => {
    const m = formatEvent(event, { severity, dashboardUrl })
    const key = m.subject && threadKey(m.subject)
    const stored = key === undefined ? undefined : state.get(key)
    let thread = stored === undefined ? undefined : (JSON.parse(stored) as Thread)
    const post = (body: ReturnType<typeof renderMessage>, channel: string, threadTs?: string) =>
      client.chat.postMessage({
        channel,
        ...body,
        ...(threadTs !== undefined ? { thread_ts: threadTs } : {}),
        unfurl_links: false,
        unfurl_media: false,
        link_names: false,
      })
    try {
      // the thread's first message was deleted in Slack: this event goes to the channel, saying so
      let rootGone = false
      if (thread && event.type === "approval.decided") {
        // the request's message shows the outcome; its thread carries the decision as a reply
        const requested = state.get(`${key}:message`)
        if (requested !== undefined) {
          const original = JSON.parse(requested) as FormattedEvent
          const outcome = `${SEVERITY_STYLE[m.severity].emoji} *${escapeSlack(m.title)}*`
          const card = (reposted: boolean) => renderMessage(original, reposted ? `${outcome} ${REPOSTED}` : outcome)
          try {
            await client.chat.update({ channel: thread.channel, ts: thread.ts, ...card(thread.reposted === true) })
          } catch (error) {
            const code = platformError(error)
            if (code === "message_not_found") rootGone = true
            else if (code === CANT_UPDATE) {
              // the card cannot show the outcome (deleted with replies: Slack's placeholder): a new card that does,
              // kept as the thread's first message before the decision replies under it, so a retry updates it
              const again = await post(card(true), thread.channel)
              if (typeof again.ts !== "string" || typeof again.channel !== "string") throw error
              thread = { channel: again.channel, ts: again.ts, reposted: true }
              state.set(key!, JSON.stringify(thread satisfies Thread), threadKept(event))
              log.warn("the approval's first message can no longer be updated in Slack; posted it again", {
                eventId: event.id,
              })
            } else throw error
          }
        }
      }
      let posted: Awaited<ReturnType<typeof post>> | undefined
      if (thread && !rootGone)
        try {
          posted = await post(renderMessage(m), thread.channel, thread.ts)
          // Slack documents no error for a reply to a deleted message, and posts it in the channel instead
          if (posted.message !== undefined && posted.message.thread_ts === undefined && typeof posted.ts === "string") {
            rootGone = true
            await client.chat
              .update({
                channel: posted.channel ?? thread.channel,
                ts: posted.ts,
                ...renderMessage(m, FOLLOWS_DELETED),
              })
              // the event is delivered either way: a retry would post it twice
              .catch((error) => log.warn("could not mark a follow-up of a deleted message", { error: String(error) }))
          }
        } catch (error) {
          if (!ROOT_GONE.has(platformError(error) ?? "")) throw error
          rootGone = true
        }
      if (posted === undefined)
        posted = await post(
          renderMessage(m, rootGone ? FOLLOWS_DELETED : undefined),
          thread?.channel ?? settings.channel,
        )
      if (rootGone)
        log.warn("the thread's first message was deleted in Slack; this event starts a new one", { eventId: event.id })
      if (
        key !== undefined &&
        (thread === undefined || rootGone) &&
        typeof posted.ts === "string" &&
        typeof posted.channel === "string"
      ) {
        // the first message of the thread, or the one in place of a deleted first message
        state.set(key, JSON.stringify({ channel: posted.channel, ts: posted.ts } satisfies Thread), threadKept(event))
        if (event.type === "approval.requested") state.set(`${key}:message`, JSON.stringify(m))
      } else if (key !== undefined && stored !== undefined && event.type === "enforcement.resolved")
        // the enforcement's thread was kept while it was in force; now for the default time, for a late replay
        state.set(key, stored)
      // the request's copy served its one update: kept, every approval's would stay in the store for ever
      if (key !== undefined && event.type === "approval.decided") state.delete(`${key}:message`)
      return ok()
    } catch (error) {
      return classify(error)
    }
  },
})
