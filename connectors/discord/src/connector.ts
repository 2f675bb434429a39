import {
  dropBidiControls,
  type FormattedEvent,
  formatEvent,
  SEVERITY_STYLE,
  truncate,
} from "@agentgov/connector-sdk/format"
import {
  createVendorFetch,
  type DeliveryResult,
  dead,
  defineConnector,
  type Logger,
  ok,
  retry,
} from "@agentgov/connector-sdk/runtime"
import { DiscordAPIError, HTTPError, RateLimitError, REST, type RESTOptions } from "@discordjs/rest"

/**
 * The Discord connector: each event as an embed posted through a channel webhook, with
 * `allowed_mentions: {parse: []}` so that nothing in an event can ping anyone, every field cut to
 * Discord's limits, and a deleted webhook (404) dead-lettered and reported loudly.
 */

/** Discord's documented embed limits (discord.com/developers/docs/resources/message#embed-object-embed-limits). */
export const EMBED_LIMITS = {
  title: 256,
  description: 4096,
  fields: 25,
  fieldName: 256,
  fieldValue: 1024,
  footer: 2048,
  /** title + description + field names and values + footer + author, across every embed of a message */
  total: 6000,
  embedsPerMessage: 10,
} as const

/** Breaks `@everyone`, `@here` and user/role mention syntax; `allowed_mentions` already stops the ping. */
export const defuseMentions = (text: string): string =>
  text.replace(/@(everyone|here)\b/gi, "@\u200b$1").replace(/<(@[!&]?|#)(\d+)>/g, "<\u200b$1$2>")

/**
 * Breaks masked links: Discord renders `[label](url)` in embed descriptions and field values as a link
 * whose label hides where it goes, so `](` gets a zero-width space (as in the Teams app) and the text
 * reads as written, the URL in plain sight.
 */
export const breakMaskedLinks = (text: string): string => text.replace(/\]\(/g, "]\u200b(")

/** Event text made inert (no ping, no masked link, no reversed text), then cut to `max`. */
const clip = (text: string, max: number) => truncate(breakMaskedLinks(defuseMentions(dropBidiControls(text))), max)

/** One embed for one formatted event, within every per-field limit and the 6,000-character total. */
export const renderEmbed = (m: FormattedEvent): Record<string, unknown> => {
  const style = SEVERITY_STYLE[m.severity]
  const title = clip(`${style.emoji} ${m.title}`, EMBED_LIMITS.title)
  const footer = clip(`${style.label} · ${m.eventType}`, EMBED_LIMITS.footer)
  let budget = EMBED_LIMITS.total - title.length - footer.length
  const description = clip(m.summary, Math.min(EMBED_LIMITS.description, Math.max(0, budget - 200)))
  budget -= description.length
  const fields: Array<{ name: string; value: string; inline: boolean }> = []
  for (const f of m.fields.slice(0, EMBED_LIMITS.fields)) {
    // Discord refuses a field without a name (50035): a client event's key can be "" or "__"
    const name = clip(f.label.trim() === "" ? "(no name)" : f.label, EMBED_LIMITS.fieldName)
    const value = clip(f.value, Math.min(EMBED_LIMITS.fieldValue, budget - name.length))
    if (value.length === 0 || budget - name.length - value.length < 0) break
    budget -= name.length + value.length
    fields.push({ name, value, inline: f.short })
  }
  const color = Number.parseInt(style.colour.slice(1), 16)
  return {
    title,
    ...(description === "" ? {} : { description }),
    color,
    ...(m.link ? { url: m.link.url } : {}),
    ...(fields.length === 0 ? {} : { fields }),
    footer: { text: footer },
    timestamp: m.timestamp,
  }
}

/** The characters of an embed that count towards Discord's 6,000 per message. */
export const embedSize = (embed: Record<string, any>): number =>
  (embed.title ?? "").length +
  (embed.description ?? "").length +
  (embed.footer?.text ?? "").length +
  (embed.author?.name ?? "").length +
  ((embed.fields ?? []) as Array<{ name: string; value: string }>).reduce(
    (n, f) => n + f.name.length + f.value.length,
    0,
  )

/** Groups embeds into messages of at most 10 embeds and 6,000 characters, keeping their order. */
export const packMessages = <A>(items: ReadonlyArray<{ readonly embed: Record<string, any>; readonly item: A }>) => {
  const messages: Array<Array<{ readonly embed: Record<string, any>; readonly item: A }>> = []
  let current: (typeof messages)[number] = []
  let size = 0
  for (const entry of items) {
    const n = embedSize(entry.embed)
    if (current.length > 0 && (current.length === EMBED_LIMITS.embedsPerMessage || size + n > EMBED_LIMITS.total)) {
      messages.push(current)
      current = []
      size = 0
    }
    current.push(entry)
    size += n
  }
  if (current.length > 0) messages.push(current)
  return messages
}

/** The webhook's id and token, and the thread it posts in, if any. */
export interface WebhookTarget {
  readonly id: string
  readonly token: string
  /** Discord's `thread_id` query parameter of Execute Webhook: a thread (or forum post) of the channel. */
  readonly threadId: string | undefined
}

/** A Discord id: a 64-bit unsigned integer in decimal (discord.com/developers/docs/reference#snowflakes). */
const isSnowflake = (text: string) => /^[1-9]\d{0,19}$/.test(text) && BigInt(text) < 2n ** 64n

/**
 * The webhook's id, token and thread from its URL (`…/api/webhooks/<id>/<token>`, optionally
 * `?thread_id=<snowflake>`, as Discord documents); a string is the problem (it never echoes the URL,
 * which holds the token).
 */
export const parseWebhookUrl = (url: string): WebhookTarget | string => {
  const parsed = new URL(url)
  const match = /\/webhooks\/(\d+)\/([A-Za-z0-9_.-]+)\/?$/.exec(parsed.pathname)
  if (!match) return "must be a Discord webhook URL ending /webhooks/<id>/<token>"
  // not named back: the URL is a secret setting, and a stray name may be part of a token pasted in
  if ([...parsed.searchParams.keys()].some((k) => k !== "thread_id"))
    return "takes no query parameter but thread_id (Discord's, to post in a thread)"
  const threads = parsed.searchParams.getAll("thread_id")
  if (threads.length > 1) return "names thread_id more than once"
  const threadId = threads[0]
  if (threadId !== undefined && !isSnowflake(threadId)) return "thread_id must be a thread's id (a Discord snowflake)"
  return { id: match[1]!, token: match[2]!, threadId }
}

/** What a Discord failure means for the queue. */
export const classify = (error: unknown): DeliveryResult => {
  if (error instanceof RateLimitError) return retry("rate limited", { afterMs: error.retryAfter, pauseAll: true })
  if (error instanceof DiscordAPIError) {
    if (error.status === 404) return dead(`webhook not found (404, code ${error.code}): replace DISCORD_WEBHOOK_URL`)
    if (error.status === 429) return retry("rate limited", { pauseAll: true })
    if (error.status >= 500) return retry(`HTTP ${error.status}`)
    return dead(`HTTP ${error.status}, code ${error.code}: ${error.message}`)
  }
  if (error instanceof HTTPError)
    return error.status >= 500 ? retry(`HTTP ${error.status}`) : dead(`HTTP ${error.status}`)
  return retry((error as Error).message ?? String(error))
}

interface Client {
  readonly rest: REST
  readonly webhook: WebhookTarget
}

/** One Execute Webhook call with `embeds` (at most 10, within 6,000 characters); a result per embed. */
const post = async (
  client: Client,
  embeds: ReadonlyArray<Record<string, unknown>>,
  log: Logger,
  signal: AbortSignal,
): Promise<Array<DeliveryResult>> => {
  try {
    await client.rest.post(`/webhooks/${client.webhook.id}/${client.webhook.token}`, {
      auth: false,
      // the thread named in DISCORD_WEBHOOK_URL, on every post
      query: new URLSearchParams({
        wait: "true",
        ...(client.webhook.threadId === undefined ? {} : { thread_id: client.webhook.threadId }),
      }),
      body: { embeds, allowed_mentions: { parse: [] } },
      signal,
    })
    return embeds.map(() => ok())
  } catch (error) {
    if (error instanceof DiscordAPIError && error.status === 404) {
      log.error(
        "the Discord webhook no longer exists: every event will be dead-lettered until DISCORD_WEBHOOK_URL is replaced, then `replay --all`",
        { status: 404, code: error.code },
      )
    }
    const result = classify(error)
    return embeds.map(() => result)
  }
}

export const discord = defineConnector({
  name: "discord",
  description: "posts agentgov events to a Discord channel webhook",
  defaultEvents: ["*"],
  settings: {
    webhookUrl: {
      env: "DISCORD_WEBHOOK_URL",
      description: "the channel webhook's URL (…/api/webhooks/<id>/<token>, ?thread_id=<id> to post in a thread)",
      kind: "url",
      required: true,
      secret: true,
      check: (v) => {
        const target = parseWebhookUrl(v)
        return typeof target === "string" ? target : undefined
      },
    },
    apiUrl: {
      env: "DISCORD_API_URL",
      description: "Discord's API base URL (a proxy's, or a test fake's)",
      kind: "https",
      default: "https://discord.com/api",
    },
  },
  setup: (settings): Client => {
    const rest = new REST({
      version: "10",
      api: settings.apiUrl.replace(/\/+$/, ""),
      // The durable queue does the waiting: a 429 comes back at once with its retry_after.
      rejectOnRateLimit: () => true,
      retries: 1,
      timeout: 10_000,
      // node:http rather than undici (the client's default): less resident memory over thousands of posts (vendorFetch.ts)
      makeRequest: createVendorFetch() as unknown as RESTOptions["makeRequest"],
    })
    return { rest, webhook: parseWebhookUrl(settings.webhookUrl) as WebhookTarget }
  },
  deliver: async (event, { client, severity, dashboardUrl, log, signal }) => {
    const [result] = await post(client, [renderEmbed(formatEvent(event, { severity, dashboardUrl }))], log, signal)
    return result!
  },
  // Discord allows 30 messages a minute per webhook: under load, up to 10 events share one message.
  batch: {
    max: EMBED_LIMITS.embedsPerMessage,
    deliver: async (events, { client, severities, dashboardUrl, log, signal }) => {
      const entries = events.map((event, i) => ({
        item: i,
        embed: renderEmbed(formatEvent(event, { severity: severities[i]!, dashboardUrl })),
      }))
      const results: Array<DeliveryResult> = []
      let failed: DeliveryResult | undefined
      for (const message of packMessages(entries)) {
        const answered = failed
          ? message.map(() =>
              failed!.outcome === "retry"
                ? failed!
                : retry("not sent: an earlier message of the batch failed", { afterMs: 0 }),
            )
          : await post(
              client,
              message.map((m) => m.embed),
              log,
              signal,
            )
        if (answered[0]!.outcome !== "ok") failed ??= answered[0]
        for (const [i, m] of message.entries()) results[m.item] = answered[i]!
      }
      return results
    },
  },
})
