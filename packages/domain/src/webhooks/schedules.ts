import type { RetryPolicy } from "./Webhook.ts"

export interface Schedule {
  /** Attempts in one round (a redelivery starts another round). */
  readonly attempts: number
  /** `delaysMs[n - 1]`: the wait after attempt n fails, before attempt n + 1. */
  readonly delaysMs: ReadonlyArray<number>
  /** No answer within this is a failure. */
  readonly timeoutMs: number
}

const S = 1_000
const MIN = 60 * S
const H = 60 * MIN

/**
 * The spec's two schedules (D9). A: 5 attempts with exponential delays and a
 * 10 s time-out; the spec lists 1, 2, 4, 8 and 16 s, of which five attempts
 * use the first four (the first attempt is immediate, as in schedule B).
 * B: 8 attempts, 30 s time-out, delays from the spec's table.
 */
export const SCHEDULES: Readonly<Record<RetryPolicy, Schedule>> = {
  exponential: { attempts: 5, delaysMs: [1 * S, 2 * S, 4 * S, 8 * S], timeoutMs: 10 * S },
  extended: { attempts: 8, delaysMs: [30 * S, 2 * MIN, 10 * MIN, 30 * MIN, 2 * H, 8 * H, 24 * H], timeoutMs: 30 * S },
}

/** Scaled time-outs never drop below this: a loaded machine must not time out a prompt loopback answer. */
const MIN_SCALED_TIMEOUT_MS = 1_000

/**
 * A schedule on a clock running `scale` times as fast (tests only; 1 in
 * production): delays and the time-out are multiplied by it.
 */
export const scaledSchedule = (policy: RetryPolicy, scale: number): Schedule => {
  const s = SCHEDULES[policy]
  if (scale === 1) return s
  return {
    attempts: s.attempts,
    delaysMs: s.delaysMs.map((d) => Math.round(d * scale)),
    timeoutMs: Math.max(Math.round(s.timeoutMs * scale), Math.min(s.timeoutMs, MIN_SCALED_TIMEOUT_MS)),
  }
}

/**
 * How long a claimed attempt is leased to its worker: its time-out plus room
 * to record the result. A lease that runs out (the worker died) lets another
 * worker take the attempt again: delivery is at least once.
 */
export const leaseMs = (schedule: Schedule, scale: number) =>
  schedule.timeoutMs + Math.max(2_000, Math.round(30_000 * scale))
