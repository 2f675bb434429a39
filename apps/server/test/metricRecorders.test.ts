/**
 * The request path's recorders (metrics.ts): what a scrape shows of them is what prom-client's own histogram
 * and counter show for the same observations, bucket edges included.
 */
// @ts-expect-error: the parser ships no types
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import { Histogram, Registry } from "prom-client"
import { describe, expect, it } from "vitest"
import { FastHistogram, processMetrics } from "../src/metrics.ts"

const BUCKETS = [0.001, 0.005, 0.01, 0.5]
// On an edge, between edges, below the first, above the last, zero.
const VALUES = [0.001, 0.0007, 0.005, 0.0051, 0.2, 0.5, 0.75, 12, 0, 0.01]

const parsed = async (registry: Registry) => parsePrometheusTextFormat(await registry.metrics())

/**
 * Every sample of an exposition, keyed by its name and its labels in sorted order (the parser above folds a
 * labelled histogram's series together, so histograms are compared sample by sample).
 */
const samples = async (registry: Registry) => {
  const out = new Map<string, number>()
  for (const line of (await registry.metrics()).split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m) continue
    const labels = [...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)]
      .map((l) => `${l[1]}=${l[2]}`)
      .sort()
    out.set(`${m[1]}{${labels.join(",")}}`, Number(m[3]))
  }
  return out
}

describe("FastHistogram", () => {
  it("exposes the same buckets, sum and count as prom-client's Histogram", async () => {
    const ours = new Registry()
    const theirs = new Registry()
    const fast = new FastHistogram({
      name: "h",
      help: "h",
      labelNames: ["op"],
      buckets: BUCKETS,
      registers: [ours],
    })
    const reference = new Histogram({ name: "h", help: "h", labelNames: ["op"], buckets: BUCKETS, registers: [theirs] })
    for (const [i, v] of VALUES.entries()) {
      const op = i % 3 === 0 ? "a" : "b"
      fast.bind(op).observe(v)
      reference.labels(op).observe(v)
    }
    const a = await samples(ours)
    expect(a).toEqual(await samples(theirs))
    // two series of 4 buckets, +Inf, sum and count
    expect(a.size).toBe(2 * 7)
    expect(a.get("h_bucket{le=0.005,op=b}")).toBe(3)
    expect(a.get("h_count{op=a}")).toBe(4)
  })

  it("binds one series per label set, and shows none before its first observation", async () => {
    const registry = new Registry()
    const fast = new FastHistogram({
      name: "h2",
      help: "h",
      labelNames: ["op"],
      buckets: BUCKETS,
      registers: [registry],
    })
    expect(fast.bind("a")).toBe(fast.bind("a"))
    fast.bind("b")
    expect(() => fast.bind()).toThrow(/label value/)
    expect((await registry.metrics()).includes("h2_bucket")).toBe(false)
    fast.bind("a").observe(1)
    const a = await samples(registry)
    expect([...a.keys()].filter((k) => k.includes("op=b"))).toEqual([])
    expect(a.get("h2_count{op=a}")).toBe(1)
    expect(a.get("h2_sum{op=a}")).toBe(1)
    expect(a.get("h2_bucket{le=0.5,op=a}")).toBe(0)
    expect(a.get("h2_bucket{le=+Inf,op=a}")).toBe(1)
  })
})

describe("the process's metrics", () => {
  it("counts what the request path adds, once, whether or not a scrape came between", async () => {
    const metrics = processMetrics()
    const count = async (name: string, labels: Record<string, string>) => {
      const families = await parsed(metrics.registry)
      const f = families.find((x: { name: string }) => x.name === name)
      const m = f?.metrics.find((x: { labels?: Record<string, string> }) =>
        Object.entries(labels).every(([k, v]) => x.labels?.[k] === v),
      )
      return Number(m?.value ?? m?.count ?? 0)
    }
    const before = await count("agentgov_guard_decisions_total", { decision: "require_approval" })
    const op = metrics.operation("recorders.test")
    for (let i = 0; i < 3; i++) {
      metrics.guardDecision("require_approval")
      op.done("ok", 0.002)
      metrics.request("other", "PURGE", 418, 0.003)
    }
    expect(await count("agentgov_guard_decisions_total", { decision: "require_approval" })).toBe(before + 3)
    metrics.guardDecision("require_approval")
    metrics.operation("recorders.test").done("ok", 0.002)
    expect(await count("agentgov_guard_decisions_total", { decision: "require_approval" })).toBe(before + 4)
    // a scrape with nothing new changes nothing
    expect(await count("agentgov_guard_decisions_total", { decision: "require_approval" })).toBe(before + 4)
    expect(await count("agentgov_operations_total", { operation: "recorders.test", outcome: "ok" })).toBe(4)
    expect(
      (await samples(metrics.registry)).get("agentgov_operation_duration_seconds_count{operation=recorders.test}"),
    ).toBe(4)
    expect(await count("agentgov_http_requests_total", { surface: "other", method: "OTHER", status: "418" })).toBe(3)
  })
})
