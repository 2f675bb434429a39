import { cpus } from "node:os"
import { prepareGuard } from "./guard.ts"
import { type IngestShape, runIngest } from "./ingest.ts"
import { drive } from "./load.ts"
import { type BenchmarkResult, benchmark, cpuPer, measure, median, round, target } from "./report.ts"
import { type BenchServer, type FreshServer, settle } from "./server.ts"

/**
 * Issue 27: what keeping trust scores costs the guard and ingest. Two server children as `npm start` runs them,
 * each on a fresh store of its own, the same in every way but one: `on` keeps trust scores (the default: its
 * trust worker reads every guard decision, enforcement, approval… and recomputes the agent's score) and `off`
 * runs with AGENTGOV_TRUST_WORKER=false. Each round drives both, the order swapped every round: POST /v1/guard
 * (guard.ts's workspace of 100 rules, SDK token, 64 connections), then POST /events/ingest (ingest.ts's shape).
 * After every timed window the server is left to settle until idle (server.ts), so that the trust worker's
 * backlog from one window never lands in the other server's; what it spent settling is recorded, and counted in
 * the CPU per request. Target (issue 27): throughput with the worker on ≥ 0.95× with it off (the median of the
 * rounds' ratios), for both.
 */

const ROUNDS = 5
const GUARD_MS = 4_000
const GUARD_CONNECTIONS = 64
const INGEST: IngestShape = { clients: 8, calls: 50, batch: 100 }
const WARMUP: IngestShape = { clients: 8, calls: 5, batch: 100 }

type Side = "on" | "off"

interface Window {
  readonly perSecond: number
  /** Server CPU µs per request (or event) in the window, and with what it spent settling afterwards. */
  readonly serverCpuUs: number | undefined
  readonly serverCpuUsWithSettle: number | undefined
  readonly settleCpuMs: number | undefined
}

const guardWindow = async (server: BenchServer): Promise<Window> => {
  const { requestOf } = await prepareGuard(server)
  let requests = 0
  let seconds = 1
  const m = await measure(server, async () => {
    const load = await drive(server.url, GUARD_CONNECTIONS, GUARD_MS, requestOf)
    requests = load.requests
    seconds = load.seconds
  })
  const settleCpuMs = await settle(server)
  return windowOf(requests / seconds, requests, m.serverCpuMs, settleCpuMs, m)
}

const ingestWindow = async (server: BenchServer, shape: IngestShape, tag: string): Promise<Window> => {
  const run = await runIngest(server, shape, tag)
  const settleCpuMs = await settle(server)
  return windowOf(run.eventsPerSecond, run.events, run.serverCpuMs, settleCpuMs, run)
}

const windowOf = (
  perSecond: number,
  units: number,
  serverCpuMs: number | undefined,
  settleCpuMs: number | undefined,
  m: Parameters<typeof cpuPer>[0],
): Window => ({
  perSecond: round(perSecond),
  serverCpuUs: cpuPer(m, units, cpus().length).serverUs,
  serverCpuUsWithSettle:
    serverCpuMs === undefined || settleCpuMs === undefined
      ? undefined
      : round(((serverCpuMs + settleCpuMs) * 1000) / units, 1),
  settleCpuMs,
})

export const runTrustImpactBenchmark = async (
  fresh: FreshServer,
  log: (line: string) => void,
): Promise<Array<BenchmarkResult>> => {
  const on = await fresh("trust_on", {})
  let off: Awaited<ReturnType<FreshServer>> | undefined
  try {
    off = await fresh("trust_off", { AGENTGOV_TRUST_WORKER: "false" })
    const servers: Record<Side, BenchServer> = { on: on.server, off: off.server }
    log("trust-impact warm-up (guard and ingest, both servers)")
    for (const side of ["off", "on"] as const) {
      await guardWindow(servers[side])
      await ingestWindow(servers[side], WARMUP, "warmup")
    }
    const rounds: Array<Record<Side, { guard: Window; ingest: Window }>> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const order: Array<Side> = r % 2 === 1 ? ["off", "on"] : ["on", "off"]
      const got: Partial<Record<Side, { guard: Window; ingest: Window }>> = {}
      for (const side of order) {
        const guard = await guardWindow(servers[side])
        const ingest = await ingestWindow(servers[side], INGEST, `round${r}`)
        got[side] = { guard, ingest }
      }
      const o = got.on!
      const f = got.off!
      log(
        `trust-impact round ${r}: guard ${round(o.guard.perSecond, 0)} req/s with the trust worker, ${round(f.guard.perSecond, 0)} without (${round(o.guard.perSecond / f.guard.perSecond, 3)}×); ` +
          `ingest ${round(o.ingest.perSecond, 0)} events/s with, ${round(f.ingest.perSecond, 0)} without (${round(o.ingest.perSecond / f.ingest.perSecond, 3)}×)`,
      )
      log(
        `  server CPU per guard request with settling: ${o.guard.serverCpuUsWithSettle ?? "?"} µs with, ${f.guard.serverCpuUsWithSettle ?? "?"} µs without; per event ${o.ingest.serverCpuUsWithSettle ?? "?"} / ${f.ingest.serverCpuUsWithSettle ?? "?"} µs`,
      )
      rounds.push({ on: o, off: f })
    }
    const med = (side: Side, kind: "guard" | "ingest", f: (w: Window) => number | undefined) => {
      const xs = rounds.map((r) => f(r[side][kind])).filter((x): x is number => x !== undefined)
      return xs.length === 0 ? undefined : round(median(xs), 1)
    }
    const result = (kind: "guard" | "ingest") => {
      const baseline = med("off", kind, (w) => w.perSecond)!
      const ratios = rounds.map((r) => round(r.on[kind].perSecond / r.off[kind].perSecond, 3))
      const ratio = median(ratios)
      const value = baseline * ratio
      return benchmark({
        name: `trust-impact-${kind}`,
        what:
          kind === "guard"
            ? `POST /v1/guard (100 rules, SDK token, ${GUARD_CONNECTIONS} connections, ${GUARD_MS} ms) on a server child keeping trust scores; ${ROUNDS} rounds interleaved with the same server without them, the value the baseline's median times the median of the rounds' ratios`
            : `POST /events/ingest (${INGEST.clients} clients × ${INGEST.calls} calls × ${INGEST.batch} events) on a server child keeping trust scores; ${ROUNDS} rounds interleaved with the same server without them, the value the baseline's median times the median of the rounds' ratios`,
        unit: kind === "guard" ? "requests/s" : "events/s",
        value,
        baseline: {
          what: "the same server, configuration and load with AGENTGOV_TRUST_WORKER=false (no trust recomputation), a second child on its own fresh store, in the same rounds; median of the rounds",
          value: baseline,
        },
        targets: [target("ratio to the same run without trust (median of the rounds' ratios)", "min", 0.95, ratio)],
        details: {
          ratios,
          withTrustMedian: med("on", kind, (w) => w.perSecond),
          serverCpuUs: {
            what: `server CPU per ${kind === "guard" ? "request" : "event"}: in the window, and with what the server spent settling until idle afterwards (the trust worker's backlog)`,
            on: med("on", kind, (w) => w.serverCpuUs),
            off: med("off", kind, (w) => w.serverCpuUs),
            onWithSettle: med("on", kind, (w) => w.serverCpuUsWithSettle),
            offWithSettle: med("off", kind, (w) => w.serverCpuUsWithSettle),
          },
          rounds: rounds.map((r) => ({ on: r.on[kind], off: r.off[kind] })),
        },
      })
    }
    return [result("guard"), result("ingest")]
  } finally {
    await off?.stop()
    await on.stop()
  }
}
