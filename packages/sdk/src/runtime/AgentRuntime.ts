import { checkApproval, checkGuardResult, checkIngestResult } from "../core/answers.ts"
import type { HttpClient } from "../core/HttpClient.ts"
import { isPlainObject } from "../core/json.ts"
import { isTransient, sleep, timerMs } from "../core/retry.ts"
import { streamEvents } from "../core/sse.ts"
import { ActionDenied, AgentGovError } from "../errors.ts"
import { seg } from "../resources/Resource.ts"
import type { Approval, AuditEvent, GuardResult, JsonObject, JsonObjectInput } from "../types.ts"
import type { FallbackDecision, GuardDecision } from "./decision.ts"
import { assertEventType, type DroppedEvents, EventQueue, type EventQueueStats, type TrackEvent } from "./EventQueue.ts"

/**
 * What an `onUnavailable` function is told.
 *
 * @example
 * ```ts
 * import type { UnavailableInfo } from "@agentgov/sdk"
 *
 * const readOnlyMayProceed = (info: UnavailableInfo) => (info.action.endsWith(".read") ? "allow" : "deny")
 * ```
 */
export interface UnavailableInfo {
  readonly action: string
  readonly context: JsonObject
  readonly error: AgentGovError
}

/**
 * Options of `client.agent()`.
 *
 * @example
 * ```ts
 * import type { AgentRuntimeOptions } from "@agentgov/sdk"
 *
 * const options: AgentRuntimeOptions = {
 *   agentId: "agt_…", // not needed with an agent key
 *   onUnavailable: "deny",
 *   flushIntervalMs: 2_000,
 *   onDrop: ({ reason, events }) => console.warn(`dropped ${events.length} events (${reason})`),
 * }
 * ```
 */
export interface AgentRuntimeOptions {
  /**
   * The acting agent. Required with a workspace key; with an agent key the service knows it
   * (and refuses any other).
   */
  readonly agentId?: string
  /**
   * What `guard()` answers when the service cannot be reached (no answer, a time-out, a 5xx, or
   * an answer that is not the API's, `INVALID_RESPONSE`, after retries): `"deny"` (default: fail closed) or `"allow"`, or a function choosing per
   * action. The answer is a {@link FallbackDecision}, and a `guard.fallback` event is tracked so
   * the audit trail shows that a decision was made without the service. Refusals (401, 403,
   * 404, 422, 429) are never turned into decisions: they reject.
   */
  readonly onUnavailable?: "deny" | "allow" | ((info: UnavailableInfo) => "deny" | "allow")
  /** Time allowed per guard attempt. Default 5,000 ms. */
  readonly guardTimeoutMs?: number
  /** Guard retries after the first attempt (same Idempotency-Key). Default 2. */
  readonly guardMaxRetries?: number
  /** How long a tracked event may wait for a batch to fill. Default 1,000 ms. */
  readonly flushIntervalMs?: number
  /** Events per ingest call, 1..100. Default 100. */
  readonly maxBatchSize?: number
  /** Events held (waiting and in flight) at most; beyond it `track()` drops the newest. Default 10,000. */
  readonly maxQueueSize?: number
  /**
   * Encoded bytes (UTF-8 JSON) of the events waiting at most, besides the batch in flight; beyond it
   * `track()` drops the newest (`queue_full`). Default 64 MiB. An event always fits an empty queue.
   */
  readonly maxQueueBytes?: number
  /** Told about every dropped event. Default: a warning on the console, at most once a minute. */
  readonly onDrop?: (dropped: DroppedEvents) => void
  /** Told about every failed ingest attempt (also those retried). */
  readonly onError?: (error: AgentGovError) => void
  /** Polling interval of `waitForApproval` when the event stream is not available. Default 2,000 ms. */
  readonly approvalPollIntervalMs?: number
}

/**
 * Options of `guard()`.
 *
 * @example
 * ```ts
 * import type { GuardOptions } from "@agentgov/sdk"
 *
 * const options: GuardOptions = { approvalId: "apr_…", signal: AbortSignal.timeout(10_000) }
 * ```
 */
export interface GuardOptions {
  /** An approved approval for this very action and context: lets exactly one call through (D7). */
  readonly approvalId?: string
  readonly signal?: AbortSignal
}

/**
 * Options of `waitForApproval()`.
 *
 * @example
 * ```ts
 * import type { WaitForApprovalOptions } from "@agentgov/sdk"
 *
 * const options: WaitForApprovalOptions = { timeoutMs: 5 * 60_000 }
 * ```
 */
export interface WaitForApprovalOptions {
  /**
   * Give up after this long with an `AgentGovError` (`APPROVAL_WAIT_TIMEOUT`). Default: wait until
   * the approval is decided or expires (its `expiresAt`, set by the rule; 1 h by default).
   */
  readonly timeoutMs?: number
  readonly signal?: AbortSignal
}

/**
 * Options of `governed()`. The mappers receive the wrapped function's arguments.
 *
 * @example
 * ```ts
 * import type { GovernedOptions } from "@agentgov/sdk"
 *
 * const options: GovernedOptions<[{ to: string; amount: number }]> = {
 *   action: "payment.send",
 *   context: ({ to, amount }) => ({ to, amount }),
 *   approvalTimeoutMs: 10 * 60_000,
 * }
 * ```
 */
export interface GovernedOptions<A extends ReadonlyArray<unknown>> {
  /** The action name for the guard. Default: the tool name. */
  readonly action?: string | ((...args: A) => string)
  /**
   * The guard's `context`. Default: the single argument when it is a plain object, `{}` for no
   * arguments, else `{args: [...]}`. Keep it JSON and under 32 KiB.
   */
  readonly context?: (...args: A) => JsonObjectInput
  /** On `require_approval`, wait for the decision (then guard again with the approval). Default true; false throws {@link ActionDenied}. */
  readonly waitForApproval?: boolean
  /** Longest wait for an approval; past it {@link ActionDenied} is thrown. Default: until it is decided or expires. */
  readonly approvalTimeoutMs?: number
  /** The event tracked after each run. Default `tool.called`; false tracks nothing. */
  readonly eventType?: string | false
  /** An abort signal for the guard and the approval wait, from the arguments. */
  readonly signal?: (...args: A) => AbortSignal | undefined
}

/** A wait for one approval, on the shared stream. */
interface ApprovalListener {
  readonly approvalId: string
  /** The approval's `approval.decided` came. */
  readonly decided: () => void
  /** The stream ended for good (no `events:read`, a refusal): poll. */
  readonly lost: () => void
}

interface ApprovalWatch {
  readonly listeners: Set<ApprovalListener>
  readonly controller: AbortController
}

const DEFAULT_EVENT_TYPE = "tool.called"
/**
 * The byte budget of one ingest batch: below the service's default body limit
 * (`AGENTGOV_MAX_BODY_BYTES`, 1 MiB), leaving room for the envelope and for the estimate of each
 * event's keys. A lower limit set by the operator is met by splitting on a 413.
 */
export const MAX_BATCH_BYTES = 900 * 1024
/** The default `maxQueueBytes`: some 2,000 events of the largest kind (32 KiB of data). */
const DEFAULT_MAX_QUEUE_BYTES = 64 * 1024 * 1024
/** While the stream is healthy, polling is only a safety net. */
const SAFETY_POLL_MS = 15_000

const defaultContext = (args: ReadonlyArray<unknown>): JsonObject =>
  args.length === 0 ? {} : args.length === 1 && isPlainObject(args[0]) ? args[0] : { args }

/**
 * The service could not decide: no answer, a 5xx, or an answer that is not the API's
 * (`INVALID_RESPONSE`: a proxy's page, a truncated body, a guard answer without its decision).
 * Anything else is the request's problem.
 */
const isUnavailable = (error: unknown): error is AgentGovError =>
  error instanceof AgentGovError &&
  (error.status === 0 || error.status >= 500 || error.code === "INVALID_RESPONSE") &&
  error.code !== "APPROVAL_WAIT_TIMEOUT"

const errorSummary = (error: unknown) =>
  error instanceof Error
    ? { name: error.name, message: error.message.slice(0, 500) }
    : { name: "Error", message: String(error).slice(0, 500) }

/**
 * The default `onDrop`: at most one console warning a minute. Drops within the minute after a
 * warning are counted and told at the end of that minute (a timer that does not keep the process
 * alive) or at `shutdown()`, whichever comes first, so that the lines add up to every drop.
 */
const warnOnDrop = () => {
  let last = Number.NEGATIVE_INFINITY
  let since = 0
  let latest = ""
  let timer: ReturnType<typeof setTimeout> | undefined
  const warn = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
    if (since === 0) return
    last = Date.now()
    console.warn(
      `@agentgov/sdk: dropped ${since} tracked event(s) (latest: ${latest}); pass onDrop to client.agent() to handle drops`,
    )
    since = 0
  }
  const onDrop = (dropped: DroppedEvents) => {
    since += dropped.events.length
    latest = `${dropped.reason}${dropped.error ? `, ${dropped.error.code}` : ""}`
    const wait = last + 60_000 - Date.now()
    if (wait <= 0) return warn()
    if (timer === undefined) {
      timer = setTimeout(warn, wait)
      ;(timer as { unref?: () => void }).unref?.()
    }
  }
  return { onDrop, flush: warn }
}

/**
 * The agent side of agentgov: ask before acting (`guard`), record what happened (`track`), wait
 * for a human (`waitForApproval`), or all three around a function (`governed`). Create it with
 * `client.agent()`; keep one per process (it holds the SDK token and the event queue) and call
 * `shutdown()` before exit.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const agentgov = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: process.env.AGENTGOV_URL! })
 * const agent = agentgov.agent() // an agent key implies the agent
 *
 * const decision = await agent.guard("email.send", { to: "cfo@example.com" })
 * if (decision.allowed) {
 *   // … send it …
 *   agent.track({ type: "email.sent", data: { to: "cfo@example.com" } })
 * }
 * await agent.shutdown()
 * ```
 */
export class AgentRuntime {
  /** The agent given in the options (undefined: implied by an agent key). */
  readonly agentId: string | undefined
  private readonly http: HttpClient
  private readonly onUnavailable: NonNullable<AgentRuntimeOptions["onUnavailable"]>
  private readonly guardTimeoutMs: number
  private readonly guardMaxRetries: number
  private readonly approvalPollIntervalMs: number
  private readonly queue: EventQueue
  /** The default drop warning's, told what is still uncounted at shutdown. */
  private readonly flushDropWarning: (() => void) | undefined
  private released = false
  /** The stream of `approval.decided` that the waits for approvals share, while one waits. */
  private approvalWatch: ApprovalWatch | undefined

  constructor(http: HttpClient, options: AgentRuntimeOptions = {}) {
    this.http = http
    this.agentId = options.agentId
    this.onUnavailable = options.onUnavailable ?? "deny"
    this.guardTimeoutMs = options.guardTimeoutMs ?? 5_000
    this.guardMaxRetries = options.guardMaxRetries ?? 2
    this.approvalPollIntervalMs = options.approvalPollIntervalMs ?? 2_000
    const maxBatchSize = options.maxBatchSize ?? 100
    if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1 || maxBatchSize > 100) {
      throw new RangeError("maxBatchSize must be an integer from 1 to 100 (the API's limit per ingest call)")
    }
    const maxQueueSize = options.maxQueueSize ?? 10_000
    if (!(maxQueueSize >= 1)) throw new RangeError("maxQueueSize must be at least 1")
    const maxQueueBytes = options.maxQueueBytes ?? DEFAULT_MAX_QUEUE_BYTES
    if (!(maxQueueBytes >= 1)) throw new RangeError("maxQueueBytes must be at least 1")
    const warning = options.onDrop ? undefined : warnOnDrop()
    this.flushDropWarning = warning?.flush
    this.queue = new EventQueue(
      async (events, idempotencyKey, signal) => {
        await http.request(
          // Stored only when the answer acknowledges every event: anything else is retried under the same key.
          {
            method: "POST",
            path: "/events/ingest",
            body: { events },
            auth: "token",
            check: checkIngestResult(events.length),
          },
          // One attempt: the queue owns the retries (same key, its backoff, Retry-After), so that
          // every failed attempt reaches onError and stats.failedAttempts.
          { idempotencyKey, signal, maxRetries: 0 },
        )
      },
      {
        maxBatchSize,
        maxBatchBytes: MAX_BATCH_BYTES,
        flushIntervalMs: options.flushIntervalMs ?? 1_000,
        maxQueueSize,
        maxQueueBytes,
        agentId: options.agentId,
        onDrop: options.onDrop ?? warning!.onDrop,
        onError: options.onError,
        retryInitialDelayMs: 500,
        retryMaxDelayMs: 30_000,
      },
    )
    http.tokens.retain()
  }

  /**
   * Asks the service whether the agent may take `action` with `context` (`POST /v1/guard`, D6)
   * and answers its decision. The SDK token is exchanged and refreshed for you. When the service
   * cannot be reached the answer is a {@link FallbackDecision} from `onUnavailable` (default
   * deny); refusals of the request itself reject with {@link AgentGovError}.
   *
   * @example
   * ```ts
   * const d = await agent.guard("payment.send", { amount: 1200, currency: "EUR" })
   * if (d.decision === "require_approval") {
   *   const approval = await agent.waitForApproval(d.approvalId!)
   *   if (approval.status === "approved") await agent.guard("payment.send", { amount: 1200, currency: "EUR" }, { approvalId: approval.id })
   * }
   * ```
   */
  async guard(action: string, context: JsonObjectInput = {}, options: GuardOptions = {}): Promise<GuardDecision> {
    const body: Record<string, unknown> = { action, context }
    if (this.agentId !== undefined) body.agentId = this.agentId
    if (options.approvalId !== undefined) body.approvalId = options.approvalId
    try {
      const result = await this.http.request<GuardResult>(
        { method: "POST", prefix: "/v1", path: "/guard", body, auth: "token", check: checkGuardResult },
        {
          timeoutMs: this.guardTimeoutMs,
          maxRetries: this.guardMaxRetries,
          // An agent should not stall on a long Retry-After: past one attempt's time, decide now.
          maxRetryAfterMs: this.guardTimeoutMs,
          signal: options.signal,
        },
      )
      return result.data
    } catch (error) {
      if (!isUnavailable(error)) throw error
      return this.fallback(action, context as JsonObject, error)
    }
  }

  /**
   * Queues an event for the audit trail; sent in batches in the background (see the options).
   * Returns false when the event was dropped (queue full, or after `shutdown()`). Throws a
   * `TypeError` for a malformed event (a bad `type` or one in the system's namespaces, `data` not
   * an object, not encodable as JSON, or over 32 KiB encoded): a programming error.
   *
   * @example
   * ```ts
   * agent.track({ type: "invoice.sent", data: { invoiceId: "inv_42", amount: 120 } })
   * ```
   */
  track(event: TrackEvent): boolean {
    return this.queue.track(event)
  }

  /**
   * Resolves once every event tracked before the call has been stored (or dropped).
   *
   * @example
   * ```ts
   * agent.track({ type: "job.finished", data: { jobId: "j1" } })
   * await agent.flush()
   * ```
   */
  flush(): Promise<void> {
    return this.queue.flush()
  }

  /**
   * Sends everything still queued, waits for it, and stops the timer; later `track()` calls drop
   * their event (`closed`). After `timeoutMs` (default 30 s, e.g. the service is down) the rest
   * is dropped and reported to `onDrop` (`shutdown`). When no other runtime of the client is still
   * running, an SDK-token exchange in flight is aborted too, so nothing of the SDK keeps the
   * process alive once it resolves. Resolves with the queue's counters.
   *
   * @example
   * ```ts
   * process.on("SIGTERM", async () => {
   *   await agent.shutdown({ timeoutMs: 10_000 })
   *   process.exit(0)
   * })
   * ```
   */
  async shutdown(options: { readonly timeoutMs?: number } = {}): Promise<EventQueueStats> {
    const stats = await this.queue.shutdown(options.timeoutMs ?? 30_000)
    if (!this.released) {
      this.released = true
      // The last runtime of the client gone: an exchange still running (the service hangs) is nobody's.
      this.http.tokens.release()
    }
    this.flushDropWarning?.()
    return stats
  }

  /**
   * Counters of the event queue (queued, in flight, sent, dropped, batches, failed attempts).
   *
   * @example
   * ```ts
   * const { queued, dropped } = agent.stats
   * ```
   */
  get stats(): EventQueueStats {
    return this.queue.stats
  }

  /**
   * Waits until approval `approvalId` is decided and returns it (`approved`, `denied`, or
   * `expired`, which counts as denied). Listens on the event stream for `approval.decided`
   * (resuming from a known event, so a decision made while it connects is not missed), polls
   * `GET /approvals/:id` when the stream is unavailable, and checks once more at `expiresAt`.
   *
   * @example
   * ```ts
   * const approval = await agent.waitForApproval("apr_…", { timeoutMs: 10 * 60_000 })
   * if (approval.status === "approved") console.log("go", approval.decisionReason)
   * ```
   */
  async waitForApproval(approvalId: string, options: WaitForApprovalOptions = {}): Promise<Approval> {
    const path = `/approvals/${seg(approvalId)}`
    const outer = options.signal
    outer?.throwIfAborted()
    const controller = new AbortController()
    const stop = controller.signal
    const onAbort = () => controller.abort(outer!.reason)
    outer?.addEventListener("abort", onAbort, { once: true })
    const timeout =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(
            () =>
              controller.abort(
                new AgentGovError({
                  status: 0,
                  code: "APPROVAL_WAIT_TIMEOUT",
                  message: `approval ${approvalId} was not decided within ${options.timeoutMs} ms`,
                }),
              ),
            timerMs(options.timeoutMs),
          )
    // An answer that is not this approval's is retried like a 5xx and is never read as a decision.
    const get = async () =>
      (
        await this.http.request<Approval>(
          { method: "GET", path, auth: "token", check: checkApproval(approvalId) },
          { signal: stop },
        )
      ).data
    try {
      const anchor = await this.latestEventId(stop)
      const first = await get()
      if (first.status !== "pending") return first
      return await new Promise<Approval>((resolve, reject) => {
        let done = false
        let streaming = anchor !== undefined
        const finish = (settle: () => void) => {
          if (done) return
          done = true
          controller.abort()
          settle()
        }
        stop.addEventListener("abort", () => finish(() => reject(stop.reason)), { once: true })
        const check = async () => {
          try {
            const approval = await get()
            if (approval.status !== "pending") finish(() => resolve(approval))
          } catch (error) {
            if (!stop.aborted && !isTransient(error)) finish(() => reject(error))
          }
        }
        if (anchor !== undefined) {
          const watch = this.watchApprovals(
            {
              approvalId,
              decided: () => void check(),
              lost: () => {
                // No stream (a credential without events:read, a proxy that buffers): poll instead.
                streaming = false
                if (!done) void check()
              },
            },
            anchor,
          )
          stop.addEventListener("abort", watch.unsubscribe, { once: true })
          // A stream already running may have passed this approval's decision before the listener was on.
          if (watch.joined) void check()
        }
        void (async () => {
          while (!done) {
            await sleep(streaming ? SAFETY_POLL_MS : this.approvalPollIntervalMs, stop).catch(() => {})
            if (done) return
            await check()
          }
        })()
        // From `expiresAt` it reads `expired` at once, before the sweep announces it.
        // (setTimeout holds at most 2^31−1 ms; a longer wait is left to the polling.)
        const untilExpiry = Date.parse(first.expiresAt) - Date.now() + 500
        if (untilExpiry < 2 ** 31 - 1) sleep(Math.max(0, untilExpiry), stop).then(check, () => {})
      })
    } finally {
      clearTimeout(timeout)
      outer?.removeEventListener("abort", onAbort)
      controller.abort()
    }
  }

  /**
   * Wraps `fn` so that every call is governed: guard first (deny → {@link ActionDenied}, nothing
   * runs), wait for an approval when one is required and guard again with it, run `fn`, then
   * track `tool.called` with `{tool, action, outcome: "ok" | "error", durationMs, eventId,
   * approvalId?, error?}`. The wrapper has `fn`'s parameters and returns a promise of its result.
   *
   * @example
   * ```ts
   * const sendPayment = agent.governed(
   *   "payment.send",
   *   async (p: { to: string; amount: number }) => bank.transfer(p.to, p.amount),
   *   { context: ({ to, amount }) => ({ to, amount }) },
   * )
   * await sendPayment({ to: "acme", amount: 50 }) // throws ActionDenied when a policy says no
   * ```
   */
  governed<A extends ReadonlyArray<unknown>, R>(
    toolName: string,
    fn: (...args: A) => R,
    options: GovernedOptions<A> = {},
  ): (...args: A) => Promise<Awaited<R>> {
    // Here, not in the tracking after `fn` ran: a TypeError then would hide its result, and a caller
    // retrying on the error would do the work twice.
    if (options.eventType !== false) assertEventType(options.eventType ?? DEFAULT_EVENT_TYPE, "governed(): eventType")
    return async (...args: A): Promise<Awaited<R>> => {
      const authorized = await this.authorize(toolName, args, options)
      const started = performance.now()
      let result: Awaited<R>
      try {
        result = await fn(...args)
      } catch (error) {
        this.record(toolName, options, started, authorized, error ?? new Error("the function threw undefined"))
        throw error
      }
      this.record(toolName, options, started, authorized, undefined)
      return result
    }
  }

  /**
   * The guard-and-approval half of {@link governed}, for adapters that run the work themselves
   * (e.g. streaming tools): resolves when the action may proceed, throws {@link ActionDenied}
   * otherwise. Pair it with {@link recordToolCall}.
   *
   * @example
   * ```ts
   * const authorized = await agent.authorize("report.export", [{ format: "csv" }])
   * const started = performance.now()
   * try {
   *   for await (const chunk of exportReport()) send(chunk)
   *   agent.recordToolCall("report.export", authorized, started, undefined)
   * } catch (error) {
   *   agent.recordToolCall("report.export", authorized, started, error)
   *   throw error
   * }
   * ```
   */
  async authorize<A extends ReadonlyArray<unknown>>(
    toolName: string,
    args: A,
    options: GovernedOptions<A> = {},
  ): Promise<{ action: string; context: JsonObjectInput; decision: GuardDecision; approvalId: string | undefined }> {
    const action = typeof options.action === "function" ? options.action(...args) : (options.action ?? toolName)
    const context = options.context ? options.context(...args) : defaultContext(args)
    const signal = options.signal?.(...args)
    let decision = await this.guard(action, context, { signal })
    let approval: Approval | undefined
    if (decision.decision === "require_approval" && decision.approvalId !== undefined) {
      if (options.waitForApproval === false) throw new ActionDenied(action, decision)
      try {
        approval = await this.waitForApproval(decision.approvalId, { timeoutMs: options.approvalTimeoutMs, signal })
      } catch (error) {
        if (!(error instanceof AgentGovError && error.code === "APPROVAL_WAIT_TIMEOUT")) throw error
        const pending = await this.http
          .request<Approval>({
            method: "GET",
            path: `/approvals/${seg(decision.approvalId)}`,
            auth: "token",
            check: checkApproval(decision.approvalId),
          })
          .then((r) => r.data)
          .catch(() => undefined)
        throw new ActionDenied(action, decision, pending)
      }
      if (approval.status !== "approved") throw new ActionDenied(action, decision, approval)
      decision = await this.guard(action, context, { approvalId: approval.id, signal })
    }
    if (!decision.allowed) throw new ActionDenied(action, decision, approval)
    return { action, context, decision, approvalId: approval?.id }
  }

  /**
   * The tracking half of {@link governed}: records one `tool.called` event for a run that
   * {@link authorize} allowed. `error` undefined means the run succeeded.
   *
   * @example
   * ```ts
   * const authorized = await agent.authorize("db.vacuum", [])
   * const started = performance.now()
   * await vacuum()
   * agent.recordToolCall("db.vacuum", authorized, started, undefined)
   * ```
   */
  recordToolCall(
    toolName: string,
    authorized: { readonly action: string; readonly decision: GuardDecision; readonly approvalId: string | undefined },
    startedAt: number,
    error: unknown,
    eventType: string | false = DEFAULT_EVENT_TYPE,
  ): void {
    this.record(toolName, { eventType }, startedAt, authorized, error)
  }

  private record(
    toolName: string,
    options: { readonly eventType?: string | false },
    startedAt: number,
    authorized: { readonly action: string; readonly decision: GuardDecision; readonly approvalId: string | undefined },
    error: unknown,
  ) {
    const type = options.eventType ?? DEFAULT_EVENT_TYPE
    if (type === false) return
    const { action, decision, approvalId } = authorized
    this.track({
      type,
      data: {
        tool: toolName,
        action,
        outcome: error === undefined ? "ok" : "error",
        durationMs: Math.round((performance.now() - startedAt) * 1000) / 1000,
        eventId: decision.eventId,
        ...(approvalId !== undefined ? { approvalId } : {}),
        ...(error !== undefined ? { error: errorSummary(error) } : {}),
      },
    })
  }

  private fallback(action: string, context: JsonObject, error: AgentGovError): FallbackDecision {
    const choice =
      typeof this.onUnavailable === "function" ? this.onUnavailable({ action, context, error }) : this.onUnavailable
    const allowed = choice === "allow"
    // The service recorded nothing: the trail should still learn, once it is back, that the agent
    // acted (or was stopped) on the SDK's word.
    this.queue.track({
      type: "guard.fallback",
      data: { action, decision: allowed ? "allow" : "deny", error: { code: error.code, message: error.message } },
    })
    return {
      decision: allowed ? "allow" : "deny",
      allowed,
      reasons: [
        {
          code: "SERVICE_UNAVAILABLE",
          message: `the service could not be reached (${error.code}: ${error.message}); onUnavailable decided "${choice}"`,
        },
      ],
      matched: [],
      eventId: null,
      error,
    }
  }

  /**
   * Listens for `approval.decided` on the runtime's one stream of them, opening it (from `anchor`) for the
   * first listener and closing it after the last: every wait of the runtime shares it, so that many
   * waits do not spend the key's streams (20 by default). `joined`: the stream was running already.
   */
  private watchApprovals(
    listener: ApprovalListener,
    anchor: string,
  ): { readonly joined: boolean; readonly unsubscribe: () => void } {
    const running = this.approvalWatch
    const watch: ApprovalWatch = running ?? { listeners: new Set(), controller: new AbortController() }
    if (running === undefined) {
      this.approvalWatch = watch
      void (async () => {
        try {
          const decided = streamEvents(
            this.http,
            { types: ["approval.decided"], lastEventId: anchor, signal: watch.controller.signal },
            "token",
          )
          for await (const event of decided) {
            const id = event.payload?.data?.approvalId
            for (const l of [...watch.listeners]) if (l.approvalId === id) l.decided()
          }
        } catch {
          // Told to the listeners below.
        }
        if (this.approvalWatch === watch) this.approvalWatch = undefined
        if (!watch.controller.signal.aborted) for (const l of [...watch.listeners]) l.lost()
        watch.listeners.clear()
      })()
    }
    watch.listeners.add(listener)
    return {
      joined: running !== undefined,
      unsubscribe: () => {
        watch.listeners.delete(listener)
        if (watch.listeners.size > 0) return
        if (this.approvalWatch === watch) this.approvalWatch = undefined
        watch.controller.abort()
      },
    }
  }

  /** The newest event id this credential can see, to resume the stream from; undefined if it cannot read events. */
  private async latestEventId(signal: AbortSignal): Promise<string | undefined> {
    try {
      const page = await this.http.request<ReadonlyArray<AuditEvent>>(
        { method: "GET", path: "/events", query: { limit: 1 }, auth: "token" },
        { signal },
      )
      return page.data[0]?.id
    } catch {
      signal.throwIfAborted()
      return undefined
    }
  }
}
