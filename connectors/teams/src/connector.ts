import { parseRetryAfter } from "@agentgov/connector-sdk"
import {
  dropBidiControls,
  type FormattedEvent,
  formatEvent,
  oneLine,
  SEVERITY_STYLE,
  truncate,
} from "@agentgov/connector-sdk/format"
import { createVendorFetch, dead, defineConnector, ok, retry } from "@agentgov/connector-sdk/runtime"

/**
 * The Microsoft Teams connector: each event as an Adaptive Card 1.5 posted to a Teams Workflows
 * webhook ("Post to a channel when a webhook request is received"), its action an
 * `Action.OpenUrl` into the service, the whole request kept under Teams' message size limit.
 */

/** Teams refuses messages over about 28 KB; stay clear of it. */
export const MAX_PAYLOAD_BYTES = 25_000
/** A fact's value beyond this is cut: facts are meant to be short. */
const MAX_FACT = 1000
const MAX_SUMMARY = 4000
/** A title (the event's, or a fact's: a client event's key) beyond this is cut, whatever the budget. */
const MAX_TITLE = 500

/**
 * Adaptive Cards render TextBlock text as a Markdown subset, and not every host honours backslash
 * escapes: break only what could mislead a reader (a `[label](url)` link whose label hides where it
 * goes, and `**` emphasis), with a zero-width space, and leave the text otherwise as written.
 */
export const escapeMarkdown = (text: string): string =>
  dropBidiControls(text).replace(/\]\(/g, "]\u200b(").replace(/\*\*/g, "*\u200b*")

/** The card's plain fallback (notifications, hosts that cannot render it): one line, no bidirectional control. */
const fallbackOf = (m: FormattedEvent) =>
  truncate(oneLine(dropBidiControls(`${m.title}${m.summary === "" ? "" : ` · ${m.summary}`}`)), 1000)

/** The card for one event; `budget` cuts summary and facts so the request stays under the limit. */
export const renderCard = (m: FormattedEvent, budget = { summary: MAX_SUMMARY, fact: MAX_FACT }) => {
  const style = SEVERITY_STYLE[m.severity]
  const body: Array<Record<string, unknown>> = [
    {
      type: "Container",
      style: m.severity === "info" ? "accent" : m.severity === "warning" ? "warning" : "attention",
      bleed: true,
      items: [
        {
          type: "TextBlock",
          text: escapeMarkdown(truncate(`${style.emoji} ${m.title}`, MAX_TITLE)),
          weight: "Bolder",
          size: "Medium",
          wrap: true,
        },
        {
          type: "TextBlock",
          text: escapeMarkdown(`${style.label} · ${m.eventType}`),
          color: style.adaptiveColor,
          isSubtle: true,
          spacing: "None",
          wrap: true,
        },
      ],
    },
  ]
  if (m.summary !== "")
    body.push({ type: "TextBlock", text: escapeMarkdown(truncate(m.summary, budget.summary)), wrap: true })
  if (m.fields.length > 0) {
    body.push({
      type: "FactSet",
      facts: m.fields.map((f) => ({
        title: escapeMarkdown(truncate(f.label, Math.min(MAX_TITLE, budget.fact))),
        value: escapeMarkdown(truncate(f.value, budget.fact)),
      })),
    })
  }
  body.push({ type: "TextBlock", text: escapeMarkdown(m.timestamp), isSubtle: true, size: "Small", wrap: true })
  return {
    $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
    type: "AdaptiveCard",
    version: "1.5",
    fallbackText: fallbackOf(m),
    body,
    ...(m.link ? { actions: [{ type: "Action.OpenUrl", title: truncate(m.link.label, 100), url: m.link.url }] } : {}),
  }
}

/** The Workflows webhook's request: a message with the card as its one attachment, under the size limit. */
export const renderPayload = (m: FormattedEvent): string => {
  const wrap = (card: unknown) =>
    JSON.stringify({
      type: "message",
      attachments: [{ contentType: "application/vnd.microsoft.card.adaptive", contentUrl: null, content: card }],
    })
  let budget = { summary: MAX_SUMMARY, fact: MAX_FACT }
  let payload = wrap(renderCard(m, budget))
  while (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES && budget.fact > 20) {
    budget = { summary: Math.floor(budget.summary / 2), fact: Math.floor(budget.fact / 2) }
    payload = wrap(renderCard(m, budget))
  }
  return payload
}

export const teams = defineConnector({
  name: "teams",
  description: "posts agentgov events to Microsoft Teams as Adaptive Cards",
  defaultEvents: ["*"],
  settings: {
    webhookUrl: {
      env: "TEAMS_WEBHOOK_URL",
      description: "the Workflows webhook URL ('Post to a channel when a webhook request is received')",
      kind: "https",
      required: true,
      secret: true,
    },
  },
  // node:http rather than the global fetch: ~80 MB less resident memory over thousands of posts (vendorFetch.ts)
  setup: () => createVendorFetch(),
  deliver: async (event, { client, settings, severity, dashboardUrl, signal }) => {
    const m = formatEvent(event, { severity, dashboardUrl })
    const res = await client(settings.webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: renderPayload(m),
      signal,
    })
    if (res.ok) return ok()
    if (res.status === 429) {
      // delay-seconds or an HTTP-date; none (or unreadable): the runtime's backoff, never an instant retry
      const header = res.headers.get("retry-after")
      return retry("HTTP 429", {
        afterMs: header === null ? undefined : parseRetryAfter(header),
        pauseAll: true,
      })
    }
    if (res.status >= 500 || res.status === 408) return retry(`HTTP ${res.status}`)
    return dead(`HTTP ${res.status}`)
  },
})
