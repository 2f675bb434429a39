import { AgentGovError } from "../errors.ts"

/** Codes of a 409 that says "the first request with this Idempotency-Key is still running". */
const IN_PROGRESS_CODES: ReadonlySet<string> = new Set([
  "IDEMPOTENCY_KEY_IN_USE",
  "IDEMPOTENCY_IN_PROGRESS",
  "REQUEST_IN_PROGRESS",
])

/**
 * Whether a failed attempt may be tried again.
 *
 * `replaySafe`: the request can be repeated without doing its work twice (GET, DELETE, a POST
 * carrying an Idempotency-Key). A 429 is retried for every request: the service refused it
 * before doing anything. Other 4xx never are: the same request would fail the same way. A 2xx
 * that is not the answer the API sends (`INVALID_RESPONSE`: a proxy's page, a truncated body) is
 * retried as a 5xx is: whether the work was done is unknown, as after a lost answer.
 */
export const isRetryable = (error: AgentGovError, replaySafe: boolean): boolean => {
  if (error.status === 429) return true
  if (!replaySafe) return false
  if (error.code === "INVALID_RESPONSE") return true
  if (error.status === 0) return error.code === "NETWORK_ERROR" || error.code === "TIMEOUT"
  if (error.status === 408) return true
  if (error.status === 409) return IN_PROGRESS_CODES.has(error.code)
  return error.status === 500 || error.status === 502 || error.status === 503 || error.status === 504
}

/**
 * Whether a failure is the service's condition rather than the request's fault: no answer,
 * a time-out, 408, 429, a 5xx, or an answer that is not the API's (`INVALID_RESPONSE`: a proxy's
 * page, a truncated body). Used where the SDK keeps trying in the background (event batches).
 */
export const isTransient = (error: unknown): error is AgentGovError =>
  error instanceof AgentGovError &&
  (error.status === 0 ||
    error.status === 408 ||
    error.status === 429 ||
    error.status >= 500 ||
    error.code === "INVALID_RESPONSE")

/**
 * "Full jitter" backoff (AWS architecture blog): a uniformly random wait between 0 and
 * `min(maxMs, initialMs · 2^(attempt−1))`, so that clients failing together spread out.
 */
export const backoffMs = (attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random) =>
  Math.round(random() * Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1)))

/**
 * `Retry-After` in seconds: delta-seconds, or an HTTP date (RFC 9110 §10.2.3). Undefined when
 * absent or unreadable.
 */
export const parseRetryAfter = (value: string | null, now: () => number = Date.now): number | undefined => {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed)
  const at = Date.parse(trimmed)
  if (Number.isNaN(at)) return undefined
  return Math.max(0, Math.ceil((at - now()) / 1000))
}

/**
 * The longest delay a timer takes (2^31 − 1 ms, some 24.8 days). Node and browsers fire a longer
 * one (`Infinity`, a `Retry-After` of 10^8 s) after 1 ms instead, so every delay the SDK sets is
 * clamped to it: a wait "for ever" stays one.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** `ms` as a timer's delay: at most {@link MAX_TIMER_MS}. */
export const timerMs = (ms: number): number => Math.min(ms, MAX_TIMER_MS)

/** Resolves after `ms` (at most {@link MAX_TIMER_MS}), or rejects with the signal's reason once it aborts. */
export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal!.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort)
      resolve()
    }, timerMs(ms))
    signal?.addEventListener("abort", onAbort, { once: true })
  })
