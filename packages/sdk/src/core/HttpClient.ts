import { AgentGovError, type ErrorDetails } from "../errors.ts"
import { type AnswerCheck, checkSdkToken } from "./answers.ts"
import { isObject } from "./json.ts"
import { backoffMs, isRetryable, parseRetryAfter, sleep, timerMs } from "./retry.ts"
import { TokenManager } from "./TokenManager.ts"

/**
 * A `fetch` implementation: the global one by default; pass your own to add a proxy agent,
 * instrumentation or a test double.
 *
 * @example
 * ```ts
 * import type { FetchLike } from "@agentgov/sdk"
 *
 * const logged: FetchLike = async (input, init) => {
 *   const res = await fetch(input, init)
 *   console.log(init?.method, String(input), res.status)
 *   return res
 * }
 * ```
 */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

/**
 * Per-call options, accepted as the last argument of every method.
 *
 * @example
 * ```ts
 * import type { RequestOptions } from "@agentgov/sdk"
 *
 * const options: RequestOptions = { idempotencyKey: "order-42-refund", timeoutMs: 10_000, maxRetries: 5 }
 * ```
 */
export interface RequestOptions {
  /**
   * POST only: the `Idempotency-Key` (1..255 printable ASCII). The same key with the same body
   * within 24 h replays the first answer instead of doing the work again. The SDK generates one
   * for every POST that has none, so its own retries are safe; pass yours to make retries across
   * process restarts safe too.
   */
  readonly idempotencyKey?: string
  /** Time allowed for each attempt, in ms. Default: the client's `timeoutMs`. */
  readonly timeoutMs?: number
  /** Retries after the first attempt. Default: the client's `maxRetries`. */
  readonly maxRetries?: number
  /** The longest `Retry-After` waited for before a retry; a longer one rejects at once. Default: the client's. */
  readonly maxRetryAfterMs?: number
  /** Aborts the call, including waits between retries; it rejects with the signal's reason. */
  readonly signal?: AbortSignal
}

/** `meta` of a list answer (D2). */
export interface PageMeta {
  readonly cursor: string | null
  readonly hasMore: boolean
}

/** A decoded success envelope. */
export interface ApiResult<T> {
  readonly data: T
  readonly meta: PageMeta | undefined
  readonly status: number
  readonly requestId: string | undefined
}

export type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE"

/** One request as the resources describe it. */
export interface RequestSpec {
  readonly method: HttpMethod
  /** Path under the prefix, e.g. `/agents/agt_1`; path parameters already encoded. */
  readonly path: string
  /** `/api/v1` (default) or `/v1` (the spec's guard address). */
  readonly prefix?: "/api/v1" | "/v1"
  readonly query?: Readonly<Record<string, unknown>> | undefined
  readonly body?: unknown
  /** `key`: the API key (default); `token`: an SDK token exchanged for it, refreshed as needed. */
  readonly auth?: "key" | "token"
  /**
   * Whether a repeat cannot do the work twice, so that network errors and 5xx may be retried.
   * Default: GET and DELETE yes, POST when it carries an Idempotency-Key, PATCH no.
   */
  readonly replaySafe?: boolean
  /** POST: generate an Idempotency-Key when the caller gave none. Default true. */
  readonly autoIdempotencyKey?: boolean
  /**
   * The shape of `data` the caller relies on: an answer without it is an `INVALID_RESPONSE`, retried
   * and reported as an envelope that does not parse is.
   */
  readonly check?: AnswerCheck
}

export interface HttpClientConfig {
  readonly apiKey: string
  /** The service's address without the `/api/v1` prefix. */
  readonly baseUrl: string
  readonly timeoutMs: number
  readonly maxRetries: number
  readonly fetch: FetchLike
  readonly headers: Readonly<Record<string, string>>
  /** The caller's W3C trace context per request (AgentGovOptions.traceContext). */
  readonly traceContext?: () => Readonly<Record<string, string>> | undefined
  /** First backoff, before jitter. */
  readonly retryInitialDelayMs: number
  /** Largest backoff. */
  readonly retryMaxDelayMs: number
  /** The longest Retry-After honoured; a longer one fails the call with that `retryAfter`. */
  readonly maxRetryAfterMs: number
}

const STATUS_CODES: Readonly<Record<number, string>> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  408: "REQUEST_TIMEOUT",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  422: "VALIDATION_ERROR",
  429: "RATE_LIMITED",
  500: "INTERNAL_ERROR",
  502: "BAD_GATEWAY",
  503: "SERVICE_UNAVAILABLE",
  504: "GATEWAY_TIMEOUT",
}

/** A fresh Idempotency-Key: a random UUID (`crypto.randomUUID` exists in every runtime the SDK supports). */
export const newIdempotencyKey = (): string => globalThis.crypto.randomUUID()

const encodeQuery = (query: Readonly<Record<string, unknown>> | undefined): string => {
  if (!query) return ""
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(query)) {
    // An empty list is no filter, as an absent one: the API refuses an empty query value (400).
    if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) continue
    // Lists are sent comma-separated, which every list filter of the API accepts.
    params.append(name, Array.isArray(value) ? value.join(",") : String(value))
  }
  const text = params.toString()
  return text === "" ? "" : `?${text}`
}

/** The AgentGovError of an answer that is not 2xx, from its envelope when it has one. */
const errorFromResponse = (status: number, headers: Headers, text: string): AgentGovError => {
  const requestId = headers.get("x-request-id") ?? undefined
  const retryAfter = parseRetryAfter(headers.get("retry-after"))
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  const error = isObject(body) && isObject(body.error) ? body.error : undefined
  if (error && typeof error.code === "string") {
    const details =
      isObject(error.details) && typeof error.details.field === "string"
        ? ({ field: error.details.field, issue: String(error.details.issue ?? "") } satisfies ErrorDetails)
        : undefined
    return new AgentGovError({
      status,
      code: error.code,
      message: typeof error.message === "string" ? error.message : error.code,
      requestId,
      details,
      retryAfter,
    })
  }
  return new AgentGovError({
    status,
    code: STATUS_CODES[status] ?? `HTTP_${status}`,
    message: `HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ""}`,
    requestId,
    retryAfter,
  })
}

/** Why an attempt ended without an answer. */
const transportError = (cause: unknown, timedOut: boolean, timeoutMs: number): AgentGovError =>
  timedOut
    ? new AgentGovError({ status: 0, code: "TIMEOUT", message: `no answer within ${timeoutMs} ms`, cause })
    : new AgentGovError({
        status: 0,
        code: "NETWORK_ERROR",
        message: `request failed: ${cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause)}`,
        cause,
      })

/**
 * The transport under every resource: envelopes (D2), typed errors, Idempotency-Keys, retries
 * with full-jitter backoff that honour `Retry-After`, per-attempt time-outs, and SDK-token
 * authentication with a single refresh on a 401.
 */
export class HttpClient {
  readonly config: HttpClientConfig
  readonly tokens: TokenManager

  constructor(config: HttpClientConfig) {
    this.config = config
    this.tokens = new TokenManager((signal, timeoutMs) =>
      this.request<{ token: string; expiresAt: string }>(
        // Minting a token changes nothing, so it is safe to repeat without a key; a key would
        // only make the service keep the token (a credential) in its replay store.
        { method: "POST", path: "/tokens", replaySafe: true, autoIdempotencyKey: false, check: checkSdkToken },
        // One attempt within the time-out of the call that needs the token: that call retries it by
        // its own rules, so the exchange never goes on (30 s and retries) after its callers gave up.
        { signal, maxRetries: 0, timeoutMs: Math.min(timeoutMs ?? config.timeoutMs, config.timeoutMs) },
      ).then((r) => r.data),
    )
  }

  /**
   * A token, waited for no longer than one attempt of the request that needs it: an exchange that hangs
   * or is told to wait (429 with a long Retry-After) goes on for the next caller, but this call's own
   * limits hold (the guard's few seconds, not the client's 30 s and its retries). Past them, a TIMEOUT
   * error, retried or not as the request's own rules say. An exchange this call starts has the same
   * time-out and makes one attempt.
   */
  private async tokenWithin(timeoutMs: number, signal: AbortSignal | undefined): Promise<string> {
    // The usual case, a token held: no timer for a wait that does not happen.
    const ready = this.tokens.usable()
    if (ready !== undefined) return ready
    const deadline = AbortSignal.timeout(timerMs(timeoutMs))
    try {
      return await this.tokens.get(signal ? AbortSignal.any([signal, deadline]) : deadline, timeoutMs)
    } catch (cause) {
      signal?.throwIfAborted()
      if (deadline.aborted) throw transportError(cause, true, timeoutMs)
      throw cause
    }
  }

  /** Sends one request, retrying as the rules allow; resolves with the decoded envelope. */
  async request<T>(spec: RequestSpec, options: RequestOptions = {}): Promise<ApiResult<T>> {
    const { config } = this
    const method = spec.method
    const idempotencyKey =
      method === "POST"
        ? (options.idempotencyKey ?? (spec.autoIdempotencyKey === false ? undefined : newIdempotencyKey()))
        : undefined
    const replaySafe = spec.replaySafe ?? (method === "GET" || method === "DELETE" || idempotencyKey !== undefined)
    const maxRetries = options.maxRetries ?? config.maxRetries
    const timeoutMs = options.timeoutMs ?? config.timeoutMs
    const maxRetryAfterMs = options.maxRetryAfterMs ?? config.maxRetryAfterMs
    const url = `${config.baseUrl}${spec.prefix ?? "/api/v1"}${spec.path}${encodeQuery(spec.query)}`
    const body = spec.body === undefined ? undefined : JSON.stringify(spec.body)
    const headers: Record<string, string> = { accept: "application/json", ...config.headers }
    if (body !== undefined) headers["content-type"] = "application/json"
    if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey
    const trace = config.traceContext?.()
    if (trace?.traceparent !== undefined) headers.traceparent = trace.traceparent
    if (trace?.tracestate !== undefined) headers.tracestate = trace.tracestate
    const signal = options.signal

    let refreshed = false
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted()
      let token: string | undefined
      if (spec.auth === "token") {
        try {
          token = await this.tokenWithin(timeoutMs, signal)
        } catch (cause) {
          signal?.throwIfAborted()
          // The exchange makes one attempt; this request retries it as its own attempt (nothing of
          // the request itself was sent, so it is safe whatever the method).
          if (!(cause instanceof AgentGovError) || attempt > maxRetries || !isRetryable(cause, true)) throw cause
          await this.waitToRetry(cause, attempt, maxRetryAfterMs, signal)
          continue
        }
        headers.authorization = `Bearer ${token}`
      } else {
        headers.authorization = `Bearer ${config.apiKey}`
      }
      const outcome = await this.attempt(url, { method, headers, body }, timeoutMs, signal, spec.check)
      if (outcome.ok) return outcome.result as ApiResult<T>
      const error = outcome.error
      if (error.status === 401 && token !== undefined && !refreshed) {
        // The token may have been refused for a reason the clock did not show (revoked signing
        // key, clock skew): drop it, exchange once more, and try again without spending a retry.
        refreshed = true
        this.tokens.invalidate(token)
        attempt--
        continue
      }
      if (attempt > maxRetries || !isRetryable(error, replaySafe)) throw error
      await this.waitToRetry(error, attempt, maxRetryAfterMs, signal)
    }
  }

  /** The wait before the next attempt: `Retry-After` (429, 503) up to `maxRetryAfterMs` (beyond it, `error` is thrown), else backoff. */
  private async waitToRetry(
    error: AgentGovError,
    attempt: number,
    maxRetryAfterMs: number,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const honoured = error.retryAfter !== undefined && (error.status === 429 || error.status === 503)
    const delay = honoured
      ? error.retryAfter! * 1000
      : backoffMs(attempt, this.config.retryInitialDelayMs, this.config.retryMaxDelayMs)
    if (honoured && delay > maxRetryAfterMs) throw error
    await sleep(delay, signal)
  }

  /**
   * Opens a streaming GET (server-sent events): resolves once the headers of a 2xx arrive; the
   * time-out covers only that. Not retried here: the caller reconnects with Last-Event-ID.
   */
  async stream(
    spec: Pick<RequestSpec, "path" | "query" | "auth">,
    headers: Readonly<Record<string, string>>,
    signal: AbortSignal,
    /** Told the SDK token the stream was opened with (`auth: "token"`), so that its end can be told apart. */
    used?: { token?: string },
  ): Promise<Response> {
    const { config } = this
    const url = `${config.baseUrl}/api/v1${spec.path}${encodeQuery(spec.query)}`
    let refreshed = false
    for (;;) {
      const token = spec.auth === "token" ? await this.tokens.get(signal) : undefined
      const all = {
        accept: "text/event-stream",
        ...config.headers,
        ...headers,
        authorization: `Bearer ${token ?? config.apiKey}`,
      }
      const controller = new AbortController()
      const onAbort = () => controller.abort(signal.reason)
      signal.addEventListener("abort", onAbort, { once: true })
      let timedOut = false
      const timer = setTimeout(() => {
        timedOut = true
        controller.abort()
      }, timerMs(config.timeoutMs))
      let response: Response
      try {
        response = await config.fetch(url, { method: "GET", headers: all, signal: controller.signal })
      } catch (cause) {
        signal.removeEventListener("abort", onAbort)
        signal.throwIfAborted()
        throw transportError(cause, timedOut, config.timeoutMs)
      } finally {
        clearTimeout(timer)
      }
      if (response.ok) {
        if (used !== undefined) used.token = token
        // The caller's signal keeps aborting the body; the listener goes with the controller.
        return response
      }
      signal.removeEventListener("abort", onAbort)
      const error = errorFromResponse(response.status, response.headers, await response.text().catch(() => ""))
      if (error.status === 401 && token !== undefined && !refreshed) {
        refreshed = true
        this.tokens.invalidate(token)
        continue
      }
      throw error
    }
  }

  private async attempt(
    url: string,
    init: { method: string; headers: Record<string, string>; body: string | undefined },
    timeoutMs: number,
    signal: AbortSignal | undefined,
    check: AnswerCheck | undefined,
  ): Promise<{ ok: true; result: ApiResult<unknown> } | { ok: false; error: AgentGovError }> {
    const controller = new AbortController()
    const onAbort = () => controller.abort(signal!.reason)
    signal?.addEventListener("abort", onAbort, { once: true })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      controller.abort()
    }, timerMs(timeoutMs))
    try {
      let response: Response
      let text: string
      try {
        response = await this.config.fetch(url, {
          method: init.method,
          headers: init.headers,
          body: init.body,
          signal: controller.signal,
        })
        text = await response.text()
      } catch (cause) {
        signal?.throwIfAborted()
        return { ok: false, error: transportError(cause, timedOut, timeoutMs) }
      }
      const requestId = response.headers.get("x-request-id") ?? undefined
      if (!response.ok) return { ok: false, error: errorFromResponse(response.status, response.headers, text) }
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = undefined
      }
      if (!isObject(parsed) || parsed.ok !== true || !("data" in parsed)) {
        return {
          ok: false,
          error: new AgentGovError({
            status: response.status,
            code: "INVALID_RESPONSE",
            message: `expected the API's JSON envelope, got: ${text.slice(0, 200)}`,
            requestId,
          }),
        }
      }
      const problem = check?.(parsed.data)
      if (problem !== undefined) {
        return {
          ok: false,
          error: new AgentGovError({
            status: response.status,
            code: "INVALID_RESPONSE",
            message: `${problem}: ${text.slice(0, 200)}`,
            requestId,
          }),
        }
      }
      const meta = isObject(parsed.meta) ? (parsed.meta as unknown as PageMeta) : undefined
      return { ok: true, result: { data: parsed.data, meta, status: response.status, requestId } }
    } finally {
      clearTimeout(timer)
      signal?.removeEventListener("abort", onAbort)
    }
  }
}
