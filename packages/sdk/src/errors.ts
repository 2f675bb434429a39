import type { GuardDecision } from "./runtime/decision.ts"
import type { Approval } from "./types.ts"

/**
 * `details` of an error envelope (D2): the field at fault and what is wrong with it.
 *
 * @example
 * ```ts
 * import type { ErrorDetails } from "@agentgov/sdk"
 *
 * const details: ErrorDetails = { field: "name", issue: "already taken" }
 * ```
 */
export interface ErrorDetails {
  readonly field: string
  readonly issue: string
}

/**
 * Codes the SDK itself sets when there is no server answer to take a code from. Every other
 * `code` is the server's (`AGENT_NOT_FOUND`, `VALIDATION_ERROR`, `RATE_LIMITED`, …).
 *
 * - `NETWORK_ERROR`: the request could not be sent or the connection broke (`status` 0).
 * - `TIMEOUT`: no answer within `timeoutMs` (`status` 0).
 * - `INVALID_RESPONSE`: a 2xx that was not the JSON envelope the API always sends (a proxy's
 *   error page, a truncated body), or a guard, token or ingest answer without the fields the SDK
 *   acts on (`status` is the answer's). Retried as a 5xx is; the guard then falls back to `onUnavailable`.
 * - `APPROVAL_WAIT_TIMEOUT`: `waitForApproval` gave up after its `timeoutMs`.
 * - `INVALID_REQUEST`: the request could not be made for a reason of the caller's (e.g. a custom
 *   `fetch` that throws something other than a network error); reported for an event batch so refused.
 *
 * @example
 * ```ts
 * import { AgentGovError, type ClientErrorCode } from "@agentgov/sdk"
 *
 * const transient: ClientErrorCode[] = ["NETWORK_ERROR", "TIMEOUT"]
 * const isTransient = (e: unknown) => e instanceof AgentGovError && (transient as string[]).includes(e.code)
 * ```
 */
export type ClientErrorCode =
  | "NETWORK_ERROR"
  | "TIMEOUT"
  | "INVALID_RESPONSE"
  | "APPROVAL_WAIT_TIMEOUT"
  | "INVALID_REQUEST"

/**
 * What {@link AgentGovError}'s constructor takes.
 *
 * @example
 * ```ts
 * import { AgentGovError, type AgentGovErrorInit } from "@agentgov/sdk"
 *
 * const init: AgentGovErrorInit = { status: 404, code: "AGENT_NOT_FOUND", message: "agent agt_1 not found" }
 * const error = new AgentGovError(init)
 * ```
 */
export interface AgentGovErrorInit {
  readonly status: number
  readonly code: string
  readonly message: string
  readonly requestId?: string | undefined
  readonly details?: ErrorDetails | undefined
  readonly retryAfter?: number | undefined
  readonly cause?: unknown
}

/**
 * The one error every REST call rejects with: the server's error envelope (D2), or a transport
 * failure. Branch on `code`, which is stable; `message` is for people.
 *
 * - `status`: the HTTP status; 0 when no answer arrived (network error, time-out).
 * - `code`: the server's code (`AGENT_NOT_FOUND`, `VALIDATION_ERROR`, `RATE_LIMITED`, …) or one
 *   of {@link ClientErrorCode}.
 * - `requestId`: the `X-Request-Id` of the answer; quote it when you report a problem.
 * - `details`: `{field, issue}` when the server names the field at fault (422, 409, 403).
 * - `retryAfter`: seconds, from `Retry-After` (429 and 503).
 *
 * @example
 * ```ts
 * import { AgentGov, AgentGovError } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * try {
 *   await client.agents.get("agt_missing")
 * } catch (error) {
 *   if (error instanceof AgentGovError && error.code === "AGENT_NOT_FOUND") console.log("no such agent", error.requestId)
 *   else throw error
 * }
 * ```
 */
export class AgentGovError extends Error {
  override readonly name = "AgentGovError"
  readonly status: number
  readonly code: string
  readonly requestId: string | undefined
  readonly details: ErrorDetails | undefined
  readonly retryAfter: number | undefined

  constructor(init: AgentGovErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause })
    this.status = init.status
    this.code = init.code
    this.requestId = init.requestId
    this.details = init.details
    this.retryAfter = init.retryAfter
  }
}

/**
 * Thrown by {@link AgentRuntime.governed} (and the framework adapters) when the guard does not
 * allow the action: denied by a policy, an approval that was denied or expired, or the service
 * unreachable with `onUnavailable: "deny"`. The wrapped function did not run.
 *
 * @example
 * ```ts
 * import { ActionDenied } from "@agentgov/sdk"
 *
 * try {
 *   await sendEmail({ to: "ceo@example.com" })
 * } catch (error) {
 *   if (error instanceof ActionDenied) console.log(error.action, error.decision.reasons[0]?.code)
 *   else throw error
 * }
 * ```
 */
export class ActionDenied extends Error {
  override readonly name = "ActionDenied"
  /** The action the guard was asked about. */
  readonly action: string
  /** The decision that refused it (`decision` is `deny` or `require_approval`). */
  readonly decision: GuardDecision
  /** The approval, when one was asked for and was denied, expired, or is still pending. */
  readonly approval: Approval | undefined

  constructor(action: string, decision: GuardDecision, approval?: Approval) {
    const reason = approval
      ? approval.status === "pending"
        ? `approval ${approval.id} is still pending`
        : `approval ${approval.id} was ${approval.status}`
      : (decision.reasons[0]?.message ?? decision.decision)
    super(`action "${action}" was not allowed: ${reason}`)
    this.action = action
    this.decision = decision
    this.approval = approval
  }
}
