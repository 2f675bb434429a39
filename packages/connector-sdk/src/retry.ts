import { NonRetryableError, RetryableError } from "./errors.ts"

/**
 * How handler attempts are retried.
 *
 * @example
 * ```ts
 * import type { RetryOptions } from "@agentgov/connector-sdk"
 *
 * const retry: RetryOptions = { maxAttempts: 8, initialDelayMs: 500, maxDelayMs: 60_000 }
 * ```
 */
export interface RetryOptions {
  /** Attempts per job, the first included. Default 5. */
  readonly maxAttempts?: number
  /** The backoff before the second attempt; doubled for each further one. Default 1,000 ms. */
  readonly initialDelayMs?: number
  /** The largest backoff. Default 300,000 ms (5 minutes). */
  readonly maxDelayMs?: number
  /** The longest `Retry-After` honoured; a longer one is cut to this. Default 900,000 ms (15 minutes). */
  readonly maxRetryAfterMs?: number
}

/** {@link RetryOptions} with every default filled in. */
export type ResolvedRetryOptions = Required<RetryOptions>

export const resolveRetryOptions = (options: RetryOptions = {}): ResolvedRetryOptions => {
  const resolved = {
    maxAttempts: options.maxAttempts ?? 5,
    initialDelayMs: options.initialDelayMs ?? 1000,
    maxDelayMs: options.maxDelayMs ?? 300_000,
    maxRetryAfterMs: options.maxRetryAfterMs ?? 900_000,
  }
  if (!Number.isInteger(resolved.maxAttempts) || resolved.maxAttempts < 1) {
    throw new RangeError("retry.maxAttempts must be an integer ≥ 1")
  }
  for (const key of ["initialDelayMs", "maxDelayMs", "maxRetryAfterMs"] as const) {
    if (!(resolved[key] >= 0 && Number.isFinite(resolved[key]))) throw new RangeError(`retry.${key} must be ≥ 0`)
  }
  return resolved
}

/**
 * The wait before attempt `attempt + 1`: a `Retry-After` carried by the error when there is one
 * (cut to `maxRetryAfterMs`), else exponential backoff with "equal jitter" — half of
 * `initialDelayMs · 2^(attempt−1)` (capped at `maxDelayMs`) fixed, half random — so that jobs
 * failing together do not retry together.
 */
export const retryDelayMs = (
  error: unknown,
  attempt: number,
  options: ResolvedRetryOptions,
  random: () => number,
  now: () => number,
): number => {
  const retryAfter = retryAfterMs(error, now)
  if (retryAfter !== undefined) return Math.min(retryAfter, options.maxRetryAfterMs)
  const exp = Math.min(options.maxDelayMs, options.initialDelayMs * 2 ** (attempt - 1))
  return Math.round(exp / 2 + random() * (exp / 2))
}

/** Whether another attempt could succeed: not for a {@link NonRetryableError} (or `retryable: false`). */
export const isRetryable = (error: unknown): boolean => {
  if (error instanceof NonRetryableError) return false
  if (typeof error === "object" && error !== null && (error as { retryable?: unknown }).retryable === false)
    return false
  return true
}

/**
 * The wait an error asks for, in milliseconds, if it asks: a {@link RetryableError}'s
 * `retryAfterMs`; an error's own `retryAfterMs` (milliseconds) or `retryAfter` (seconds, as
 * Slack's client throws it, or a `Retry-After` string); or a `Retry-After` header on
 * `error.response.headers` or `error.headers` (fetch `Headers` or a plain record, as Octokit and
 * most HTTP clients attach them). Looks through `error.cause` too.
 *
 * @example
 * ```ts
 * import { retryAfterMs } from "@agentgov/connector-sdk"
 *
 * retryAfterMs({ response: { headers: { "retry-after": "30" } } }) // 30000
 * retryAfterMs(new Error("boom"))                                   // undefined
 * ```
 */
export const retryAfterMs = (error: unknown, now: () => number = Date.now): number | undefined => {
  for (let e = error, depth = 0; depth < 5 && typeof e === "object" && e !== null; depth++) {
    const found = ownRetryAfter(e as Record<string, unknown>, now)
    if (found !== undefined) return found
    e = (e as { cause?: unknown }).cause
  }
  return undefined
}

const ownRetryAfter = (e: Record<string, unknown>, now: () => number): number | undefined => {
  if (e instanceof RetryableError) return e.retryAfterMs === undefined ? undefined : nonNegative(e.retryAfterMs)
  if (typeof e.retryAfterMs === "number") return nonNegative(e.retryAfterMs)
  if (typeof e.retryAfter === "number") return nonNegative(e.retryAfter * 1000)
  if (typeof e.retryAfter === "string") return parseRetryAfter(e.retryAfter, now)
  const response = e.response
  const fromResponse =
    typeof response === "object" && response !== null
      ? headerValue((response as { headers?: unknown }).headers, "retry-after")
      : undefined
  const value = fromResponse ?? headerValue(e.headers, "retry-after")
  return value === undefined ? undefined : parseRetryAfter(value, now)
}

const headerValue = (headers: unknown, name: string): string | undefined => {
  if (typeof headers !== "object" || headers === null) return undefined
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue
    if (typeof value === "string") return value
    if (typeof value === "number") return String(value)
    if (Array.isArray(value) && typeof value[0] === "string") return value[0]
  }
  return undefined
}

/**
 * An HTTP `Retry-After` value in milliseconds: delay-seconds, or an HTTP-date (time from now).
 *
 * @example
 * ```ts
 * import { parseRetryAfter } from "@agentgov/connector-sdk"
 *
 * parseRetryAfter("120")                           // 120000
 * parseRetryAfter("Wed, 21 Oct 2026 07:28:00 GMT") // ms until then (0 if past)
 * ```
 */
export const parseRetryAfter = (value: string, now: () => number = Date.now): number | undefined => {
  const text = value.trim()
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000)
  // An HTTP-date's three forms all open with the day's name; Date.parse alone also takes "-5" or "2" as a year
  // long past, which would have made a wait of 0
  if (!HTTP_DATE_START.test(text)) return undefined
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now())
}

/** IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 …`) and asctime (`Sun Nov  6 …`). */
const HTTP_DATE_START = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /i

const nonNegative = (ms: number): number | undefined => (Number.isFinite(ms) ? Math.max(0, ms) : undefined)
