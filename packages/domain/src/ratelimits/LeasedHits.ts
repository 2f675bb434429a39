import type { Counts, HitResult, LimitKey } from "./Counters.ts"
import { windowPosition } from "./slidingWindow.ts"

/**
 * One step of the shared store's script for one group, run in order with the others of its call.
 * `take`: admits up to `want` requests as one block, all-or-nothing per limit, and counts them
 * (fewer when fewer fit; see LEASE_SHARE). `give`: hands back `amount` requests taken in window
 * `index` and not used.
 */
export type HitOp =
  | {
      readonly kind: "take"
      readonly limits: ReadonlyArray<LimitKey>
      readonly nowMs: number
      readonly windowMs: number
      readonly want: number
    }
  | {
      readonly kind: "give"
      readonly limits: ReadonlyArray<LimitKey>
      readonly index: number
      readonly windowMs: number
      readonly amount: number
    }

/** Per op: how many requests were taken (0 for a give or a refusal) and, per limit, the counts after it. */
export interface HitReply {
  readonly granted: number
  readonly counts: ReadonlyArray<Counts>
}

/** The shared store (Redis): runs one group's ops in order, atomically each. */
export type HitStore = (group: string, ops: ReadonlyArray<HitOp>) => Promise<ReadonlyArray<HitReply>>

/**
 * A take may reserve at most this share of what still fits (and always at least the one request
 * that asked): near a limit, nothing is held in reserve, so that below 16 free requests the
 * counters behave exactly as with one take per request. Must match the store's script.
 */
export const LEASE_SHARE = 8

export interface LeasedHitsOptions {
  /** The period over which demand is measured (ms, on the requests' clock). */
  readonly periodMs?: number
  /** How often reserves not hit since the last look are handed back (ms, real time; default `periodMs`). */
  readonly idleMs?: number
  /** The largest block one take asks for. */
  readonly maxLease?: number
  /** Signatures remembered at most; beyond, new ones take one request at a time. */
  readonly maxLeases?: number
  /** Decides a request when the store fails (the in-process counters). */
  readonly fallback: (group: string, limits: ReadonlyArray<LimitKey>, nowMs: number, windowMs: number) => HitResult
  readonly onError?: (cause: unknown) => void
}

/** The reserve of one signature (a group and its exact limits): requests taken from the store, not used yet. */
interface Lease {
  readonly signature: string
  readonly group: string
  readonly limits: ReadonlyArray<LimitKey>
  readonly windowMs: number
  /** The window the reserve was taken in. */
  index: number
  tokens: number
  /** The counts the store answered at the last take; `current` includes the reserve. */
  counts: ReadonlyArray<Counts>
  /** Demand: hits in period `period`, and in the period before it. */
  period: number
  hits: number
  lastHits: number
  /** Hit since the last tick; ticks without a hit. */
  touched: boolean
  idleTicks: number
  /** A take with a reserve is under way (a refill, or the take of a request that found the reserve empty). */
  refilling: boolean
}

interface Queued {
  readonly op: HitOp
  readonly resolve: (reply: HitReply) => void
  readonly reject: (cause: unknown) => void
}

/**
 * The API rate limits (D10) shared through a store without a round trip per request, and without
 * ever admitting more than a limit. A busy signature (a workspace, a credential, an agent: one
 * request's limits together) takes a block of requests from the store in one step: the store
 * counts them at once, all-or-nothing against every limit, so that the instances together never
 * exceed a limit. The instance then admits from its reserve in memory and takes the next block
 * before the reserve runs out. The block is about two periods of the demand it saw (2 × the hits
 * of the last period), at most 1/LEASE_SHARE of what still fits; what is not used goes back at the
 * window's end, when the signature goes idle for a period, and on close.
 *
 * The cost is on the strict side: another signature sharing a counter (another key of the same
 * workspace, on any instance) sees the reserve as used until it is used or handed back, at most
 * 1/LEASE_SHARE of the room left. A request with no reserve goes to the store as before (one call
 * per group and turn of the event loop), and a refusal always comes from the store, with counts
 * that hold no reserve of this signature: Retry-After stays exact.
 */
export class LeasedHits {
  readonly #leases = new Map<string, Lease>()
  #queue = new Map<string, Array<Queued>>()
  readonly #store: HitStore
  readonly #periodMs: number
  readonly #idleMs: number
  readonly #maxLease: number
  readonly #maxLeases: number
  readonly #fallback: LeasedHitsOptions["fallback"]
  readonly #onError: (cause: unknown) => void
  readonly #calls = new Set<Promise<unknown>>()
  #timer: ReturnType<typeof setInterval> | undefined
  #closed = false

  constructor(store: HitStore, options: LeasedHitsOptions) {
    this.#store = store
    this.#periodMs = options.periodMs ?? 100
    this.#idleMs = options.idleMs ?? this.#periodMs
    this.#maxLease = options.maxLease ?? 10_000
    this.#maxLeases = options.maxLeases ?? 100_000
    this.#fallback = options.fallback
    this.#onError = options.onError ?? (() => {})
  }

  /** Reserves held now, over every signature (for tests and metrics). */
  get reserved(): number {
    let n = 0
    for (const lease of this.#leases.values()) n += lease.tokens
    return n
  }

  /** Synchronous when the signature's reserve admits the request; otherwise the store decides. */
  hit(group: string, limits: ReadonlyArray<LimitKey>, nowMs: number, windowMs: number): HitResult | Promise<HitResult> {
    const lease = this.#leaseOf(group, limits, windowMs, nowMs)
    const { index } = windowPosition(nowMs, windowMs)
    const period = Math.floor(nowMs / this.#periodMs)
    if (period !== lease.period) {
      lease.lastHits = period === lease.period + 1 ? lease.hits : 0
      lease.hits = 0
      lease.period = period
    }
    lease.hits++
    lease.touched = true
    // A reserve is spent only in the window it was taken in.
    if (lease.tokens > 0 && lease.index !== index) this.#giveBack(lease)
    const want = Math.max(1, Math.min(this.#maxLease, 2 * lease.lastHits))
    if (lease.tokens > 0) {
      const result = this.#spend(lease)
      if (lease.tokens * 2 < want && !lease.refilling && !this.#closed) this.#refill(lease, nowMs, want)
      return result
    }
    // One take with a reserve per signature at a time. Requests that find the reserve empty while it is under
    // way ask for themselves only: each taking its own reserve would hold an eighth of what is left per request
    // of the turn, until the window is all reserve and they are refused with room to spare.
    const reserving = !lease.refilling && !this.#closed
    if (reserving) lease.refilling = true
    return this.#send(group, { kind: "take", limits, nowMs, windowMs, want: reserving ? want : 1 }).then(
      (reply) => {
        if (reserving) lease.refilling = false
        if (reply.granted === 0) {
          // Redis counts the reserve that a take of this signature answered meanwhile brought in: spend it, so
          // that a refusal only ever comes when this signature holds no reserve (and its counts hold none).
          if (lease.tokens > 0 && lease.index === index) return this.#spend(lease)
          return { admitted: false, counts: reply.counts }
        }
        this.#add(lease, index, reply.granted - 1, reply.counts)
        return { admitted: true, counts: this.#countsOf(lease) }
      },
      (cause) => {
        if (reserving) lease.refilling = false
        this.#onError(cause)
        return this.#fallback(group, limits, nowMs, windowMs)
      },
    )
  }

  #spend(lease: Lease): HitResult {
    lease.tokens--
    return { admitted: true, counts: this.#countsOf(lease) }
  }

  /** Hands back every reserve and waits for the store calls under way. */
  async close(): Promise<void> {
    this.#closed = true
    if (this.#timer) clearInterval(this.#timer)
    this.#timer = undefined
    for (const lease of this.#leases.values()) if (lease.tokens > 0) this.#giveBack(lease)
    await this.settled()
  }

  /**
   * Sends what is queued and waits until no store call is under way, their replies handled: the store then
   * counts every request admitted and every reserve taken or handed back so far (a refill answered meanwhile
   * may queue a hand-back: that is sent and waited for too).
   */
  async settled(): Promise<void> {
    while (this.#calls.size > 0 || this.#queue.size > 0) {
      this.#flush()
      await Promise.allSettled([...this.#calls])
    }
  }

  #leaseOf(group: string, limits: ReadonlyArray<LimitKey>, windowMs: number, nowMs: number): Lease {
    let signature = `${group}\u0000${windowMs}`
    for (const l of limits) signature += `\u0000${l.key}\u0000${l.limit}`
    const known = this.#leases.get(signature)
    if (known !== undefined) return known
    const lease: Lease = {
      signature,
      group,
      limits,
      windowMs,
      index: 0,
      tokens: 0,
      counts: [],
      period: Math.floor(nowMs / this.#periodMs),
      hits: 0,
      lastHits: 0,
      touched: true,
      idleTicks: 0,
      refilling: false,
    }
    // Past the bound (a flood of distinct callers), a signature is not remembered: one take per request.
    if (this.#leases.size < this.#maxLeases && !this.#closed) {
      this.#leases.set(signature, lease)
      this.#timer ??= setInterval(() => this.#tick(), this.#idleMs)
      this.#timer.unref?.()
    }
    return lease
  }

  /** Counts for the headers: the store's last answer, less the reserve not spent yet. */
  #countsOf(lease: Lease): ReadonlyArray<Counts> {
    return lease.counts.map((c) => ({ previous: c.previous, current: c.current - lease.tokens }))
  }

  /** Adds what a take reserved; a reserve of another window than the one held goes back first. */
  #add(lease: Lease, index: number, tokens: number, counts: ReadonlyArray<Counts>) {
    if (lease.tokens > 0 && lease.index !== index) {
      if (index < lease.index) {
        // A take answered after the window moved on: its reserve is of no use now.
        if (tokens > 0) this.#give(lease, index, tokens)
        return
      }
      this.#giveBack(lease)
    }
    // A forgotten (or never remembered) signature keeps no reserve.
    if (this.#leases.get(lease.signature) !== lease) {
      if (tokens > 0) this.#give(lease, index, tokens)
      lease.counts = counts
      return
    }
    lease.counts = counts
    lease.index = index
    lease.tokens += tokens
  }

  #refill(lease: Lease, nowMs: number, want: number) {
    const { index } = windowPosition(nowMs, lease.windowMs)
    lease.refilling = true
    const refill = this.#send(lease.group, {
      kind: "take",
      limits: lease.limits,
      nowMs,
      windowMs: lease.windowMs,
      want,
    })
      .then(
        (reply) => {
          if (reply.granted > 0) {
            if (this.#closed) this.#give(lease, index, reply.granted)
            else this.#add(lease, index, reply.granted, reply.counts)
          }
        },
        (cause) => this.#onError(cause),
      )
      .finally(() => {
        lease.refilling = false
        this.#calls.delete(refill)
      })
    // Tracked until its reply is handled, so that close() waits for the hand-back it may queue.
    this.#calls.add(refill)
  }

  #giveBack(lease: Lease) {
    this.#give(lease, lease.index, lease.tokens)
    lease.tokens = 0
  }

  #give(lease: Lease, index: number, amount: number) {
    this.#send(lease.group, { kind: "give", limits: lease.limits, index, windowMs: lease.windowMs, amount }).catch(
      // Not handed back: the counters stay higher than the truth until the window ends (the strict side).
      (cause) => this.#onError(cause),
    )
  }

  /** Queues an op for this turn's call of its group (setImmediate: after the I/O callbacks of this turn). */
  #send(group: string, op: HitOp): Promise<HitReply> {
    return new Promise<HitReply>((resolve, reject) => {
      if (this.#queue.size === 0) setImmediate(() => this.#flush())
      const queued = this.#queue.get(group)
      const item = { op, resolve, reject }
      if (queued) queued.push(item)
      else this.#queue.set(group, [item])
    })
  }

  #flush() {
    const batch = this.#queue
    this.#queue = new Map()
    for (const [group, items] of batch) {
      const call = this.#store(
        group,
        items.map((i) => i.op),
      ).then(
        (replies) => {
          items.forEach((item, i) => {
            item.resolve(replies[i]!)
          })
        },
        (cause) => {
          for (const item of items) item.reject(cause)
        },
      )
      this.#calls.add(call)
      void call.finally(() => this.#calls.delete(call))
    }
  }

  /** Each period: idle signatures hand their reserve back; long-idle ones are forgotten. */
  #tick() {
    for (const [signature, lease] of this.#leases) {
      if (lease.touched) {
        lease.touched = false
        lease.idleTicks = 0
        continue
      }
      lease.idleTicks++
      if (lease.tokens > 0) this.#giveBack(lease)
      if (lease.idleTicks >= 10 && !lease.refilling) this.#leases.delete(signature)
    }
    if (this.#leases.size === 0 && this.#timer) {
      clearInterval(this.#timer)
      this.#timer = undefined
    }
  }
}
