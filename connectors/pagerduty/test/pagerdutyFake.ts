import { type FakeAnswer, type FakeRequest, startScriptedFake, type VendorFake } from "@agentgov/connector-testing"

/**
 * A fake of PagerDuty's Events API v2 (`POST /v2/enqueue`) on loopback, holding to what PagerDuty
 * documents: `202 {status: "success", message: "Event processed", dedup_key}`; `400 {status:
 * "invalid event", errors}` for a missing or unknown routing key, an unknown `event_action`, a
 * trigger without `summary`, `source` or a known `severity`, a summary over 1,024 characters, or
 * an event over 512 KB; 429 when throttled. It keeps alerts by `dedup_key`: a trigger on an open
 * alert adds to it, a resolve closes it.
 */

export const ROUTING_KEY = "R0123456789abcdef0123456789ABCDE"

export interface Alert {
  readonly dedupKey: string
  status: "triggered" | "resolved"
  /** The accepted events of this alert, oldest first. */
  readonly events: Array<any>
}

export interface PagerDutyFake extends VendorFake {
  /** Alerts by dedup key, in the order they were opened. */
  readonly alerts: Map<string, Alert>
  /** Every accepted event, oldest first. */
  readonly events: Array<any>
  readonly requests: ReadonlyArray<FakeRequest>
  /** The next `n` requests get `status` (a 5xx outage). */
  readonly failWith: (status: number, n?: number) => void
}

const invalid = (...errors: Array<string>): FakeAnswer => ({
  status: 400,
  body: { status: "invalid event", message: "Event object is invalid", errors },
})

/** The documented reasons PagerDuty refuses an event, or undefined. */
export const problemsOf = (raw: string): Array<string> => {
  if (Buffer.byteLength(raw) > 512 * 1024) return ["Event must be no larger than 512 KB"]
  let body: any
  try {
    body = JSON.parse(raw)
  } catch {
    return ["Malformed JSON"]
  }
  const problems: Array<string> = []
  if (typeof body.routing_key !== "string" || body.routing_key === "")
    problems.push("'routing_key' is missing or blank")
  else if (body.routing_key !== ROUTING_KEY) problems.push("Invalid routing key")
  if (!["trigger", "acknowledge", "resolve"].includes(body.event_action)) problems.push("'event_action' is invalid")
  if (body.event_action !== "trigger" && (typeof body.dedup_key !== "string" || body.dedup_key === ""))
    problems.push("'dedup_key' is required for acknowledge and resolve")
  if (typeof body.dedup_key === "string" && body.dedup_key.length > 255) problems.push("'dedup_key' is too long")
  if (body.event_action === "trigger") {
    const p = body.payload ?? {}
    if (typeof p.summary !== "string" || p.summary === "") problems.push("'payload.summary' is missing or blank")
    else if (p.summary.length > 1024) problems.push("'payload.summary' must be no longer than 1024 characters")
    if (typeof p.source !== "string" || p.source === "") problems.push("'payload.source' is missing or blank")
    if (!["critical", "error", "warning", "info"].includes(p.severity)) problems.push("'payload.severity' is invalid")
    for (const l of body.links ?? []) if (typeof l.href !== "string") problems.push("'links.href' is invalid")
  }
  return problems
}

/** What a responder reads of an event: summary, class, details and links. */
const visible = (e: any): string =>
  e.event_action === "trigger"
    ? [
        e.payload.summary,
        e.payload.class ?? "",
        ...Object.entries(e.payload.custom_details ?? {}).map(([k, v]) => `${k}: ${v}`),
        ...(e.links ?? []).map((l: any) => `${l.text} ${l.href}`),
      ].join("\n")
    : `${e.event_action} ${e.dedup_key}`

export const startPagerDutyFake = async (): Promise<PagerDutyFake> => {
  const alerts = new Map<string, Alert>()
  const events: Array<any> = []
  let outage: { status: number; n: number } | undefined
  let seq = 0
  const answer = (r: FakeRequest): FakeAnswer => {
    if (r.method !== "POST" || r.url !== "/v2/enqueue") return { status: 404, body: { message: "Not Found" } }
    if (outage && outage.n > 0) {
      outage.n--
      return { status: outage.status, body: { message: "Internal Server Error" } }
    }
    const problems = problemsOf(r.raw)
    if (problems.length > 0) return invalid(...problems)
    const body = JSON.parse(r.raw)
    const key: string = body.dedup_key ?? `pd-${++seq}`
    events.push({ ...body, dedup_key: key })
    const alert = alerts.get(key)
    if (body.event_action === "trigger") {
      if (alert && alert.status === "triggered") alert.events.push(body)
      else alerts.set(key, { dedupKey: key, status: "triggered", events: [body] })
    } else if (alert && body.event_action === "resolve") {
      alert.status = "resolved"
      alert.events.push(body)
    }
    return { status: 202, body: { status: "success", message: "Event processed", dedup_key: key } }
  }
  const { http, attempts, failNext } = await startScriptedFake(answer, {
    // PagerDuty's 429 carries no Retry-After; the tests pass one to check it is honoured when present
    rateLimit: (seconds) => ({
      status: 429,
      headers: { "retry-after": String(seconds) },
      body: { status: "throttle event", message: "Requests for this service are arriving too quickly" },
    }),
    refuse: () => invalid("'payload.severity' is invalid"),
  })
  return {
    url: `${http.url}/v2/enqueue`,
    alerts,
    events,
    requests: http.requests,
    failWith: (status, n = 1) => {
      outage = { status, n }
    },
    accepted: () => events.map(visible),
    attempts,
    failNext,
    close: http.close,
  }
}
