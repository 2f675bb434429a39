import { randomBytes } from "node:crypto"
import { Redis } from "ioredis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { InMemoryRateCounter, redisRateStore, SyncedRateCounter, type SyncStore } from "../src/index.ts"

/**
 * The guard's rate counters shared by several instances through a real Redis
 * (SyncedRateCounter): each instance counts at once in memory and reconciles
 * at each sync. The instances here are counters over one Redis, synced by
 * hand on a fixed clock (the timer is set out of the way) except where the
 * timer itself is under test.
 */

const WINDOW = 60_000
/** 1 s into a fixed window. */
const T0 = Math.floor(1_700_000_000_000 / WINDOW) * WINDOW + 1_000
const MANUAL = { syncMs: 3_600_000 }

describe.runIf(process.env.REDIS_URL)("rate counters shared through Redis", () => {
  let client: Redis
  let store: SyncStore
  beforeAll(async () => {
    client = new Redis(process.env.REDIS_URL!)
    store = redisRateStore(client)
  })
  afterAll(() => client.quit())
  const key = () => `test:${randomBytes(6).toString("hex")}`

  it("counts its own calls at once and the other instance's after a sync", async () => {
    const a = new SyncedRateCounter(store, MANUAL)
    const b = new SyncedRateCounter(store, MANUAL)
    const k = key()
    expect([1, 2, 3].map(() => a.hit(k, WINDOW, 4, T0).count)).toEqual([1, 2, 3])
    // b has not heard of a's calls yet.
    expect(b.hit(k, WINDOW, 4, T0)).toEqual({ count: 1, exceeded: false })
    await a.sync(T0)
    await b.sync(T0)
    expect(b.hit(k, WINDOW, 4, T0)).toEqual({ count: 5, exceeded: true })
    expect(a.hit(k, WINDOW, 4, T0).count).toBe(4)
    await a.sync(T0)
    // Synced so far: a's four and b's first (b's second is still b's own).
    expect(a.hit(k, WINDOW, 4, T0).count).toBe(6)
  })

  it("weighs the previous window with every instance's calls in it", async () => {
    const a = new SyncedRateCounter(store, MANUAL)
    const b = new SyncedRateCounter(store, MANUAL)
    const c = new SyncedRateCounter(store, MANUAL)
    const k = key()
    for (let i = 0; i < 10; i++) a.hit(k, WINDOW, 100, T0)
    b.hit(k, WINDOW, 100, T0)
    await a.sync(T0)
    await b.sync(T0)
    const half = T0 - 1_000 + WINDOW + WINDOW / 2
    // b knew 11 calls of the window that is now the previous one, half of which still overlap.
    expect(b.hit(k, WINDOW, 100, half).count).toBe(11 * 0.5 + 1)
    // c never counted this key before: it learns the previous window from Redis at its first sync.
    expect(c.hit(k, WINDOW, 100, half).count).toBe(1)
    await c.sync(half)
    expect(c.hit(k, WINDOW, 100, half).count).toBe(11 * 0.5 + 2)
  })

  it("alone, counts exactly as the in-process counter, synced or not", async () => {
    const synced = new SyncedRateCounter(store, MANUAL)
    const memory = new InMemoryRateCounter()
    const k = key()
    let t = T0
    let x = 7
    for (let i = 0; i < 300; i++) {
      x = (x * 1_103_515_245 + 12_345) % 2 ** 31
      t += x % 5 === 0 ? (x % 90_000) + 1 : x % 2_000
      expect(synced.hit(k, WINDOW, 50, t)).toEqual(memory.hit(k, WINDOW, 50, t))
      if (i % 7 === 0) await synced.sync(t)
    }
  })

  it("sends on its own timer, and what is counted before close", async () => {
    const now = Date.now()
    const a = new SyncedRateCounter(store, { syncMs: 20 })
    const k = key()
    a.hit(k, WINDOW, 10, now)
    a.hit(k, WINDOW, 10, now)
    // Fifty of its syncs: a timer turn and a round trip to the store each, on a loaded machine too.
    await new Promise((r) => setTimeout(r, 1_000))
    const b = new SyncedRateCounter(store, MANUAL)
    b.hit(k, WINDOW, 10, now)
    await b.sync(now)
    expect(b.hit(k, WINDOW, 10, now).count).toBe(4)
    a.hit(k, WINDOW, 10, now)
    await a.close()
    await b.sync(now)
    expect(b.hit(k, WINDOW, 10, now).count).toBe(6)
  })

  it("keeps the calls of a failed sync and sends them later, in the window they were counted in", async () => {
    let down = true
    const failures: Array<unknown> = []
    const flaky: SyncStore = (entries) => (down ? Promise.reject(new Error("Redis is down")) : store(entries))
    const a = new SyncedRateCounter(flaky, { ...MANUAL, onError: (e) => failures.push(e) })
    const b = new SyncedRateCounter(store, MANUAL)
    const k = key()
    a.hit(k, WINDOW, 10, T0)
    a.hit(k, WINDOW, 10, T0)
    await a.sync(T0)
    expect(failures).toHaveLength(1)
    // Still counted here, and more calls still count.
    expect(a.hit(k, WINDOW, 10, T0).count).toBe(3)
    await a.sync(T0)
    expect(failures).toHaveLength(2)
    // The next window starts before Redis is back: the three calls belong to the window before.
    const next = T0 + WINDOW
    expect(a.hit(k, WINDOW, 10, next).count).toBeCloseTo(3 * (59 / 60) + 1)
    down = false
    await a.sync(next)
    b.hit(k, WINDOW, 10, next)
    await b.sync(next)
    expect(b.hit(k, WINDOW, 10, next).count).toBeCloseTo(3 * (59 / 60) + 3)
  })

  it("keeps counting apart the windows of a key whose period changed", async () => {
    const a = new SyncedRateCounter(store, MANUAL)
    const k = key()
    a.hit(k, WINDOW, 10, T0)
    a.hit(k, WINDOW, 10, T0)
    // The policy was edited from per minute to per second: a new counter, the minute's calls still sent.
    expect(a.hit(k, 1_000, 10, T0).count).toBe(1)
    await a.sync(T0)
    const b = new SyncedRateCounter(store, MANUAL)
    b.hit(k, WINDOW, 10, T0)
    await b.sync(T0)
    expect(b.hit(k, WINDOW, 10, T0).count).toBe(4)
  })

  it("remembers a bounded number of counters, and still sends the calls of those it forgets", async () => {
    const a = new SyncedRateCounter(store, { ...MANUAL, maxKeys: 4 })
    const keys = Array.from({ length: 10 }, key)
    for (const k of keys) a.hit(k, WINDOW, 10, T0)
    expect(a.size).toBeLessThanOrEqual(4)
    await a.sync(T0)
    const b = new SyncedRateCounter(store, MANUAL)
    for (const k of keys) b.hit(k, WINDOW, 10, T0)
    await b.sync(T0)
    expect(keys.map((k) => b.hit(k, WINDOW, 10, T0).count)).toEqual(keys.map(() => 3))
  })
})
