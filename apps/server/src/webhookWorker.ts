import type { Runtime } from "@agentgov/api"
import { type AttemptResult, DeliveryQueue, parseAllowlist, systemResolver, WebhookSettings } from "@agentgov/domain"
import { SpanKind } from "@opentelemetry/api"
import { Layer } from "effect"
import { STOP_GRACE_MS, settledWithin } from "./background.ts"
import type { ServerConfig } from "./config.ts"
import type { Instruments } from "./instrument.ts"
import type { Logger } from "./logger.ts"
import { extractFrom, inSpan, untraced } from "./tracing.ts"

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
  /** The last pass left due deliveries for want of their workspaces' or webhooks' shares: attempts ending free some. */
  let heldByShares = false
  /** Attempts ended since then. */
  let freed = 0
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
    attempt(claimed)
      .then((result) => {
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
        else busyWebhooks.delete(hook)
        if (inFlight === 0) idle?.()
        // A saturated worker claims again once a batch's worth of room is free, not per finished attempt; one whose
        // due deliveries wait for their workspaces' shares, once a quarter of a share is free.
        if (stopping) return
        if (saturated && concurrency - inFlight >= Math.min(batch, Math.ceil(concurrency / 4))) void pump()
        else if (heldByShares && ++freed >= Math.max(1, Math.min(batch, Math.floor(perWorkspace / 4)))) void pump()
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
    try {
      do {
        again = false
        saturated = false
        while (!stopping) {
          const room = Math.min(batch, concurrency - inFlight)
          if (room <= 0) {
            saturated = true
            break
          }
          const claimed = await runtime.runPromise(
            untraced(queue.claim(room, { busy, perWorkspace, busyWebhooks, perWebhook })),
          )
          for (const d of claimed) dispatch(d)
          if (claimed.length < room) break
        }
      } while (again && !stopping)
      if (!stopping && !saturated) {
        const due = await runtime.runPromise(untraced(queue.untilNextDue))
        // Due now but not claimable: their workspaces are at their shares here (claimed again as attempts end), or
        // another worker holds those rows for a moment. Look again shortly either way.
        heldByShares = due !== undefined && due <= 0 && inFlight > 0
        wakeIn(due === undefined ? pollMs : Math.min(pollMs, Math.max(due, 10)))
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
      total += n
      if (n === 0) break
    }
    if (total > 0) log.info("purged old webhook deliveries", { count: total })
  }
  /** The purge in progress, which a stop waits for (within its grace) before the runtime is disposed. */
  let purging: Promise<void> | undefined
  const purgeNow = () => {
    if (stopping || purging) return
    purging = purge()
      .catch((cause) => {
        if (!stopping) log.error("purging webhook deliveries failed", { cause: String(cause) })
      })
      .finally(() => {
        purging = undefined
      })
  }
  const purger = setInterval(purgeNow, PURGE_EVERY_MS)
  purger.unref()

  const unlisten = await queue.wakeups(() => void pump())
  void pump()
  purgeNow()

  return {
    stop: async () => {
      stopping = true
      clearTimeout(wakeTimer)
      clearInterval(purger)
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
