import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
// @ts-expect-error: plain JavaScript, run by `npm start` without the TypeScript stripper
import * as dashboard from "../../../apps/dashboard/build.mjs"
import { prepareGuard } from "./guard.ts"
import { drive } from "./load.ts"
import { type BenchmarkResult, benchmark, median, round, summarise, target } from "./report.ts"
import { type BenchServer, processRssBytes, START_SCRIPT, startServer } from "./server.ts"

/**
 * The embedded default against the same service on PostgreSQL (issue 25, target 2), in one run:
 * - a fresh `npm start`: no DATABASE_URL, a new AGENTGOV_DATA_DIR (so `initdb` included), from spawning npm to
 *   the "agentgov listening" line; median of STARTS starts;
 * - the server process's RSS, idle, a second after that start (PostgreSQL's own processes are not in it);
 * - POST /v1/guard at 16 and 64 connections against a server on its embedded PostgreSQL and the PostgreSQL
 *   one the other benchmarks use, same rules and bodies (guard.ts), rounds interleaved, medians.
 */

const STARTS = 3
const ROUNDS = 3
const ROUND_MS = 4_000
const LEVELS = [16, 64] as const
const mib = (bytes: number | undefined) => (bytes === undefined ? Number.NaN : round(bytes / 1024 / 1024, 1))

/** A fresh data directory the embedded cluster's `postgres` user may enter (it runs as that user under root). */
const freshDataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "agentgov-embedded-"))
  chmodSync(dir, 0o755)
  return dir
}

/** The pid of the server's node process below `ancestor` (npm → sh → node). */
const serverPidUnder = (ancestor: number): number | undefined => {
  const parent = new Map<number, number>()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      parent.set(Number(entry), Number(readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ")[1]))
    } catch {
      // gone
    }
  }
  for (const pid of parent.keys()) {
    let up: number | undefined = pid
    while (up !== undefined && up > 1 && up !== ancestor) up = parent.get(up)
    if (up !== ancestor) continue
    try {
      const command = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      // An argument of its own (the shell npm runs has the whole command line as one).
      if (command.includes(START_SCRIPT)) return pid
    } catch {
      // gone
    }
  }
  return undefined
}

/** Ends the process group of `child` (npm, its shell, the server): SIGTERM, then SIGKILL after 20 s. */
const stopGroup = async (child: ChildProcess) => {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  process.kill(-child.pid!, "SIGTERM")
  const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), 20_000)
  await exited
  clearTimeout(timer)
}

/** One fresh `npm start` on the embedded default: ms to listening, and the server's idle RSS. */
const firstStart = async (root: string) => {
  const dataDir = freshDataDir()
  const { DATABASE_URL: _db, REDIS_URL: _redis, ...env } = process.env
  const started = performance.now()
  const child = spawn("npm", ["start", "--silent"], {
    cwd: root,
    detached: true,
    env: { ...env, PORT: "0", HOST: "127.0.0.1", AGENTGOV_DATA_DIR: dataDir, LOG_LEVEL: "info" },
    stdio: ["ignore", "ignore", "pipe"],
  })
  try {
    const readyMs = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("npm start did not listen within 60 s")), 60_000)
      child.once("exit", (code) => reject(new Error(`npm start exited with ${code}`)))
      createInterface({ input: child.stderr! }).on("line", (line) => {
        if (line.includes('"agentgov listening"')) {
          clearTimeout(timer)
          resolve(performance.now() - started)
        }
      })
    })
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const pid = serverPidUnder(child.pid!)
    return { readyMs: round(readyMs, 0), idleRssBytes: pid === undefined ? undefined : processRssBytes(pid) }
  } finally {
    await stopGroup(child)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

export const runEmbeddedBenchmark = async (
  root: string,
  postgresServer: BenchServer,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  // A fresh start as an operator repeats it: the dashboard already built (npm start builds it once, when stale).
  if (dashboard.stale() && !dashboard.build("pipe"))
    log("embedded: the dashboard did not build; starts go on without it")
  const starts = []
  for (let i = 1; i <= STARTS; i++) {
    const s = await firstStart(root)
    log(`embedded: fresh npm start ${i}: listening after ${s.readyMs} ms, server RSS ${mib(s.idleRssBytes)} MiB idle`)
    starts.push(s)
  }
  const dataDir = freshDataDir()
  let embedded: BenchServer | undefined
  try {
    embedded = await startServer({ root, databaseUrl: undefined, dataDir })
    const sides = { postgres: await prepareGuard(postgresServer), embedded: await prepareGuard(embedded) }
    const urls = { postgres: postgresServer.url, embedded: embedded.url }
    type Side = keyof typeof sides
    const run = async (side: Side, connections: number) => {
      const load = await drive(urls[side], connections, ROUND_MS, sides[side].requestOf)
      return { requestsPerSecond: load.requests / load.seconds, latencyMs: summarise(load.latenciesMs) }
    }
    for (const connections of LEVELS) for (const side of ["postgres", "embedded"] as const) await run(side, connections)
    const rounds: Array<Record<number, Record<Side, Awaited<ReturnType<typeof run>>>>> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const round_: Record<number, Record<Side, Awaited<ReturnType<typeof run>>>> = {}
      for (const connections of LEVELS) {
        const order: Array<Side> = r % 2 === 1 ? ["postgres", "embedded"] : ["embedded", "postgres"]
        const got: Partial<Record<Side, Awaited<ReturnType<typeof run>>>> = {}
        for (const side of order) got[side] = await run(side, connections)
        round_[connections] = got as Record<Side, Awaited<ReturnType<typeof run>>>
        log(
          `embedded round ${r}, ${connections} connections: embedded ${round(got.embedded!.requestsPerSecond, 0)} req/s ` +
            `p99 ${got.embedded!.latencyMs.p99} ms; PostgreSQL ${round(got.postgres!.requestsPerSecond, 0)} req/s p99 ${got.postgres!.latencyMs.p99} ms`,
        )
      }
      rounds.push(round_)
    }
    const at = (connections: number) => {
      const m = (f: (x: Record<Side, Awaited<ReturnType<typeof run>>>) => number) =>
        median(rounds.map((r) => f(r[connections]!)))
      return {
        connections,
        embeddedRequestsPerSecond: round(m((x) => x.embedded.requestsPerSecond)),
        postgresRequestsPerSecond: round(m((x) => x.postgres.requestsPerSecond)),
        embeddedP99Ms: m((x) => x.embedded.latencyMs.p99),
        postgresP99Ms: m((x) => x.postgres.latencyMs.p99),
      }
    }
    const [c16, c64] = LEVELS.map(at) as [ReturnType<typeof at>, ReturnType<typeof at>]
    const readyMs = median(starts.map((s) => s.readyMs))
    const idleRss = median(starts.map((s) => mib(s.idleRssBytes)))
    return benchmark({
      name: "embedded",
      what: `the embedded default (PostgreSQL 18 from npm, in AGENTGOV_DATA_DIR): a fresh \`npm start\` to listening (median of ${STARTS}, initdb included), the server's idle RSS then, and POST /v1/guard at 16 and 64 connections against the same service on the machine's PostgreSQL (medians of ${ROUNDS} interleaved rounds of ${ROUND_MS} ms)`,
      unit: "requests/s",
      value: c64.embeddedRequestsPerSecond,
      baseline: {
        what: "the same service on the machine's PostgreSQL (the server the other benchmarks use), same rules and bodies, at 64 connections",
        value: c64.postgresRequestsPerSecond,
      },
      targets: [
        target(
          "guard throughput ratio, 16 connections",
          "min",
          0.8,
          c16.embeddedRequestsPerSecond / c16.postgresRequestsPerSecond,
        ),
        target(
          "guard throughput ratio, 64 connections",
          "min",
          0.8,
          c64.embeddedRequestsPerSecond / c64.postgresRequestsPerSecond,
        ),
        target("guard p99 ratio, 16 connections", "max", 1.5, c16.embeddedP99Ms / c16.postgresP99Ms),
        target("guard p99 ratio, 64 connections", "max", 1.5, c64.embeddedP99Ms / c64.postgresP99Ms),
        target("idle RSS MiB", "max", 200, idleRss),
        target("fresh npm start to listening, ms", "max", 3_000, readyMs),
      ],
      details: { starts, levels: [c16, c64], rounds },
    })
  } finally {
    await embedded?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
