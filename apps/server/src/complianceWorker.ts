import type { Runtime } from "@agentgov/api"
import { ComplianceService } from "@agentgov/domain"
import type { Logger } from "./logger.ts"

export interface ComplianceWorker {
  readonly stop: () => Promise<void>
}

/**
 * Generates requested compliance reports off the request path (D14): looks for one waiting every `pollMs`
 * and generates them one after another. Any number of processes may run one on the same database: a report
 * is claimed with SKIP LOCKED and a lease, so each is generated once, and one whose worker died is taken
 * up again when its lease ends.
 */
export const startComplianceWorker = (runtime: Runtime, log: Logger, pollMs = 500): ComplianceWorker => {
  let running: Promise<void> | undefined
  let stopping = false
  const drain = async () => {
    while (!stopping) {
      const id = await runtime.runPromise(ComplianceService.use((s) => s.generateNext))
      if (id === undefined) return
      log.info("compliance report generated", { reportId: id })
    }
  }
  const timer = setInterval(() => {
    if (running || stopping) return
    running = drain()
      .catch((cause) => log.error("compliance worker failed", { cause: String(cause) }))
      .finally(() => {
        running = undefined
      })
  }, pollMs)
  timer.unref()
  return {
    stop: async () => {
      stopping = true
      clearInterval(timer)
      await running
    },
  }
}
