import { randomBytes } from "node:crypto"
import { prepareGuard } from "./guard.ts"
import { drive } from "./load.ts"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"
import { type BenchServer, type FreshServer, settle } from "./server.ts"

/**
 * Issue 34: POST /v1/guard over HTTP with Prometheus metrics on (AGENTGOV_METRICS_TOKEN set: every request,
 * decision, append and batch counted; /metrics scraped once per round, as Prometheus would) and tracing off,
 * against the same run with both off: two server children as `npm start` runs them, each on a fresh store of
 * its own, rounds interleaved with the order swapped, medians. Target: ≥ 0.97×.
 */

const ROUNDS = 8
const ROUND_MS = 3_000
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

    const window = async (side: Side) => {
      const { requestOf } = await prepareGuard(servers[side])
      const load = await drive(servers[side].url, CONNECTIONS, ROUND_MS, requestOf)
      if (side === "metrics") await scrape()
      await settle(servers[side])
      return load.requests / load.seconds
    }
    log("metrics-on warm-up (both servers)")
    await window("plain")
    await window("metrics")
    const rounds: Array<Record<Side, number>> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const order: Array<Side> = r % 2 === 1 ? ["plain", "metrics"] : ["metrics", "plain"]
      const got: Partial<Record<Side, number>> = {}
      for (const side of order) got[side] = await window(side)
      log(
        `metrics-on round ${r}: guard ${round(got.metrics!, 0)} req/s with metrics, ${round(got.plain!, 0)} without (${round(got.metrics! / got.plain!, 3)}×)`,
      )
      rounds.push({ metrics: round(got.metrics!), plain: round(got.plain!) })
    }
    // The counters moved: the metrics were really on for every guard call measured.
    const exposition = await scrape()
    const decisions = [...exposition.matchAll(/^agentgov_guard_decisions_total\{[^}]*\} (\d+(?:\.\d+)?)$/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    )
    if (decisions === 0) throw new Error("the metrics server counted no guard decision")
    const value = median(rounds.map((r) => r.metrics))
    const baseline = median(rounds.map((r) => r.plain))
    const ratios = rounds.map((r) => round(r.metrics / r.plain, 3))
    return benchmark({
      name: "metrics-on",
      what: `POST /v1/guard (100 rules, SDK token, ${CONNECTIONS} connections, ${ROUND_MS} ms per round) on a server child with Prometheus metrics on (AGENTGOV_METRICS_TOKEN, /metrics scraped once per round) and tracing off; median of ${ROUNDS} interleaved rounds`,
      unit: "requests/s",
      value,
      baseline: {
        what: "the same server and load with metrics and tracing both off, a second child on its own fresh store, in the same rounds",
        value: baseline,
      },
      targets: [target("ratio to metrics and tracing off", "min", 0.97, value / baseline)],
      details: { rounds, ratios, medianOfRoundRatios: median(ratios), guardDecisionsCounted: decisions },
    })
  } finally {
    await plain?.stop()
    await withMetrics.stop()
  }
}
