import { type AnyWebhookEvent, canonicalEventName, type SystemEventDataMap, type SystemEventName } from "../events.ts"
import { defaultSeverity, type Severity } from "../severity.ts"

/**
 * One event as a person reads it, before any vendor's markup: apps render it as Block Kit, an
 * embed, an Adaptive Card, an e-mail or an issue. Every value is plain text (never JSON); apps
 * escape it for their markup and cut it to their limits.
 *
 * @example
 * ```ts
 * import { formatEvent } from "@agentgov/connector-sdk/format"
 *
 * const m = formatEvent(event, { dashboardUrl: "https://agentgov.example.com" })
 * console.log(`${m.title}\n${m.summary}\n${m.fields.map((f) => `${f.label}: ${f.value}`).join("\n")}`)
 * ```
 */
export interface FormattedEvent {
  readonly eventId: string
  readonly eventType: string
  /** One line: what happened, to whom. */
  readonly title: string
  /** A sentence or two; empty when the title says it all. */
  readonly summary: string
  readonly severity: Severity
  /** Label/value pairs, most useful first. */
  readonly fields: ReadonlyArray<FormattedField>
  /** Where to look in the dashboard; absent without a dashboard URL. */
  readonly link: { readonly label: string; readonly url: string } | undefined
  /** What the event is about, for threading: follow-ups of one approval or enforcement share it. */
  readonly subject: { readonly kind: "approval" | "enforcement"; readonly id: string } | undefined
  /** The event's own time, ISO 8601. */
  readonly timestamp: string
}

/** One label/value pair of a {@link FormattedEvent}. */
export interface FormattedField {
  readonly label: string
  readonly value: string
  /** Short enough to sit beside others (a score, a tier), as opposed to a reason. */
  readonly short: boolean
}

/**
 * Options of {@link formatEvent}.
 *
 * @example
 * ```ts
 * formatEvent(event, { severity: ctx.severity, dashboardUrl: ctx.dashboardUrl })
 * ```
 */
export interface FormatOptions {
  /** The severity after the operator's map; default {@link defaultSeverity}. */
  readonly severity?: Severity
  /** The dashboard's base URL, for the link. */
  readonly dashboardUrl?: string | undefined
}

// -----------------------------------------------------------------------------------------------
// Plain-text helpers: a missing or odd value reads as nothing rather than as JSON

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** A scalar as text; arrays of scalars joined; anything else undefined (never JSON). */
export const plain = (v: unknown): string | undefined => {
  if (typeof v === "string") return v.trim() === "" ? undefined : v
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : undefined
  if (typeof v === "boolean") return v ? "yes" : "no"
  if (Array.isArray(v)) {
    const parts = v.map(plain).filter((p): p is string => p !== undefined)
    return parts.length === 0 ? undefined : parts.join(", ")
  }
  return undefined
}

/** `2026-11-25T04:09:00.000Z` → `2026-11-25 04:09 UTC`. */
export const when = (v: unknown): string | undefined => {
  if (typeof v !== "string") return undefined
  const t = Date.parse(v)
  if (Number.isNaN(t)) return v
  return `${new Date(t).toISOString().slice(0, 16).replace("T", " ")} UTC`
}

/** `require_approval` → `require approval`; `enforcement.created` → `Enforcement created`. */
const words = (v: unknown): string | undefined => {
  const s = plain(v)
  return s?.replace(/[_.]+/g, " ")
}
const capital = (s: string) => s.charAt(0).toUpperCase() + s.slice(1)
const tierName = (v: unknown) => {
  const s = plain(v)
  return s === undefined ? undefined : capital(s)
}
const signed = (n: unknown) => (typeof n === "number" ? (n > 0 ? `+${n}` : String(n)) : undefined)

/** 86400 → `1 day`, 90 → `1 min 30 s`. */
export const duration = (seconds: unknown): string | undefined => {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) return undefined
  if (seconds === 0) return "none"
  const units: Array<[number, string, string]> = [
    [86_400, "day", "days"],
    [3600, "h", "h"],
    [60, "min", "min"],
    [1, "s", "s"],
  ]
  const out: Array<string> = []
  let rest = Math.round(seconds)
  for (const [size, one, many] of units) {
    const n = Math.floor(rest / size)
    if (n > 0) out.push(`${n} ${n === 1 ? one : many}`)
    rest -= n * size
    if (out.length === 2) break
  }
  return out.join(" ")
}

type Draft = {
  title: string
  summary?: string | undefined
  fields?: ReadonlyArray<readonly [string, string | undefined, boolean?]>
  link?: readonly [label: string, path: string] | undefined
  subject?: FormattedEvent["subject"]
}

const agentOf = (d: { agentName?: unknown; agentId?: unknown }) => plain(d.agentName) ?? plain(d.agentId) ?? "an agent"
const agentLink = (d: { agentId?: unknown }): Draft["link"] =>
  typeof d.agentId === "string" ? ["Open the agent", `/agents/${encodeURIComponent(d.agentId)}`] : undefined
const enforcementLink = (id: unknown): Draft["link"] =>
  typeof id === "string" ? ["Open the enforcement", `/enforcement/${encodeURIComponent(id)}`] : undefined
const enforcementSubject = (id: unknown): Draft["subject"] =>
  typeof id === "string" ? { kind: "enforcement", id } : undefined
const approvalSubject = (id: unknown): Draft["subject"] =>
  typeof id === "string" ? { kind: "approval", id } : undefined
const policyLink = (id: unknown): Draft["link"] =>
  typeof id === "string" ? ["Open the policy", `/policies/${encodeURIComponent(id)}`] : undefined
const contentLink = (id: unknown): Draft["link"] =>
  typeof id === "string" ? ["Open the content", `/content/${encodeURIComponent(id)}`] : undefined
const reportLink = (id: unknown): Draft["link"] =>
  typeof id === "string" ? ["Open the report", `/compliance/reports/${encodeURIComponent(id)}`] : undefined
const FRAMEWORK: Readonly<Record<string, string>> = { "eu-ai-act": "EU AI Act", gdpr: "GDPR", soc2: "SOC 2" }
const frameworkOf = (f: unknown) => (typeof f === "string" ? (FRAMEWORK[f] ?? plain(f)) : undefined) ?? "a framework"
const webhookLink = (id: unknown): Draft["link"] =>
  typeof id === "string" ? ["Open the webhook", `/webhooks/${encodeURIComponent(id)}`] : undefined

const ENFORCEMENT_WORD: Readonly<Record<string, string>> = {
  warning: "Warning",
  throttle: "Throttle",
  suspension: "Suspension",
  revocation: "Revocation",
}
const enforcementWord = (t: unknown) => (typeof t === "string" ? (ENFORCEMENT_WORD[t] ?? capital(t)) : "Enforcement")

const reasonsText = (list: unknown): string | undefined => {
  if (!Array.isArray(list)) return undefined
  const lines = list
    .filter(isRecord)
    .map((r) => plain(r.message) ?? words(r.code))
    .filter((s): s is string => s !== undefined)
  return lines.length === 0 ? undefined : lines.join("; ")
}

const redactionsText = (list: unknown): string | undefined => {
  if (!Array.isArray(list)) return undefined
  const parts = list.filter(isRecord).map((r) => `${plain(r.rule) ?? words(r.kind) ?? "?"} ×${plain(r.count) ?? "?"}`)
  return parts.length === 0 ? undefined : parts.join(", ")
}

const matchedPolicies = (list: unknown): string | undefined => {
  if (!Array.isArray(list)) return undefined
  const ids = [
    ...new Set(
      list
        .filter(isRecord)
        .map((m) => plain(m.policyId))
        .filter(Boolean),
    ),
  ]
  return ids.length === 0 ? undefined : ids.join(", ")
}

type Formatters = { readonly [K in SystemEventName]: (data: Partial<SystemEventDataMap[K]>) => Draft }

/** One formatter per event type of the catalog (`docs/events.md`); the type makes a missing one an error. */
const FORMATTERS: Formatters = {
  "agent.registered": (d) => ({
    title: `New agent registered: ${agentOf(d)}`,
    summary:
      typeof d.trustScore === "number" ? `It starts with a trust score of ${d.trustScore} out of 1000.` : undefined,
    fields: [
      ["Agent", agentOf(d), true],
      ["Starting trust score", typeof d.trustScore === "number" ? `${d.trustScore} / 1000` : undefined, true],
      ["Agent id", plain(d.agentId), true],
    ],
    link: agentLink(d),
  }),
  "agent.updated": (d) => {
    const isVersion = Array.isArray(d.changes) && d.changes.includes("currentVersion")
    return {
      title: isVersion ? `New version of ${agentOf(d)}: ${plain(d.version) ?? "?"}` : `Agent updated: ${agentOf(d)}`,
      fields: [
        ["Agent", agentOf(d), true],
        ["Changed", words(d.changes), true],
        ["Version", plain(d.version), true],
        ["Previous version", d.previousVersion === null ? "none (first version)" : plain(d.previousVersion), true],
      ],
      link: agentLink(d),
    }
  },
  "agent.deregistered": (d) => ({
    title: `Agent deregistered: ${agentOf(d)}`,
    summary: "Its API keys are revoked.",
    fields: [["Agent id", plain(d.agentId), true]],
    link: agentLink(d),
  }),
  "agent.suspended": (d) => ({
    title: `Agent suspended: ${agentOf(d)}`,
    summary: plain(d.reason),
    fields: [
      ["Agent", agentOf(d), true],
      ["Until", when(d.expiresAt) ?? "lifted by an operator", true],
      ["Enforcement", plain(d.enforcementId), true],
    ],
    link: enforcementLink(d.enforcementId) ?? agentLink(d),
    subject: enforcementSubject(d.enforcementId),
  }),
  "policy.evaluated": (d) => ({
    title: `Policy check: ${plain(d.action) ?? "an action"} → ${words(d.decision) ?? "?"}`,
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Decision", words(d.decision), true],
      ["Allowed now", plain(d.allowed), true],
      ["Why", reasonsText(d.reasons), false],
      ["Policies matched", matchedPolicies(d.matched), false],
      ["Took", typeof d.durationMs === "number" ? `${d.durationMs} ms` : undefined, true],
    ],
    link: agentLink(d),
  }),
  "policy.created": (d) => ({
    title: `Policy created: ${plain(d.name) ?? plain(d.policyId) ?? "a policy"}`,
    fields: [
      ["Mode", plain(d.mode), true],
      ["Enabled", plain(d.enabled), true],
      ["Rules", plain(d.rules), true],
      ["Version", plain(d.version), true],
    ],
    link: policyLink(d.policyId),
  }),
  "policy.updated": (d) => ({
    title: `Policy updated: ${plain(d.name) ?? plain(d.policyId) ?? "a policy"} (version ${plain(d.previousVersion) ?? "?"} → ${plain(d.version) ?? "?"})`,
    fields: [
      ["Changed", words(d.changes), false],
      ["Mode", plain(d.mode), true],
      ["Enabled", plain(d.enabled), true],
      ["Rules", plain(d.rules), true],
    ],
    link: policyLink(d.policyId),
  }),
  "policy.deleted": (d) => ({
    title: `Policy deleted: ${plain(d.name) ?? plain(d.policyId) ?? "a policy"}`,
    summary: "Its versions stay on record.",
    fields: [
      ["Last version", plain(d.version), true],
      ["Policy id", plain(d.policyId), true],
    ],
    link: policyLink(d.policyId),
  }),
  "policy.denied": (d) => ({
    title: `Action blocked: ${plain(d.action) ?? "an action"}`,
    summary: reasonsText(d.reasons),
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Action", plain(d.action), true],
      ["Policies matched", matchedPolicies(d.matched) ?? "none (workspace default or agent status)", false],
    ],
    link: agentLink(d),
  }),
  "policy.violated": (d) => {
    const violations = Array.isArray(d.violations) ? d.violations.filter(isRecord) : []
    const monitorOnly = violations.length > 0 && violations.every((v) => v.mode === "monitor")
    return {
      title: `Policy violated${monitorOnly ? " (monitor only)" : ""}: ${plain(d.action) ?? "an action"}`,
      summary: reasonsText(violations),
      fields: [
        ["Agent", plain(d.agentId), true],
        ["Decision", words(d.decision), true],
        ["Rules violated", String(violations.length), true],
        ["Policies", matchedPolicies(violations), false],
      ],
      link: agentLink(d),
    }
  },
  "enforcement.created": (d) => ({
    title: `${enforcementWord(d.type)} issued to ${plain(d.agentId) ?? "an agent"}`,
    summary: plain(d.reason),
    fields: [
      ["Type", words(d.type), true],
      ["Limit", typeof d.limitPerMinute === "number" ? `${d.limitPerMinute} requests per minute` : undefined, true],
      ["Until", when(d.expiresAt) ?? "resolved by an operator", true],
      ["Policy", plain(d.policyId), true],
      ["Rule", plain(d.ruleId), true],
    ],
    link: enforcementLink(d.enforcementId),
    subject: enforcementSubject(d.enforcementId),
  }),
  "enforcement.updated": (d) => ({
    title: `${enforcementWord(d.type)} changed for ${plain(d.agentId) ?? "an agent"}`,
    summary: plain(d.reason),
    fields: [
      ["Changed", words(d.changes), true],
      ["Until", d.expiresAt === null ? "resolved by an operator" : when(d.expiresAt), true],
    ],
    link: enforcementLink(d.enforcementId),
    subject: enforcementSubject(d.enforcementId),
  }),
  "enforcement.appealed": (d) => ({
    title: `${enforcementWord(d.type)} appealed by ${plain(d.agentId) ?? "an agent"}`,
    summary: plain(d.reason) === undefined ? undefined : `Grounds: ${plain(d.reason)}`,
    fields: [["Status", words(d.status), true]],
    link: enforcementLink(d.enforcementId),
    subject: enforcementSubject(d.enforcementId),
  }),
  "enforcement.resolved": (d) => ({
    title: `${enforcementWord(d.type)} ${d.status === "expired" ? "expired" : "resolved"} for ${plain(d.agentId) ?? "an agent"}`,
    summary: plain(d.reason),
    fields: [
      ["Outcome", words(d.resolution) ?? words(d.status), true],
      ["Agent reinstated", plain(d.reinstated), true],
    ],
    link: enforcementLink(d.enforcementId),
    subject: enforcementSubject(d.enforcementId),
  }),
  "approval.requested": (d) => ({
    title: `Approval needed: ${plain(d.action) ?? "an action"}`,
    summary: plain(d.reason),
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Action", plain(d.action), true],
      ["Decide by", when(d.expiresAt), true],
      ["Approvers", plain(d.approvers), true],
      ["Policy", plain(d.policyId), true],
    ],
    link:
      typeof d.approvalId === "string"
        ? ["Review the approval", `/approvals/${encodeURIComponent(d.approvalId)}`]
        : undefined,
    subject: approvalSubject(d.approvalId),
  }),
  "approval.decided": (d) => ({
    title: `${d.expired ? "Approval expired (denied)" : d.decision === "approved" ? "Approved" : "Denied"}: ${plain(d.action) ?? "an action"}`,
    summary: plain(d.reason),
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Decision", d.expired ? "denied: nobody decided in time" : words(d.decision), true],
      ["Decided by", plain(d.decidedBy), true],
    ],
    link:
      typeof d.approvalId === "string"
        ? ["Open the approval", `/approvals/${encodeURIComponent(d.approvalId)}`]
        : undefined,
    subject: approvalSubject(d.approvalId),
  }),
  "trust.score.changed": (d) => {
    const direction = typeof d.delta === "number" ? (d.delta < 0 ? "fell" : "rose") : "changed"
    return {
      title: `Trust score of ${agentOf(d)} ${direction}: ${plain(d.previousScore) ?? "?"} → ${plain(d.newScore) ?? "?"}`,
      summary: plain(d.reason),
      fields: [
        ["Score", typeof d.newScore === "number" ? `${d.newScore} / 1000` : undefined, true],
        ["Change", signed(d.delta), true],
        ["Tier", tierName(d.newTier), true],
      ],
      link: agentLink(d),
    }
  },
  "trust.score.adjusted": (d) => {
    const delta = typeof d.delta === "number" ? d.delta : undefined
    return {
      title: `An operator adjusted the trust score of ${agentOf(d)}${delta === undefined ? "" : ` by ${delta > 0 ? "+" : ""}${delta}`}`,
      summary: plain(d.reason),
      fields: [
        ["Agent", agentOf(d), true],
        ["Adjustment", delta === undefined ? undefined : `${delta > 0 ? "+" : ""}${delta} points`, true],
        ["Reason", plain(d.reason), false],
      ],
      link: agentLink(d),
    }
  },
  "trust.tier.upgraded": (d) => ({
    title: `${agentOf(d)} promoted: ${tierName(d.previousTier) ?? "?"} → ${tierName(d.newTier) ?? "?"}`,
    fields: [["Score", typeof d.score === "number" ? `${d.score} / 1000` : undefined, true]],
    link: agentLink(d),
  }),
  "trust.tier.downgraded": (d) => ({
    title: `${agentOf(d)} demoted: ${tierName(d.previousTier) ?? "?"} → ${tierName(d.newTier) ?? "?"}`,
    fields: [["Score", typeof d.score === "number" ? `${d.score} / 1000` : undefined, true]],
    link: agentLink(d),
  }),
  "content.registered": (d) => ({
    title: `Content registered for protection: ${plain(d.contentId) ?? "an item"}`,
    fields: [
      ["Type", plain(d.mediaType), true],
      ["Watermarked", plain(d.watermarked), true],
      ["C2PA provenance", plain(d.c2pa), true],
      ["Produced by", plain(d.agentId), true],
      ["Fingerprint", plain(d.fingerprint), false],
    ],
    link: contentLink(d.contentId),
  }),
  "content.match.detected": (d) => ({
    title: `Possible infringement of ${plain(d.contentId) ?? "registered content"}`,
    fields: [
      ["Similarity", typeof d.similarity === "number" ? `${Math.round(d.similarity * 100)}%` : undefined, true],
      ["Found at", plain(d.url), false],
      ["Matches", plain(d.matchedContentId), true],
      ["Match", plain(d.matchId), true],
    ],
    link: contentLink(d.contentId),
  }),
  "content.takedown.submitted": (d) => ({
    title: `Takedown notice sent for ${plain(d.contentId) ?? "registered content"}`,
    fields: [
      ["Infringing location", plain(d.url), false],
      ["Takedown", plain(d.takedownId), true],
      ["Match", plain(d.matchId), true],
    ],
    link: contentLink(d.contentId),
  }),
  "badge.earned": (d) => ({
    title: `${agentOf(d)} earned a ${tierName(d.tier) ?? ""} badge`.replace("  ", " "),
    fields: [["Score", typeof d.score === "number" ? `${d.score} / 1000` : undefined, true]],
    link: agentLink(d),
  }),
  "badge.revoked": (d) => ({
    title: `${agentOf(d)} lost its ${tierName(d.tier) ?? ""} badge`.replace("  ", " "),
    summary:
      d.reason === "agent_suspended"
        ? "The agent was suspended."
        : d.reason === "tier_below_bronze"
          ? "Its trust score fell below Bronze."
          : undefined,
    link: agentLink(d),
  }),
  "workspace.created": (d) => ({
    title: `Workspace created: ${plain(d.name) ?? plain(d.workspaceId) ?? "?"}`,
    fields: [
      ["Environment", plain(d.environment), true],
      ["Plan", plain(d.plan), true],
    ],
    link: ["Open the workspace", "/settings"],
  }),
  "workspace.updated": (d) => ({
    title: "Workspace settings changed",
    fields: [
      ["Changed", words(d.changes), true],
      ["Name", plain(d.name), true],
      ["Plan", plain(d.plan), true],
      ["Guard default", plain(d.guardDefault), true],
    ],
    link: ["Open the workspace", "/settings"],
  }),
  "workspace.deleted": (d) => ({
    title: `Workspace deleted: ${plain(d.name) ?? plain(d.workspaceId) ?? "?"}`,
    summary: typeof d.revokedKeys === "number" ? `${d.revokedKeys} active API keys were revoked.` : undefined,
  }),
  "apikey.created": (d) => ({
    title: `API key created: ${plain(d.name) ?? plain(d.keyId) ?? "?"}`,
    fields: [
      ["Kind", plain(d.type), true],
      ["Prefix", plain(d.prefix), true],
      ["Scopes", plain(d.scopes), false],
    ],
    link: ["Open the API keys", "/api-keys"],
  }),
  "apikey.revoked": (d) => ({
    title: `API key revoked: ${plain(d.name) ?? plain(d.keyId) ?? "?"}`,
    fields: [
      ["Why", words(d.reason), true],
      ["Prefix", plain(d.prefix), true],
    ],
    link: ["Open the API keys", "/api-keys"],
  }),
  "apikey.rotated": (d) => ({
    title: `API key rotated: ${plain(d.keyId) ?? "?"} → ${plain(d.newKeyId) ?? "?"}`,
    fields: [["Old key keeps working for", duration(d.overlapSeconds), true]],
    link: ["Open the API keys", "/api-keys"],
  }),
  "member.invited": (d) => ({
    title: `Invited: ${plain(d.email) ?? "?"} as ${plain(d.role) ?? "?"}`,
    fields: [["Link expires", plain(d.expiresAt), true]],
    link: ["Open the members", "/members"],
  }),
  "invitation.revoked": (d) => ({
    title: `Invitation withdrawn: ${plain(d.email) ?? "?"}`,
    fields: [["Role", plain(d.role), true]],
    link: ["Open the members", "/members"],
  }),
  "member.joined": (d) => ({
    title: `Joined: ${plain(d.email) ?? "?"} as ${plain(d.role) ?? "?"}`,
    fields: [],
    link: ["Open the members", "/members"],
  }),
  "member.role_changed": (d) => ({
    title: `Role changed: ${plain(d.email) ?? "?"}, ${plain(d.from) ?? "?"} → ${plain(d.to) ?? "?"}`,
    fields: [],
    link: ["Open the members", "/members"],
  }),
  "member.signin_link_created": (d) => ({
    title: `Sign-in link made for owner ${plain(d.email) ?? "?"}`,
    fields: [["Expires", plain(d.expiresAt), true]],
    link: ["Open the members", "/members"],
  }),
  "member.removed": (d) => ({
    title: `${d.left === true ? "Left" : "Removed"}: ${plain(d.email) ?? "?"}`,
    fields: [["Role held", plain(d.role), true]],
    link: ["Open the members", "/members"],
  }),
  "oauth.client.created": (d) => ({
    title: `App registered: ${plain(d.name) ?? plain(d.clientId) ?? "?"}`,
    fields: [
      ["Type", plain(d.type), true],
      ["Scopes", plain(d.scopes), false],
      ["Redirect URIs", plain(d.redirectUris), false],
    ],
    link: ["Open the members", "/members"],
  }),
  "oauth.client.deleted": (d) => ({
    title: `App deleted: ${plain(d.name) ?? plain(d.clientId) ?? "?"}`,
    fields: [["Grants revoked", plain(d.revokedGrants), true]],
    link: ["Open the members", "/members"],
  }),
  "oauth.grant.created": (d) => ({
    title: `App authorised: ${plain(d.clientName) ?? plain(d.clientId) ?? "?"}`,
    fields: [
      ["By", plain(d.userId), true],
      ["Scopes", plain(d.scopes), false],
    ],
    link: ["Open the members", "/members"],
  }),
  "oauth.grant.revoked": (d) => ({
    title:
      d.reason === "code_reused" || d.reason === "refresh_token_reused"
        ? `App access revoked: a ${d.reason === "code_reused" ? "code" : "refresh token"} was used twice`
        : `App access revoked: ${plain(d.clientId) ?? "?"}`,
    fields: [
      ["App", plain(d.clientId), true],
      ["Granted by", plain(d.userId), true],
      ["Reason", plain(d.reason), true],
    ],
    link: ["Open the members", "/members"],
  }),
  "webhook.created": (d) => ({
    title: `Webhook registered: ${plain(d.origin) ?? plain(d.webhookId) ?? "?"}`,
    fields: [
      ["Events", plain(d.events), false],
      ["Retries", plain(d.retryPolicy), true],
      ["Enabled", plain(d.enabled), true],
    ],
    link: webhookLink(d.webhookId),
  }),
  "webhook.updated": (d) => ({
    title: `Webhook changed: ${plain(d.origin) ?? plain(d.webhookId) ?? "?"}`,
    fields: [
      ["Changed", words(d.changes), true],
      ["Events", plain(d.events), false],
      ["Enabled", plain(d.enabled), true],
      ["Retries", plain(d.retryPolicy), true],
    ],
    link: webhookLink(d.webhookId),
  }),
  "webhook.secret.rotated": (d) => ({
    title: `Webhook signing secret rotated: ${plain(d.webhookId) ?? "?"}`,
    fields: [["Old secret still signs for", duration(d.overlapSeconds), true]],
    link: webhookLink(d.webhookId),
  }),
  "webhook.deleted": (d) => ({
    title: `Webhook deleted: ${plain(d.origin) ?? plain(d.webhookId) ?? "?"}`,
  }),
  "webhook.redelivered": (d) => ({
    title: `Webhook deliveries queued again: ${plain(d.queued) ?? "?"}`,
    fields: [["Webhook", plain(d.webhookId), true]],
    link: webhookLink(d.webhookId),
  }),
  "webhook.disabled": (d) => ({
    title: `Webhook disabled: ${plain(d.webhookId) ?? "?"}`,
    summary:
      d.reason === "endpoint_gone"
        ? "The endpoint answered 410 Gone."
        : "Every attempt of one delivery failed; deliveries are paused until it is re-enabled.",
    fields: [
      ["Delivery", plain(d.deliveryId), true],
      ["Event", plain(d.eventId), true],
    ],
    link: webhookLink(d.webhookId),
  }),
  "chain.invalid": (d) => ({
    title: "Audit chain verification failed",
    summary: plain(d.reason),
    fields: [
      ["First bad event", typeof d.firstBadSequence === "number" ? `#${d.firstBadSequence}` : undefined, true],
      ["Verified before it", plain(d.checked), true],
      ["Found by", words(d.trigger), true],
    ],
    link: ["Open the audit trail", "/events"],
  }),
  "compliance.report.generated": (d) => ({
    title: `${frameworkOf(d.framework)} report ready: ${words(d.result) ?? "result unknown"}`,
    summary: typeof d.counted === "number" ? `${d.counted} events counted, pinned to a signed checkpoint.` : undefined,
    fields: [
      ["Framework", frameworkOf(d.framework), true],
      ["Scope", typeof d.agentId === "string" ? `agent ${d.agentId}` : "the whole workspace", true],
      ["Period", d.from && d.to ? `${plain(d.from)} to ${plain(d.to)}` : undefined, false],
      ["Checkpoint tree size", typeof d.treeSize === "number" ? String(d.treeSize) : undefined, true],
    ],
    link: reportLink(d.reportId),
  }),
  "certification.issued": (d) => ({
    title: `${agentOf(d)} certified for ${frameworkOf(d.framework)}`,
    fields: [
      ["Agent", agentOf(d), true],
      ["Framework", frameworkOf(d.framework), true],
      ["Valid until", plain(d.expiresAt), true],
    ],
    link: reportLink(d.reportId),
  }),
  "certification.revoked": (d) => ({
    title: `${frameworkOf(d.framework)} certification of ${agentOf(d)} revoked`,
    summary: plain(d.note) ?? words(d.reason),
    fields: [
      ["Agent", agentOf(d), true],
      ["Framework", frameworkOf(d.framework), true],
      ["Why", words(d.reason), true],
      ["Operator's reason", plain(d.note)],
    ],
    link: agentLink(d),
  }),
  "mcp.tool.called": (d) => ({
    title: `${agentOf(d)} called ${plain(d.action) ?? "an MCP tool"}`,
    summary: d.isError ? "The tool answered with an error." : undefined,
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Server", plain(d.server), true],
      ["Tool", plain(d.tool), true],
      ["Took", typeof d.durationMs === "number" ? `${d.durationMs} ms` : undefined, true],
      ["Redacted", redactionsText(d.redactions), false],
    ],
    link: agentLink(d),
  }),
  "mcp.tool.denied": (d) => ({
    title: `MCP call refused: ${plain(d.action) ?? "a tool"}`,
    summary: reasonsText(d.reasons) ?? words(d.reason),
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Server", plain(d.server), true],
      ["Tool", plain(d.tool), true],
      ["Why", words(d.reason), true],
    ],
    link: agentLink(d),
    subject: approvalSubject(d.approvalId),
  }),
  "mcp.definition.flagged": (d) => ({
    title: `MCP tool definition flagged: ${plain(d.server) ?? "a server"}/${plain(d.tool) ?? "a tool"}`,
    summary: Array.isArray(d.findings)
      ? d.findings
          .filter(isRecord)
          .map((f) => `${words(f.kind) ?? "finding"}: ${plain(f.detail) ?? ""}`.trim())
          .join("; ")
      : undefined,
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Server", plain(d.server), true],
      ["Tool", plain(d.tool), true],
    ],
    link: agentLink(d),
  }),
  "mcp.result.redacted": (d) => ({
    title: `Redacted from the result of ${plain(d.action) ?? "an MCP tool"}`,
    summary: redactionsText(d.redactions),
    fields: [
      ["Agent", plain(d.agentId), true],
      ["Server", plain(d.server), true],
      ["Tool", plain(d.tool), true],
    ],
    link: agentLink(d),
  }),
}

const MAX_GENERIC_FIELDS = 12

/** A client (ingested) event: its type in words, and its top-level data fields as label/value pairs. */
const generic = (type: string, data: unknown): Draft => {
  const fields: Array<readonly [string, string | undefined, boolean]> = []
  if (isRecord(data)) {
    for (const [key, value] of Object.entries(data)) {
      if (fields.length >= MAX_GENERIC_FIELDS) break
      const label = capital(
        key
          .replace(/([a-z])([A-Z])/g, "$1 $2")
          .replace(/[_-]+/g, " ")
          .toLowerCase(),
      )
      const text = plain(value) ?? (isRecord(value) ? `${Object.keys(value).length} fields` : undefined)
      fields.push([label, text, (text?.length ?? 0) <= 40])
    }
    const more = Object.keys(data).length - MAX_GENERIC_FIELDS
    if (more > 0) fields.push(["More", `${more} further fields`, true])
  }
  return { title: capital(words(type) ?? "event"), fields, link: ["Open the event", "/events"] }
}

/**
 * Formats any event: the catalog's types each by their own formatter, client events generically.
 *
 * @example
 * ```ts
 * import { formatEvent } from "@agentgov/connector-sdk/format"
 *
 * const m = formatEvent(event, { severity: "critical", dashboardUrl: "https://agentgov.example.com" })
 * m.title // "Agent suspended: billing-bot"
 * ```
 */
export const formatEvent = (event: AnyWebhookEvent, options: FormatOptions = {}): FormattedEvent => {
  const type = canonicalEventName(event.type)
  const data = isRecord(event.data) ? event.data : {}
  const formatter = (FORMATTERS as Record<string, ((d: any) => Draft) | undefined>)[type]
  const draft = formatter ? formatter(data) : generic(type, data)
  const base = options.dashboardUrl?.replace(/\/+$/, "")
  const link = draft.link && base ? { label: draft.link[0], url: `${base}${draft.link[1]}` } : undefined
  return {
    eventId: event.id,
    eventType: type,
    title: draft.title,
    summary: draft.summary ?? "",
    severity: options.severity ?? defaultSeverity(event),
    fields: (draft.fields ?? [])
      .filter((f): f is readonly [string, string, boolean?] => f[1] !== undefined)
      .map(([label, value, short]) => ({ label, value, short: short ?? false })),
    link,
    subject: draft.subject,
    timestamp: event.timestamp,
  }
}

/**
 * The event types that have their own formatter (every type of the catalog).
 *
 * @example
 * ```ts
 * import { FORMATTED_EVENT_TYPES } from "@agentgov/connector-sdk/format"
 *
 * FORMATTED_EVENT_TYPES.includes("approval.requested") // true
 * ```
 */
export const FORMATTED_EVENT_TYPES: ReadonlyArray<string> = Object.freeze(Object.keys(FORMATTERS))
