import { describe, expect, it } from "vitest"
import { type AttemptOutcome, nextStep, SCHEDULES, scaledSchedule } from "../../src/index.ts"

const failed = (over: Partial<AttemptOutcome> = {}): AttemptOutcome => ({
  success: false,
  statusCode: 500,
  startedAt: 1_000_000,
  responseTimeMs: 37,
  ...over,
})

describe("retry schedules (D9)", () => {
  it("schedule A: 5 attempts, retried 1, 2, 4 and 8 s after each failure, 10 s time-out", () => {
    expect(SCHEDULES.exponential).toEqual({ attempts: 5, delaysMs: [1000, 2000, 4000, 8000], timeoutMs: 10_000 })
  })

  it("schedule B: 8 attempts with the spec's cumulative waits, 30 s time-out", () => {
    const b = SCHEDULES.extended
    expect(b.attempts).toBe(8)
    expect(b.timeoutMs).toBe(30_000)
    const cumulative = [0]
    for (const d of b.delaysMs) cumulative.push(cumulative.at(-1)! + d)
    const m = 60_000
    const h = 60 * m
    // The spec's table: 0s, 30s, 2m 30s, 12m 30s, 42m 30s, 2h 42m (rounded), 10h 42m, 34h 42m.
    expect(cumulative.slice(0, 5)).toEqual([0, 30_000, 2.5 * m, 12.5 * m, 42.5 * m])
    expect(cumulative.slice(5).map((ms) => Math.floor(ms / m))).toEqual([2 * 60 + 42, 10 * 60 + 42, 34 * 60 + 42])
    expect(cumulative.at(-1)! / h).toBeCloseTo(34.708, 2)
  })

  it("a scaled schedule multiplies delays and time-outs, never taking a time-out below 1 s", () => {
    expect(scaledSchedule("exponential", 1)).toBe(SCHEDULES.exponential)
    expect(scaledSchedule("exponential", 0.01)).toEqual({ attempts: 5, delaysMs: [10, 20, 40, 80], timeoutMs: 1000 })
    expect(scaledSchedule("extended", 0.5)).toMatchObject({
      timeoutMs: 15_000,
      delaysMs: [15_000, 60_000, 300_000, 900_000, 3_600_000, 14_400_000, 43_200_000],
    })
  })
})

describe("nextStep", () => {
  const a = SCHEDULES.exponential

  it("a 2xx ends the delivery", () => {
    expect(nextStep(a, 1, { success: true, statusCode: 204, startedAt: 0, responseTimeMs: 3 })).toEqual({
      kind: "delivered",
    })
  })

  it("a failure is retried after the attempt's delay, counted from the end of the attempt", () => {
    expect(nextStep(a, 1, failed())).toEqual({ kind: "retry", at: 1_000_000 + 37 + 1000 })
    expect(nextStep(a, 4, failed({ statusCode: undefined, error: "timeout" }))).toEqual({
      kind: "retry",
      at: 1_000_000 + 37 + 8000,
    })
  })

  it("the round's last failure fails the delivery and disables the webhook", () => {
    expect(nextStep(a, 5, failed())).toEqual({ kind: "failed", disable: "all_attempts_failed" })
    expect(nextStep(SCHEDULES.extended, 7, failed()).kind).toBe("retry")
    expect(nextStep(SCHEDULES.extended, 8, failed())).toEqual({ kind: "failed", disable: "all_attempts_failed" })
  })

  it("410 Gone disables at once, whatever attempt it is", () => {
    expect(nextStep(a, 1, failed({ statusCode: 410 }))).toEqual({ kind: "failed", disable: "endpoint_gone" })
  })
})
