import { type ChildProcess, spawn } from "node:child_process"
import { cpus } from "node:os"
import { drive as driveLoad, requestBytes } from "./load.ts"
import { type BenchmarkResult, benchmark, cpuPer, measure, median, round, summarise, target } from "./report.ts"
import { type BenchServer, processCpuMs } from "./server.ts"

/**
 * `POST /v1/guard` over HTTP with an SDK token, 50 concurrent keep-alive
 * connections, against the server child on PostgreSQL (every evaluation is
 * recorded in the chain), and a bare node:http JSON echo server in another
 * child process measured in the same run with the same load generator
 * (load.ts) and bodies.
 * Targets: throughput ≥ 0.4× the echo server's, p99 ≤ 10 ms.
 */

const CONNECTIONS = 50
const ROUND_MS = 4_000
const ROUNDS = 3
const RULES = 100

/** The baseline: read the body, parse it, answer a small JSON document. Nothing else. */
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

const startEcho = (): Promise<{ url: string; child: ChildProcess }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", ECHO_SERVER], { stdio: ["ignore", "pipe", "inherit"] })
    child.stdout!.setEncoding("utf8").once("data", (line: string) => {
      resolve({ url: `http://127.0.0.1:${JSON.parse(line).port}`, child })
    })
    child.once("error", reject)
  })

/** CONNECTIONS connections sending `requestOf(i)` for ROUND_MS. */
const drive = async (url: string, requestOf: (i: number) => Buffer) => {
  const load = await driveLoad(url, CONNECTIONS, ROUND_MS, requestOf)
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

export const runGuardHttpBenchmark = async (
  server: BenchServer,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
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
  const echo = await startEcho()
  try {
    const auth = { authorization: `Bearer ${token.body.data.token}` }
    const echoRequests = bodies.map((body) => requestBytes(echo.url, "/echo", {}, body))
    const guardRequests = bodies.map((body) => requestBytes(server.url, "/v1/guard", auth, body))
    const toEcho = (i: number) => echoRequests[i % echoRequests.length]!
    const toGuard = (i: number) => guardRequests[i % guardRequests.length]!
    log(`guard warm-up (${CONNECTIONS} connections)`)
    await drive(echo.url, toEcho)
    await drive(server.url, toGuard)
    type Measured = Load & {
      serverCpuUsPerRequest: number | undefined
      clientCpuUsPerRequest: number | undefined
      postgresCpuUsPerRequest: number | undefined
      /** The share of the machine's cores left idle in the round. */
      idle: number | undefined
    }
    /** A round, with the CPU the serving process, PostgreSQL and the load generator spent per request: on a shared machine, what throughput is made of. */
    const measureRound = async (pid: number | undefined, round_: () => Promise<Load>): Promise<Measured> => {
      let load!: Load
      const window = await measure({ cpuMs: () => (pid === undefined ? undefined : processCpuMs(pid)) }, async () => {
        load = await round_()
      })
      const cpu = cpuPer(window, load.requests, cpus().length)
      return {
        ...load,
        serverCpuUsPerRequest: cpu.serverUs,
        clientCpuUsPerRequest: cpu.loadUs,
        postgresCpuUsPerRequest: cpu.postgresUs,
        idle: cpu.idle,
      }
    }
    const rounds: Array<{ guard: Measured; echo: Measured }> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const e = await measureRound(echo.child.pid, () => drive(echo.url, toEcho))
      const g = await measureRound(server.pid, () => drive(server.url, toGuard))
      log(
        `guard round ${r}: ${round(g.requestsPerSecond, 0)} req/s (p99 ${g.latencyMs.p99} ms, server ${g.serverCpuUsPerRequest ?? "?"}, PostgreSQL ${g.postgresCpuUsPerRequest ?? "?"}, load ${g.clientCpuUsPerRequest ?? "?"} µs CPU/request, ${pct(g.idle)} idle); echo ${round(e.requestsPerSecond, 0)} req/s (server ${e.serverCpuUsPerRequest ?? "?"}, load ${e.clientCpuUsPerRequest ?? "?"} µs CPU/request, ${pct(e.idle)} idle)`,
      )
      rounds.push({ guard: g, echo: e })
    }
    // Informational: the SDK sends an Idempotency-Key with every guard call; each request here has its own.
    const run = `bench-${Date.now().toString(36)}`
    const keyed = await drive(server.url, (i) =>
      requestBytes(server.url, "/v1/guard", { ...auth, "idempotency-key": `${run}-${i}` }, bodies[i % bodies.length]),
    )
    log(`guard with Idempotency-Key: ${round(keyed.requestsPerSecond, 0)} req/s (p99 ${keyed.latencyMs.p99} ms)`)
    const value = median(rounds.map((r) => r.guard.requestsPerSecond))
    const baseline = median(rounds.map((r) => r.echo.requestsPerSecond))
    const p99 = median(rounds.map((r) => r.guard.latencyMs.p99))
    return benchmark({
      name: "guard-http",
      what: `POST /v1/guard with an SDK token, ${CONNECTIONS} keep-alive connections, ${RULES} rules, every decision recorded in the chain on PostgreSQL; ${ROUND_MS} ms per round, median of ${ROUNDS}`,
      unit: "requests/s",
      value,
      baseline: {
        what: "a bare node:http JSON echo server (child process), same load generator (load.ts) and bodies",
        value: round(baseline),
      },
      targets: [target("ratio to the echo server", "min", 0.4, value / baseline), target("p99 ms", "max", 10, p99)],
      details: {
        rounds,
        withIdempotencyKey: {
          what: "one round with a distinct Idempotency-Key on every request, as the SDK sends; informational",
          requestsPerSecond: round(keyed.requestsPerSecond, 0),
          ratio: round(keyed.requestsPerSecond / baseline, 3),
          latencyMs: keyed.latencyMs,
        },
      },
    })
  } finally {
    echo.child.kill("SIGKILL")
  }
}
