import { randomBytes } from "node:crypto"
import { Effect, type Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Counters, type LimitKey, remaining, waitMs, windowPosition } from "../src/index.ts"

/**
 * The limiter's arithmetic against Cloudflare's sliding-window formula, on a
 * fixed clock: rate = previousCount × ((window − elapsed) / window) + currentCount,
 * a request admitted when the rate including it is within the limit. The
 * reference below is written from that formula alone and shares no code with
 * the limiter.
 */

const WINDOW = 60_000

class Reference {
  readonly counts = new Map<number, number>()
  readonly limit: number
  constructor(limit: number) {
    this.limit = limit
  }
  rate(now: number) {
    const index = Math.floor(now / WINDOW)
    const elapsed = now - index * WINDOW
    return ((this.counts.get(index - 1) ?? 0) * (WINDOW - elapsed)) / WINDOW + (this.counts.get(index) ?? 0)
  }
  wouldAdmit(now: number) {
    return this.rate(now) + 1 <= this.limit
  }
  hit(now: number) {
    if (!this.wouldAdmit(now)) return false
    const index = Math.floor(now / WINDOW)
    this.counts.set(index, (this.counts.get(index) ?? 0) + 1)
    return true
  }
}

/** A deterministic traffic pattern: bursts and lulls over five windows. */
const traffic = (seed: number) => {
  let x = seed
  const next = () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31
    return x / 2 ** 31
  }
  const times: Array<number> = []
  let t = 1_700_000_000_000 - (1_700_000_000_000 % WINDOW) + 1_234
  while (times.length < 400) {
    t += next() < 0.2 ? Math.floor(next() * 9_000) : Math.floor(next() * 700)
    times.push(t)
  }
  return times
}

const stores: Array<[string, Layer.Layer<Counters>]> = [["in-process", Counters.memory]]
if (process.env.REDIS_URL) stores.push(["Redis", Counters.redis(process.env.REDIS_URL)])

describe.each(stores)("sliding-window counters (%s)", (_name, layer) => {
  const runtime = ManagedRuntime.make(layer)
  afterAll(() => runtime.dispose())
  const hit = (group: string, limits: ReadonlyArray<LimitKey>, now: number) =>
    runtime.runPromise(Counters.use((c) => c.hit(group, limits, now, WINDOW)))

  it.each([
    [7, 1],
    [10, 2],
    [25, 3],
  ])("admits exactly what the formula admits (limit %i, seed %i)", async (limit, seed) => {
    const group = `test-${randomBytes(6).toString("hex")}`
    const reference = new Reference(limit)
    let admitted = 0
    let refused = 0
    for (const now of traffic(seed)) {
      const expected = reference.hit(now)
      const got = await hit(group, [{ key: "k", limit }], now)
      expect(got.admitted, `at ${now}`).toBe(expected)
      const { elapsed } = windowPosition(now, WINDOW)
      const { previous, current } = got.counts[0]!
      // Remaining: what the formula still lets through now.
      expect(remaining(limit, previous, current, elapsed, WINDOW)).toBe(
        Math.max(0, Math.floor(limit - reference.rate(now) + 1e-9)),
      )
      if (expected) admitted++
      else {
        refused++
        // The wait is the truth: admitted exactly then, not a millisecond before.
        const wait = waitMs(limit, previous, current, elapsed, WINDOW)
        expect(wait).toBeGreaterThan(0)
        expect(reference.wouldAdmit(now + wait), `wait ${wait} at ${now}`).toBe(true)
        expect(reference.wouldAdmit(now + wait - 1), `wait ${wait} at ${now}`).toBe(false)
      }
    }
    // The pattern exercises both sides of the limit.
    expect(admitted).toBeGreaterThan(limit)
    expect(refused).toBeGreaterThan(10)
  })

  it("checks issued in one turn (one script call in Redis) decide in order, each all-or-nothing, per group", async () => {
    const group = `test-${randomBytes(6).toString("hex")}`
    const other = `test-${randomBytes(6).toString("hex")}`
    const limit = 5
    const reference = new Reference(limit)
    const otherReference = new Reference(limit)
    // A window boundary falls inside the batch: each check carries its own window position.
    const start = 2_000_000_000_000 - (2_000_000_000_000 % WINDOW) + WINDOW - 3
    const times = Array.from({ length: 12 }, (_, i) => start + i)
    const results = await Promise.all(
      times.flatMap((now) => [
        hit(group, [{ key: "k", limit }], now),
        // A check one limit refuses moves nothing for the checks after it.
        hit(
          group,
          [
            { key: "k", limit: 1_000 },
            { key: "never", limit: 0 },
          ],
          now,
        ),
        hit(other, [{ key: "k", limit }], now),
      ]),
    )
    times.forEach((now, i) => {
      expect(results[3 * i]!.admitted, `at ${now}`).toBe(reference.hit(now))
      expect(results[3 * i + 1]!.admitted).toBe(false)
      expect(results[3 * i + 2]!.admitted, `other group at ${now}`).toBe(otherReference.hit(now))
    })
    // Three before the boundary; just after it they still count almost fully, so two more fit.
    expect(results.filter((r, i) => i % 3 === 0 && r.admitted).length).toBe(limit)
    expect(results.filter((r, i) => i % 3 === 0 && !r.admitted).length).toBeGreaterThan(0)
  })

  it("is all-or-nothing: a request one limit refuses moves no counter", async () => {
    const group = `test-${randomBytes(6).toString("hex")}`
    const now = 1_800_000_000_000 - (1_800_000_000_000 % WINDOW) + 5_000
    const limits = [
      { key: "workspace", limit: 100 },
      { key: "agent", limit: 2 },
    ]
    expect((await hit(group, limits, now)).admitted).toBe(true)
    expect((await hit(group, limits, now + 1)).admitted).toBe(true)
    const refused = await hit(group, limits, now + 2)
    expect(refused.admitted).toBe(false)
    expect(refused.counts.map((c) => c.current)).toEqual([2, 2])
    // The workspace counter alone shows the refused request was not counted.
    const other = await hit(group, [{ key: "workspace", limit: 100 }], now + 3)
    expect(other.counts[0]!.current).toBe(3)
  })

  it("carries the count into the next window and forgets it after", async () => {
    const group = `test-${randomBytes(6).toString("hex")}`
    const start = 1_900_000_000_000 - (1_900_000_000_000 % WINDOW)
    const limits = [{ key: "k", limit: 4 }]
    for (let i = 0; i < 4; i++) expect((await hit(group, limits, start + i)).admitted).toBe(true)
    expect((await hit(group, limits, start + 10)).admitted).toBe(false)
    // A quarter into the next window three quarters of the previous 4 still count: 3 + 1 ≤ 4.
    const next = await hit(group, limits, start + WINDOW + WINDOW / 4)
    expect(next.admitted).toBe(true)
    expect(next.counts[0]).toEqual({ previous: 4, current: 1 })
    expect((await hit(group, limits, start + WINDOW + WINDOW / 4 + 1)).admitted).toBe(false)
    // Two windows on, nothing is left of the burst.
    const later = await hit(group, limits, start + 3 * WINDOW)
    expect(later.counts[0]).toEqual({ previous: 0, current: 1 })
  })
})

describe("waitMs", () => {
  it("is zero when a request fits and runs into the next window when the current one is full", () => {
    expect(waitMs(10, 0, 3, 1_000, WINDOW)).toBe(0)
    // Current window full (10 of 10), previous empty: the next window, where 10 × (W − e′)/W + 1 ≤ 10 needs e′ ≥ W/10.
    expect(waitMs(10, 0, 10, 20_000, WINDOW)).toBe(40_000 + 6_000)
  })
  it("waits for the previous window's share to decay when the current one has room", () => {
    // 10 × (W − e)/W + 5 + 1 ≤ 10 ⇔ e ≥ 0.6 W: from 30 s in, 6 s more.
    expect(waitMs(10, 10, 5, 30_000, WINDOW)).toBe(6_000)
  })
})

describe("Effect integration", () => {
  it("the in-process store keeps separate groups apart", async () => {
    const program = Effect.gen(function* () {
      const c = yield* Counters
      const a = yield* c.hit("a", [{ key: "k", limit: 1 }], 0, WINDOW)
      const b = yield* c.hit("b", [{ key: "k", limit: 1 }], 0, WINDOW)
      const again = yield* c.hit("a", [{ key: "k", limit: 1 }], 1, WINDOW)
      return [a.admitted, b.admitted, again.admitted]
    })
    expect(await Effect.runPromise(program.pipe(Effect.provide(Counters.memory)))).toEqual([true, true, false])
  })
})
