/**
 * How the group commit's direct appends tell listeners (`agentgov_events`: live streams, trust workers) that a
 * workspace's chain moved, without a NOTIFY in every append.
 *
 * A NOTIFY costs PostgreSQL more than its queue entry: every listening backend is woken to read it, and the
 * notifying transaction holds a cluster-wide lock from its queue entry until its commit is flushed, so notifying
 * commits never share a WAL flush (PostgreSQL's async.c, `PreCommit_Notify`). So per workspace and process:
 * - an append's statement carries the NOTIFY when `gapMs` or more have passed since the last announcement to
 *   other instances (`begin` says so): at most one a gap;
 * - the others do not. This process's listeners hear each at once (`local`), after it committed; the other
 *   instances hear the last of them from the next statement that carries one, or, when the appends stop, from a
 *   NOTIFY of its own (`notify`, its own transaction) a gap later;
 * - a statement that failed may have committed: what it would have said is owed to every instance, this one's
 *   own LISTEN included;
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
  /** Tells this process's listeners, synchronously. Its failure is swallowed. */
  readonly local: (payload: string) => void
  /** Milliseconds on a monotonic clock; default `performance.now()`. */
  readonly now?: () => number
}

/** One statement, from `begin` to `end`. */
export interface Announcing {
  /** Whether the statement carries the NOTIFY. */
  readonly carried: boolean
  /** The statement's place among the workspace's statements, in the order they were sent. */
  readonly ticket: number
}

/** How a statement ended: it wrote, it wrote nothing, or it failed, having perhaps committed. */
export type AppendEnd = "written" | "nothing" | "unknown"

interface Entry {
  /** When the last announcement to other instances went out, or the statement carrying it was sent. */
  at: number
  /** The newest append not yet announced to other instances. */
  owed: string | undefined
  /** The ticket of the statement that made `owed`: a carrier sent before it does not cover it. */
  owedBy: number
  timer: ReturnType<typeof setTimeout> | undefined
  inFlight: number
  tickets: number
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
      entry = {
        at: Number.NEGATIVE_INFINITY,
        owed: undefined,
        owedBy: 0,
        timer: undefined,
        inFlight: 0,
        tickets: 0,
      }
      entries.set(workspaceId, entry)
    }
    return entry
  }

  /**
   * Sends what is owed. A NOTIFY that fails (the store unreachable) is not retried: the live feeds' sweep
   * (EventFeed.ts, FEED_SWEEP_MS) and the trust worker's poll find those appends all the same.
   */
  const send = async (entry: Entry) => {
    clearTimeout(entry.timer)
    entry.timer = undefined
    const payload = entry.owed
    if (payload === undefined) return
    entry.owed = undefined
    entry.at = now()
    try {
      await notify(payload)
    } catch {
      // See above.
    }
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
  const begin = (workspaceId: string): Announcing => {
    const entry = entryOf(workspaceId)
    entry.inFlight += 1
    entry.tickets += 1
    const t = now()
    if (t - entry.at < gapMs) return { carried: false, ticket: entry.tickets }
    entry.at = t
    return { carried: true, ticket: entry.tickets }
  }

  /** After it, with the payload it announces (`<workspaceId>:<its last sequence>`). */
  const end = (workspaceId: string, statement: Announcing, ended: AppendEnd, payload: string) => {
    const entry = entryOf(workspaceId)
    entry.inFlight = Math.max(0, entry.inFlight - 1)
    const owe = () => {
      // A newer statement's payload stands; once it is sent (by `flush`), this one is owed again.
      if (statement.ticket < entry.owedBy && entry.owed !== undefined) return
      entry.owed = payload
      entry.owedBy = statement.ticket
    }
    if (ended === "written") {
      // A carrier covers what fell owed before it was sent, not what a later statement added.
      if (statement.carried) {
        if (entry.owedBy < statement.ticket) entry.owed = undefined
      } else {
        owe()
        try {
          local(payload)
        } catch {
          // A listener's failure is its own: the append stands, and the others are still owed it.
        }
      }
    } else if (ended === "unknown") owe()
    arm(entry)
  }

  /** Sends everything owed now (at shutdown). */
  const flush = () => Promise.all([...entries.values()].map(send))

  return { begin, end, flush }
}
