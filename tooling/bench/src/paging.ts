import { setTimeout as sleep } from "node:timers/promises"
import {
  type ConnectorChild,
  now,
  startConnectorChild,
  startVendorFake,
  tagPrefix,
  type VendorFake,
  waitForArrivals,
} from "./connectorApps.ts"
import { benchWorkspace, subscribe } from "./connectors.ts"
import { type BenchmarkResult, benchmark, measure, summarise, target } from "./report.ts"
import type { BenchServer } from "./server.ts"

/**
 * Paging (issue 29): an enforcement written (before `POST /enforcement`) → the PagerDuty connector's
 * `trigger` received by a fake of Events API v2. The connector is a child process from its bin on its
 * own signed webhook, subscribed to its defaults; the baseline is a bare receiver subscribed to the same
 * events in the same run (the service's webhook delivery alone).
 */

export interface PagingShape {
  readonly warmup: number
  readonly enforcements: number
  readonly intervalMs: number
}

export const PAGING_SHAPE: PagingShape = { warmup: 20, enforcements: 200, intervalMs: 50 }

export async function runPagingBenchmark(
  root: string,
  server: BenchServer,
  log: (line: string) => void,
  shape: PagingShape = PAGING_SHAPE,
): Promise<BenchmarkResult> {
  const api = await benchWorkspace(server, "bench-paging")
  let pager: ConnectorChild | undefined
  let bare: VendorFake | undefined
  try {
    pager = await startConnectorChild(root, "pagerduty")
    bare = await startVendorFake(() => ({ status: 200 }))
    const events = ["enforcement.*", "trust.tier.downgraded"]
    await subscribe(api, `${pager.url}/webhooks`, events, pager.secret)
    await subscribe(api, `${bare.url}/bench`, events)
    const agents: Array<string> = []
    for (let i = 0; i < shape.warmup + shape.enforcements; i++) {
      const res = await api.call("POST", "/api/v1/agents", { name: `bench-pager-${i}` })
      if (res.status !== 201) throw new Error(`creating an agent answered ${res.status}: ${JSON.stringify(res.body)}`)
      agents.push(res.body.data.id)
    }
    const prefix = tagPrefix()
    let next = 0
    const enforce = async (count: number) => {
      const sent = new Map<string, number>()
      const calls: Array<Promise<void>> = []
      const start = performance.now()
      for (let i = 0; i < count; i++) {
        const tag = `${prefix}${next}`
        const agentId = agents[next++]!
        sent.set(tag, now())
        calls.push(
          api
            .call("POST", "/api/v1/enforcement", { agentId, type: "warning", reason: `paging benchmark ${tag}` })
            .then((res) => {
              if (res.status !== 201) throw new Error(`enforcement answered ${res.status}: ${JSON.stringify(res.body)}`)
            }),
        )
        await sleep(Math.max(0, start + (i + 1) * shape.intervalMs - performance.now()))
      }
      await Promise.all(calls)
      return sent
    }
    log(`paging: warm-up, ${shape.warmup} enforcements`)
    const warm = await enforce(shape.warmup)
    await waitForArrivals([pager.fake, bare], [...warm.keys()], 60_000)
    log(`paging: ${shape.enforcements} enforcements, one every ${shape.intervalMs} ms`)
    let sent = new Map<string, number>()
    const window = await measure(server, async () => {
      sent = await enforce(shape.enforcements)
      await waitForArrivals([pager!.fake, bare!], [...sent.keys()], 60_000)
    })
    const latencies = (fake: VendorFake) =>
      [...sent].flatMap(([tag, at]) => (fake.arrivals.has(tag) ? [fake.arrivals.get(tag)! - at] : []))
    const paged = summarise(latencies(pager.fake))
    const base = summarise(latencies(bare))
    log(`paging: enforcement → PagerDuty p50 ${paged.p50} ms, p99 ${paged.p99} ms; bare receiver p50 ${base.p50} ms`)
    return benchmark({
      name: "paging",
      what: `${shape.enforcements} enforcements (POST /enforcement, one every ${shape.intervalMs} ms) → the PagerDuty connector (child process, its default events) → trigger received by an Events API v2 fake; from before the POST to arrival`,
      unit: "ms (p50)",
      value: paged.p50,
      baseline: {
        what: "a bare receiver on loopback subscribed to the same events in the same run (the service's webhook delivery alone, p50)",
        value: base.p50,
      },
      targets: [
        target("enforcement → PagerDuty p50 (ms)", "max", 100, paged.p50),
        target("share paged", "min", 1, paged.count / sent.size),
      ],
      details: {
        shape,
        latencyMs: paged,
        bareReceiverMs: base,
        window,
        connectorProblems: pager.problems.slice(0, 10),
      },
    })
  } finally {
    api.close()
    await pager?.stop()
    await bare?.close()
  }
}
