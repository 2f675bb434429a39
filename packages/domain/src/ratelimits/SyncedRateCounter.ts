import type { RateCounter, RateHit } from "../policies/engine/RateCounter.ts"
import { estimate, windowPosition } from "./slidingWindow.ts"

/** What one sync sends for a counter: its fixed window, and the calls counted here in it since the last sync. */
export interface SyncEntry {
  readonly key: string
  readonly windowMs: number
  readonly index: number
  readonly delta: number
}

/** Per entry, the shared counts once its delta is added: of window `index` and of the one before. */
export interface SyncCounts {
  readonly current: number
  readonly previous: number
}

/** The shared store: adds each entry's delta to its window's count and answers both windows' counts. */
export type SyncStore = (entries: ReadonlyArray<SyncEntry>) => Promise<ReadonlyArray<SyncCounts>>

interface Slot {
  windowMs: number
  index: number
  /** The shared counts of windows `index` and `index − 1` at the last answered sync (this instance's included). */
  current: number
  previous: number
  /** Calls counted here in window `index`, not sent yet. */
  pending: number
  /** Calls of window `index` in the sync under way, not yet in `current`. */
  sending: number
  /** The last call counted here (ms). */
  hitAt: number
}

export interface SyncedRateCounterOptions {
  /** How often counts go to the store and come back (ms). */
  readonly syncMs?: number
  /** A counter is refreshed with the other instances' calls while it was hit here within this long (ms). */
  readonly hotMs?: number
  /** Counters remembered; beyond, those whose windows are over go, then the oldest. */
  readonly maxKeys?: number
  /** Counters per store call; a sync with more sends them in several calls, one after the other. */
  readonly maxSyncEntries?: number
  readonly onError?: (cause: unknown) => void
}

/**
 * The rate conditions' counters (and throttles') shared by every instance
 * through a store (Redis), without a round trip per guard call: evaluation
 * stays synchronous. Each instance counts its calls at once in memory and,
 * every `syncMs`, adds them to the shared counts and reads back the other
 * instances' (one script call for every counter in play). A call therefore
 * sees its own instance's calls at once and the others' as of the last sync:
 * at most one interval plus a round trip late. A counter not hit here for
 * `hotMs` stops being refreshed; its next call sees the others' calls up to
 * its last refresh, and the sync after it brings the rest.
 *
 * Sliding windows as D10 and InMemoryRateCounter: the current fixed window's
 * count plus the previous one's, weighted by its remaining overlap. When the
 * store fails, calls keep being counted here and go to the store at a later
 * sync (a reply lost after the store counted them counts them twice: limits
 * err on the strict side).
 */
export class SyncedRateCounter implements RateCounter {
  readonly #slots = new Map<string, Slot>()
  /** The counters hit within `hotMs`, least recently hit first: what a sync sends and refreshes. */
  readonly #recent = new Map<string, Slot>()
  /** Calls of a window this instance has moved past (or forgotten), still to be sent. */
  #leftover: Array<SyncEntry> = []
  readonly #store: SyncStore
  readonly #syncMs: number
  readonly #hotMs: number
  readonly #maxKeys: number
  /** The size at which the next sweep runs: it doubles with the live counters, so sweeps stay amortised. */
  #sweepAt: number
  readonly #maxSyncEntries: number
  readonly #onError: (cause: unknown) => void
  #timer: ReturnType<typeof setTimeout> | undefined
  #syncing: Promise<void> | undefined
  #closed = false

  constructor(store: SyncStore, options: SyncedRateCounterOptions = {}) {
    this.#store = store
    this.#syncMs = options.syncMs ?? 100
    this.#hotMs = options.hotMs ?? 10_000
    this.#maxKeys = options.maxKeys ?? 100_000
    this.#sweepAt = Math.min(1_024, this.#maxKeys)
    this.#maxSyncEntries = options.maxSyncEntries ?? 5_000
    this.#onError = options.onError ?? (() => {})
  }

  get size(): number {
    return this.#slots.size
  }

  hit(key: string, windowMs: number, max: number, nowMs: number): RateHit {
    const { index, elapsed } = windowPosition(nowMs, windowMs)
    let slot = this.#slots.get(key)
    if (slot === undefined || slot.windowMs !== windowMs) {
      if (slot !== undefined) this.#park(key, slot)
      else if (this.#slots.size >= this.#sweepAt) this.#sweep(nowMs)
      slot = { windowMs, index, current: 0, previous: 0, pending: 0, sending: 0, hitAt: nowMs }
      this.#slots.set(key, slot)
    } else if (index > slot.index) {
      const total = slot.current + slot.sending + slot.pending
      this.#park(key, slot)
      slot.previous = index === slot.index + 1 ? total : 0
      slot.current = 0
      slot.sending = 0
      slot.index = index
    }
    // A clock that steps back lands in the window it names; counts stay where they are.
    slot.pending++
    slot.hitAt = nowMs
    this.#recent.delete(key)
    this.#recent.set(key, slot)
    this.#schedule()
    const count = estimate(slot.previous, slot.current + slot.sending + slot.pending, elapsed, windowMs)
    return { count, exceeded: count > max }
  }

  /**
   * Sends what was counted here and refreshes the counters hit within `hotMs`; resolves when the answer
   * is in (or the store failed). One sync at a time: a call during one waits for it, then runs its own.
   */
  async sync(nowMs = Date.now()): Promise<void> {
    while (this.#syncing) await this.#syncing
    const run = this.#run(nowMs)
    this.#syncing = run
    try {
      await run
    } finally {
      this.#syncing = undefined
    }
  }

  /** Stops the timer and sends what is still counted here. */
  async close(): Promise<void> {
    this.#closed = true
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = undefined
    await this.sync()
  }

  /** Moves a slot's unsent calls to the leftovers, under the window they were counted in. */
  #park(key: string, slot: Slot) {
    if (slot.pending > 0) this.#leftover.push({ key, windowMs: slot.windowMs, index: slot.index, delta: slot.pending })
    slot.pending = 0
  }

  #schedule() {
    if (this.#timer !== undefined || this.#closed) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.sync().then(() => {
        if (this.#recent.size > 0 || this.#leftover.length > 0) this.#schedule()
      })
    }, this.#syncMs)
    this.#timer.unref?.()
  }

  async #run(nowMs: number): Promise<void> {
    // Counters not hit within hotMs leave the refresh; what they still hold goes as a leftover.
    for (const [key, slot] of this.#recent) {
      if (nowMs - slot.hitAt < this.#hotMs) break
      this.#park(key, slot)
      this.#recent.delete(key)
    }
    const entries: Array<SyncEntry> = this.#leftover
    this.#leftover = []
    const sent: Array<Slot | undefined> = entries.map(() => undefined)
    for (const [key, slot] of this.#recent) {
      entries.push({ key, windowMs: slot.windowMs, index: slot.index, delta: slot.pending })
      sent.push(slot)
      slot.sending += slot.pending
      slot.pending = 0
    }
    for (let from = 0; from < entries.length; from += this.#maxSyncEntries) {
      const chunk = entries.slice(from, from + this.#maxSyncEntries)
      const slots = sent.slice(from, from + this.#maxSyncEntries)
      try {
        this.#apply(chunk, slots, await this.#store(chunk))
      } catch (cause) {
        this.#onError(cause)
        this.#restore(entries.slice(from), sent.slice(from))
        return
      }
    }
  }

  /** Takes in the shared counts: a counter's own window, or the one it has since moved past. */
  #apply(entries: ReadonlyArray<SyncEntry>, sent: ReadonlyArray<Slot | undefined>, counts: ReadonlyArray<SyncCounts>) {
    entries.forEach((entry, i) => {
      const slot = this.#slots.get(entry.key)
      const shared = counts[i]
      if (slot === undefined || shared === undefined || slot.windowMs !== entry.windowMs) return
      if (slot.index === entry.index) {
        if (sent[i] === slot) slot.sending -= entry.delta
        slot.current = Math.max(slot.current, shared.current - slot.sending)
        slot.previous = Math.max(slot.previous, shared.previous)
      } else if (slot.index === entry.index + 1) {
        slot.previous = Math.max(slot.previous, shared.current)
      }
    })
  }

  /** After a failed sync: the calls are counted again later, in their slot while it is still in that window. */
  #restore(entries: ReadonlyArray<SyncEntry>, sent: ReadonlyArray<Slot | undefined>) {
    entries.forEach((entry, i) => {
      const slot = sent[i]
      if (slot !== undefined && this.#slots.get(entry.key) === slot && slot.index === entry.index) {
        slot.sending -= entry.delta
        slot.pending += entry.delta
      } else if (entry.delta > 0) this.#leftover.push(entry)
    })
    // A store down for long: the oldest calls are dropped from what is still to be sent, not kept without bound.
    if (this.#leftover.length > this.#maxKeys) this.#leftover.splice(0, this.#leftover.length - this.#maxKeys)
  }

  /** Drops counters whose windows are over; if still full, the oldest. */
  #sweep(nowMs: number) {
    for (const [key, slot] of this.#slots) {
      if (Math.floor(nowMs / slot.windowMs) > slot.index + 1) this.#forget(key, slot)
    }
    if (this.#slots.size >= this.#maxKeys) {
      let drop = this.#slots.size - Math.floor(this.#maxKeys * 0.9)
      for (const [key, slot] of this.#slots) {
        if (drop-- <= 0) break
        this.#forget(key, slot)
      }
    }
    this.#sweepAt = Math.min(this.#maxKeys, Math.max(1_024, this.#slots.size * 2))
  }

  #forget(key: string, slot: Slot) {
    this.#park(key, slot)
    this.#slots.delete(key)
    this.#recent.delete(key)
  }
}
