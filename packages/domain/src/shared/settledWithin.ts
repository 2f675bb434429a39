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
