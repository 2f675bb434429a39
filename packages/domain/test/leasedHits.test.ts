import { randomBytes } from "node:crypto"
import { Redis } from "ioredis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type HitResult,
  type HitStore,
  LeasedHits,
  type LeasedHitsOptions,
  type LimitKey,
  redisHitStore,
  remaining,
  windowPosition,
} from "../src/index.ts"

/**
 * The API rate limits shared through a real Redis with reserves (LeasedHits):
 * a busy signature admits from a block it took from Redis, the instances
 * together never admit more than a limit, and what is not used goes back.
 * Requests run on a fixed clock; the idle hand-back timer is set out of the
 * way except where it is under test.
 */

const WINDOW = 60_000
/** 1 s into a fixed window. */
const T0 = Math.floor(1_700_000_000_000 / WINDOW) * WINDOW + 1_000
const notFromFallback = () => {
  throw new Error("the store failed")
}

describe.runIf(process.env.REDIS_URL)("API rate limits with reserves through Redis", () => {
  let client: Redis
  let redisStore: HitStore
  const open: Array<LeasedHits> = []
  beforeAll(() => {
    client = new Redis(process.env.REDIS_URL!)
    redisStore = redisHitStore(client)
  })
  afterAll(async () => {
    await Promise.all(open.map((l) => l.close()))
    await client.quit()
  })
  const group = () => `test-${randomBytes(6).toString("hex")}`
  /** An instance whose store calls are counted. */
  const instance = (options: Partial<LeasedHitsOptions> = {}) => {
    const calls = { n: 0 }
    const store: HitStore = (g, ops) => {
      calls.n++
      return redisStore(g, ops)
    }
    const leased = new LeasedHits(store, { idleMs: 3_600_000, fallback: notFromFallback, ...options })
    open.push(leased)
    return { leased, calls }
  }
  const countOf = async (g: string, key: string, nowMs: number) =>
    Number((await client.get(`agentgov:rl:{${g}}:${key}:${windowPosition(nowMs, WINDOW).index}`)) ?? 0)

  it("admits a busy signature's requests from its reserve, without a call each, and hands the rest back", async () => {
    const { leased, calls } = instance()
    const g = group()
    const limits: Array<LimitKey> = [
      { key: "ws", limit: 1_000_000 },
      { key: "key:a", limit: 1_000_000 },
    ]
    let answeredAtOnce = 0
    const remainders: Array<number> = []
    // 3,000 requests over 300 ms: 10 per ms.
    for (let i = 0; i < 3_000; i++) {
      const now = T0 + Math.floor(i / 10)
      const result = leased.hit(g, limits, now, WINDOW)
      if (!(result instanceof Promise)) answeredAtOnce++
      const { admitted, counts } = await result
      expect(admitted).toBe(true)
      remainders.push(
        remaining(1_000_000, counts[0]!.previous, counts[0]!.current, windowPosition(now, WINDOW).elapsed, WINDOW),
      )
    }
    // The first period goes one request per call (one call per turn); after it, the reserve answers.
    expect(answeredAtOnce).toBeGreaterThan(1_800)
    expect(calls.n).toBeLessThan(1_100)
    // The headers count down one by one: the reserve is not shown as used.
    expect(remainders.slice(0, 5)).toEqual([999_999, 999_998, 999_997, 999_996, 999_995])
    expect(remainders.at(-1)).toBe(1_000_000 - 3_000)
    // Redis holds the requests plus the reserve; after close, exactly the requests.
    await leased.settled()
    expect(await countOf(g, "ws", T0)).toBe(3_000 + leased.reserved)
    await leased.close()
    expect(await countOf(g, "ws", T0)).toBe(3_000)
    expect(await countOf(g, "key:a", T0)).toBe(3_000)
  })

  it("never lets two instances together exceed a limit, and lets them use all of it", async () => {
    const a = instance()
    const b = instance()
    const g = group()
    const limit = 2_000
    const limits = [{ key: "ws", limit }]
    let admitted = 0
    let refusedInARow = 0
    // Both busy at one request per ms each, until both are refused by Redis.
    for (let i = 0; refusedInARow < 4 && i < 20_000; i++) {
      const now = T0 + i
      const results = await Promise.all([a.leased.hit(g, limits, now, WINDOW), b.leased.hit(g, limits, now, WINDOW)])
      const n = results.filter((r) => r.admitted).length
      admitted += n
      refusedInARow = n === 0 ? refusedInARow + 1 : 0
      // Redis never counts more than the limit, reserves included.
      if (i % 97 === 0) expect(await countOf(g, "ws", now)).toBeLessThanOrEqual(limit)
    }
    expect(admitted).toBe(limit)
    expect(a.calls.n + b.calls.n).toBeLessThan(limit / 2)
    await Promise.all([a.leased.close(), b.leased.close()])
    expect(await countOf(g, "ws", T0)).toBe(limit)
  })

  it("decides near a limit exactly as one call per request would: refusals from Redis, with exact counts", async () => {
    const { leased } = instance()
    const g = group()
    const limit = 500
    const limits = [{ key: "k", limit }]
    // The same requests through one call each (want 1 is what a quiet signature sends).
    const exact = instance({ periodMs: 3_600_000 })
    const h = group()
    const outcomes: Array<[boolean, boolean]> = []
    let refusal: HitResult | undefined
    for (let i = 0; i < 700; i++) {
      const now = T0 + i
      const [got, want] = await Promise.all([
        leased.hit(g, limits, now, WINDOW),
        exact.leased.hit(h, limits, now, WINDOW),
      ])
      outcomes.push([got.admitted, want.admitted])
      if (!got.admitted) refusal ??= got
    }
    expect(outcomes.filter(([got]) => got).length).toBe(limit)
    expect(outcomes.every(([got, want]) => got === want)).toBe(true)
    // The refusal's counts hold no reserve: the wait computed from them is the true one.
    expect(refusal!.counts[0]).toEqual({ previous: 0, current: limit })
    expect(leased.reserved).toBe(0)
  })

  it("reserves at most an eighth of what is left, so another signature sharing the counter still gets in", async () => {
    const { leased } = instance()
    const g = group()
    const a = [
      { key: "ws", limit: 1_000 },
      { key: "key:a", limit: 1_000 },
    ]
    const b = [
      { key: "ws", limit: 1_000 },
      { key: "key:b", limit: 1_000 },
    ]
    for (let i = 0; i < 950; i++) expect((await leased.hit(g, a, T0 + i, WINDOW)).admitted).toBe(true)
    // 50 left in the workspace: a's reserve holds a few of them at most.
    expect(leased.reserved).toBeLessThanOrEqual(Math.ceil(50 / 8) + 1)
    expect((await leased.hit(g, b, T0 + 950, WINDOW)).admitted).toBe(true)
  })

  it("spends a reserve only in the window it was taken in; the rest goes back to that window", async () => {
    const { leased } = instance()
    const g = group()
    const limits = [{ key: "k", limit: 1_000_000 }]
    const end = T0 - 1_000 + WINDOW - 300
    for (let i = 0; i < 2_000; i++) await leased.hit(g, limits, end + Math.floor(i / 10), WINDOW)
    expect(leased.reserved).toBeGreaterThan(0)
    // The first request of the next window sends the reserve back with its own take.
    const next = await leased.hit(g, limits, T0 - 1_000 + WINDOW + 10, WINDOW)
    expect(next.counts[0]).toEqual({ previous: 2_000, current: 1 })
    expect(await countOf(g, "k", end)).toBe(2_000)
  })

  it("hands an idle signature's reserve back within a few periods", async () => {
    const { leased } = instance({ idleMs: 20 })
    const g = group()
    const limits = [{ key: "k", limit: 1_000_000 }]
    const now = T0
    for (let i = 0; i < 2_000; i++) await leased.hit(g, limits, now + Math.floor(i / 10), WINDOW)
    expect(leased.reserved).toBeGreaterThan(0)
    const deadline = Date.now() + 2_000
    while (leased.reserved > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    expect(leased.reserved).toBe(0)
    // The give is on its way once the reserve is zero.
    await leased.settled()
    expect(await countOf(g, "k", now)).toBe(2_000)
  })

  it("hands back on close a reserve whose take was still under way", async () => {
    let slow = false
    const leased = new LeasedHits(
      async (g, ops) => {
        if (slow) await new Promise((r) => setTimeout(r, 30))
        return redisStore(g, ops)
      },
      { idleMs: 3_600_000, fallback: notFromFallback },
    )
    const g = group()
    const limits = [{ key: "k", limit: 1_000_000 }]
    let hits = 0
    // Past the first period, the reserve answers; spending it down starts a refill.
    for (let i = 0; i < 1_500; i++, hits++) await leased.hit(g, limits, T0 + Math.floor(i / 10), WINDOW)
    await leased.settled()
    slow = true
    while (leased.reserved * 2 >= 2_000) {
      expect(leased.hit(g, limits, T0 + 150, WINDOW) instanceof Promise).toBe(false)
      hits++
    }
    // The refill is in flight (30 ms) when close starts: its reserve must go back too.
    await leased.close()
    expect(await countOf(g, "k", T0)).toBe(hits)
  })

  it("falls back to the in-process counters when Redis fails, and keeps what it reserved", async () => {
    let failing = false
    const fallbackCalls: Array<string> = []
    const leased = new LeasedHits((g, ops) => (failing ? Promise.reject(new Error("down")) : redisStore(g, ops)), {
      idleMs: 3_600_000,
      fallback: (g) => {
        fallbackCalls.push(g)
        return { admitted: true, counts: [{ previous: 0, current: 1 }] }
      },
    })
    open.push(leased)
    const g = group()
    const limits = [{ key: "k", limit: 1_000_000 }]
    for (let i = 0; i < 1_500; i++) await leased.hit(g, limits, T0 + Math.floor(i / 10), WINDOW)
    // Let a refill under way land before counting the reserve.
    await leased.settled()
    const reserve = leased.reserved
    expect(reserve).toBeGreaterThan(1)
    failing = true
    // The reserve still admits while Redis is down; past it, the fallback decides.
    let fromReserve = 0
    for (let i = 0; i < reserve + 5; i++) {
      const r = leased.hit(g, limits, T0 + 100 + Math.floor(i / 10), WINDOW)
      if (!(r instanceof Promise)) fromReserve++
      expect((await r).admitted).toBe(true)
    }
    expect(fromReserve).toBe(reserve)
    expect(fallbackCalls.length).toBe(5)
  })
})
