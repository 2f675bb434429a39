import { newIdempotencyKey } from "../core/HttpClient.ts"
import { backoffMs, isTransient, sleep, timerMs } from "../core/retry.ts"
import { AgentGovError } from "../errors.ts"
import type { IngestEvent, JsonObject, JsonObjectInput } from "../types.ts"
import { reservedNamespaceOf } from "./systemNamespaces.ts"

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
  /**
   * `lowercase.dotted`: 2–8 segments of `[a-z][a-z0-9_]*`, not in one of the system's namespaces
   * (`agent.*`, `policy.*`, `approval.*`, … `mcp.*`; `track()` throws a `TypeError` for those).
   */
  readonly type: string
  /**
   * A JSON object, at most 32 KiB encoded (UTF-8). Default `{}`. `track()` throws a `TypeError`
   * for data that does not encode (a `BigInt`, a cycle) or encodes larger. Any object type
   * (your `interface`s too); a copy of it as it encodes at `track()` is what is sent.
   */
  readonly data?: JsonObjectInput
  /** Default: the runtime's `agentId` (or the agent of an agent key). */
  readonly agentId?: string
  readonly occurredAt?: string | Date
}

/**
 * Why events were dropped:
 *
 * - `queue_full`: `maxQueueSize` events, or `maxQueueBytes` of them encoded, were already waiting
 *   (the newest is dropped; the queue keeps its order and never blocks the caller);
 * - `closed`: `track()` after `shutdown()`;
 * - `rejected`: the service refused them for good (a 422 or 403 naming one event, `events[i]`,
 *   drops that event and the rest of its batch is sent; a 413 for a single event too large for
 *   the service's body limit drops that event; 401 and other refusals drop the batch), or the
 *   batch could not be sent for a reason other than the service's (`INVALID_REQUEST`, e.g. a
 *   custom `fetch` that throws something else than a network error);
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
  /** Encoded bytes of the events waiting (beyond the batch in flight) at most; an event alone always fits. */
  readonly maxQueueBytes: number
  readonly agentId: string | undefined
  readonly onDrop: (dropped: DroppedEvents) => void
  readonly onError: ((error: AgentGovError) => void) | undefined
  /** A batch ends before its events' encoded size would pass this (bytes), as well as at `maxBatchSize`. */
  readonly maxBatchBytes: number
  /** Backoff between attempts of one batch (the queue owns the retries; the transport makes one attempt). */
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
  /** `data` as it encoded at `track()`: what is sent, whatever the caller does with its object later. */
  readonly json: string
  readonly agentId: string | undefined
  /** Epoch ms when stamped by track(), else the caller's ISO string. */
  readonly at: number | string
  /** The event's encoded size in an ingest body, in bytes (its `data` measured at `track()`). */
  readonly bytes: number
}

const EVENT_TYPE = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*){1,7}$/

/**
 * Throws the `TypeError` `track()` throws for `type`: not `lowercase.dotted`, or in one of the
 * system's namespaces. `caller` names the call in the message.
 */
export function assertEventType(type: unknown, caller: string): asserts type is string {
  if (typeof type !== "string" || !EVENT_TYPE.test(type)) {
    throw new TypeError(
      `${caller}: type must be lowercase.dotted (2–8 segments of [a-z][a-z0-9_]*), got ${JSON.stringify(type)}`,
    )
  }
  const namespace = reservedNamespaceOf(type)
  if (namespace !== undefined) {
    throw new TypeError(
      `${caller}: "${type}" is in the system's "${namespace}.*" namespace, which only the service writes in; name custom events under another first segment`,
    )
  }
}

/** The service's limit on one event's `data`, encoded (`MAX_EVENT_DATA_BYTES`). */
export const MAX_EVENT_DATA_BYTES = 32 * 1024

/** An event's keys, quotes and commas in the body, beyond its type, data, agentId and time. */
const EVENT_OVERHEAD_BYTES = 64

/** UTF-8 length of a string as `JSON.stringify` writes it (well-formed: no lone surrogates). */
const utf8Length = (s: string): number => {
  let n = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) continue
    if (c < 0x800) n += 1
    else if (c >= 0xd800 && c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2 // two code units, four bytes
      i++
    } else n += 2
  }
  return n
}

const sizeOf = (part: ReadonlyArray<Pending>) => part.reduce((sum, p) => sum + p.bytes, 0)

const toIngest = (p: Pending): IngestEvent => ({
  type: p.type,
  data: JSON.parse(p.json) as JsonObject,
  ...(p.agentId !== undefined ? { agentId: p.agentId } : {}),
  occurredAt: typeof p.at === "number" ? new Date(p.at).toISOString() : p.at,
})

/**
 * `events[3].type` → 3: which event of the batch the service refused, from a 422 (invalid) or a
 * 403 (e.g. another agent's `agentId` under an agent key) naming it. A 401, or a 403 naming no
 * event (a missing scope), is the credential's fault and refuses the whole batch.
 */
const refusedIndex = (error: AgentGovError, size: number): number | undefined => {
  if ((error.status !== 422 && error.status !== 403) || !error.details) return undefined
  const m = /^events\[(\d+)\]/.exec(error.details.field)
  if (!m) return undefined
  const index = Number(m[1])
  return index < size ? index : undefined
}

/**
 * The batching queue behind `track()`.
 *
 * - A batch is sent when `maxBatchSize` (100, the API's limit) events wait, or events of
 *   `maxBatchBytes` (below the service's 1 MiB body limit), when the oldest has waited
 *   `flushIntervalMs`, on `flush()`, and on `shutdown()`. A batch ends at either limit.
 * - A 413 (an operator set a lower body limit) splits the batch in two halves, each sent under a
 *   new key (the refused request stored nothing), and lowers the byte limit for later batches; a
 *   single event too large alone is dropped.
 * - Batches go one at a time, in order, each with one Idempotency-Key kept across all its
 *   retries: a batch the service stored but whose answer was lost is replayed, not stored twice.
 * - Transient failures (no answer, 408, 429, 5xx, and `INVALID_RESPONSE`: an answer that does not
 *   acknowledge every event of the batch; the transport's `AgentGovError`s) are retried
 *   until they succeed, with backoff (`Retry-After` honoured); the queue holds at most
 *   `maxQueueSize` events and `maxQueueBytes` of them encoded meanwhile, and drops the newest
 *   beyond that (`onDrop`). Refusals, and
 *   any other error (a body that does not encode), are dropped and reported, never retried.
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
  /** Encoded bytes of the events waiting (not in flight). */
  private queuedBytes = 0
  /** The byte limit of a batch: `maxBatchBytes`, lowered by a 413. */
  private budget: number
  private waiters: Array<{ readonly target: number; readonly resolve: () => void }> = []
  private readonly abort = new AbortController()
  private counters = { sent: 0, dropped: 0, batches: 0, failedAttempts: 0 }

  constructor(send: SendBatch, options: EventQueueOptions) {
    this.send = send
    this.options = options
    this.budget = options.maxBatchBytes
  }

  /** Queues an event; false when it was dropped (queue full, or shut down). Never blocks. */
  track(event: TrackEvent): boolean {
    const type = event?.type
    assertEventType(type, "track()")
    const data = event.data ?? {}
    if (typeof data !== "object" || data === null || Array.isArray(data)) {
      throw new TypeError("track(): data must be a JSON object")
    }
    // Encoded once here, so that a BigInt or a cycle throws at the call instead of failing the batch.
    let json: string | undefined
    try {
      json = JSON.stringify(data)
    } catch (cause) {
      throw new TypeError(`track(): data must encode as JSON: ${cause instanceof Error ? cause.message : cause}`, {
        cause,
      })
    }
    if (typeof json !== "string" || json[0] !== "{") throw new TypeError("track(): data must encode to a JSON object")
    const dataBytes = utf8Length(json)
    if (dataBytes > MAX_EVENT_DATA_BYTES) {
      throw new TypeError(
        `track(): data encodes to ${dataBytes} bytes; the service takes at most ${MAX_EVENT_DATA_BYTES} (32 KiB)`,
      )
    }
    const at =
      event.occurredAt === undefined
        ? Date.now()
        : event.occurredAt instanceof Date
          ? event.occurredAt.toISOString()
          : event.occurredAt
    const agentId = event.agentId ?? this.options.agentId
    const bytes =
      EVENT_OVERHEAD_BYTES +
      type.length +
      dataBytes +
      (agentId === undefined ? 0 : utf8Length(JSON.stringify(agentId))) +
      (typeof at === "number" ? 24 : utf8Length(JSON.stringify(at)))
    // Its encoding as it is now: the event records what happened at track(), whatever the caller does with its
    // object later (reuses it, adds a BigInt or a cycle: that would cost the whole batch), and getters,
    // Proxies and toJSON run once, here. Decoded again only when its batch is sent, off the caller's path.
    const pending: Pending = { type, json, agentId, at, bytes }
    if (this.closed) {
      this.drop([pending], "closed")
      return false
    }
    // Bounded in bytes as well as in count: 10,000 events of 32 KiB would hold some 330 MB while the service is down.
    if (
      this.enqueued - this.settled >= this.options.maxQueueSize ||
      (this.queuedBytes > 0 && this.queuedBytes + bytes > this.options.maxQueueBytes)
    ) {
      this.drop([pending], "queue_full")
      return false
    }
    this.buf.push(pending)
    this.enqueued++
    this.queuedBytes += bytes
    if (this.buf.length - this.head >= this.options.maxBatchSize || this.queuedBytes >= this.budget) this.kick()
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
        timer = setTimeout(() => resolve(true), timerMs(timeoutMs))
      }),
    ])
    clearTimeout(timer)
    if (timedOut) {
      this.abort.abort()
      const rest = this.buf.slice(this.head)
      this.buf = []
      this.head = 0
      this.queuedBytes = 0
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
    }, timerMs(this.options.flushIntervalMs))
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
        const due =
          queued >= this.options.maxBatchSize ||
          this.queuedBytes >= this.budget ||
          this.settled < this.flushTarget ||
          this.closed
        if (!due) break
        // Up to maxBatchSize events, ending before the byte budget would be passed (always one at least).
        const most = Math.min(this.options.maxBatchSize, queued)
        let n = 0
        let bytes = 0
        while (n < most) {
          const next = this.buf[this.head + n]!.bytes
          if (n > 0 && bytes + next > this.budget) break
          bytes += next
          n++
        }
        const batch = this.buf.slice(this.head, this.head + n)
        this.head += n
        this.queuedBytes -= bytes
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
    // The parts of the batch still to send, in order; a 413 splits the first one in two.
    const parts: Array<Array<Pending>> = [batch.slice()]
    this.inFlight = batch.length
    try {
      while (parts.length > 0) {
        if (this.abort.signal.aborted) {
          const rest = parts.flat()
          parts.length = 0
          this.drop(rest, "shutdown")
          this.done(rest.length)
          break
        }
        const part = parts.shift()!
        if (!(await this.sendPart(part))) continue
        // The service refused the body's size and stored nothing: each half goes under a key of its own.
        const half = Math.ceil(part.length / 2)
        parts.unshift(part.slice(0, half), part.slice(half))
      }
    } finally {
      this.inFlight = 0
    }
  }

  /**
   * Sends `part` under one key until it is stored or dropped. True when the service refused its
   * size (413) and it holds more than one event: the caller splits it (`part` then holds what is
   * left of it).
   */
  private async sendPart(part: Array<Pending>): Promise<boolean> {
    const events = part.map(toIngest)
    let key = newIdempotencyKey()
    let failures = 0
    while (events.length > 0) {
      try {
        await this.send(events, key, this.abort.signal)
        this.counters.sent += events.length
        this.counters.batches++
        this.done(events.length)
        return false
      } catch (cause) {
        if (this.abort.signal.aborted) {
          this.drop(events, "shutdown")
          this.done(events.length)
          return false
        }
        // Only the transport's errors say something about the service. Anything else (a custom fetch
        // throwing a programming error) would fail the same way on every retry.
        const error =
          cause instanceof AgentGovError
            ? cause
            : new AgentGovError({
                status: 0,
                code: "INVALID_REQUEST",
                message: `the batch could not be sent: ${cause instanceof Error ? cause.message : String(cause)}`,
                cause,
              })
        this.counters.failedAttempts++
        this.report(error)
        if (cause instanceof AgentGovError && isTransient(cause)) {
          failures++
          // Retry-After: 0 (or an HTTP date already past, by a skewed clock) is no wait at all: backoff
          // instead, or the queue would retry as fast as the service answers, without end.
          const wait =
            error.retryAfter !== undefined && error.retryAfter > 0
              ? error.retryAfter * 1000
              : backoffMs(failures, this.options.retryInitialDelayMs, this.options.retryMaxDelayMs)
          // Same key: if the failed attempt was stored after all, the retry replays it.
          await sleep(wait, this.abort.signal).catch(() => {})
          continue
        }
        if (error.status === 413 && events.length > 1) {
          // Later batches are built below what was refused, so that a lower limit costs one 413, not one per batch.
          this.budget = Math.min(this.budget, Math.max(1, Math.floor(sizeOf(part) / 2)))
          return true
        }
        const index = refusedIndex(error, events.length)
        if (index === undefined) {
          this.drop(events, "rejected", error)
          this.done(events.length)
          return false
        }
        const [refused] = events.splice(index, 1)
        part.splice(index, 1)
        this.drop([refused!], "rejected", error)
        this.done(1)
        // The refused request stored nothing, and the body changed: the rest needs a key of its own.
        key = newIdempotencyKey()
        failures = 0
      }
    }
    return false
  }

  /** `n` events of the batch in flight are settled (stored or dropped). */
  private done(n: number) {
    this.inFlight -= n
    this.settle(n)
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
