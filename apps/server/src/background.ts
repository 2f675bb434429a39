/**
 * How long a stopping worker waits for the work it has in flight (webhook attempts; passes of the trust and compliance
 * workers and of the server's periodic jobs) before it leaves it to its leases and cursors.
 */
export const STOP_GRACE_MS = 5_000

/** Resolves once every one of `all` has settled, or after `ms`, whichever comes first. */
export const settledWithin = (all: ReadonlyArray<Promise<unknown>>, ms: number): Promise<void> =>
  all.length === 0
    ? Promise.resolve()
    : new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms)
        timer.unref()
        void Promise.allSettled(all).then(() => {
          clearTimeout(timer)
          resolve()
        })
      })
