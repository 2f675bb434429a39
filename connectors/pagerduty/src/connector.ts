import { type AnyWebhookEvent, parseRetryAfter } from "@agentgov/connector-sdk"
import { dropBidiControls, type FormattedEvent, formatEvent, truncate } from "@agentgov/connector-sdk/format"
import { type DeliveryResult, dead, defineConnector, ok, retry, type StateStore } from "@agentgov/connector-sdk/runtime"

/**
 * The PagerDuty connector: agentgov events as PagerDuty Events API v2 alerts. One incident per
 * enforcement and one per agent whose trust tier dropped, by a stable `dedup_key`, so a repeat
 * (an update, an appeal, a second drop) adds to the open alert rather than paging again; the
 * enforcement's resolution, or the tier's recovery, resolves it.
 */

/** PagerDuty's documented limits (developer.pagerduty.com, Events API v2 "Send an Alert Event"). */
export const EVENTS_V2_LIMITS = {
  summary: 1024,
  /** The whole event, JSON; larger is refused. */
  eventBytes: 512 * 1024,
} as const

/** What agentgov sends besides the events the operator routes: its own ceiling per detail value. */
const DETAIL_VALUE_MAX = 4096
/** Room left under {@link EVENTS_V2_LIMITS.eventBytes} for everything that is not a custom detail. */
const DETAILS_BUDGET_BYTES = EVENTS_V2_LIMITS.eventBytes - 16 * 1024

export type PagerDutySeverity = "critical" | "error" | "warning" | "info"

type Action = "trigger" | "resolve"

const TIERS = ["untrusted", "probation", "bronze", "silver", "gold", "platinum"] as const
const tierRank = (tier: unknown) => TIERS.indexOf(tier as (typeof TIERS)[number])

const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined)

/** The incident an event belongs to: one per enforcement, one per agent's tier, else one per event. */
export const dedupKey = (event: AnyWebhookEvent): string => {
  const d = (event.data ?? {}) as Record<string, unknown>
  if (event.type.startsWith("enforcement.") && str(d.enforcementId)) return `agentgov:enforcement:${d.enforcementId}`
  if (event.type.startsWith("trust.tier.") && str(d.agentId)) return `agentgov:trust-tier:${d.agentId}`
  return `agentgov:event:${event.id}`
}

/**
 * The mark of an enforcement whose incident was resolved. An enforcement has no event after its
 * resolution, so a trigger of it that comes later (a dead letter `replay`ed, a late redelivery) would
 * open a fresh incident on the same `dedup_key` that nothing resolves: it is skipped instead.
 */
const resolvedKey = (key: string) => `resolved:${key}`

/**
 * What to do with an event: trigger (or add to) its incident, resolve it, or nothing (a tier that
 * went up without an open incident, or short of the tier it had before the drop; an enforcement
 * already resolved).
 */
export const actionFor = (event: AnyWebhookEvent, state: StateStore): Action | "skip" => {
  const d = (event.data ?? {}) as Record<string, unknown>
  if (event.type === "enforcement.resolved") return "resolve"
  if (event.type.startsWith("enforcement.") && state.get(resolvedKey(dedupKey(event))) !== undefined) return "skip"
  if (event.type === "trust.tier.upgraded") {
    const before = state.get(`tier:${dedupKey(event)}`)
    if (before === undefined) return "skip"
    return tierRank(d.newTier) >= tierRank(before) ? "resolve" : "skip"
  }
  return "trigger"
}

/** Custom details from the formatted fields: each value cut, the whole within the event's limit. */
export const customDetails = (m: FormattedEvent, event: AnyWebhookEvent): Record<string, string> => {
  const details: Record<string, string> = {}
  let bytes = 0
  const add = (key: string, value: string) => {
    const v = truncate(dropBidiControls(value), DETAIL_VALUE_MAX)
    const size = Buffer.byteLength(JSON.stringify(key)) + Buffer.byteLength(JSON.stringify(v)) + 2
    if (bytes + size > DETAILS_BUDGET_BYTES) return false
    details[key] = v
    bytes += size
    return true
  }
  add("Event", m.eventType)
  add("Event id", event.id)
  if (m.summary !== "") add("Summary", m.summary)
  for (const f of m.fields) {
    const label = dropBidiControls(f.label)
    let key = label
    for (let n = 2; key in details; n++) key = `${label} (${n})`
    if (!add(key, f.value)) {
      details.Truncated = "more details in agentgov"
      break
    }
  }
  return details
}

/** The Events v2 body for one event. */
export const buildEvent = (
  event: AnyWebhookEvent,
  action: Action,
  m: FormattedEvent,
  routingKey: string,
  dashboardUrl: string | undefined,
): Record<string, unknown> => {
  const d = (event.data ?? {}) as Record<string, unknown>
  const links = m.link ? [{ href: m.link.url, text: m.link.label }] : []
  const base = {
    routing_key: routingKey,
    event_action: action,
    dedup_key: dedupKey(event),
    ...(dashboardUrl ? { client: "agentgov", client_url: dashboardUrl } : {}),
  }
  if (action === "resolve") return base
  return {
    ...base,
    payload: {
      summary: truncate(dropBidiControls(m.title), EVENTS_V2_LIMITS.summary),
      source: truncate(dropBidiControls(str(d.agentName) ?? str(d.agentId) ?? "") || "agentgov", 255),
      severity: m.severity satisfies PagerDutySeverity,
      timestamp: m.timestamp,
      component: "agentgov",
      group: event.workspaceId,
      class: m.eventType,
      custom_details: customDetails(m, event),
    },
    links,
  }
}

/** What a PagerDuty answer means for the queue. */
export const classify = (status: number, body: string, retryAfter: string | null): DeliveryResult => {
  if (status === 202 || (status >= 200 && status < 300)) return ok()
  // delay-seconds or an HTTP-date; none, or one that cannot be read, leaves the wait to the runtime's backoff
  const afterMs = retryAfter === null ? undefined : parseRetryAfter(retryAfter)
  if (status === 429)
    return retry("throttled by PagerDuty (429)", { ...(afterMs === undefined ? {} : { afterMs }), pauseAll: true })
  if (status >= 500) return retry(`HTTP ${status}`, afterMs === undefined ? {} : { afterMs })
  // 400: "invalid event" (a bad routing key, a field the API refuses); retrying changes nothing
  return dead(`HTTP ${status}: ${truncate(body.replace(/\s+/g, " "), 300)}`)
}

export const pagerduty = defineConnector({
  name: "pagerduty",
  description: "pages through PagerDuty Events API v2 on enforcements and trust-tier drops",
  defaultEvents: ["enforcement.*", "trust.tier.downgraded", "trust.tier.upgraded"],
  settings: {
    routingKey: {
      env: "PAGERDUTY_ROUTING_KEY",
      description: "the integration key of an Events API v2 integration on the service to page",
      required: true,
      secret: true,
      check: (v) => (/^[A-Za-z0-9]{32}$/.test(v) ? undefined : "must be a 32-character Events API v2 integration key"),
    },
    eventsUrl: {
      env: "PAGERDUTY_EVENTS_URL",
      description: "the Events API v2 endpoint (EU accounts: https://events.eu.pagerduty.com/v2/enqueue)",
      kind: "https",
      default: "https://events.pagerduty.com/v2/enqueue",
    },
  },
  // one incident's events in order: its trigger never overtakes its resolve
  orderingKey: (event) => dedupKey(event),
  deliver: async (event, { settings, severity, dashboardUrl, state, signal, log }) => {
    const action = actionFor(event, state)
    if (action === "skip") {
      if (event.type.startsWith("enforcement."))
        log.info("the enforcement's incident was resolved; not triggered again", { key: dedupKey(event) })
      return ok()
    }
    const key = dedupKey(event)
    const body = buildEvent(
      event,
      action,
      formatEvent(event, { severity, dashboardUrl }),
      settings.routingKey,
      dashboardUrl,
    )
    let res: Response
    try {
      res = await fetch(settings.eventsUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal,
      })
    } catch (error) {
      return retry(`PagerDuty unreachable: ${(error as Error).message}`)
    }
    const result = classify(res.status, await res.text().catch(() => ""), res.headers.get("retry-after"))
    if (result.outcome !== "ok") return result
    if (event.type === "trust.tier.downgraded" && state.get(`tier:${key}`) === undefined) {
      // the tier before the first drop: the incident resolves when the agent is back there, however long that
      // takes (kept until then: without it the upgrade is skipped and the incident never resolves)
      state.set(`tier:${key}`, String((event.data as { previousTier?: string }).previousTier ?? "untrusted"), {
        ttlMs: Number.POSITIVE_INFINITY,
      })
    }
    if (action === "resolve") state.delete(`tier:${key}`)
    if (event.type === "enforcement.resolved") state.set(resolvedKey(key), new Date().toISOString())
    return ok()
  },
})
