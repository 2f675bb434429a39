import type { Runtime } from "@agentgov/api"
import { type AttemptResult, DeliveryQueue, parseAllowlist, systemResolver, WebhookSettings } from "@agentgov/domain"
import { SpanKind } from "@opentelemetry/api"
import { Layer } from "effect"
import { STOP_GRACE_MS, settledWithin } from "./background.ts"
import type { ServerConfig } from "./config.ts"
import type { Instruments } from "./instrument.ts"
import type { Logger } from "./logger.ts"
import { extractFrom, inSpan, untraced } from "./tracing.ts"
import { makeWebhookShares } from "./webhookShares.ts"

/** The webhook settings the domain takes from configuration. */
export const webhookSettings = (config: ServerConfig) =>
  Layer.succeed(WebhookSettings, {
    timeScale: config.webhookTimeScale ?? 1,
    // Nothing but the operator's allowlist admits a non-public target, not even loopback on the embedded store.
    targets: { allowlist: parseAllowlist(config.webhookAllowlist ?? []).allowlist },
    resolver: systemResolver,
  })

export interface WebhookWorkerOptions {
  /** Attempts in flight at once in this process. */
  readonly concurrency?: number
  /** Deliveries taken per claim. */
  readonly batch?: number
  /** The longest sleep without a look at the queue (the fallback when a notification is missed). */
  readonly pollMs?: number
}

export interface WebhookWorker {
  readonly stop: () => Promise<void>
}

/** Results are recorded together: at most this many per transaction, and none waits longer than FLUSH_MS. */
const FLUSH_SIZE = 200
const FLUSH_MS = 5
/** A worker whose due deliveries wait for shares claims again this long after an attempt ends (fewer than a quarter). */
const FREED_MS = 10
/**
 * The share of a worker's attempts in flight one workspace may hold (224 of 256): a backlog to endpoints that never
 * answer (each attempt holding its place for the whole time-out) always leaves places to the other workspaces, and
 * the claim's round-robin gives them the next ones that free. Not less: a workspace's throughput to a fast receiver
 * is bounded by it (the webhook bench, one workspace: 4,200–4,900 deliveries/s with no share, 3,500–3,700 with half,
 * 2,700 with a quarter).
 */
const WORKSPACE_SHARE = 0.875
/**
 * The share one webhook may hold (192 of 256): a receiver that never answers holds its own share for its time-outs,
 * and its workspace's other webhooks keep the rest of the workspace's (32 places) for prompt deliveries. Not the
 * workspace's whole share: before, one dead receiver beside healthy ones took all 224 places, and 177 of 400 deliveries
 * to the healthy webhooks waited about 29 s behind its time-outs. Not much less: a single webhook's throughput to a
 * fast receiver is bounded by it (see WORKSPACE_SHARE).
 */
const WEBHOOK_SHARE = 0.75
/**
 * A webhook's share starts at this many places on a worker and grows by one with each attempt its receiver answers
 * (any status: an answer frees its place), up to WEBHOOK_SHARE's; an attempt that ends unanswered (a time-out, a
 * refused or reset connection) sets it back here. A receiver that never answers therefore holds 16 places, not 192:
 * two of them in one workspace used to fill its whole share (192 + 32) and hold its other webhooks for their
 * time-outs. One that answers is at its full share after about 176 answers (the webhook benchmark's receiver within
 * its first tenth of a second).
 */
const WEBHOOK_START_SHARE = 16
/**
 * A grown share is forgotten once its webhook has had nothing in flight here this long (it starts again from
 * WEBHOOK_START_SHARE): the claim carries every remembered share, so they are the webhooks active of late.
 */
const GROWN_SHARE_IDLE_MS = 60_000
/** At most this many grown shares at once: past it, a webhook not yet grown stays at its start until some are forgotten. */
const MAX_GROWN_SHARES = 10_000
/**
 * Finished deliveries (and their attempts) are kept this long after their event, then purged: once as the worker
 * starts (a server restarted more often than hourly would otherwise never purge) and hourly after that.
 */
export const WEBHOOK_HISTORY_DAYS = 30
const PURGE_EVERY_MS = 3_600_000

/**
 * The delivery worker: wakes on the `agentgov_webhooks` notification that an
 * append (or a redelivery, or a re-enabled webhook) queued deliveries, at the
 * next retry's due time, and at least every `pollMs`; claims due deliveries
 * in short transactions (DeliveryQueue), sends them concurrently outside any
 * transaction, and records the results in batches. Any number of processes
 * may run one on the same database: claims skip each other's rows.
 */
export const startWebhookWorker = async (
  runtime: Pick<Runtime, "runPromise">,
  log: Logger,
  options: WebhookWorkerOptions = {},
  instruments: Instruments = { metrics: undefined, tracing: false },
): Promise<WebhookWorker> => {
  const concurrency = options.concurrency ?? 256
  const batch = options.batch ?? 100
  const pollMs = options.pollMs ?? 2_000
  const queue = await runtime.runPromise(DeliveryQueue.useSync((q) => q))
  const { metrics } = instruments
  // Each attempt in a span of its own (its traceparent goes out with the webhook, WebhookClient), when tracing.
  const attempt: typeof queue.attempt = instruments.tracing
    ? (d) =>
        inSpan("webhook.delivery", { "agentgov.webhook.attempt": d.attempt }, () => queue.attempt(d), {
          kind: SpanKind.CLIENT,
          // Under the span that appended the event: the caller's trace reaches the receiver.
          parent: extractFrom({ traceparent: d.traceParent ?? undefined }),
        })
    : queue.attempt

  let stopping = false
  /** Stopped: what is recorded was flushed, and the runtime may be disposed. */
  let stopped = false
  let inFlight = 0
  /** Attempts in flight here by workspace: a workspace takes at most `perWorkspace` of them (fair claims). */
  const busy = new Map<string, number>()
  const perWorkspace = Math.max(1, Math.ceil(concurrency * WORKSPACE_SHARE))
  /** Attempts in flight here by webhook: a webhook takes at most `perWebhook` of them. */
  const busyWebhooks = new Map<string, number>()
  const perWebhook = Math.max(1, Math.min(perWorkspace, Math.ceil(concurrency * WEBHOOK_SHARE)))
  /** Each webhook's places here, grown as its receiver answers (webhookShares.ts). */
  const shares = makeWebhookShares({
    start: Math.min(perWebhook, WEBHOOK_START_SHARE),
    full: perWebhook,
    idleMs: GROWN_SHARE_IDLE_MS,
    cap: MAX_GROWN_SHARES,
  })
  const shareForgetter = setInterval(() => shares.forgetIdle(), GROWN_SHARE_IDLE_MS / 6)
  shareForgetter.unref()
  /** The last pass left due deliveries for want of their workspaces' or webhooks' shares: attempts ending free some. */
  let heldByShares = false
  /** Attempts ended since then. */
  let freed = 0
  /** The claim that follows attempts ending while shares held deliveries (FREED_MS after the first of them). */
  let freedTimer: NodeJS.Timeout | undefined
  let pumping = false
  let again = false
  let saturated = false
  let wakeTimer: NodeJS.Timeout | undefined
  let results: Array<AttemptResult> = []
  let flushTimer: NodeJS.Timeout | undefined
  let flushing: Promise<void> | undefined
  let idle: (() => void) | undefined

  const wakeIn = (ms: number) => {
    if (stopping) return
    clearTimeout(wakeTimer)
    wakeTimer = setTimeout(() => void pump(), ms)
    wakeTimer.unref()
  }

  const flush = async (): Promise<void> => {
    if (flushing) return flushing
    flushing = (async () => {
      while (results.length > 0) {
        const taken = results.slice(0, FLUSH_SIZE)
        try {
          await runtime.runPromise(queue.record(taken))
          results = results.slice(taken.length)
        } catch (cause) {
          // Kept for the next try; if this process dies first, the leases run out and the attempts are made again.
          log.error("recording webhook attempts failed", { cause: String(cause), count: taken.length })
          if (stopping) return
          await new Promise((r) => setTimeout(r, 500))
        }
        // A retry is due at its own time: look again when that is.
        if (taken.some((r) => r.next.kind === "retry")) void pump()
      }
    })().finally(() => {
      flushing = undefined
      // Results that arrived as the loop ended would otherwise wait for the next one.
      if (results.length > 0 && !stopping) scheduleFlush()
    })
    return flushing
  }

  const scheduleFlush = () => {
    if (results.length >= FLUSH_SIZE) {
      clearTimeout(flushTimer)
      flushTimer = undefined
      void flush()
    } else if (flushTimer === undefined) {
      flushTimer = setTimeout(() => {
        flushTimer = undefined
        void flush()
      }, FLUSH_MS)
    }
  }

  const dispatch = (claimed: Parameters<typeof queue.attempt>[0]) => {
    inFlight++
    const workspace = claimed.workspaceId
    const hook = claimed.webhookId
    busy.set(workspace, (busy.get(workspace) ?? 0) + 1)
    busyWebhooks.set(hook, (busyWebhooks.get(hook) ?? 0) + 1)
    shares.opened(hook)
    attempt(claimed)
      .then((result) => {
        shares.ended(hook, result.outcome.statusCode !== undefined)
        metrics?.webhookAttempt(result.next.kind)
        // Past the stop's grace the runtime is gone: the result is not recorded, and the lease brings the attempt
        // back to the queue (as operations.md says), which is no error.
        if (stopped) return log.debug("webhook attempt ended after the worker stopped; its lease returns it")
        results.push(result)
        scheduleFlush()
      })
      .catch((cause) => log.error("webhook attempt failed unexpectedly", { cause: String(cause) }))
      .finally(() => {
        inFlight--
        const left = (busy.get(workspace) ?? 1) - 1
        if (left > 0) busy.set(workspace, left)
        else busy.delete(workspace)
        const hookLeft = (busyWebhooks.get(hook) ?? 1) - 1
        if (hookLeft > 0) busyWebhooks.set(hook, hookLeft)
        else {
          busyWebhooks.delete(hook)
          shares.drained(hook)
        }
        if (inFlight === 0) idle?.()
        // A saturated worker claims again once a batch's worth of room is free, not per finished attempt; one whose
        // due deliveries wait for their workspaces' or webhooks' shares, once a quarter of a share is free, and else
        // shortly after (the attempts ending meanwhile together): the room may be a small share's (a workspace's
        // other webhooks beside one that never answers have 32 places).
        if (stopping) return
        if (saturated && concurrency - inFlight >= Math.min(batch, Math.ceil(concurrency / 4))) void pump()
        else if (heldByShares) {
          if (++freed >= Math.max(1, Math.min(batch, Math.floor(perWorkspace / 4)))) void pump()
          else if (freedTimer === undefined) {
            freedTimer = setTimeout(() => {
              freedTimer = undefined
              void pump()
            }, FREED_MS)
            freedTimer.unref()
          }
        }
      })
  }

  const pump = async (): Promise<void> => {
    if (stopping) return
    if (pumping) {
      again = true
      return
    }
    pumping = true
    heldByShares = false
    freed = 0
    clearTimeout(freedTimer)
    freedTimer = undefined
    const fairness = { busy, perWorkspace, busyWebhooks, perWebhook: shares.start, webhookShares: shares.grown }
    try {
      for (;;) {
        do {
          again = false
          saturated = false
          while (!stopping) {
            const room = Math.min(batch, concurrency - inFlight)
            if (room <= 0) {
              saturated = true
              break
            }
            const claimed = await runtime.runPromise(untraced(queue.claim(room, fairness)))
            for (const d of claimed) dispatch(d)
            if (claimed.length < room) break
          }
        } while (again && !stopping)
        if (stopping || saturated) break
        // Attempts that end while the queue is read count towards the next claim (their room may be what was missing).
        heldByShares = inFlight > 0
        const next = await runtime.runPromise(untraced(queue.untilNextDue(fairness)))
        // A notification (or enough ended attempts) came while the queue was read: claim again at once.
        if (again && !stopping) continue
        // Due now but not claimable: their workspaces or webhooks are at their shares here, and attempts ending
        // claim again (see dispatch). Until then the worker sleeps until the next delivery a claim could take is due
        // (another worker may hold a due one for a moment: shortly), a notification, or the poll. It used to look
        // again every 10 ms while a receiver that never answered held its webhook's share (about 12% of a core here and
        // as much in the embedded store for a dead receiver and 5 events/s; see decisions.md, fifth pass).
        heldByShares = next.due !== undefined && next.due <= 0 && inFlight > 0
        if (!heldByShares) freed = 0
        wakeIn(next.claimable === undefined ? pollMs : Math.min(pollMs, Math.max(next.claimable, 10)))
        break
      }
    } catch (cause) {
      if (!stopping) {
        log.error("webhook worker could not read its queue", { cause: String(cause) })
        wakeIn(1_000)
      }
    } finally {
      pumping = false
    }
  }

  const purge = async () => {
    const before = new Date(Date.now() - WEBHOOK_HISTORY_DAYS * 86_400_000).toISOString()
    let total = 0
    while (!stopping) {
      const n = await runtime.runPromise(untraced(queue.purgeFinished(before)))
      // Another instance is purging (instances starting together all try): it does the work, this one stops.
      if (n === undefined) {
        log.debug("another instance is purging webhook deliveries")
        break
      }
      total += n
      if (n === 0) break
    }
    if (total > 0) log.info("purged old webhook deliveries", { count: total })
  }
  /** The purge in progress, which a stop waits for (within its grace) before the runtime is disposed. */
  let purging: Promise<void> | undefined
  /** A webhook was deleted while a purge ran: purge again after it, for its history. */
  let purgeAgain = false
  const purgeNow = () => {
    if (stopping) return
    if (purging) {
      purgeAgain = true
      return
    }
    purgeAgain = false
    purging = purge()
      .catch((cause) => {
        if (!stopping) log.error("purging webhook deliveries failed", { cause: String(cause) })
      })
      .finally(() => {
        purging = undefined
        if (purgeAgain) purgeNow()
      })
  }
  const purger = setInterval(purgeNow, PURGE_EVERY_MS)
  purger.unref()

  // A deleted webhook's history is removed by the purge, at once rather than within the hour.
  const unlisten = await queue.wakeups(
    () => void pump(),
    () => purgeNow(),
  )
  void pump()
  purgeNow()

  return {
    stop: async () => {
      stopping = true
      clearTimeout(wakeTimer)
      clearTimeout(freedTimer)
      clearInterval(purger)
      clearInterval(shareForgetter)
      await unlisten().catch(() => {})
      const purged = purging ? settledWithin([purging], STOP_GRACE_MS) : undefined
      if (inFlight > 0)
        await new Promise<void>((resolve) => {
          idle = resolve
          setTimeout(resolve, STOP_GRACE_MS).unref()
        })
      await purged
      clearTimeout(flushTimer)
      await flush()
      stopped = true
    },
  }
}
