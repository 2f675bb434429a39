import { newIdempotencyKey } from "../core/HttpClient.ts"
import { backoffMs, isTransient, sleep } from "../core/retry.ts"
import { AgentGovError } from "../errors.ts"
import type { IngestEvent, JsonObject } from "../types.ts"

/**
 * An event for `track()`. `occurredAt` is stamped when `track()` is called if you give none, so
 * the time stays the moment it happened however late the batch is sent.
 *
 * @example
 * ```ts
 * import type { TrackEvent } from "@agentgov/sdk"
 *
 * const event: TrackEvent = { type: "invoice.sent", data: { invoiceId: "inv_42", amount: 120 } }
 * ```
 */
export interface TrackEvent {
  /** `lowercase.dotted`: 2–8 segments of `[a-z][a-z0-9_]*`; not one of the system's own names. */
  readonly type: string
  /** A JSON object, at most 32 KiB encoded. Default `{}`. */
  readonly data?: JsonObject
  /** Default: the runtime's `agentId` (or the agent of an agent key). */
  readonly agentId?: string
  readonly occurredAt?: string | Date
}

/**
 * Why events were dropped:
 *
 * - `queue_full`: `maxQueueSize` events were already waiting (the newest is dropped; the queue
 *   keeps its order and never blocks the caller);
 * - `closed`: `track()` after `shutdown()`;
 * - `rejected`: the service refused them for good (422 for one event drops that event and the
 *   rest of its batch is sent; 401/403 drop the batch);
 * - `shutdown`: `shutdown()` ran out of time; events of a batch that was in flight may or may
 *   not have been stored.
 *
 * @example
 * ```ts
 * import type { DropReason } from "@agentgov/sdk"
 *
 * const serious = (r: DropReason) => r === "rejected" || r === "shutdown"
 * ```
 */
export type DropReason = "queue_full" | "closed" | "rejected" | "shutdown"

/**
 * What `onDrop` receives.
 *
 * @example
 * ```ts
 * import type { DroppedEvents } from "@agentgov/sdk"
 *
 * const onDrop = (d: DroppedEvents) => console.warn(`dropped ${d.events.length} events: ${d.reason}`, d.error?.code)
 * ```
 */
export interface DroppedEvents {
  readonly reason: DropReason
  readonly events: ReadonlyArray<IngestEvent>
  /** The service's refusal, for `rejected`. */
  readonly error?: AgentGovError
}

/**
 * Counters of the event queue.
 *
 * @example
 * ```ts
 * import type { EventQueueStats } from "@agentgov/sdk"
 *
 * const backlog = (s: EventQueueStats) => s.queued + s.inFlight
 * ```
 */
export interface EventQueueStats {
  /** Waiting to be sent. */
  readonly queued: number
  /** In the batch being sent now. */
  readonly inFlight: number
  /** Stored by the service. */
  readonly sent: number
  readonly dropped: number
  /** Ingest calls that succeeded (one per batch). */
  readonly batches: number
  /** Attempts that failed (and were retried, or dropped). */
  readonly failedAttempts: number
}

export interface EventQueueOptions {
  readonly maxBatchSize: number
  readonly flushIntervalMs: number
  readonly maxQueueSize: number
  readonly agentId: string | undefined
  readonly onDrop: (dropped: DroppedEvents) => void
  readonly onError: ((error: AgentGovError) => void) | undefined
  /** Backoff between attempts of one batch after the transport's own retries gave up. */
  readonly retryInitialDelayMs: number
  readonly retryMaxDelayMs: number
}

/** Sends one batch with its Idempotency-Key; rejects with the AgentGovError of the last attempt. */
export type SendBatch = (
  events: ReadonlyArray<IngestEvent>,
  idempotencyKey: string,
  signal: AbortSignal,
) => Promise<void>

interface Pending {
  readonly type: string
  readonly data: JsonObject
  readonly agentId: string | undefined
  /** Epoch ms when stamped by track(), else the caller's ISO string. */
  readonly at: number | string
}

const EVENT_TYPE = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*){1,7}$/

const toIngest = (p: Pending): IngestEvent => ({
  type: p.type,
  data: p.data,
  ...(p.agentId !== undefined ? { agentId: p.agentId } : {}),
  occurredAt: typeof p.at === "number" ? new Date(p.at).toISOString() : p.at,
})

/** `events[3].type` → 3: which event of the batch the service refused. */
const refusedIndex = (error: AgentGovError, size: number): number | undefined => {
  if (error.status !== 422 || !error.details) return undefined
  const m = /^events\[(\d+)\]/.exec(error.details.field)
  if (!m) return undefined
  const index = Number(m[1])
  return index < size ? index : undefined
}

/**
 * The batching queue behind `track()`.
 *
 * - A batch is sent when `maxBatchSize` (100, the API's limit) events wait, when the oldest has
 *   waited `flushIntervalMs`, on `flush()`, and on `shutdown()`.
 * - Batches go one at a time, in order, each with one Idempotency-Key kept across all its
 *   retries: a batch the service stored but whose answer was lost is replayed, not stored twice.
 * - Transient failures (no answer, 408, 429, 5xx) are retried until they succeed, with backoff
 *   (`Retry-After` honoured); the queue holds at most `maxQueueSize` events meanwhile and drops
 *   the newest beyond that (`onDrop`). Refusals are dropped and reported, never retried.
 * - While events wait, a timer keeps the process alive, so a script that tracks and returns
 *   still sends them; call `shutdown()` to finish sooner or to bound the wait.
 */
export class EventQueue {
  private readonly send: SendBatch
  private readonly options: EventQueueOptions
  private buf: Array<Pending> = []
  private head = 0
  /** Events accepted so far; each settles (sent or dropped) in order. */
  private enqueued = 0
  private settled = 0
  /** Partial batches are sent while `settled` is below this (flush, timer, shutdown). */
  private flushTarget = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  private pumping = false
  private closed = false
  private inFlight = 0
  private waiters: Array<{ readonly target: number; readonly resolve: () => void }> = []
  private readonly abort = new AbortController()
  private counters = { sent: 0, dropped: 0, batches: 0, failedAttempts: 0 }

  constructor(send: SendBatch, options: EventQueueOptions) {
    this.send = send
    this.options = options
  }

  /** Queues an event; false when it was dropped (queue full, or shut down). Never blocks. */
  track(event: TrackEvent): boolean {
    const type = event?.type
    if (typeof type !== "string" || !EVENT_TYPE.test(type)) {
      throw new TypeError(
        `track(): type must be lowercase.dotted (2–8 segments of [a-z][a-z0-9_]*), got ${JSON.stringify(type)}`,
      )
    }
    const data = event.data ?? {}
    if (typeof data !== "object" || data === null || Array.isArray(data)) {
      throw new TypeError("track(): data must be a JSON object")
    }
    const at =
      event.occurredAt === undefined
        ? Date.now()
        : event.occurredAt instanceof Date
          ? event.occurredAt.toISOString()
          : event.occurredAt
    const pending: Pending = { type, data, agentId: event.agentId ?? this.options.agentId, at }
    if (this.closed) {
      this.drop([pending], "closed")
      return false
    }
    if (this.enqueued - this.settled >= this.options.maxQueueSize) {
      this.drop([pending], "queue_full")
      return false
    }
    this.buf.push(pending)
    this.enqueued++
    if (this.buf.length - this.head >= this.options.maxBatchSize) this.kick()
    else if (this.timer === undefined && !this.pumping) this.startTimer()
    return true
  }

  /** Resolves once every event tracked before the call is stored or dropped. */
  flush(): Promise<void> {
    const target = this.enqueued
    if (this.settled >= target) return Promise.resolve()
    this.flushTarget = Math.max(this.flushTarget, target)
    this.stopTimer()
    this.kick()
    return new Promise((resolve) => this.waiters.push({ target, resolve }))
  }

  /**
   * Stops accepting events, sends everything queued, and stops the timer. After `timeoutMs`
   * (if the service cannot take them) it aborts the batch in flight and drops the rest
   * (`onDrop`, reason `shutdown`). Resolves with the counters; calling it again is harmless.
   */
  async shutdown(timeoutMs: number): Promise<EventQueueStats> {
    this.closed = true
    this.stopTimer()
    const done = this.flush()
    let timer: ReturnType<typeof setTimeout> | undefined
    const timedOut = await Promise.race([
      done.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs)
      }),
    ])
    clearTimeout(timer)
    if (timedOut) {
      this.abort.abort()
      const rest = this.buf.slice(this.head)
      this.buf = []
      this.head = 0
      if (rest.length > 0) {
        this.drop(rest, "shutdown")
        this.settle(rest.length)
      }
      await done
    }
    return this.stats
  }

  get stats(): EventQueueStats {
    return {
      queued: this.buf.length - this.head,
      inFlight: this.inFlight,
      ...this.counters,
    }
  }

  private startTimer() {
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.flushTarget = Math.max(this.flushTarget, this.enqueued)
      this.kick()
    }, this.options.flushIntervalMs)
  }

  private stopTimer() {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }

  private kick() {
    if (this.pumping) return
    this.pumping = true
    queueMicrotask(() => void this.pump())
  }

  private async pump(): Promise<void> {
    try {
      for (;;) {
        const queued = this.buf.length - this.head
        if (queued === 0) break
        const due = queued >= this.options.maxBatchSize || this.settled < this.flushTarget || this.closed
        if (!due) break
        const n = Math.min(this.options.maxBatchSize, queued)
        const batch = this.buf.slice(this.head, this.head + n)
        this.head += n
        if (this.head === this.buf.length) {
          this.buf = []
          this.head = 0
        } else if (this.head >= 4096) {
          this.buf = this.buf.slice(this.head)
          this.head = 0
        }
        await this.sendBatch(batch)
      }
    } finally {
      this.pumping = false
    }
    if (this.buf.length - this.head > 0 && this.timer === undefined && !this.closed) this.startTimer()
  }

  private async sendBatch(batch: ReadonlyArray<Pending>): Promise<void> {
    const events = batch.map(toIngest)
    this.inFlight = events.length
    let key = newIdempotencyKey()
    let failures = 0
    try {
      while (events.length > 0) {
        try {
          await this.send(events, key, this.abort.signal)
          this.counters.sent += events.length
          this.counters.batches++
          this.settle(events.length)
          return
        } catch (cause) {
          if (this.abort.signal.aborted) {
            this.drop(events, "shutdown")
            this.settle(events.length)
            return
          }
          const error =
            cause instanceof AgentGovError
              ? cause
              : new AgentGovError({ status: 0, code: "NETWORK_ERROR", message: String(cause), cause })
          this.counters.failedAttempts++
          this.report(error)
          if (isTransient(error)) {
            failures++
            const wait =
              error.retryAfter !== undefined
                ? error.retryAfter * 1000
                : backoffMs(failures, this.options.retryInitialDelayMs, this.options.retryMaxDelayMs)
            // Same key: if the failed attempt was stored after all, the retry replays it.
            await sleep(wait, this.abort.signal).catch(() => {})
            continue
          }
          const index = refusedIndex(error, events.length)
          if (index === undefined) {
            this.drop(events, "rejected", error)
            this.settle(events.length)
            return
          }
          const [refused] = events.splice(index, 1)
          this.drop([refused!], "rejected", error)
          this.settle(1)
          // The refused request stored nothing, and the body changed: the rest needs a key of its own.
          key = newIdempotencyKey()
          failures = 0
        }
      }
    } finally {
      this.inFlight = 0
    }
  }

  private settle(n: number) {
    this.settled += n
    if (this.waiters.length === 0) return
    const still: typeof this.waiters = []
    for (const w of this.waiters) {
      if (this.settled >= w.target) w.resolve()
      else still.push(w)
    }
    this.waiters = still
  }

  private drop(events: ReadonlyArray<Pending | IngestEvent>, reason: DropReason, error?: AgentGovError) {
    this.counters.dropped += events.length
    const ingest = events.map((e) => ("at" in e ? toIngest(e) : e))
    try {
      this.options.onDrop(error ? { reason, events: ingest, error } : { reason, events: ingest })
    } catch {
      // A throwing callback must not break the queue.
    }
  }

  private report(error: AgentGovError) {
    try {
      this.options.onError?.(error)
    } catch {
      // as above
    }
  }
}
