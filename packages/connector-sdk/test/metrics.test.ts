import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
// @ts-expect-error: the parser ships no types
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import { afterEach, describe, expect, it } from "vitest"
import { dead, defineConnector, ok, type RunningConnector, startConnector } from "../src/runtime/index.ts"
import { envelope, SECRET, signedHeaders } from "./helpers.ts"

/** A connector's `/metrics` (issue 34): its queue depth and dead letters, in Prometheus text format. */

const dirs: Array<string> = []
const running: Array<RunningConnector> = []
afterEach(async () => {
  for (const r of running.splice(0)) await r.close()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

const scrape = async (url: string) => {
  const res = await fetch(`${url}/metrics`)
  expect(res.status).toBe(200)
  const families = parsePrometheusTextFormat(await res.text()) as Array<{
    name: string
    metrics: Array<{ labels: Record<string, string>; value: string }>
  }>
  const value = (name: string) => {
    const f = families.find((x) => x.name === name)
    expect(f, name).toBeDefined()
    expect(f!.metrics[0]!.labels).toEqual({ connector: "metered" })
    return Number(f!.metrics[0]!.value)
  }
  return value
}

describe("GET /metrics of a connector", () => {
  it("counts received, delivered and dead-lettered deliveries, and the queue", async () => {
    const answers = [ok(), dead("HTTP 400")]
    const definition = defineConnector({
      name: "metered",
      description: "a connector for the metrics test",
      defaultEvents: ["approval.*"],
      settings: {},
      deliver: async () => answers.shift() ?? ok(),
    })
    const dir = mkdtempSync(join(tmpdir(), "agentgov-connector-metrics-"))
    dirs.push(dir)
    const r = await startConnector(definition, {
      env: { PORT: "0", HOST: "127.0.0.1", AGENTGOV_WEBHOOK_SECRET: SECRET, AGENTGOV_CONNECTOR_DATA_DIR: dir },
      log: () => {},
    })
    running.push(r)
    const before = await scrape(r.url)
    expect(before("agentgov_connector_queue_depth")).toBe(0)
    expect(before("agentgov_connector_dead_letters")).toBe(0)
    expect(before("agentgov_connector_ready")).toBe(1)
    for (const id of ["apr_m1", "apr_m2"]) {
      const body = JSON.stringify(envelope("approval.requested", { approvalId: id }))
      const res = await fetch(`${r.url}/webhooks`, { method: "POST", headers: signedHeaders(body), body })
      expect(res.status).toBeLessThan(300)
    }
    await r.idle()
    const after = await scrape(r.url)
    expect(after("agentgov_connector_received_total")).toBe(2)
    expect(after("agentgov_connector_delivered_total")).toBe(1)
    expect(after("agentgov_connector_dead_letters")).toBe(1)
    expect(after("agentgov_connector_queue_depth")).toBe(0)
    expect((await fetch(`${r.url}/metrics`, { method: "POST" })).status).toBe(405)
  })
})
