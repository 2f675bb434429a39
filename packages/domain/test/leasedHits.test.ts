import { randomBytes } from "node:crypto"
import fc from "fast-check"
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

  it("answers a burst that finds the reserve empty with one reserve, not one per request (finding 5)", async () => {
    // The report: an enterprise workspace (10,000 a minute) with 9,002 left; 800 requests at once got 204
    // refusals. Each request that found the reserve empty took its own, an eighth of what was left each,
    // until the window was all reserve and the rest were refused with room to spare.
    const { leased, calls } = instance()
    const g = group()
    const a = [
      { key: "ws", limit: 10_000 },
      { key: "key:a", limit: 10_000 },
    ]
    // 998 requests in one period: the signature is busy, its reserve still empty.
    for (let i = 0; i < 998; i++) expect((await leased.hit(g, a, T0 + Math.floor(i / 10), WINDOW)).admitted).toBe(true)
    await leased.settled()
    expect(leased.reserved).toBe(0)
    const before = calls.n
    const burst = await Promise.all(Array.from({ length: 800 }, () => leased.hit(g, a, T0 + 100, WINDOW)))
    expect(burst.filter((r) => !r.admitted).length).toBe(0)
    // One store call for the turn, and one block held: at most an eighth of the 9,002 left.
    expect(calls.n - before).toBe(1)
    expect(leased.reserved).toBeGreaterThan(0)
    expect(leased.reserved).toBeLessThanOrEqual(Math.floor(9_002 / 8))
    // Another key of the workspace still finds the room.
    const b = [
      { key: "ws", limit: 10_000 },
      { key: "key:b", limit: 10_000 },
    ]
    const others = await Promise.all(Array.from({ length: 800 }, () => leased.hit(g, b, T0 + 100, WINDOW)))
    expect(others.filter((r) => !r.admitted).length).toBe(0)
    await leased.close()
    expect(await countOf(g, "ws", T0)).toBe(998 + 800 + 800)
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

/**
 * Property: callers arriving together on up to three instances that share one Redis, over random limits, use
 * already made, waves of concurrent requests and reserve sizes, on a fixed clock within one window (time moves
 * one demand period per wave, so that a busy signature asks for a reserve). Each instance has one signature
 * (the workspace and a key, perhaps the same key as another instance's), so what one instance holds in
 * reserve is its signature's. The room is the requests that still fit the workspace's window; it only grows
 * as the previous window's share decays, so (1) holds against the room at the first wave, (2) at the last.
 *
 * (1) No refusal while the window has room: an instance refuses only when its own reserve is empty, so a
 *     refusal there implies that the requests admitted by all, plus the reserves the OTHER instances still
 *     hold unused, fill the room. With one instance: admitted ≥ min(demand, room).
 * (2) No overshoot: the instances together admit at most the room (reserves included, Redis never counts
 *     more), Redis counts exactly the admitted requests plus the reserves held, and after close exactly the
 *     admitted requests.
 * (3) A burst takes one block, not one per request: an instance holds less than one and a half blocks (a block
 *     is at most maxLease and twice the hits of a period), what is left of one when the next is taken plus
 *     that one, so that other signatures sharing the workspace's counter are not shut out by its reserve.
 */
describe.runIf(process.env.REDIS_URL)("reserves under concurrent callers, through Redis (property)", () => {
  const clients: Array<Redis> = []
  beforeAll(() => {
    for (let i = 0; i < 3; i++) clients.push(new Redis(process.env.REDIS_URL!))
  })
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.quit()))
  })

  const PERIOD = 100
  const scenario = fc.record({
    // Small limits half the time: the waves fill them, and refusals are what is under test.
    limit: fc.oneof(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 1, max: 12_000 })),
    /** Of the limit, in thousandths: the previous window's count and the current one's before the waves. */
    previous: fc.integer({ min: 0, max: 1_000 }),
    used: fc.integer({ min: 0, max: 1_000 }),
    /** Where in the window the first wave comes. */
    elapsed: fc.integer({ min: 0, max: WINDOW - 10 * PERIOD }),
    maxLease: fc.integer({ min: 1, max: 10_000 }),
    keys: fc.array(fc.constantFrom("a", "b", "c"), { minLength: 1, maxLength: 3 }),
    /** Per wave, the requests each instance issues in one turn, and whether the wave's answers are awaited. */
    waves: fc.array(
      fc.record({
        sizes: fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 3, maxLength: 3 }),
        wait: fc.boolean(),
      }),
      { minLength: 1, maxLength: 5 },
    ),
  })

  it("refuses only when the window is full, reserves of other instances counted as used, and never overshoots", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const g = `prop-${randomBytes(6).toString("hex")}`
        const start = T0 - 1_000 + s.elapsed
        const { index } = windowPosition(start, WINDOW)
        const wsKey = (i: number) => `agentgov:rl:{${g}}:ws:${i}`
        const previous = Math.floor((s.limit * s.previous) / 1_000)
        const used = Math.floor((s.limit * s.used) / 1_000)
        await clients[0]!.set(wsKey(index - 1), previous, "PX", 3 * WINDOW)
        await clients[0]!.set(wsKey(index), used, "PX", 3 * WINDOW)
        // Written independently of slidingWindow.ts: n more fit while (used + n)·W + previous·(W − e) ≤ limit·W.
        // It only grows as the previous window's share decays: least at the first wave, most at the last.
        const roomAt = (elapsed: number) =>
          Math.max(0, Math.floor((s.limit * WINDOW - previous * (WINDOW - elapsed)) / WINDOW) - used)
        const room = roomAt(s.elapsed)
        const roomAtEnd = roomAt(s.elapsed + (s.waves.length - 1) * PERIOD)
        const instances = s.keys.map(
          (_key, i) =>
            new LeasedHits(redisHitStore(clients[i]!), {
              periodMs: PERIOD,
              idleMs: 3_600_000,
              maxLease: s.maxLease,
              fallback: notFromFallback,
            }),
        )
        const limitsOf = (i: number): Array<LimitKey> => [
          { key: "ws", limit: s.limit },
          { key: `key:${s.keys[i]}`, limit: s.limit },
        ]
        const admitted = instances.map(() => 0)
        const refused = instances.map(() => 0)
        const pending: Array<Promise<unknown>> = []
        let demand = 0
        try {
          for (const [w, wave] of s.waves.entries()) {
            const now = start + w * PERIOD
            const inWave: Array<Promise<unknown>> = []
            // The instances' requests interleaved, all issued in one turn.
            const most = Math.max(...wave.sizes.slice(0, instances.length))
            for (let r = 0; r < most; r++)
              instances.forEach((leased, i) => {
                if (r >= wave.sizes[i]!) return
                demand++
                inWave.push(
                  Promise.resolve(leased.hit(g, limitsOf(i), now, WINDOW)).then((result) => {
                    if (result.admitted) admitted[i]!++
                    else refused[i]!++
                  }),
                )
              })
            pending.push(...inWave)
            // Either the next wave comes after these answers, or while they are still under way.
            if (wave.wait) await Promise.all(inWave)
            else await new Promise((resolve) => setImmediate(resolve))
          }
          await Promise.all(pending)
          await Promise.all(instances.map((l) => l.settled()))
          const total = admitted.reduce((a, b) => a + b, 0)
          const held = instances.map((l) => l.reserved)
          const heldTotal = held.reduce((a, b) => a + b, 0)
          const said = JSON.stringify({ room, roomAtEnd, demand, admitted, refused, held })
          // (2) Redis counts every admitted request and every reserve, and never more than the room.
          expect(Number(await clients[0]!.get(wsKey(index))), said).toBe(used + total + heldTotal)
          expect(total + heldTotal, said).toBeLessThanOrEqual(roomAtEnd)
          // (1) A refusal on instance i: the room is filled by what was admitted and what the others hold.
          instances.forEach((_, i) => {
            if (refused[i]! > 0)
              expect(total + heldTotal - held[i]!, `instance ${i}: ${said}`).toBeGreaterThanOrEqual(room)
            // (3)
            const block = Math.min(s.maxLease, 2 * Math.max(...s.waves.map((w) => w.sizes[i]!)))
            expect(held[i]!, `instance ${i}: ${said}`).toBeLessThan(Math.max(1, 1.5 * block))
          })
        } finally {
          await Promise.all(instances.map((l) => l.close()))
        }
        // (2) Every unused reserve went back: Redis counts exactly the admitted requests.
        expect(Number(await clients[0]!.get(wsKey(index)))).toBe(used + admitted.reduce((a, b) => a + b, 0))
      }),
      {
        numRuns: 60,
        // Counterexamples found before the fix, kept so that each runs every time. A burst of 16 behind a take
        // of 2 (of the 16 left) near a limit: the take's reserve must admit the last of them. A quiet signature
        // then a burst of 3: one block for the burst, not one each.
        examples: [
          [
            {
              limit: 17,
              previous: 0,
              used: 0,
              elapsed: 0,
              maxLease: 2,
              keys: ["a"],
              waves: [
                { sizes: [1, 0, 0], wait: true },
                { sizes: [16, 0, 0], wait: false },
              ],
            },
          ],
          [
            {
              limit: 21,
              previous: 0,
              used: 0,
              elapsed: 0,
              maxLease: 2,
              keys: ["a"],
              waves: [
                { sizes: [1, 0, 0], wait: false },
                { sizes: [3, 0, 0], wait: false },
              ],
            },
          ],
        ],
      },
    )
  }, 120_000)
})
