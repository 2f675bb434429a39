import { type DependencyList, useCallback, useEffect, useRef, useState } from "react"
import { type ApiErrorInfo, errorInfo, MAX_PAGE_SIZE } from "./api.ts"

export interface QueryState<T> {
  readonly data: T | undefined
  readonly error: ApiErrorInfo | undefined
  readonly loading: boolean
  readonly reload: () => void
}

/** Runs `load` when `deps` change; the latest answer wins. */
export const useQuery = <T>(load: () => Promise<T>, deps: DependencyList): QueryState<T> => {
  const [state, setState] = useState<{ data?: T; error?: ApiErrorInfo; loading: boolean }>({ loading: true })
  const [tick, setTick] = useState(0)
  const seq = useRef(0)
  // biome-ignore lint/correctness/useExhaustiveDependencies: the caller's deps decide
  useEffect(() => {
    const mine = ++seq.current
    setState((s) => ({ ...s, loading: true, error: undefined }))
    load().then(
      (data) => mine === seq.current && setState({ data, loading: false }),
      (e) => mine === seq.current && setState({ error: errorInfo(e), loading: false }),
    )
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { data: state.data, error: state.error, loading: state.loading, reload }
}

export interface Page<T> {
  readonly data: ReadonlyArray<T>
  readonly meta: { readonly cursor: string | null; readonly hasMore: boolean }
}

/**
 * A cursor-paginated list: `limit` records a page (never more than 100), a stack of cursors for "previous",
 * and a reset whenever the filters (`deps`) change.
 */
export const usePaged = <T>(
  load: (page: { limit: number; cursor?: string }) => Promise<Page<T>>,
  deps: DependencyList,
  initialLimit = 25,
) => {
  const [limit, setLimitRaw] = useState(Math.min(initialLimit, MAX_PAGE_SIZE))
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined])
  const cursor = cursors.at(-1)
  // biome-ignore lint/correctness/useExhaustiveDependencies: filters reset the pages
  useEffect(() => setCursors([undefined]), [...deps, limit])
  const query = useQuery(() => load({ limit, ...(cursor === undefined ? {} : { cursor }) }), [...deps, limit, cursor])
  return {
    ...query,
    rows: query.data?.data ?? [],
    page: cursors.length,
    limit,
    setLimit: (n: number) => setLimitRaw(Math.max(1, Math.min(n, MAX_PAGE_SIZE))),
    hasNext: query.data?.meta.hasMore === true && query.data.meta.cursor !== null,
    hasPrev: cursors.length > 1,
    next: () => query.data?.meta.cursor && setCursors((c) => [...c, query.data!.meta.cursor!]),
    prev: () => setCursors((c) => (c.length > 1 ? c.slice(0, -1) : c)),
  }
}

/** A mutation's state: run it, see it pending, read its error. */
export const useAction = <A extends Array<unknown>, T>(run: (...args: A) => Promise<T>) => {
  const [pending, setPending] = useState(false)
  const [error, setError] = useState<ApiErrorInfo | undefined>()
  const call = async (...args: A): Promise<T | undefined> => {
    setPending(true)
    setError(undefined)
    try {
      return await run(...args)
    } catch (e) {
      setError(errorInfo(e))
      return undefined
    } finally {
      setPending(false)
    }
  }
  return { call, pending, error, clear: () => setError(undefined) }
}

/**
 * `run` at most once every `ms`: the first call runs at once, the calls made meanwhile fold into one at the end of
 * the interval. For a list reloaded on each live event: a flood of events (an agent requesting approvals as fast as
 * its workspace's limit lets it) is a reload every `ms`, not one each, which would spend the person's own rate limit
 * (the plan's, per minute) and leave their "Deny" or "Suspend" refused with a 429.
 */
export const useThrottled = (run: () => void, ms: number) => {
  const latest = useRef(run)
  latest.current = run
  const state = useRef<{ timer: ReturnType<typeof setTimeout> | undefined; pending: boolean }>({
    timer: undefined,
    pending: false,
  })
  useEffect(() => () => clearTimeout(state.current.timer), [])
  return useCallback(() => {
    const s = state.current
    if (s.timer !== undefined) {
      s.pending = true
      return
    }
    latest.current()
    const tick = () => {
      if (!s.pending) {
        s.timer = undefined
        return
      }
      s.pending = false
      latest.current()
      s.timer = setTimeout(tick, ms)
    }
    s.timer = setTimeout(tick, ms)
  }, [ms])
}
