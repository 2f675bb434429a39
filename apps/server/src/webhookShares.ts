/**
 * A delivery worker's places per webhook, grown as its receiver answers (slow start; decisions.md, "A webhook's
 * places grow as its receiver answers"). A webhook starts with `start` places on a worker and gains one with each
 * attempt its receiver answers (any status: an answer frees its place), up to `full`; an attempt that ends
 * unanswered (a time-out, a refused or reset connection) sets it back to `start`. A receiver that never answers
 * therefore holds `start` places, and one that answers reaches `full` after `full - start` answers.
 *
 * Only shares above `start` are remembered (`grown`, which every claim carries): a grown share is forgotten once its
 * webhook has had nothing in flight here for `idleMs`, so the map holds the webhooks active of late; and at most
 * `cap` are remembered at once: past it, a webhook not yet grown stays at `start` until some are forgotten.
 */
export interface WebhookSharesOptions {
  /** The places a webhook starts with. */
  readonly start: number
  /** The most places a webhook may grow to. */
  readonly full: number
  /** A grown share is forgotten after this long with nothing of its webhook in flight. */
  readonly idleMs: number
  /** The most grown shares remembered at once. */
  readonly cap: number
  /** The clock idleness is measured by (ms); `Date.now` unless a test gives its own. */
  readonly now?: () => number
}

export const makeWebhookShares = (options: WebhookSharesOptions) => {
  const { start, full, idleMs, cap } = options
  const now = options.now ?? Date.now
  const grown = new Map<string, number>()
  /** Since when each webhook with a grown share has had nothing in flight. */
  const idleSince = new Map<string, number>()
  return {
    /** The places every webhook starts with: its share unless `grown` has one. */
    start,
    /** The shares above `start`, by webhook: what the claim gives each webhook instead of `start`. */
    grown: grown as ReadonlyMap<string, number>,
    /** The webhook's places now. */
    shareOf: (hook: string): number => grown.get(hook) ?? start,
    /** An attempt of the webhook was sent: it is not idle. */
    opened: (hook: string): void => {
      idleSince.delete(hook)
    },
    /** An attempt of the webhook ended: an answer grows its share by one (up to `full`), none sets it back. */
    ended: (hook: string, answered: boolean): void => {
      if (!answered) {
        grown.delete(hook)
        idleSince.delete(hook)
        return
      }
      const share = grown.get(hook) ?? start
      if (share >= full) return
      if (!grown.has(hook) && grown.size >= cap) return
      grown.set(hook, share + 1)
    },
    /** The webhook's last attempt in flight here ended: its idleness starts now. */
    drained: (hook: string): void => {
      if (grown.has(hook)) idleSince.set(hook, now())
    },
    /** Forgets the grown shares of webhooks idle for `idleMs` or longer; returns how many. */
    forgetIdle: (): number => {
      const before = now() - idleMs
      let forgotten = 0
      for (const [hook, since] of idleSince)
        if (since <= before) {
          grown.delete(hook)
          idleSince.delete(hook)
          forgotten += 1
        }
      return forgotten
    },
  }
}

export type WebhookShares = ReturnType<typeof makeWebhookShares>
