import { cpus } from "node:os"
import type postgres from "postgres"
import { type Child, startChild, startDurable } from "./durable.ts"
import { drive as driveLoad, requestBytes } from "./load.ts"
import { type BenchmarkResult, benchmark, cpuPer, measure, median, round, summarise, target } from "./report.ts"
import { type BenchServer, processCpuMs } from "./server.ts"

/**
 * `POST /v1/guard` over HTTP with an SDK token against the server child on PostgreSQL (every decision
 * recorded in the chain), and in the same run, rounds interleaved, the minimal durable design
 * (durableServer.ts: node:http + postgres.js, static token, one trivial rule, one audit-width row with a
 * SHA-256 per decision, group commit, synchronous_commit on), both driven by the same load generator
 * (load.ts) with the same bodies, at 1 (sequential), 16 and 64 keep-alive connections.
 * Targets (issue 25): throughput ≥ 0.8× the durable server's at 16 and 64 connections, p99 ≤ 1.25× its
 * p99 there, sequential p50 ≤ 1.3× its p50. A bare node:http echo server at 64 connections is recorded
 * as information: what HTTP alone costs on this machine.
 */

const LEVELS = [1, 16, 64] as const
const ROUND_MS = 4_000
const ROUNDS = 3
const RULES = 100

/** The echo: read the body, parse it, answer a small JSON document. Nothing else. */
const ECHO_SERVER = `
const http = require("node:http")
const server = http.createServer((req, res) => {
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}")
    const out = JSON.stringify({ ok: true, data: { echo: body } })
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) })
    res.end(out)
  })
})
server.keepAliveTimeout = 65000
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })))
`

/** `connections` connections sending `requestOf(i)` for ROUND_MS. */
const drive = async (url: string, connections: number, requestOf: (i: number) => Buffer) => {
  const load = await driveLoad(url, connections, ROUND_MS, requestOf)
  return {
    requests: load.requests,
    requestsPerSecond: load.requests / load.seconds,
    latencyMs: summarise(load.latenciesMs),
  }
}
type Load = Awaited<ReturnType<typeof drive>>

const pct = (share: number | undefined) => (share === undefined ? "?%" : `${Math.round(share * 100)}%`)

/** A workspace-sized policy set: RULES rules over exact, prefix and glob actions, half with conditions. */
const policies = () =>
  Array.from({ length: RULES / 10 }, (_, p) => ({
    name: `bench-policy-${p}`,
    rules: Array.from({ length: 10 }, (_, r) => {
      const i = p * 10 + r
      const actions = i % 3 === 0 ? [`tool.t${i}`] : i % 3 === 1 ? [`svc${i}.*`] : [`*.op${i}`]
      return {
        id: `r${i}`,
        effect: i % 7 === 0 ? "deny" : "allow",
        actions,
        ...(i % 2 === 0 ? { when: { all: [{ field: "context.amount", op: "lt", value: 1000 + i }] } } : {}),
      }
    }),
  }))

/**
 * A workspace-sized policy set, an agent and an SDK token on `server`, and 64 guard bodies over them (a quarter
 * exact-action rules, a quarter prefix rules, half no rule): what every guard-over-HTTP measurement sends.
 */
export const prepareGuard = (server: BenchServer): ReturnType<typeof setUpGuard> => {
  let prepared = preparedGuards.get(server)
  if (prepared === undefined) {
    prepared = setUpGuard(server)
    preparedGuards.set(server, prepared)
  }
  return prepared
}
/** Once per server: the benchmarks that share a server share its workspace's rules. */
const preparedGuards = new WeakMap<BenchServer, ReturnType<typeof setUpGuard>>()

const setUpGuard = async (server: BenchServer) => {
  for (const doc of policies()) {
    const res = await server.call("POST", "/api/v1/policies", doc)
    if (res.status !== 201) throw new Error(`policy: ${res.status} ${JSON.stringify(res.body)}`)
  }
  const agent = await server.call("POST", "/api/v1/agents", { name: `bench-guard-${Date.now()}` })
  if (agent.status !== 201) throw new Error(`agent: ${agent.status}`)
  const token = await server.call("POST", "/api/v1/tokens")
  if (token.status !== 201) throw new Error(`token: ${token.status} ${JSON.stringify(token.body)}`)
  const agentId = agent.body.data.id as string
  const bodies = Array.from({ length: 64 }, (_, i) =>
    JSON.stringify({
      agentId,
      action: i % 4 === 0 ? `tool.t${(i * 3) % RULES}` : i % 4 === 1 ? `svc${(i * 3 + 1) % RULES}.read` : "files.read",
      context: { amount: (i * 37) % 2000, path: `/data/${i}.csv` },
    }),
  )
  const auth = { authorization: `Bearer ${token.body.data.token}` }
  const requests = bodies.map((body) => requestBytes(server.url, "/v1/guard", auth, body))
  return { bodies, auth, requestOf: (i: number) => requests[i % requests.length]! }
}

export const runGuardHttpBenchmark = async (
  server: BenchServer,
  sql: postgres.Sql,
  databaseUrl: string,
  log: (line: string) => void,
  cpuProfDir?: string,
): Promise<BenchmarkResult> => {
  const { bodies, auth, requestOf: guardRequestOf } = await prepareGuard(server)
  const durable = await startDurable(sql, databaseUrl, "durable_guard", cpuProfDir)
  let echo: Child | undefined
  try {
    echo = await startChild(["-e", ECHO_SERVER])
    const echoRequests = bodies.map((body) => requestBytes(echo!.url, "/echo", {}, body))
    const durableRequests = bodies.map((body) =>
      requestBytes(durable.url, "/v1/guard", { authorization: `Bearer ${durable.key}` }, body),
    )
    const sides = {
      guard: { url: server.url, pid: server.pid, requestOf: guardRequestOf },
      durable: {
        url: durable.url,
        pid: durable.pid,
        requestOf: (i: number) => durableRequests[i % durableRequests.length]!,
      },
      echo: { url: echo.url, pid: echo.pid, requestOf: (i: number) => echoRequests[i % echoRequests.length]! },
    }
    type Side = keyof typeof sides
    /** Every guard request the server answered here, warm-up included: a CPU profile's time divides by it. */
    let guardRequestsServed = 0
    type Measured = Load & {
      serverCpuUsPerRequest: number | undefined
      clientCpuUsPerRequest: number | undefined
      postgresCpuUsPerRequest: number | undefined
      /** The share of the machine's cores left idle in the round. */
      idle: number | undefined
    }
    /** A round, with the CPU the serving process, PostgreSQL and the load generator spent per request: on a shared machine, what throughput is made of. */
    const measureRound = async (side: Side, connections: number): Promise<Measured> => {
      const { url, pid, requestOf } = sides[side]
      let load!: Load
      const window = await measure({ cpuMs: () => processCpuMs(pid) }, async () => {
        load = await drive(url, connections, requestOf)
      })
      if (side === "guard") guardRequestsServed += load.requests
      const cpu = cpuPer(window, load.requests, cpus().length)
      return {
        ...load,
        serverCpuUsPerRequest: cpu.serverUs,
        clientCpuUsPerRequest: cpu.loadUs,
        postgresCpuUsPerRequest: cpu.postgresUs,
        idle: cpu.idle,
      }
    }
    const describe = (m: Measured) =>
      `${round(m.requestsPerSecond, 0)} req/s, p50 ${m.latencyMs.p50} p99 ${m.latencyMs.p99} ms; server ${m.serverCpuUsPerRequest ?? "?"}, PostgreSQL ${m.postgresCpuUsPerRequest ?? "?"}, load ${m.clientCpuUsPerRequest ?? "?"} µs CPU/request, ${pct(m.idle)} idle`

    log(`guard warm-up (${LEVELS.join(", ")} connections, both sides)`)
    for (const connections of LEVELS) {
      await measureRound("durable", connections)
      await measureRound("guard", connections)
    }
    await measureRound("echo", 64)

    type Level = { connections: number; guard: Measured; durable: Measured }
    const rounds: Array<{ levels: Array<Level>; echo: Measured }> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const levels: Array<Level> = []
      for (const connections of LEVELS) {
        // The order swapped every round, so that neither side always runs after the other.
        const order: Array<Side> = r % 2 === 1 ? ["durable", "guard"] : ["guard", "durable"]
        const got: Partial<Record<Side, Measured>> = {}
        for (const side of order) got[side] = await measureRound(side, connections)
        levels.push({ connections, guard: got.guard!, durable: got.durable! })
        log(`guard round ${r}, ${connections} connection(s): ${describe(got.guard!)}`)
        log(`  minimal durable: ${describe(got.durable!)}`)
      }
      const e = await measureRound("echo", 64)
      log(`  echo, 64 connections: ${describe(e)}`)
      rounds.push({ levels, echo: e })
    }
    // Informational: the SDK sends an Idempotency-Key with every guard call; each request here has its own.
    const run = `bench-${Date.now().toString(36)}`
    const keyed = await drive(server.url, 64, (i) =>
      requestBytes(server.url, "/v1/guard", { ...auth, "idempotency-key": `${run}-${i}` }, bodies[i % bodies.length]),
    )
    guardRequestsServed += keyed.requests
    log(`guard with Idempotency-Key: ${round(keyed.requestsPerSecond, 0)} req/s (p99 ${keyed.latencyMs.p99} ms)`)
    log(`guard requests served in this benchmark, warm-up included: ${guardRequestsServed}`)

    /** Medians over the rounds at one level. */
    const at = (connections: number) => {
      const ls = rounds.map((r) => r.levels.find((l) => l.connections === connections)!)
      const m = (f: (l: Level) => number) => median(ls.map(f))
      return {
        connections,
        requestsPerSecond: round(m((l) => l.guard.requestsPerSecond)),
        durableRequestsPerSecond: round(m((l) => l.durable.requestsPerSecond)),
        p50Ms: m((l) => l.guard.latencyMs.p50),
        durableP50Ms: m((l) => l.durable.latencyMs.p50),
        p99Ms: m((l) => l.guard.latencyMs.p99),
        durableP99Ms: m((l) => l.durable.latencyMs.p99),
      }
    }
    const [seq, c16, c64] = LEVELS.map(at) as [ReturnType<typeof at>, ReturnType<typeof at>, ReturnType<typeof at>]
    const echoRate = median(rounds.map((r) => r.echo.requestsPerSecond))
    return benchmark({
      name: "guard-http",
      what: `POST /v1/guard with an SDK token, ${RULES} rules, every decision recorded in the chain on PostgreSQL; at 1, 16 and 64 keep-alive connections, ${ROUND_MS} ms per round, medians of ${ROUNDS} interleaved rounds; the headline at 64 connections`,
      unit: "requests/s",
      value: c64.requestsPerSecond,
      baseline: {
        what: "the minimal durable design (durableServer.ts, child process) at 64 connections: node:http + postgres.js, static bearer token, one trivial rule, one audit-width row with a SHA-256 per decision, group-committed multi-row INSERTs with synchronous_commit on into a copy of events with all its indexes; same load generator (load.ts) and bodies",
        value: c64.durableRequestsPerSecond,
      },
      targets: [
        target("throughput ratio, 16 connections", "min", 0.8, c16.requestsPerSecond / c16.durableRequestsPerSecond),
        target("throughput ratio, 64 connections", "min", 0.8, c64.requestsPerSecond / c64.durableRequestsPerSecond),
        target("p99 ratio, 16 connections", "max", 1.25, c16.p99Ms / c16.durableP99Ms),
        target("p99 ratio, 64 connections", "max", 1.25, c64.p99Ms / c64.durableP99Ms),
        target("sequential p50 ratio", "max", 1.3, seq.p50Ms / seq.durableP50Ms),
      ],
      details: {
        levels: [seq, c16, c64],
        echo: {
          what: "a bare node:http JSON echo server (child process) at 64 connections, same load generator and bodies: HTTP alone on this machine; informational",
          requestsPerSecond: round(echoRate),
          ratio: round(c64.requestsPerSecond / echoRate, 3),
        },
        guardRequestsServed,
        rounds,
        withIdempotencyKey: {
          what: "one round at 64 connections with a distinct Idempotency-Key on every request, as the SDK sends; informational",
          requestsPerSecond: round(keyed.requestsPerSecond, 0),
          ratio: round(keyed.requestsPerSecond / c64.durableRequestsPerSecond, 3),
          latencyMs: keyed.latencyMs,
        },
      },
    })
  } finally {
    await durable.stop()
    await echo?.stop()
  }
}
