import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { setTimeout as delay } from "node:timers/promises"
import { BoundedSet } from "./cache.ts"
import { HandlerTimeoutError, WebhookVerificationError } from "./errors.ts"
import { type AnyWebhookEvent, type EventForPattern, type EventPattern, matchesEventPattern } from "./events.ts"
import { errorSummary, methodNotAllowed, readBody, send } from "./http.ts"
import {
  isRetryable,
  type ResolvedRetryOptions,
  type RetryOptions,
  resolveRetryOptions,
  retryDelayMs,
} from "./retry.ts"
import { Webhook } from "./Webhook.ts"

/**
 * What a handler receives beside the event.
 *
 * @example
 * ```ts
 * app.on("approval.requested", async (event, { attempt, signal }) => {
 *   if (attempt > 1) console.log("retrying", event.id)
 *   await fetch(url, { method: "POST", body: JSON.stringify(event.data), signal })
 * })
 * ```
 */
export interface HandlerContext {
  /** This job's attempt, starting at 1 (not the server's `metadata.attempt`). */
  readonly attempt: number
  readonly maxAttempts: number
  /** Aborted when the attempt times out, or when `close()` gives up waiting. Pass it to your HTTP calls. */
  readonly signal: AbortSignal
  /** The pattern the handler was registered with. */
  readonly pattern: string
  /** `X-SVC-Webhook-Id` of the delivery that brought the event. */
  readonly deliveryId: string
}

/**
 * A handler of events matching a pattern. Throwing (or rejecting) fails the attempt: it is retried
 * with backoff, after a `Retry-After` the error carries, up to `retry.maxAttempts`.
 *
 * @example
 * ```ts
 * import type { EventHandler } from "@agentgov/connector-sdk"
 *
 * const onRequested: EventHandler<"approval.requested"> = async (event) => {
 *   await postToChannel(`Approval needed: ${event.data.action}`)
 * }
 * app.on("approval.requested", onRequested)
 * ```
 */
export type EventHandler<P extends string = "*"> = (event: EventForPattern<P>, context: HandlerContext) => unknown

/**
 * A job that failed for good: kept for inspection (`app.deadLetters()`) and passed to
 * `onDeadLetter`, so that you can store it, alert, or retry it later (`app.retryDeadLetters()`).
 *
 * @example
 * ```ts
 * import type { DeadLetter } from "@agentgov/connector-sdk"
 *
 * const describe = (l: DeadLetter) => `${l.event.type} ${l.event.id} → ${l.pattern}: ${l.error.message} (${l.reason})`
 * ```
 */
export interface DeadLetter {
  /** Unique within this app: `dl_<n>`. */
  readonly id: string
  readonly event: AnyWebhookEvent
  readonly deliveryId: string
  /** The pattern of the handler that failed. */
  readonly pattern: string
  /** Attempts made. */
  readonly attempts: number
  /**
   * `max_attempts`: every attempt failed; `non_retryable`: the handler threw a
   * `NonRetryableError`; `shutdown`: the app closed before the job could succeed.
   */
  readonly reason: "max_attempts" | "non_retryable" | "shutdown"
  /** The last failure, summarised. */
  readonly error: { readonly name: string; readonly message: string }
  /** The last failure as thrown. */
  readonly cause: unknown
  /** ISO 8601. */
  readonly failedAt: string
}

/**
 * Where event ids are remembered for de-duplication. The default is in memory, per process; give
 * a shared store (Redis `SET NX PX`, a database row) when several instances receive one webhook.
 *
 * @example
 * ```ts
 * import type { DedupeStore } from "@agentgov/connector-sdk"
 *
 * const redisStore = (redis: Redis): DedupeStore => ({
 *   claim: async (id, ttlMs) => (await redis.set(`evt:${id}`, "1", "PX", ttlMs, "NX")) === "OK",
 *   release: async (id) => void (await redis.del(`evt:${id}`)),
 * })
 * ```
 */
export interface DedupeStore {
  /** Records `eventId`; false when it was already recorded (a duplicate). */
  claim(eventId: string, ttlMs: number): boolean | Promise<boolean>
  /** Forgets `eventId` (the delivery was refused after the claim, so its retry must be accepted). */
  release(eventId: string): void | Promise<void>
}

/**
 * Where the app reports problems. Default `console`; `false` for silence.
 *
 * @example
 * ```ts
 * import type { ConnectorLogger } from "@agentgov/connector-sdk"
 *
 * const logger: ConnectorLogger = { warn: (m, d) => pino.warn(d, m), error: (m, d) => pino.error(d, m) }
 * ```
 */
export interface ConnectorLogger {
  warn(message: string, details?: Record<string, unknown>): void
  error(message: string, details?: Record<string, unknown>): void
}

/**
 * Options of {@link createConnector}.
 *
 * @example
 * ```ts
 * import { type ConnectorOptions, createConnector } from "@agentgov/connector-sdk"
 *
 * const options: ConnectorOptions = {
 *   secret: process.env.AGENTGOV_WEBHOOK_SECRET!,
 *   port: 8080,
 *   concurrency: 2,
 *   retry: { maxAttempts: 8 },
 *   onDeadLetter: (letter) => console.error("gave up", letter.event.id),
 * }
 * const app = createConnector(options)
 * ```
 */
export interface ConnectorOptions {
  /** The webhook's signing secret, or several during a rotation (any one may match). */
  readonly secret: string | ReadonlyArray<string>
  /** The path deliveries are POSTed to. Default `/webhooks`. */
  readonly path?: string
  /** The port `listen()` uses when given none. Default 3000; 0 picks a free one. */
  readonly port?: number
  /** The interface `listen()` binds. Default: Node's (every interface). */
  readonly host?: string
  /** Allowed distance between the signed timestamp and now, either way. Default 300 s. */
  readonly toleranceSeconds?: number
  /** Accept the legacy body-only signature (`X-SVC-Signature`). Default false: it can be replayed. */
  readonly allowLegacy?: boolean
  /** Larger bodies are answered 413. Default 1 MiB. */
  readonly maxBodyBytes?: number
  /** Handlers running at once. Default 4. */
  readonly concurrency?: number
  /**
   * Jobs held (queued, running or waiting for a retry) before deliveries are answered 503 with
   * `Retry-After`, so that the service retries later. Default 1,000.
   */
  readonly maxQueueSize?: number
  readonly retry?: RetryOptions
  /** An attempt running longer fails (and its `signal` is aborted). Default 60,000 ms; 0 for none. */
  readonly handlerTimeoutMs?: number
  /**
   * De-duplication by event id (D9). `ttlMs` default 48 h (longer than the service's longest retry
   * schedule, 34 h 42 min); `maxEntries` default 10,000 (the in-memory store's bound).
   */
  readonly dedupe?: { readonly ttlMs?: number; readonly maxEntries?: number; readonly store?: DedupeStore }
  /** Dead letters kept in memory (oldest dropped first). Default 1,000. */
  readonly maxDeadLetters?: number
  /** Called once per dead letter. Errors it throws are logged, not retried. */
  readonly onDeadLetter?: (letter: DeadLetter) => unknown
  /** Called after each failed attempt that will be retried. */
  readonly onRetry?: (info: RetryInfo) => unknown
  readonly logger?: ConnectorLogger | false
  /** The clock (ms since the epoch). Default `Date.now`. For tests. */
  readonly now?: () => number
  /** Waits before a retry; must reject when `signal` aborts. Default a timer. For tests. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>
  /** A number in [0, 1) for jitter. Default `Math.random`. For tests. */
  readonly random?: () => number
}

/**
 * A failed attempt that will be retried.
 *
 * @example
 * ```ts
 * createConnector({ secret, onRetry: (i) => console.warn(`${i.event.id} attempt ${i.attempt} failed; again in ${i.delayMs} ms`) })
 * ```
 */
export interface RetryInfo {
  readonly event: AnyWebhookEvent
  readonly pattern: string
  /** The attempt that failed. */
  readonly attempt: number
  readonly error: unknown
  /** The wait before the next attempt. */
  readonly delayMs: number
}

/**
 * The app's state, as `GET /healthz` reports it.
 *
 * @example
 * ```ts
 * const { queueDepth, deadLetters } = app.health()
 * ```
 */
export interface ConnectorHealth {
  readonly status: "ok" | "closing"
  /** Jobs waiting for a free handler slot. */
  readonly queueDepth: number
  /** Jobs whose handler is running. */
  readonly inFlight: number
  /** Jobs waiting for their next attempt. */
  readonly retrying: number
  /** Dead letters held. */
  readonly deadLetters: number
  /** Deliveries accepted (202) since start. */
  readonly received: number
  /** Deliveries answered as duplicates. */
  readonly duplicates: number
  /** Jobs that succeeded. */
  readonly succeeded: number
  /** Attempts that failed (retried or not). */
  readonly failedAttempts: number
}

/**
 * Options of {@link ConnectorApp.close}.
 *
 * @example
 * ```ts
 * await app.close({ timeoutMs: 5_000 })
 * ```
 */
export interface CloseOptions {
  /** How long to wait for queued and running handlers. Default 10,000 ms. */
  readonly timeoutMs?: number
}

/**
 * What {@link ConnectorApp.close} achieved.
 *
 * @example
 * ```ts
 * const { drained, abandoned } = await app.close()
 * if (!drained) console.warn(`${abandoned} handlers still running at exit`)
 * ```
 */
export interface CloseResult {
  /** Every queued and running job finished in time. */
  readonly drained: boolean
  /** Handlers still running when the wait ended (their signal is aborted). */
  readonly abandoned: number
  /** Jobs dead-lettered by the shutdown (waiting retries, and queued jobs if the wait timed out). */
  readonly deadLettered: number
}

interface Route {
  readonly pattern: string
  readonly handler: (event: any, context: HandlerContext) => unknown
}

interface Job {
  readonly event: AnyWebhookEvent
  readonly deliveryId: string
  readonly route: Route
  attempts: number
  lastError: unknown
  controller: AbortController | undefined
}

const DEFAULT_PATH = "/webhooks"
const DEFAULT_MAX_BODY = 1024 * 1024
const DEFAULT_DEDUPE_TTL_MS = 48 * 3600_000
const CLOSING_RETRY_AFTER_SECONDS = 5
const QUEUE_FULL_RETRY_AFTER_SECONDS = 30

const defaultSleep = (ms: number, signal: AbortSignal): Promise<void> => delay(ms, undefined, { signal })

const positiveInt = (value: number | undefined, fallback: number, name: string, min = 1): number => {
  const v = value ?? fallback
  if (!Number.isInteger(v) || v < min) throw new RangeError(`createConnector: \`${name}\` must be an integer ≥ ${min}`)
  return v
}

/**
 * A connector: an HTTP endpoint that verifies agentgov's signed webhooks, answers at once, and runs
 * your handlers in the background with retries. Create it with {@link createConnector}.
 *
 * Invariants: a handler never runs for a delivery whose signature or timestamp did not verify;
 * an event id accepted once is not run again (within `dedupe.ttlMs`); the answer (202) is sent
 * before any handler runs.
 *
 * @example
 * ```ts
 * import { createConnector } from "@agentgov/connector-sdk"
 *
 * const app = createConnector({ secret: process.env.AGENTGOV_WEBHOOK_SECRET! })
 * app.on("enforcement.*", async (event) => page(event))
 * await app.listen(8080)
 * ```
 */
export class ConnectorApp {
  /** The path deliveries are accepted on. */
  readonly path: string
  readonly #options: ConnectorOptions
  readonly #webhook: Webhook
  readonly #retry: ResolvedRetryOptions
  readonly #concurrency: number
  readonly #maxQueue: number
  readonly #maxBody: number
  readonly #handlerTimeoutMs: number
  readonly #dedupeTtlMs: number
  readonly #dedupe: DedupeStore
  readonly #maxDeadLetters: number
  readonly #logger: ConnectorLogger | undefined
  readonly #now: () => number
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>
  readonly #random: () => number

  readonly #routes: Array<Route> = []
  readonly #queue: Array<Job> = []
  readonly #running = new Set<Job>()
  readonly #waiting = new Map<Job, AbortController>()
  readonly #deadLetters: Array<DeadLetter> = []
  readonly #deadLetterRoutes = new WeakMap<DeadLetter, Route>()
  #deadLetterSeq = 0
  #idleWaiters: Array<() => void> = []
  #server: Server | undefined
  #closing = false
  #stopped = false
  #closePromise: Promise<CloseResult> | undefined
  #shutdownDeadLetters = 0
  #stats = { received: 0, duplicates: 0, succeeded: 0, failedAttempts: 0 }

  constructor(options: ConnectorOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#webhook = new Webhook({
      secret: options.secret,
      toleranceSeconds: options.toleranceSeconds,
      allowLegacy: options.allowLegacy,
      now: this.#now,
      // Replays are caught by the event-id de-duplication below, which, unlike the verifier's
      // memory, forgets a delivery that was refused (503): its retry may reuse the same headers.
      replayProtection: false,
    })
    this.path = options.path ?? DEFAULT_PATH
    if (!this.path.startsWith("/")) throw new TypeError("createConnector: `path` must start with /")
    if (this.path === "/healthz") throw new TypeError("createConnector: `path` cannot be /healthz")
    this.#retry = resolveRetryOptions(options.retry)
    this.#concurrency = positiveInt(options.concurrency, 4, "concurrency")
    this.#maxQueue = positiveInt(options.maxQueueSize, 1000, "maxQueueSize")
    this.#maxBody = positiveInt(options.maxBodyBytes, DEFAULT_MAX_BODY, "maxBodyBytes")
    this.#handlerTimeoutMs = positiveInt(options.handlerTimeoutMs, 60_000, "handlerTimeoutMs", 0)
    this.#maxDeadLetters = positiveInt(options.maxDeadLetters, 1000, "maxDeadLetters", 0)
    this.#dedupeTtlMs = positiveInt(options.dedupe?.ttlMs, DEFAULT_DEDUPE_TTL_MS, "dedupe.ttlMs")
    if (options.dedupe?.store) {
      this.#dedupe = options.dedupe.store
    } else {
      const seen = new BoundedSet(positiveInt(options.dedupe?.maxEntries, 10_000, "dedupe.maxEntries"), this.#now)
      this.#dedupe = { claim: (id, ttl) => seen.add(id, ttl), release: (id) => seen.delete(id) }
    }
    this.#logger = options.logger === false ? undefined : (options.logger ?? console)
    this.#sleep = options.sleep ?? defaultSleep
    this.#random = options.random ?? Math.random
  }

  /**
   * Runs `handler` for every accepted event whose type matches `pattern`: an exact name (aliases
   * such as `enforcement.issued` resolved), `prefix.*`, or `*`. Every matching handler runs, each
   * with its own retries, in no guaranteed order. Typed by the pattern.
   *
   * @example
   * ```ts
   * app
   *   .on("approval.requested", (event) => notify(`approve ${event.data.action}? ${event.data.approvalId}`))
   *   .on("enforcement.*", (event) => page(event))
   *   .on("*", (event) => audit.log(event.type))
   * ```
   */
  on<P extends EventPattern>(pattern: P, handler: EventHandler<P>): this {
    if (
      typeof pattern !== "string" ||
      pattern === "" ||
      (pattern.includes("*") && pattern !== "*" && !/^[^*]+\.\*$/.test(pattern))
    ) {
      throw new TypeError(`on: "${String(pattern)}" is not an event name, a "prefix.*" pattern or "*"`)
    }
    if (typeof handler !== "function") throw new TypeError("on: handler must be a function")
    this.#routes.push({ pattern, handler })
    return this
  }

  /**
   * The Node request listener behind `listen()`, to mount the connector on a server of your own
   * (it serves the webhook path and `/healthz`, and answers 404 elsewhere).
   *
   * @example
   * ```ts
   * import { createServer } from "node:http"
   *
   * createServer(app.requestListener).listen(8080)
   * ```
   */
  readonly requestListener = (req: IncomingMessage, res: ServerResponse): void => {
    this.#handle(req, res).catch((error: unknown) => {
      this.#logger?.error("connector: request failed", { error: errorSummary(error) })
      if (!res.headersSent) send(res, 500, { ok: false, error: { code: "INTERNAL_ERROR", message: "internal error" } })
      else res.destroy()
    })
  }

  /**
   * Starts an HTTP server. Resolves once it listens, with its address.
   *
   * @example
   * ```ts
   * const { port, url } = await app.listen(Number(process.env.PORT ?? 3000))
   * console.log(`POST ${url}${app.path}`)
   * ```
   */
  async listen(
    port?: number,
    host?: string,
  ): Promise<{ readonly port: number; readonly host: string; readonly url: string }> {
    if (this.#server) throw new Error("listen: already listening")
    if (this.#closing) throw new Error("listen: the connector is closed")
    const server = createServer(this.requestListener)
    // a sender that stalls mid-body must not hold a socket for minutes
    server.requestTimeout = 30_000
    server.headersTimeout = 15_000
    this.#server = server
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(port ?? this.#options.port ?? 3000, host ?? this.#options.host, () => {
        server.off("error", reject)
        resolve()
      })
    })
    const address = server.address() as AddressInfo
    const urlHost = address.family === "IPv6" ? `[${address.address}]` : address.address
    return { port: address.port, host: address.address, url: `http://${urlHost}:${address.port}` }
  }

  /**
   * The app's counters, as `GET /healthz` serves them.
   *
   * @example
   * ```ts
   * setInterval(() => metrics.gauge("connector.queue", app.health().queueDepth), 10_000)
   * ```
   */
  health(): ConnectorHealth {
    return {
      status: this.#closing ? "closing" : "ok",
      queueDepth: this.#queue.length,
      inFlight: this.#running.size,
      retrying: this.#waiting.size,
      deadLetters: this.#deadLetters.length,
      ...this.#stats,
    }
  }

  /**
   * The dead letters held, oldest first (a copy).
   *
   * @example
   * ```ts
   * for (const letter of app.deadLetters()) console.log(letter.event.id, letter.error.message)
   * ```
   */
  deadLetters(): ReadonlyArray<DeadLetter> {
    return [...this.#deadLetters]
  }

  /**
   * Queues the dead letters that `filter` selects (all by default) again, each with a fresh set of
   * attempts, and removes them from the list. Returns how many were queued.
   *
   * @example
   * ```ts
   * // after fixing the Slack token:
   * app.retryDeadLetters((letter) => letter.error.message.includes("invalid_auth"))
   * ```
   */
  retryDeadLetters(filter: (letter: DeadLetter) => boolean = () => true): number {
    if (this.#closing) throw new Error("retryDeadLetters: the connector is closing")
    let count = 0
    for (let i = 0; i < this.#deadLetters.length; ) {
      const letter = this.#deadLetters[i]!
      const route = this.#deadLetterRoutes.get(letter)
      if (route === undefined || !filter(letter)) {
        i++
        continue
      }
      this.#deadLetters.splice(i, 1)
      this.#queue.push({
        event: letter.event,
        deliveryId: letter.deliveryId,
        route,
        attempts: 0,
        lastError: undefined,
        controller: undefined,
      })
      count++
    }
    if (count > 0) setImmediate(() => this.#pump())
    return count
  }

  /**
   * Resolves when no job is queued, running or waiting for a retry. Handy in tests.
   *
   * @example
   * ```ts
   * await fetch(`${url}/webhooks`, { method: "POST", headers, body })
   * await app.idle()
   * expect(sent).toHaveLength(1)
   * ```
   */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve()
    return new Promise((resolve) => this.#idleWaiters.push(resolve))
  }

  /**
   * Stops accepting deliveries (the server stops listening; requests already arriving get 503, so
   * the service retries them), dead-letters jobs waiting for a retry (reason `shutdown`), and waits
   * up to `timeoutMs` for queued and running handlers. When the wait times out, queued jobs are
   * dead-lettered and running handlers' signals aborted. Idempotent.
   *
   * @example
   * ```ts
   * process.on("SIGTERM", async () => {
   *   const result = await app.close({ timeoutMs: 10_000 })
   *   process.exit(result.drained ? 0 : 1)
   * })
   * ```
   */
  close(options: CloseOptions = {}): Promise<CloseResult> {
    this.#closePromise ??= this.#close(options.timeoutMs ?? 10_000)
    return this.#closePromise
  }

  async #close(timeoutMs: number): Promise<CloseResult> {
    this.#closing = true
    const server = this.#server
    const serverClosed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve()
    server?.closeIdleConnections()

    for (const [job, controller] of this.#waiting) {
      controller.abort()
      this.#waiting.delete(job)
      this.#deadLetter(job, job.lastError, "shutdown")
    }
    this.#notifyIdle()

    const timeout = new AbortController()
    const drained = await Promise.race([
      this.idle().then(() => true),
      delay(timeoutMs, false, { signal: timeout.signal, ref: false }).catch(() => false),
    ])
    timeout.abort()

    this.#stopped = true
    const abandoned = this.#running.size
    if (!drained) {
      for (const job of this.#queue.splice(0)) {
        this.#deadLetter(job, new Error("the connector closed before the job ran"), "shutdown")
      }
      for (const job of this.#running) job.controller?.abort(new Error("the connector is closing"))
    }
    server?.closeAllConnections()
    await serverClosed
    return { drained, abandoned, deadLettered: this.#shutdownDeadLetters }
  }

  // ---------------------------------------------------------------------------------------------
  // HTTP

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?", 1)[0]
    if (path === "/healthz") {
      if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed(res, "GET, HEAD")
      const health = this.health()
      return send(res, health.status === "ok" ? 200 : 503, health, {}, req.method === "HEAD")
    }
    if (path !== this.path) {
      return send(res, 404, { ok: false, error: { code: "NOT_FOUND", message: `no route ${path}` } })
    }
    if (req.method !== "POST") return methodNotAllowed(res, "POST")
    if (this.#closing) return this.#unavailable(res, CLOSING_RETRY_AFTER_SECONDS, "the connector is shutting down")

    const body = await readBody(req, this.#maxBody)
    if (body === "too_large") {
      return send(
        res,
        413,
        { ok: false, error: { code: "PAYLOAD_TOO_LARGE", message: `bodies are limited to ${this.#maxBody} bytes` } },
        { connection: "close" },
      )
    }
    if (body === "aborted") return

    let delivery: ReturnType<Webhook["verifyDelivery"]>
    try {
      delivery = this.#webhook.verifyDelivery(body, req.headers)
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error
      if (error.code === "INVALID_PAYLOAD") {
        return send(res, 400, { ok: false, error: { code: "BAD_REQUEST", message: error.message } })
      }
      return send(res, 401, {
        ok: false,
        error: { code: "UNAUTHORIZED", message: `webhook verification failed: ${error.code}` },
      })
    }
    const { event, deliveryId } = delivery
    const routes = this.#routes.filter((r) => matchesEventPattern(r.pattern, event.type))
    if (this.#pending() + routes.length > this.#maxQueue) {
      return this.#unavailable(res, QUEUE_FULL_RETRY_AFTER_SECONDS, "the connector's queue is full")
    }
    if (!(await this.#dedupe.claim(event.id, this.#dedupeTtlMs))) {
      this.#stats.duplicates++
      return send(res, 200, { ok: true, data: { eventId: event.id, duplicate: true } })
    }
    if (this.#closing) {
      await this.#dedupe.release(event.id)
      return this.#unavailable(res, CLOSING_RETRY_AFTER_SECONDS, "the connector is shutting down")
    }
    this.#stats.received++
    for (const route of routes) {
      this.#queue.push({ event, deliveryId, route, attempts: 0, lastError: undefined, controller: undefined })
    }
    // answer first; handlers start on a later turn of the event loop
    send(res, 202, { ok: true, data: { eventId: event.id, handlers: routes.length } })
    if (routes.length > 0) setImmediate(() => this.#pump())
  }

  #unavailable(res: ServerResponse, retryAfterSeconds: number, message: string): void {
    send(res, 503, { ok: false, error: { code: "UNAVAILABLE", message } }, { "retry-after": String(retryAfterSeconds) })
  }

  // ---------------------------------------------------------------------------------------------
  // Jobs

  #pending(): number {
    return this.#queue.length + this.#running.size + this.#waiting.size
  }

  #isIdle(): boolean {
    return this.#pending() === 0
  }

  #notifyIdle(): void {
    if (!this.#isIdle()) return
    const waiters = this.#idleWaiters
    this.#idleWaiters = []
    for (const resolve of waiters) resolve()
  }

  #pump(): void {
    while (!this.#stopped && this.#running.size < this.#concurrency && this.#queue.length > 0) {
      void this.#run(this.#queue.shift()!)
    }
    this.#notifyIdle()
  }

  async #run(job: Job): Promise<void> {
    this.#running.add(job)
    job.attempts++
    const controller = new AbortController()
    job.controller = controller
    try {
      await this.#attempt(job, controller)
      this.#stats.succeeded++
    } catch (error) {
      this.#stats.failedAttempts++
      job.lastError = error
      this.#failed(job, error)
    } finally {
      job.controller = undefined
      this.#running.delete(job)
      this.#pump()
    }
  }

  #attempt(job: Job, controller: AbortController): Promise<unknown> {
    const context: HandlerContext = {
      attempt: job.attempts,
      maxAttempts: this.#retry.maxAttempts,
      signal: controller.signal,
      pattern: job.route.pattern,
      deliveryId: job.deliveryId,
    }
    const run = Promise.resolve().then(() => job.route.handler(job.event, context))
    if (this.#handlerTimeoutMs === 0) return run
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new HandlerTimeoutError(this.#handlerTimeoutMs)
        controller.abort(error)
        reject(error)
      }, this.#handlerTimeoutMs)
    })
    return Promise.race([run, timeout]).finally(() => clearTimeout(timer))
  }

  #failed(job: Job, error: unknown): void {
    // while closing there is no later to retry in
    const giveUp: DeadLetter["reason"] | undefined = this.#closing
      ? "shutdown"
      : !isRetryable(error)
        ? "non_retryable"
        : job.attempts >= this.#retry.maxAttempts
          ? "max_attempts"
          : undefined
    if (giveUp !== undefined) {
      this.#deadLetter(job, error, giveUp)
      return
    }

    const delayMs = retryDelayMs(error, job.attempts, this.#retry, this.#random, this.#now)
    this.#logger?.warn("connector: handler failed; will retry", {
      eventId: job.event.id,
      type: job.event.type,
      pattern: job.route.pattern,
      attempt: job.attempts,
      delayMs,
      error: errorSummary(error),
    })
    this.#hook("onRetry", () =>
      this.#options.onRetry?.({ event: job.event, pattern: job.route.pattern, attempt: job.attempts, error, delayMs }),
    )
    const controller = new AbortController()
    this.#waiting.set(job, controller)
    this.#sleep(delayMs, controller.signal).then(
      () => {
        // close() may have taken it already
        if (!this.#waiting.delete(job)) return
        this.#queue.push(job)
        this.#pump()
      },
      () => {
        // aborted by close(), which dead-letters it
      },
    )
  }

  #deadLetter(job: Job, error: unknown, reason: DeadLetter["reason"]): void {
    const letter: DeadLetter = {
      id: `dl_${++this.#deadLetterSeq}`,
      event: job.event,
      deliveryId: job.deliveryId,
      pattern: job.route.pattern,
      attempts: job.attempts,
      reason,
      error: errorSummary(error),
      cause: error,
      failedAt: new Date(this.#now()).toISOString(),
    }
    if (reason === "shutdown") this.#shutdownDeadLetters++
    this.#deadLetterRoutes.set(letter, job.route)
    if (this.#maxDeadLetters > 0) {
      this.#deadLetters.push(letter)
      if (this.#deadLetters.length > this.#maxDeadLetters) this.#deadLetters.shift()
    }
    this.#logger?.error("connector: handler gave up (dead letter)", {
      eventId: job.event.id,
      type: job.event.type,
      pattern: job.route.pattern,
      attempts: job.attempts,
      reason,
      error: letter.error,
    })
    this.#hook("onDeadLetter", () => this.#options.onDeadLetter?.(letter))
  }

  #hook(name: string, call: () => unknown): void {
    try {
      Promise.resolve(call()).catch((error: unknown) =>
        this.#logger?.error(`connector: ${name} failed`, { error: errorSummary(error) }),
      )
    } catch (error) {
      this.#logger?.error(`connector: ${name} failed`, { error: errorSummary(error) })
    }
  }
}

/**
 * Creates a connector app. Register handlers with `on`, then `listen`.
 *
 * @example
 * ```ts
 * import { createConnector } from "@agentgov/connector-sdk"
 *
 * const app = createConnector({ secret: process.env.AGENTGOV_WEBHOOK_SECRET! })
 *
 * app.on("approval.requested", async (event) => {
 *   await slack.chat.postMessage({ channel: "#approvals", text: `Approve ${event.data.action}?` })
 * })
 *
 * await app.listen(Number(process.env.PORT ?? 3000))
 * ```
 */
export const createConnector = (options: ConnectorOptions): ConnectorApp => new ConnectorApp(options)
