/**
 * Why a delivery was refused.
 *
 * - `MISSING_HEADER`: a required header is absent (the message names it).
 * - `INVALID_HEADER`: a header is malformed (e.g. a timestamp that is not Unix seconds).
 * - `BAD_SIGNATURE`: no signature matches any configured secret, or only the legacy form was sent
 *   and `allowLegacy` is off.
 * - `TIMESTAMP_TOO_OLD` / `TIMESTAMP_IN_FUTURE`: the signed timestamp is outside the tolerance.
 * - `REPLAYED`: this exact signed request was verified before.
 * - `INVALID_PAYLOAD`: the verified body is not JSON, or not an event envelope.
 *
 * @example
 * ```ts
 * import type { WebhookVerificationErrorCode } from "@agentgov/connector-sdk"
 *
 * const retryable: WebhookVerificationErrorCode[] = ["TIMESTAMP_IN_FUTURE"]
 * ```
 */
export type WebhookVerificationErrorCode =
  | "MISSING_HEADER"
  | "INVALID_HEADER"
  | "BAD_SIGNATURE"
  | "TIMESTAMP_TOO_OLD"
  | "TIMESTAMP_IN_FUTURE"
  | "REPLAYED"
  | "INVALID_PAYLOAD"

/**
 * The one error {@link Webhook.verify} throws: the delivery must not be trusted. Answer 401 (400
 * for `INVALID_PAYLOAD`); `ConnectorApp` does this for you.
 *
 * @example
 * ```ts
 * import { Webhook, WebhookVerificationError } from "@agentgov/connector-sdk"
 *
 * try {
 *   const event = new Webhook({ secret }).verify(rawBody, req.headers)
 * } catch (error) {
 *   if (error instanceof WebhookVerificationError) console.warn(error.code) // e.g. "BAD_SIGNATURE"
 *   throw error
 * }
 * ```
 */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError"
  readonly code: WebhookVerificationErrorCode
  /** The HTTP status a receiver should answer with. */
  readonly status: 400 | 401

  constructor(code: WebhookVerificationErrorCode, message: string) {
    super(message)
    this.code = code
    this.status = code === "INVALID_PAYLOAD" ? 400 : 401
  }
}

/**
 * Options of {@link RetryableError}.
 *
 * @example
 * ```ts
 * import type { RetryableErrorOptions } from "@agentgov/connector-sdk"
 *
 * const options: RetryableErrorOptions = { retryAfterMs: 30_000 }
 * ```
 */
export interface RetryableErrorOptions {
  /** Wait at least this long before the next attempt (a vendor's `Retry-After`). */
  readonly retryAfterMs?: number
  readonly cause?: unknown
}

/**
 * Throw from a handler to ask for another attempt, optionally not before `retryAfterMs` (say,
 * after a vendor's 429). Any other error is retried too, with backoff; this one carries the wait.
 *
 * @example
 * ```ts
 * import { RetryableError } from "@agentgov/connector-sdk"
 *
 * app.on("approval.requested", async (event) => {
 *   const res = await fetch(url, { method: "POST", body: JSON.stringify(event.data) })
 *   if (res.status === 429) {
 *     throw new RetryableError("rate limited", { retryAfterMs: Number(res.headers.get("retry-after")) * 1000 })
 *   }
 * })
 * ```
 */
export class RetryableError extends Error {
  override readonly name = "RetryableError"
  readonly retryAfterMs: number | undefined

  constructor(message: string, options: RetryableErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.retryAfterMs = options.retryAfterMs
  }
}

/**
 * Throw from a handler when another attempt cannot succeed (a vendor's 400, a channel that does
 * not exist): the job goes to the dead letters at once, without further attempts.
 *
 * @example
 * ```ts
 * import { NonRetryableError } from "@agentgov/connector-sdk"
 *
 * app.on("badge.earned", async (event) => {
 *   if (!channelFor(event.workspaceId)) throw new NonRetryableError(`no channel for ${event.workspaceId}`)
 * })
 * ```
 */
export class NonRetryableError extends Error {
  override readonly name = "NonRetryableError"

  constructor(message: string, options: { readonly cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
  }
}

/**
 * What a handler's attempt failed with when it ran longer than `handlerTimeoutMs`; retried like any
 * other error.
 *
 * @example
 * ```ts
 * import { createConnector, HandlerTimeoutError } from "@agentgov/connector-sdk"
 *
 * const app = createConnector({
 *   secret,
 *   onDeadLetter: (letter) => {
 *     if (letter.error.name === HandlerTimeoutError.name) console.warn("handler hung", letter.event.id)
 *   },
 * })
 * ```
 */
export class HandlerTimeoutError extends Error {
  override readonly name = "HandlerTimeoutError"

  constructor(timeoutMs: number) {
    super(`handler did not finish within ${timeoutMs} ms`)
  }
}
