/**
 * How the group commit's direct appends tell listeners (`agentgov_events`: live streams, trust workers) that a
 * workspace's chain moved, without a NOTIFY in every append.
 *
 * A NOTIFY costs PostgreSQL more than its queue entry: every listening backend is woken to read it, and the
 * notifying transaction holds a cluster-wide lock from its queue entry until its commit is flushed, so notifying
 * commits never share a WAL flush (PostgreSQL's async.c, `PreCommit_Notify`). So per workspace:
 * - the first append after a gap of `gapMs` carries the NOTIFY in its own statement (`begin` says so);
 * - the appends within the gap do not. This process's listeners hear each at once (`local`), after it committed;
 *   the others hear the last of them from the next append that carries one, or, when the appends stop, from a
 *   NOTIFY of its own (`notify`, its own transaction) a gap later;
 * - `flush` sends what is owed at shutdown.
 *
 * The payload is `<workspaceId>:<sequence>`; listeners read only the workspace from it.
 */

/** Workspaces a process keeps state for; beyond, those with nothing owed or in flight are forgotten. */
const MAX_WORKSPACES = 10_000

export interface AnnouncementsOptions {
  readonly gapMs: number
  /** NOTIFY to every instance, in a transaction of its own. Its failure is swallowed (see `send`). */
  readonly notify: (payload: string) => Promise<void>
  /** Tells this process's listeners, synchronously. */
  readonly local: (payload: string) => void
  /** Milliseconds on a monotonic clock; default `performance.now()`. */
  readonly now?: () => number
}

interface Entry {
  /** When the last announcement to other instances went out (or the statement carrying it was sent). */
  at: number
  /** The newest append not yet announced to other instances. */
  owed: string | undefined
  timer: ReturnType<typeof setTimeout> | undefined
  inFlight: number
}

export const makeAnnouncements = (options: AnnouncementsOptions) => {
  const { gapMs, notify, local } = options
  const now = options.now ?? (() => performance.now())
  const entries = new Map<string, Entry>()

  const entryOf = (workspaceId: string) => {
    let entry = entries.get(workspaceId)
    if (entry === undefined) {
      if (entries.size >= MAX_WORKSPACES)
        for (const [w, e] of entries) if (e.owed === undefined && e.inFlight === 0) entries.delete(w)
      entry = { at: Number.NEGATIVE_INFINITY, owed: undefined, timer: undefined, inFlight: 0 }
      entries.set(workspaceId, entry)
    }
    return entry
  }

  /**
   * Sends what is owed. A lost NOTIFY (the store unreachable) is not retried: the live feeds' sweep (EventFeed.ts,
   * FEED_SWEEP_MS) and the trust worker's poll find those appends all the same.
   */
  const send = async (entry: Entry) => {
    clearTimeout(entry.timer)
    entry.timer = undefined
    const payload = entry.owed
    if (payload === undefined) return
    entry.owed = undefined
    entry.at = now()
    await notify(payload).catch(() => {})
  }

  /**
   * Sends what is owed a gap after it fell owed, unless a statement is in flight then: that one may carry it, and if
   * it does not, its end arms the timer again. While appends keep coming, the first past the gap carries it, and no
   * NOTIFY needs a transaction of its own.
   */
  const arm = (entry: Entry) => {
    if (entry.owed === undefined) {
      clearTimeout(entry.timer)
      entry.timer = undefined
      return
    }
    if (entry.timer !== undefined || entry.inFlight > 0) return
    entry.timer = setTimeout(() => {
      entry.timer = undefined
      if (entry.inFlight === 0) void send(entry)
    }, gapMs)
    entry.timer.unref?.()
  }

  /** Before an append's statement is sent: whether it carries the NOTIFY. */
  const begin = (workspaceId: string): boolean => {
    const entry = entryOf(workspaceId)
    entry.inFlight += 1
    const t = now()
    if (t - entry.at < gapMs) return false
    entry.at = t
    return true
  }

  /** After it: `payload` when it wrote, undefined when it wrote nothing (or failed). */
  const end = (workspaceId: string, carried: boolean, payload: string | undefined) => {
    const entry = entryOf(workspaceId)
    entry.inFlight = Math.max(0, entry.inFlight - 1)
    if (payload !== undefined) {
      if (carried) entry.owed = undefined
      else {
        local(payload)
        entry.owed = payload
      }
    }
    arm(entry)
  }

  /** Sends everything owed now (at shutdown). */
  const flush = () => Promise.all([...entries.values()].map(send))

  return { begin, end, flush }
}
