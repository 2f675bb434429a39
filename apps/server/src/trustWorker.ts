import type { Runtime } from "@agentgov/api"
import { TrustRecompute } from "@agentgov/domain"
import { STOP_GRACE_MS, settledWithin } from "./background.ts"
import type { Logger } from "./logger.ts"
import { untraced } from "./tracing.ts"

export interface TrustWorkerOptions {
  /** How often every agent is recomputed for decay, tenure and key age (default 1 h). */
  readonly sweepMs?: number
  /** The longest sleep without a look for workspaces behind (the fallback when a notification is missed). */
  readonly pollMs?: number
  /**
   * Notifications of one workspace are gathered this long into one pass, and its passes start at least this far
   * apart (the guard's events come in floods: back to back, passes cost PostgreSQL a commit and a scan each).
   */
  readonly gatherMs?: number
}

export interface TrustWorker {
  readonly stop: () => Promise<void>
}

/**
 * The trust worker (D12): follows each workspace's audit trail from its durable cursor
 * (TrustRecompute.catchUp), woken by the `agentgov_events` announcements of appends on any instance
 * (coalesced per workspace, see the domain's audit/announcements.ts), and at least every `pollMs`;
 * recomputes every agent each `sweepMs` for decay. Passes
 * of one workspace never overlap here, and other instances skip a workspace whose cursor row is
 * locked, so any number of instances may run it on one database.
 */
export const startTrustWorker = async (
  runtime: Pick<Runtime, "runPromise">,
  log: Logger,
  options: TrustWorkerOptions = {},
): Promise<TrustWorker> => {
  const sweepMs = options.sweepMs ?? 3_600_000
  const pollMs = options.pollMs ?? 5_000
  const gatherMs = options.gatherMs ?? 500
  const trust = await runtime.runPromise(TrustRecompute.useSync((t) => t))

  let stopping = false
  const due = new Set<string>()
  const running = new Map<string, Promise<void>>()
  /** When each workspace's last pass started: the next waits until gatherMs after it. */
  const started = new Map<string, number>()
  const later = new Map<string, NodeJS.Timeout>()
  let timer: NodeJS.Timeout | undefined

  const runOne = (workspaceId: string) => {
    if (running.has(workspaceId) || later.has(workspaceId)) return
    const wait = (started.get(workspaceId) ?? Number.NEGATIVE_INFINITY) + gatherMs - Date.now()
    if (wait > 0) {
      const t = setTimeout(() => {
        later.delete(workspaceId)
        if (!stopping) runOne(workspaceId)
      }, wait)
      t.unref()
      later.set(workspaceId, t)
      return
    }
    due.delete(workspaceId)
    started.set(workspaceId, Date.now())
    const pass = (async () => {
      try {
        for (;;) {
          const result = await runtime.runPromise(trust.catchUp(workspaceId))
          if (!result.more || stopping) break
        }
      } catch (cause) {
        if (!stopping) log.error("trust recomputation failed", { workspaceId, cause: String(cause) })
      }
    })().finally(() => {
      running.delete(workspaceId)
      // Events that arrived during the pass asked for another.
      if (due.has(workspaceId) && !stopping) runOne(workspaceId)
    })
    running.set(workspaceId, pass)
  }

  const flush = () => {
    timer = undefined
    for (const w of [...due]) runOne(w)
  }

  const wake = (workspaceId: string) => {
    if (stopping) return
    due.add(workspaceId)
    if (timer === undefined) {
      timer = setTimeout(flush, gatherMs)
      timer.unref()
    }
  }

  const lookBehind = async () => {
    try {
      for (const w of await runtime.runPromise(untraced(trust.behind))) wake(w)
    } catch (cause) {
      if (!stopping) log.error("trust worker could not read its cursors", { cause: String(cause) })
    }
  }

  const sweepAll = async () => {
    try {
      for (const w of await runtime.runPromise(untraced(trust.sweepDue(sweepMs)))) {
        if (stopping) return
        await runtime.runPromise(trust.sweep(w))
      }
    } catch (cause) {
      if (!stopping) log.error("trust sweep failed", { cause: String(cause) })
    }
  }

  const unlisten = await runtime.runPromise(
    trust.wakeups((workspaceId) => (workspaceId === undefined ? void lookBehind() : wake(workspaceId))),
  )
  const poller = setInterval(() => void lookBehind(), pollMs)
  poller.unref()
  const sweeper = setInterval(() => void sweepAll(), Math.min(sweepMs, 60_000))
  sweeper.unref()
  await lookBehind()

  return {
    stop: async () => {
      stopping = true
      clearInterval(poller)
      clearInterval(sweeper)
      clearTimeout(timer)
      timer = undefined
      for (const t of later.values()) clearTimeout(t)
      later.clear()
      await unlisten().catch(() => {})
      // A pass still running after the grace is given up: its cursor was not moved, and the next instance goes on
      // from there (its failure when the pool closes under it is not logged).
      await settledWithin([...running.values()], STOP_GRACE_MS)
    },
  }
}
