import { randomBytes } from "node:crypto"
import { prepareGuard } from "./guard.ts"
import { drive } from "./load.ts"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"
import { type BenchServer, type FreshServer, processCpuMs, settle } from "./server.ts"

/**
 * Issue 34: POST /v1/guard over HTTP with Prometheus metrics on (AGENTGOV_METRICS_TOKEN set: every request,
 * decision, append and batch counted; /metrics scraped once per round, as Prometheus would) and tracing off,
 * against the same run with both off: two server children as `npm start` runs them, each on a fresh store of
 * its own, short rounds interleaved with the order swapped; the median of the rounds' ratios, and each side's
 * server CPU per request. Target: ≥ 0.97×.
 */

const ROUNDS = 10
const ROUND_MS = 2_000
const CONNECTIONS = 64

type Side = "metrics" | "plain"

/** Neither server traces: no OTEL_* variable that switches the SDK on (tracing.ts: tracingWanted). */
const noTracing = {
  OTEL_SDK_DISABLED: "true",
  OTEL_TRACES_EXPORTER: "none",
  OTEL_EXPORTER_OTLP_ENDPOINT: "",
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "",
}

export const runMetricsOnBenchmark = async (
  fresh: FreshServer,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const metricsToken = randomBytes(24).toString("hex")
  const withMetrics = await fresh("metrics_on", { ...noTracing, AGENTGOV_METRICS_TOKEN: metricsToken })
  let plain: Awaited<ReturnType<FreshServer>> | undefined
  try {
    plain = await fresh("metrics_off", { ...noTracing, AGENTGOV_METRICS_TOKEN: "", AGENTGOV_METRICS_PORT: "" })
    const servers: Record<Side, BenchServer> = { metrics: withMetrics.server, plain: plain.server }
    const scrape = async () => {
      const res = await fetch(`${servers.metrics.url}/metrics`, {
        headers: { authorization: `Bearer ${metricsToken}` },
      })
      const text = await res.text()
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`)
      return text
    }
    const unscraped = await fetch(`${servers.plain.url}/metrics`)
    await unscraped.body?.cancel()
    if (unscraped.status !== 404) throw new Error(`/metrics on the server without metrics answered ${unscraped.status}`)

    /** Requests per second, and the server's CPU µs per request (on a shared machine, steadier than the rate). */
    const window = async (side: Side) => {
      const { requestOf } = await prepareGuard(servers[side])
      const cpu0 = processCpuMs(servers[side].pid)
      const load = await drive(servers[side].url, CONNECTIONS, ROUND_MS, requestOf)
      const cpu1 = processCpuMs(servers[side].pid)
      if (side === "metrics") await scrape()
      await settle(servers[side])
      return {
        perSecond: round(load.requests / load.seconds),
        cpuUsPerRequest:
          cpu0 === undefined || cpu1 === undefined ? undefined : round(((cpu1 - cpu0) * 1000) / load.requests, 1),
      }
    }
    type Window = Awaited<ReturnType<typeof window>>
    log("metrics-on warm-up (both servers)")
    await window("plain")
    await window("metrics")
    const rounds: Array<Record<Side, Window>> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const order: Array<Side> = r % 2 === 1 ? ["plain", "metrics"] : ["metrics", "plain"]
      const got: Partial<Record<Side, Window>> = {}
      for (const side of order) got[side] = await window(side)
      const { metrics, plain } = got as Record<Side, Window>
      log(
        `metrics-on round ${r}: guard ${round(metrics.perSecond, 0)} req/s with metrics (${metrics.cpuUsPerRequest ?? "?"} µs CPU each), ${round(plain.perSecond, 0)} without (${plain.cpuUsPerRequest ?? "?"} µs): ${round(metrics.perSecond / plain.perSecond, 3)}×`,
      )
      rounds.push({ metrics, plain })
    }
    // The counters moved: the metrics were really on for every guard call measured.
    const exposition = await scrape()
    const decisions = [...exposition.matchAll(/^agentgov_guard_decisions_total\{[^}]*\} (\d+(?:\.\d+)?)$/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    )
    if (decisions === 0) throw new Error("the metrics server counted no guard decision")
    const baseline = round(median(rounds.map((r) => r.plain.perSecond)))
    const ratios = rounds.map((r) => round(r.metrics.perSecond / r.plain.perSecond, 3))
    const ratio = median(ratios)
    const value = baseline * ratio
    const cpu = (side: Side) => {
      const xs = rounds.map((r) => r[side].cpuUsPerRequest).filter((x): x is number => x !== undefined)
      return xs.length === 0 ? undefined : round(median(xs), 1)
    }
    return benchmark({
      name: "metrics-on",
      what: `POST /v1/guard (100 rules, SDK token, ${CONNECTIONS} connections, ${ROUND_MS} ms per round) on a server child with Prometheus metrics on (AGENTGOV_METRICS_TOKEN, /metrics scraped once per round) and tracing off; ${ROUNDS} interleaved rounds, the value the baseline's median times the median of the rounds' ratios`,
      unit: "requests/s",
      value,
      baseline: {
        what: "the same server and load with metrics and tracing both off, a second child on its own fresh store, in the same rounds; median of the rounds",
        value: baseline,
      },
      targets: [target("ratio to metrics and tracing off (median of the rounds' ratios)", "min", 0.97, ratio)],
      details: {
        ratios,
        serverCpuUsPerRequest: {
          what: "server CPU µs per guard request (median of the rounds): what counting costs, steadier than the rate on a shared machine",
          metrics: cpu("metrics"),
          plain: cpu("plain"),
        },
        guardDecisionsCounted: decisions,
        rounds,
      },
    })
  } finally {
    await plain?.stop()
    await withMetrics.stop()
  }
}
