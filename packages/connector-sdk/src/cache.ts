/**
 * A bounded set of keys, each forgotten after its time to live or when the set is full (oldest
 * first). Memory stays bounded whatever a sender does; the price of a full set is forgetting early.
 */
export class BoundedSet {
  readonly #max: number
  readonly #now: () => number
  // insertion order = age order, so the first entries are the first to evict
  readonly #expiries = new Map<string, number>()

  constructor(maxEntries: number, now: () => number) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError("maxEntries must be a positive integer")
    this.#max = maxEntries
    this.#now = now
  }

  get size(): number {
    return this.#expiries.size
  }

  has(key: string): boolean {
    const expiry = this.#expiries.get(key)
    if (expiry === undefined) return false
    if (expiry <= this.#now()) {
      this.#expiries.delete(key)
      return false
    }
    return true
  }

  /** Records `key` for `ttlMs`; returns false when it was already present (and unexpired). */
  add(key: string, ttlMs: number): boolean {
    if (this.has(key)) return false
    const now = this.#now()
    this.#prune(now)
    this.#expiries.set(key, now + ttlMs)
    while (this.#expiries.size > this.#max) {
      const oldest = this.#expiries.keys().next().value as string
      this.#expiries.delete(oldest)
    }
    return true
  }

  delete(key: string): void {
    this.#expiries.delete(key)
  }

  /** Drops expired entries from the old end; stops at the first live one (cheap, amortised). */
  #prune(now: number): void {
    for (const [key, expiry] of this.#expiries) {
      if (expiry > now) return
      this.#expiries.delete(key)
    }
  }
}
