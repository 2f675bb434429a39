import { type AnyWebhookEvent, isEventType } from "./events.ts"

/**
 * How loud an event is, lowest first: PagerDuty Events v2's four levels, so that a paging connector
 * passes them through and chat connectors map them to colours and emoji.
 *
 * @example
 * ```ts
 * import type { Severity } from "@agentgov/connector-sdk"
 *
 * const loud: Severity = "critical"
 * ```
 */
export type Severity = "info" | "warning" | "error" | "critical"

/**
 * The levels, lowest first.
 *
 * @example
 * ```ts
 * import { SEVERITIES } from "@agentgov/connector-sdk"
 *
 * SEVERITIES.indexOf("error") > SEVERITIES.indexOf("warning") // true
 * ```
 */
export const SEVERITIES: ReadonlyArray<Severity> = Object.freeze(["info", "warning", "error", "critical"])

/**
 * Whether `value` names a severity.
 *
 * @example
 * ```ts
 * import { isSeverity } from "@agentgov/connector-sdk"
 *
 * isSeverity("warning") // true
 * ```
 */
export const isSeverity = (value: unknown): value is Severity =>
  typeof value === "string" && (SEVERITIES as ReadonlyArray<string>).includes(value)

/**
 * Whether `severity` is at least `minimum`.
 *
 * @example
 * ```ts
 * import { atLeast } from "@agentgov/connector-sdk"
 *
 * atLeast("error", "warning") // true
 * ```
 */
export const atLeast = (severity: Severity, minimum: Severity): boolean =>
  SEVERITIES.indexOf(severity) >= SEVERITIES.indexOf(minimum)

const BY_TYPE: Readonly<Record<string, Severity>> = {
  "agent.suspended": "critical",
  "chain.invalid": "critical",
  "policy.denied": "error",
  "trust.tier.downgraded": "error",
  "badge.revoked": "error",
  "certification.revoked": "warning",
  "content.match.detected": "error",
  "webhook.disabled": "error",
  "mcp.tool.denied": "error",
  "mcp.definition.flagged": "warning",
  "mcp.result.redacted": "warning",
  "approval.requested": "warning",
  "agent.deregistered": "warning",
  "enforcement.updated": "warning",
  "enforcement.appealed": "warning",
  "content.takedown.submitted": "warning",
  "apikey.revoked": "warning",
  "workspace.deleted": "warning",
  "webhook.deleted": "warning",
}

/**
 * The severity an event has before any operator mapping: what a person on call would want
 * (a suspension or a broken audit chain is critical, a denied action an error, a pending approval a
 * warning, the rest information). Client (ingested) events are `info`.
 *
 * @example
 * ```ts
 * import { defaultSeverity } from "@agentgov/connector-sdk"
 *
 * defaultSeverity(event) // "critical" for an agent.suspended
 * ```
 */
export const defaultSeverity = (event: AnyWebhookEvent): Severity => {
  if (isEventType(event, "enforcement.created")) {
    return event.data.type === "suspension" || event.data.type === "revocation" ? "critical" : "error"
  }
  if (isEventType(event, "policy.violated")) {
    // a violation of monitor policies alone changed nothing: worth a look, not an alarm
    return event.data.violations.every((v) => v.mode === "monitor") ? "warning" : "error"
  }
  if (isEventType(event, "trust.score.changed")) return event.data.delta < 0 ? "warning" : "info"
  return BY_TYPE[event.type] ?? "info"
}
