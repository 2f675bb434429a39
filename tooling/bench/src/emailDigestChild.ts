/**
 * The e-mail digest benchmark's child process (run with `--conditions=@agentgov/source`), one step per
 * process so that each reports its own peak RSS:
 * - `fill <dir> <events>`: stores `events` events in `<dir>/email.db` as the connector does
 *   (`pending` of each event, then `DigestStore.add`), in one transaction (the fill is not timed);
 * - `baseline <dir>`: the floor of the build, timed: the events' counts by type and agent in one query
 *   (through the same index the build reads);
 * - `build <dir>`: the daily digest built as the connector builds it, timed: `DigestStore.assign` with
 *   `renderDigest` (every waiting event assigned, counted, sampled and rendered, the message stored);
 * - `reset <dir>`: the events waiting again, for the next round.
 * Each prints one JSON line: `{ms, peakRssBytes, ...}`.
 */
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import type { Severity } from "@agentgov/connector-sdk"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { pending } from "../../../connectors/email/src/connector.ts"
import { DigestStore } from "../../../connectors/email/src/DigestStore.ts"
import { renderDigest } from "../../../connectors/email/src/render.ts"

const TYPES = [
  "enforcement.created",
  "enforcement.resolved",
  "policy.violated",
  "approval.requested",
  "approval.decided",
  "trust.score.changed",
  "trust.tier.downgraded",
  "agent.registered",
  "guard.denied",
  "billing.invoice.paid",
] as const
const SEVERITIES: ReadonlyArray<Severity> = ["info", "warning", "error", "critical"]
const AGENTS = 500
const DASHBOARD = "https://gov.example.com"

const [step, dir, count] = process.argv.slice(2)
if (!dir) throw new Error("usage: emailDigestChild.ts fill|baseline|build|reset <dir> [events]")
const peak = () => process.resourceUsage().maxRSS * 1024
const report = (r: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ ...r, peakRssBytes: peak() })}\n`)

switch (step) {
  case "fill": {
    const store = new DigestStore(dir)
    // the store's own `add`, in one transaction of its connection: not 100,000 fsyncs
    const now = Date.now()
    const events = Number(count)
    const started = performance.now()
    store.transaction(() => {
      for (let i = 0; i < events; i++) {
        const type = TYPES[i % TYPES.length]!
        const agent = (i * 7919) % AGENTS
        const event = sampleEvent(type, {
          id: `evt_bench${randomBytes(6).toString("hex")}${i}`,
          timestamp: new Date(now - (events - i) * 800).toISOString(),
          data: { agentId: `agt_bench${String(agent).padStart(4, "0")}`, agentName: `agent-${agent}` } as never,
        })
        const e = pending(event, SEVERITIES[i % SEVERITIES.length]!, DASHBOARD)
        store.add({ ...e, recipients: "ops@example.com" }, now)
      }
    })
    store.close()
    report({ ms: performance.now() - started, events })
    break
  }
  case "baseline": {
    const db = new DatabaseSync(join(dir, "email.db"), { readOnly: true })
    const started = performance.now()
    const groups = db.prepare("SELECT type, agent_key, COUNT(*) AS n FROM events GROUP BY type, agent_key").all()
    const ms = performance.now() - started
    db.close()
    report({ ms, groups: groups.length })
    break
  }
  case "build": {
    const store = new DigestStore(dir)
    const now = Date.now()
    const started = performance.now()
    const digests = store.assign(
      () => `<digest.${now}.${randomBytes(8).toString("hex")}@agentgov.connector>`,
      now,
      (id) => renderDigest(store, id, { frequency: "daily", dashboardUrl: DASHBOARD, now }),
    )
    const ms = performance.now() - started
    store.close()
    report({
      ms,
      digests: digests.length,
      events: digests.reduce((n, d) => n + d.eventCount, 0),
      htmlBytes: digests.reduce((n, d) => n + d.html.length, 0),
      textBytes: digests.reduce((n, d) => n + d.text.length, 0),
    })
    break
  }
  case "reset": {
    const db = new DatabaseSync(join(dir, "email.db"))
    db.exec("BEGIN; DELETE FROM digests; UPDATE meta SET value = '0' WHERE key = 'assigned_through'; COMMIT;")
    db.close()
    report({ ms: 0 })
    break
  }
  default:
    throw new Error(`unknown step ${step}`)
}
