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
import { type BenchmarkResult, benchmark, measure, round, summarise, target } from "./report.ts"
import { type BenchServer, jsonClient } from "./server.ts"

/**
 * The chat connectors (issue 28), each a child process started from its bin, all three subscribed to the
 * same events through their own signed webhooks of the bench server (a fresh set for each benchmark):
 * - connectors-latency: event written (before the ingest call) → the Slack, Discord and Teams fakes
 *   received it, at 100 events/s; the baseline is a bare receiver subscribed to the same events in the same
 *   run (what the service's webhook delivery alone takes, before any connector's queue and vendor call);
 * - connectors-memory: each connector's RSS after 10,000 events (all delivered), against its own RSS idle
 *   right after start; the target, issue 28's 80 MB, in decimal megabytes (80·10⁶ bytes = 76.29 MiB).
 */

export interface ConnectorShape {
  readonly warmupEvents: number
  readonly latencyEvents: number
  readonly eventsPerSecond: number
  readonly memoryEvents: number
  readonly memoryBatch: number
  readonly memoryClients: number
}

export const CONNECTOR_SHAPE: ConnectorShape = {
  warmupEvents: 100,
  latencyEvents: 1_000,
  eventsPerSecond: 100,
  memoryEvents: 10_000,
  memoryBatch: 100,
  memoryClients: 2,
}

const APPS = ["slack", "discord", "teams"] as const
const MiB = 2 ** 20
/** Issue 28's "≤ 80 MB" read in decimal megabytes, the stricter reading: 80·10⁶ bytes = 76.29 MiB. */
const MEMORY_TARGET_MIB = round((80 * 10 ** 6) / MiB, 2)
const mib = (bytes: number | undefined) => (bytes === undefined ? Number.NaN : round(bytes / MiB))

const expectStatus = (res: { status: number; body: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what} answered ${res.status}: ${JSON.stringify(res.body)}`)
  return res.body.data
}

/** A workspace of its own, and a client on its key. */
export const benchWorkspace = async (server: BenchServer, name: string) => {
  const ws = expectStatus(
    await server.call("POST", "/api/v1/workspaces", {
      name: `${name}-${Date.now()}`,
      environment: "test",
      plan: "enterprise",
    }),
    201,
    "creating the workspace",
  )
  return jsonClient(server.url, ws.apiKey.apiKey as string, 32)
}

export const subscribe = async (
  api: ReturnType<typeof jsonClient>,
  url: string,
  events: ReadonlyArray<string>,
  secret?: string,
) =>
  expectStatus(
    await api.call("POST", "/api/v1/webhooks", { url, events, ...(secret ? { secret } : {}) }),
    201,
    `registering the webhook to ${url}`,
  ) as { id: string; secret: string }

/** The three chat apps and a bare receiver, all subscribed to `bench.connector.*` in a workspace of their own. */
const setUp = async (root: string, server: BenchServer) => {
  const api = await benchWorkspace(server, "bench-connectors")
  const apps: Array<ConnectorChild> = []
  let bare: VendorFake | undefined
  const tearDown = async () => {
    api.close()
    for (const app of apps) await app.stop()
    await bare?.close()
  }
  try {
    for (const name of APPS) apps.push(await startConnectorChild(root, name))
    bare = await startVendorFake(() => ({ status: 200 }))
    const events = ["bench.connector.*"]
    for (const app of apps) await subscribe(api, `${app.url}/webhooks`, events, app.secret)
    await subscribe(api, `${bare.url}/bench`, events)
  } catch (error) {
    await tearDown()
    throw error
  }
  const prefix = tagPrefix()
  let n = 0
  const event = (tag: string) => ({ type: "bench.connector.tick", data: { tag, note: "connector benchmark" } })
  /** One ingest call of `batch` tagged events; their tags. */
  const ingest = async (batch: number) => {
    const tags = Array.from({ length: batch }, () => `${prefix}${n++}`)
    expectStatus(await api.call("POST", "/api/v1/events/ingest", { events: tags.map(event) }), 201, "ingest")
    return tags
  }
  /** Single-event ingest calls at `perSecond`; the send time of each tag. */
  const paced = async (count: number, perSecond: number) => {
    const sent = new Map<string, number>()
    const calls: Array<Promise<unknown>> = []
    const start = performance.now()
    for (let i = 0; i < count; i++) {
      const tag = `${prefix}${n++}`
      sent.set(tag, now())
      calls.push(
        api
          .call("POST", "/api/v1/events/ingest", { events: [event(tag)] })
          .then((res) => expectStatus(res, 201, "ingest")),
      )
      await sleep(Math.max(0, start + ((i + 1) * 1000) / perSecond - performance.now()))
    }
    await Promise.all(calls)
    return sent
  }
  return { apps, bare: bare!, ingest, paced, tearDown }
}

const connectorProblems = (apps: ReadonlyArray<ConnectorChild>) =>
  apps.flatMap((a) => a.problems.slice(0, 5).map((p) => `${a.name}: ${p}`))

export async function runConnectorLatencyBenchmark(
  root: string,
  server: BenchServer,
  log: (line: string) => void,
  shape: ConnectorShape = CONNECTOR_SHAPE,
): Promise<BenchmarkResult> {
  const { apps, bare, paced, tearDown } = await setUp(root, server)
  try {
    const fakes = [...apps.map((a) => a.fake), bare]
    log(`connectors-latency: warm-up, ${shape.warmupEvents} events to Slack, Discord and Teams`)
    const warm = await paced(shape.warmupEvents, shape.eventsPerSecond)
    await waitForArrivals(fakes, [...warm.keys()], 60_000)

    log(`connectors-latency: ${shape.latencyEvents} events at ${shape.eventsPerSecond}/s`)
    let sent = new Map<string, number>()
    const window = await measure(server, async () => {
      sent = await paced(shape.latencyEvents, shape.eventsPerSecond)
      await waitForArrivals(fakes, [...sent.keys()], 60_000)
    })
    const latencies = (fake: VendorFake) =>
      [...sent].flatMap(([tag, at]) => (fake.arrivals.has(tag) ? [fake.arrivals.get(tag)! - at] : []))
    const perApp = Object.fromEntries(apps.map((a) => [a.name, summarise(latencies(a.fake))]))
    const all = summarise(apps.flatMap((a) => latencies(a.fake)))
    const base = summarise(latencies(bare))
    log(
      `connectors-latency: p50 ${all.p50} ms, p99 ${all.p99} ms (${APPS.map((a) => `${a} p50 ${perApp[a]!.p50}`).join(", ")}); bare receiver p50 ${base.p50} ms`,
    )
    return benchmark({
      name: "connectors-latency",
      what: `Slack, Discord and Teams connectors (child processes from their bins, each on its own signed webhook) and a bare receiver subscribed to the same events; ${shape.latencyEvents} single-event ingest calls at ${shape.eventsPerSecond}/s; latency from before the ingest call to the vendor fake receiving the event, over all three apps`,
      unit: "ms (p50)",
      value: all.p50,
      baseline: {
        what: "a bare receiver on loopback subscribed to the same events in the same run (the service's webhook delivery alone, p50)",
        value: base.p50,
      },
      targets: [
        target("event → vendor p50 (ms)", "max", 100, all.p50),
        target("event → vendor p99 (ms)", "max", 1_000, all.p99),
        target("share delivered", "min", 1, all.count / (sent.size * apps.length)),
      ],
      details: {
        shape,
        latencyMs: all,
        perApp,
        bareReceiverMs: base,
        window,
        connectorProblems: connectorProblems(apps),
      },
    })
  } finally {
    await tearDown()
  }
}

export async function runConnectorMemoryBenchmark(
  root: string,
  server: BenchServer,
  log: (line: string) => void,
  shape: ConnectorShape = CONNECTOR_SHAPE,
): Promise<BenchmarkResult> {
  const { apps, ingest, tearDown } = await setUp(root, server)
  try {
    await sleep(1_000)
    const idleRss = Object.fromEntries(apps.map((a) => [a.name, a.rssBytes()]))
    log(`connectors-memory: ${shape.memoryEvents} events in calls of ${shape.memoryBatch} to Slack, Discord and Teams`)
    const tags: Array<string> = []
    const perClient = Math.ceil(shape.memoryEvents / shape.memoryBatch / shape.memoryClients)
    const started = performance.now()
    await Promise.all(
      Array.from({ length: shape.memoryClients }, async () => {
        for (let k = 0; k < perClient; k++) tags.push(...(await ingest(shape.memoryBatch)))
      }),
    )
    await waitForArrivals(
      apps.map((a) => a.fake),
      tags,
      600_000,
    )
    const drainMs = performance.now() - started
    await sleep(2_000)
    const afterRss = Object.fromEntries(apps.map((a) => [a.name, a.rssBytes()]))
    // Reported beside the target's figure, not instead of it: V8's memory reducer gives back ~10 MiB some seconds
    // after a burst (measured 2026-11-27: 87-91 MiB at 2 s, 78-82 MiB at 10-30 s).
    await sleep(8_000)
    const restRss = Object.fromEntries(apps.map((a) => [a.name, a.rssBytes()]))
    const missing = Object.fromEntries(apps.map((a) => [a.name, tags.filter((t) => !a.fake.arrivals.has(t)).length]))
    const worst = Math.max(...apps.map((a) => mib(afterRss[a.name])))
    log(
      `connectors-memory: RSS after ${tags.length} events ${APPS.map((a) => `${a} ${mib(afterRss[a])} MiB (idle ${mib(idleRss[a])}, 10 s on ${mib(restRss[a])})`).join(", ")}; ingested and drained in ${round(drainMs / 1000)} s`,
    )
    const lost = Object.values(missing).reduce((s, m) => s + m, 0)
    return benchmark({
      name: "connectors-memory",
      what: `RSS (VmRSS) of each of the Slack, Discord and Teams connector children after ${tags.length} events (ingested in calls of ${shape.memoryBatch} by ${shape.memoryClients} clients), all delivered to its fake, 2 s after the last arrived (and in details 10 s after); the largest of the three`,
      unit: "MiB",
      value: worst,
      baseline: {
        what: "the connectors' RSS idle right after start, same run (the largest of the three)",
        value: Math.max(...apps.map((a) => mib(idleRss[a.name]))),
      },
      targets: [
        target(
          "RSS MiB after 10,000 events, largest app (80 MB = 80·10⁶ bytes = 76.29 MiB)",
          "max",
          MEMORY_TARGET_MIB,
          worst,
        ),
        target("share delivered", "min", 1, 1 - lost / (tags.length * apps.length)),
      ],
      details: {
        idleRssMiB: Object.fromEntries(APPS.map((a) => [a, mib(idleRss[a])])),
        afterRssMiB: Object.fromEntries(APPS.map((a) => [a, mib(afterRss[a])])),
        restRssMiB10s: Object.fromEntries(APPS.map((a) => [a, mib(restRss[a])])),
        missing,
        ingestAndDrainMs: round(drainMs),
        connectorProblems: connectorProblems(apps),
      },
    })
  } finally {
    await tearDown()
  }
}
