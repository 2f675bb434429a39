import type { Runtime } from "@agentgov/api"
import { ComplianceService } from "@agentgov/domain"
import { STOP_GRACE_MS, settledWithin } from "./background.ts"
import type { Logger } from "./logger.ts"

export interface ComplianceWorker {
  readonly stop: () => Promise<void>
}

/** How often a worker looks for reports without being told of one: leases that ran out, notifications missed. */
export const COMPLIANCE_POLL_MS = 5_000

/**
 * Generates requested compliance reports off the request path (D14), one after another: woken by the
 * notification a request sends (`COMPLIANCE_CHANNEL`, from any instance), and every `pollMs` besides. Any number
 * of processes may run one on the same database: a report is claimed with SKIP LOCKED and a lease, so each is
 * generated once, and one whose worker died is taken up again when its lease ends.
 */
export const startComplianceWorker = async (
  runtime: Pick<Runtime, "runPromise">,
  log: Logger,
  pollMs = COMPLIANCE_POLL_MS,
): Promise<ComplianceWorker> => {
  const service = await runtime.runPromise(ComplianceService.useSync((s) => s))
  let running: Promise<void> | undefined
  /** A wake-up while a pass runs: look again after it (the pass may have looked before the report was there). */
  let again = false
  let stopping = false
  const drain = async () => {
    while (!stopping) {
      const id = await runtime.runPromise(service.generateNext)
      if (id === undefined) return
      log.info("compliance report generated", { reportId: id })
    }
  }
  const wake = () => {
    if (stopping) return
    if (running) {
      again = true
      return
    }
    again = false
    running = drain()
      .catch((cause) =>
        // Given up by a shutdown (below): the report keeps its lease, and is taken up again when that ends.
        stopping
          ? log.debug("compliance report left unfinished by the shutdown", { cause: String(cause) })
          : log.error("compliance worker failed", { cause: String(cause) }),
      )
      .finally(() => {
        running = undefined
        if (again) wake()
      })
  }
  const unlisten = await service.wakeups(wake)
  const timer = setInterval(wake, pollMs)
  timer.unref()
  // Reports requested while no worker ran.
  wake()
  return {
    stop: async () => {
      stopping = true
      clearInterval(timer)
      await unlisten().catch(() => {})
      if (running) await settledWithin([running], STOP_GRACE_MS)
    },
  }
}
