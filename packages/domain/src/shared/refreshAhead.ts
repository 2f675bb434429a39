import { type Context, Effect } from "effect"

/**
 * A cached copy that is reloaded before it expires. Under steady traffic an entry that simply expired sent every
 * call that found it expired to the slow path at once, each with its own read (the guard's throttle every 5 s,
 * its agent and policy set every 30 s: ~60 reads and slow calls in a burst at 64 connections). Past
 * `REFRESH_AT` of its life, the first call that reads an entry starts one reload in the background and the entry
 * goes on serving until it expires, so the bound on how old a copy may be is unchanged. A reload that failed or is
 * slow is not started again before `retryMs`.
 */
export interface Refreshable {
  /** When the copy was read (epoch ms). */
  readonly at: number
  /** No further reload before this instant: one is under way or has just failed. Set here. */
  retryAt?: number
}

/** The share of an entry's life after which it is reloaded ahead of its expiry. */
export const REFRESH_AT = 0.8

/** Calls `reload` when `entry`, which may be `maxAgeMs` old, is due for one; returns whether it did. */
export const refreshAhead = (
  entry: Refreshable,
  now: number,
  maxAgeMs: number,
  reload: () => void,
  retryMs = 1_000,
): boolean => {
  if (now - entry.at < maxAgeMs * REFRESH_AT) return false
  if (entry.retryAt !== undefined && now < entry.retryAt) return false
  entry.retryAt = now + retryMs
  reload()
  return true
}

/**
 * Starts reloads in the background on `context`'s services (a layer's own): a reload that fails is logged at debug
 * level, and the copy it was to replace serves on until it expires (`refreshAhead` tries again after its retry delay).
 */
export const backgroundReloads = (context: Context.Context<never>) => {
  const fork = Effect.runForkWith(context)
  return (what: string, reload: Effect.Effect<unknown>): void => {
    fork(
      reload.pipe(Effect.catchCause((cause) => Effect.logDebug(`${what} was not reloaded ahead; tried again`, cause))),
    )
  }
}
