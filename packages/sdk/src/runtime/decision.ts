import type { AgentGovError } from "../errors.ts"
import type { GuardReason, GuardResult } from "../types.ts"

/**
 * The decision `guard()` returns when the service could not be reached (no answer, a time-out,
 * a 5xx, or an answer that is not the API's, after retries): made by the SDK from `onUnavailable`, recorded nowhere by the service.
 * Recognise it by `eventId === null` or `reasons[0].code === "SERVICE_UNAVAILABLE"`.
 *
 * @example
 * ```ts
 * import type { FallbackDecision, GuardDecision } from "@agentgov/sdk"
 *
 * const isFallback = (d: GuardDecision): d is FallbackDecision => d.eventId === null
 * ```
 */
export interface FallbackDecision {
  readonly decision: "allow" | "deny"
  readonly allowed: boolean
  readonly reasons: readonly [GuardReason & { readonly code: "SERVICE_UNAVAILABLE" }]
  readonly matched: readonly []
  readonly approvalId?: undefined
  /** No event records a fallback decision on the service. */
  readonly eventId: null
  /** Why the service could not decide. */
  readonly error: AgentGovError
}

/**
 * What `guard()` returns: the service's decision (D6), or a {@link FallbackDecision} when the
 * service could not be reached.
 *
 * @example
 * ```ts
 * import type { GuardDecision } from "@agentgov/sdk"
 *
 * const explain = (d: GuardDecision) => `${d.decision}: ${d.reasons.map((r) => r.code).join(", ")}`
 * ```
 */
export type GuardDecision = GuardResult | FallbackDecision
