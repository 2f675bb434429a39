import { estimate, windowPosition } from "../../ratelimits/slidingWindow.ts"

/**
 * Where rate conditions count. Synchronous, so that evaluation stays a plain function; the
 * store shared by instances (Redis) sits behind it by counting locally and reconciling
 * (ratelimits/SyncedRateCounter.ts).
 *
 * The contract the engine relies on: `hit` records one call for `key` at `nowMs` and returns
 * the number of calls in the sliding window of `windowMs` ending at `nowMs`, this one included,
 * and whether that number exceeds `max`.
 */
export interface RateCounter {
  readonly hit: (key: string, windowMs: number, max: number, nowMs: number) => RateHit
}

export interface RateHit {
  /** Calls in the window, this one included (an estimate for sliding-window counters). */
  readonly count: number
  /** `count > max`: the rate condition holds. */
  readonly exceeded: boolean
}

interface Slot {
  windowMs: number
  index: number
  previous: number
  current: number
}

/**
 * In-process counters with the sliding-window estimate the API rate limits use (decision D10,
 * `ratelimits/slidingWindow.ts`): the current fixed window's count plus the previous window's,
 * weighted by how much of it still overlaps the sliding window. Two numbers per key, whatever
 * `max` is. Keys whose windows have passed are dropped as the map grows.
 */
export class InMemoryRateCounter implements RateCounter {
  readonly #slots = new Map<string, Slot>()
  readonly #maxKeys: number
  #sweepAt: number

  constructor(options?: { readonly maxKeys?: number }) {
    this.#maxKeys = options?.maxKeys ?? 100_000
    this.#sweepAt = Math.min(1_024, this.#maxKeys)
  }

  get size(): number {
    return this.#slots.size
  }

  hit(key: string, windowMs: number, max: number, nowMs: number): RateHit {
    const { index, elapsed } = windowPosition(nowMs, windowMs)
    let slot = this.#slots.get(key)
    if (slot === undefined || slot.windowMs !== windowMs) {
      if (this.#slots.size >= this.#sweepAt) this.#sweep(nowMs)
      slot = { windowMs, index, previous: 0, current: 0 }
      this.#slots.set(key, slot)
    } else if (index > slot.index) {
      slot.previous = index === slot.index + 1 ? slot.current : 0
      slot.current = 0
      slot.index = index
    }
    // A clock that steps back lands in the window it names; counts stay where they are.
    slot.current++
    const count = estimate(slot.previous, slot.current, elapsed, windowMs)
    return { count, exceeded: count > max }
  }

  /** Drops keys whose windows are over; if still full, the oldest keys. */
  #sweep(nowMs: number) {
    for (const [key, slot] of this.#slots) {
      if (Math.floor(nowMs / slot.windowMs) > slot.index + 1) this.#slots.delete(key)
    }
    if (this.#slots.size >= this.#maxKeys) {
      let drop = this.#slots.size - Math.floor(this.#maxKeys * 0.9)
      for (const key of this.#slots.keys()) {
        if (drop-- <= 0) break
        this.#slots.delete(key)
      }
    }
    this.#sweepAt = Math.min(this.#maxKeys, Math.max(1_024, this.#slots.size * 2))
  }
}
