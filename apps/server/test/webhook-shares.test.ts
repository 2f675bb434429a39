import { describe, expect, it } from "vitest"
import { makeWebhookShares } from "../src/webhookShares.ts"

/** Shares as the worker makes them (16 to start, 192 at most), on a clock the test moves. */
const shares = (over: { cap?: number; idleMs?: number } = {}) => {
  let t = 1_000_000
  const s = makeWebhookShares({
    start: 16,
    full: 192,
    idleMs: over.idleMs ?? 60_000,
    cap: over.cap ?? 10_000,
    now: () => t,
  })
  const advance = (ms: number) => {
    t += ms
  }
  return { s, advance }
}
/** One attempt of `hook`, sent and ended, the webhook left with nothing in flight. */
const attempt = (s: ReturnType<typeof shares>["s"], hook: string, answered = true) => {
  s.opened(hook)
  s.ended(hook, answered)
  s.drained(hook)
}

describe("a webhook's places on a worker", () => {
  it("start at 16, grow by one an answer up to 192, and go back to 16 on an attempt left unanswered", () => {
    const { s } = shares()
    expect(s.shareOf("wh_a")).toBe(16)
    expect(s.grown.size).toBe(0)
    for (let i = 0; i < 10; i++) attempt(s, "wh_a")
    expect(s.shareOf("wh_a")).toBe(26)
    for (let i = 0; i < 500; i++) attempt(s, "wh_a")
    expect(s.shareOf("wh_a")).toBe(192)
    attempt(s, "wh_a", false)
    expect(s.shareOf("wh_a")).toBe(16)
    expect(s.grown.has("wh_a")).toBe(false)
  })

  it("are forgotten a minute after the webhook's last attempt in flight ended, not while one is in flight", () => {
    const { s, advance } = shares()
    for (let i = 0; i < 50; i++) attempt(s, "wh_idle")
    for (let i = 0; i < 50; i++) attempt(s, "wh_busy")
    // wh_busy has an attempt open from now on; wh_idle has nothing in flight.
    s.opened("wh_busy")
    advance(59_999)
    expect(s.forgetIdle()).toBe(0)
    expect(s.shareOf("wh_idle")).toBe(66)
    advance(1)
    expect(s.forgetIdle()).toBe(1)
    expect(s.shareOf("wh_idle")).toBe(16)
    expect(s.grown.has("wh_idle")).toBe(false)
    // Open for two minutes: still its grown share, and forgotten only a minute after it drained.
    advance(120_000)
    expect(s.forgetIdle()).toBe(0)
    expect(s.shareOf("wh_busy")).toBe(66)
    s.ended("wh_busy", true)
    s.drained("wh_busy")
    advance(30_000)
    expect(s.forgetIdle()).toBe(0)
    expect(s.shareOf("wh_busy")).toBe(67)
    advance(30_000)
    expect(s.forgetIdle()).toBe(1)
    expect(s.grown.size).toBe(0)
  })

  it("a webhook sent to again before its minute is up keeps its grown share", () => {
    const { s, advance } = shares()
    for (let i = 0; i < 20; i++) attempt(s, "wh_a")
    advance(50_000)
    attempt(s, "wh_a")
    advance(50_000)
    expect(s.forgetIdle()).toBe(0)
    expect(s.shareOf("wh_a")).toBe(37)
  })

  it("past 10,000 grown shares a webhook stays at 16 until some are forgotten; those grown keep growing", () => {
    const { s, advance } = shares()
    for (let i = 0; i < 10_000; i++) attempt(s, `wh_${i}`)
    expect(s.grown.size).toBe(10_000)
    attempt(s, "wh_late")
    attempt(s, "wh_late")
    expect(s.shareOf("wh_late")).toBe(16)
    expect(s.grown.size).toBe(10_000)
    attempt(s, "wh_0")
    expect(s.shareOf("wh_0")).toBe(18)
    // A minute on, the idle ones are forgotten, all but wh_0, which has an attempt open again...
    advance(60_000)
    s.opened("wh_0")
    expect(s.forgetIdle()).toBe(9_999)
    // ...and the late webhook grows as any.
    attempt(s, "wh_late")
    expect(s.shareOf("wh_late")).toBe(17)
    expect(s.grown.size).toBe(2)
  })

  it("an unanswered attempt frees its webhook's place among the 10,000 at once", () => {
    const { s } = shares({ cap: 2 })
    attempt(s, "wh_a")
    attempt(s, "wh_b")
    attempt(s, "wh_c")
    expect(s.shareOf("wh_c")).toBe(16)
    attempt(s, "wh_a", false)
    attempt(s, "wh_c")
    expect(s.shareOf("wh_c")).toBe(17)
    expect([...s.grown.keys()].sort()).toEqual(["wh_b", "wh_c"])
  })
})
