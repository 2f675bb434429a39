/**
 * Cloudflare's sliding-window counter (decision D10). Time is cut into fixed
 * windows of `windowMs`; each limit keeps the count of the current window and
 * of the one before. The rate at `now` is estimated as
 *
 *   previous × (windowMs − elapsed) / windowMs + current
 *
 * where `elapsed` is the time since the current window began. A request is
 * admitted when the estimate including it stays within the limit:
 * `previous × (windowMs − elapsed) + (current + 1) × windowMs ≤ limit × windowMs`,
 * kept in integers so that this file and the Redis script (Counters.ts)
 * decide identically. Refused requests are not counted.
 */

export interface WindowPosition {
  /** Index of the current window: floor(now / windowMs). */
  readonly index: number
  /** Milliseconds since the current window began. */
  readonly elapsed: number
}

export const windowPosition = (nowMs: number, windowMs: number): WindowPosition => {
  const index = Math.floor(nowMs / windowMs)
  return { index, elapsed: nowMs - index * windowMs }
}

/** Whether one more request fits: the admission rule above. */
export const admits = (limit: number, previous: number, current: number, elapsed: number, windowMs: number) =>
  previous * (windowMs - elapsed) + (current + 1) * windowMs <= limit * windowMs

/** The estimated count at `elapsed`, as a fraction. */
export const estimate = (previous: number, current: number, elapsed: number, windowMs: number) =>
  (previous * (windowMs - elapsed)) / windowMs + current

/** Requests still admitted now: floor(limit − estimate), never negative. */
export const remaining = (limit: number, previous: number, current: number, elapsed: number, windowMs: number) =>
  Math.max(0, Math.floor(limit - estimate(previous, current, elapsed, windowMs) + 1e-9))

/**
 * How long until one more request would be admitted, with no other traffic, in
 * milliseconds (0 when it would be now). Within the current window the
 * previous window's share decays; if the current window alone is full, the
 * wait runs into the next window, where the current count becomes the
 * previous one.
 */
export const waitMs = (limit: number, previous: number, current: number, elapsed: number, windowMs: number) => {
  if (admits(limit, previous, current, elapsed, windowMs)) return 0
  const toNextWindow = windowMs - elapsed
  if (current + 1 <= limit) {
    // previous × (windowMs − elapsed − t) ≤ (limit − current − 1) × windowMs
    const t = toNextWindow - ((limit - current - 1) * windowMs) / previous
    return Math.max(0, Math.ceil(t))
  }
  // In the next window: current × (windowMs − e′) + windowMs ≤ limit × windowMs
  const intoNext = Math.max(0, windowMs - ((limit - 1) * windowMs) / current)
  return Math.ceil(toNextWindow + intoNext)
}

/**
 * When the estimate falls back to zero with no more traffic (epoch ms): the
 * end of the next window while the current one has requests, the end of this
 * one while only the previous one has, else now.
 */
export const resetAtMs = (
  previous: number,
  current: number,
  position: WindowPosition,
  windowMs: number,
  nowMs: number,
) => (current > 0 ? (position.index + 2) * windowMs : previous > 0 ? (position.index + 1) * windowMs : nowMs)
