import { spawn } from "node:child_process"
import { Agent, request } from "node:http"
import { join } from "node:path"
import { drive, requestBytes } from "./load.ts"
import { type BenchmarkResult, benchmark, median, round, summarise, target } from "./report.ts"
import { processCpuMs } from "./server.ts"

/**
 * The credential benchmarks of issue 4, against authServer.ts in a child
 * process (so that load generation and serving do not share an event loop):
 *
 * - throughput of `GET /v1/ping` with an SDK token (verified once, then
 *   cached; rate limits counted in-process) against the same route with no
 *   credential check at all: target ≥ 0.6×;
 * - the latency the Redis rate-limit check adds: p99 of sequential requests
 *   with Redis counters minus p99 with rate limiting off: target ≤ 1 ms.
 */

export const CONCURRENCY = 32
export const THROUGHPUT_MS = 3_000
const ROUNDS = 3
const LATENCY_REQUESTS = 5_000

export interface AuthChild {
  readonly ports: Record<string, number>
  /** An SDK token of the child's workspace. */
  readonly token: string
  /** An OAuth access token (`svc_oauth_at_…`) of the same workspace, from the code flow with PKCE. */
  readonly oauthToken: string
  readonly pid: number
  readonly stop: () => void
}

/** authServer.ts as a child process, on `databaseUrl`. */
export const startAuthChild = (root: string, databaseUrl: string): Promise<AuthChild> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, "tooling/bench/src/authServer.ts")], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let out = ""
    let err = ""
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      err += c
    })
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      out += c
      const line = out.split("\n").find((l) => l.startsWith("{"))
      if (line) resolve({ ...JSON.parse(line), pid: child.pid!, stop: () => child.kill("SIGKILL") })
    })
    child.once("exit", (code) => reject(new Error(`auth bench server exited (${code}):\n${err}`)))
  })

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY })

const get = (port: number, token: string | undefined): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path: "/v1/ping", agent, headers: token ? { authorization: `Bearer ${token}` } : {} },
      (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      },
    )
    req.on("error", reject)
    req.end()
  })

/**
 * Requests per second from CONCURRENCY keep-alive connections for THROUGHPUT_MS (load.ts) on the child's
 * `GET /v1/ping`: with no token on the `open` port, the token-auth benchmark's baseline route.
 */
export const throughput = async (port: number, token: string | undefined, ms = THROUGHPUT_MS) =>
  (await rateAndCpu(`http://127.0.0.1:${port}`, "/v1/ping", token ? { authorization: `Bearer ${token}` } : {}, ms))
    .perSecond

/**
 * `GET path` from CONCURRENCY keep-alive connections for `ms`: requests per second, and the CPU µs the serving
 * process `pid` spent per request (on a shared machine a steadier measure of the work than the rate).
 */
export const rateAndCpu = async (
  url: string,
  path: string,
  headers: Readonly<Record<string, string>>,
  ms: number,
  pid?: number,
) => {
  const request = requestBytes(url, path, headers)
  const cpu0 = pid === undefined ? undefined : processCpuMs(pid)
  const load = await drive(url, CONCURRENCY, ms, () => request)
  const cpu1 = pid === undefined ? undefined : processCpuMs(pid)
  return {
    perSecond: load.requests / load.seconds,
    cpuUsPerRequest:
      cpu0 === undefined || cpu1 === undefined ? undefined : Math.round(((cpu1 - cpu0) * 10_000) / load.requests) / 10,
  }
}

/** Per-request latency in µs, one request at a time. */
const latencies = async (port: number, token: string) => {
  const out: Array<number> = []
  for (let i = 0; i < LATENCY_REQUESTS; i++) {
    const t0 = performance.now()
    const status = await get(port, token)
    out.push((performance.now() - t0) * 1000)
    if (status !== 200) throw new Error(`ping answered ${status}`)
  }
  return out
}

export const runAuthBenchmarks = async (
  root: string,
  databaseUrl: string,
  log: (line: string) => void,
): Promise<Array<BenchmarkResult>> => {
  const child = await startAuthChild(root, databaseUrl)
  try {
    const { ports, token } = child
    // Warm-up: the token's one signature check happens here, and the JIT settles.
    await throughput(ports.open!, undefined)
    await throughput(ports.token!, token)
    const rounds: Array<{ open: number; token: number }> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const open = await throughput(ports.open!, undefined)
      const tok = await throughput(ports.token!, token)
      log(`auth round ${r}: open ${round(open, 0)} req/s, SDK token ${round(tok, 0)} req/s`)
      rounds.push({ open, token: tok })
    }
    const value = median(rounds.map((r) => r.token))
    const baseline = median(rounds.map((r) => r.open))
    const results: Array<BenchmarkResult> = [
      benchmark({
        name: "token-auth",
        what: `GET /v1/ping through the REST facade with a cached SDK token and in-process rate limits, ${CONCURRENCY} keep-alive connections, ${THROUGHPUT_MS} ms per round; median of ${ROUNDS}`,
        unit: "requests/s",
        value,
        baseline: { what: "the same route and facade with no credential check", value: round(baseline) },
        targets: [target("ratio to no authentication", "min", 0.6, value / baseline)],
        details: { rounds },
      }),
    ]

    if (ports["token-redis"] === undefined) {
      log("rate-limit overhead: REDIS_URL is not set; skipped")
      return results
    }
    await latencies(ports["token-redis"]!, token)
    await latencies(ports["token-nolimit"]!, token)
    const off = summarise(await latencies(ports["token-nolimit"]!, token))
    const redis = summarise(await latencies(ports["token-redis"]!, token))
    const added = (redis.p99 - off.p99) / 1000
    log(`rate-limit overhead: p99 ${off.p99} µs without limits, ${redis.p99} µs with Redis counters`)
    results.push(
      benchmark({
        name: "rate-limit-redis",
        what: `p99 latency added by the Redis rate-limit check: ${LATENCY_REQUESTS} sequential token-authenticated GET /v1/ping, with Redis counters and with rate limiting off`,
        unit: "ms added at p99",
        value: round(added, 3),
        baseline: { what: "p99 with rate limiting off (ms)", value: round(off.p99 / 1000, 3) },
        targets: [target("added p99 ms", "max", 1, added)],
        details: { withoutLimitsUs: off, withRedisUs: redis },
      }),
    )
    return results
  } finally {
    await child.stop()
    agent.destroy()
  }
}
