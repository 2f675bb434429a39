import { type ChildProcess, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { Agent, request } from "node:http"
import { join } from "node:path"
import { createInterface } from "node:readline"

export interface Response {
  readonly status: number
  readonly body: any
}

export interface BenchServer {
  readonly url: string
  /** The bootstrap key: workspace `default`, every scope. */
  readonly key: string
  readonly pid: number
  /**
   * The one-time dashboard sign-in link the server printed on its first start (no identity provider configured),
   * on this server's address; undefined until printed.
   */
  readonly signInLink: () => string | undefined
  /** Warnings and errors the server logged (JSON lines). */
  readonly problems: Array<string>
  /** A JSON request over a keep-alive connection; `body` is sent as is when it is a string. */
  readonly call: (method: string, path: string, body?: unknown) => Promise<Response>
  /** CPU time (user + system) the server process has used so far, in ms; undefined off Linux. */
  readonly cpuMs: () => number | undefined
  readonly stop: () => Promise<void>
}

export interface StartOptions {
  readonly root: string
  /** Undefined: the server's embedded default, PostgreSQL in `dataDir`. */
  readonly databaseUrl: string | undefined
  readonly dataDir: string
  /** Directory for a V8 CPU profile of the server (`--cpu-prof`), written when it exits. */
  readonly cpuProfDir?: string | undefined
  /** Extra environment for the server (e.g. REDIS_URL). */
  readonly env?: Readonly<Record<string, string>>
}

/** Linux: utime + stime of a process from /proc, in ms (clock ticks are 10 ms on every common kernel). */
export const processCpuMs = (pid: number): number | undefined => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return undefined
  }
}

/** Linux: resident set size of a process (VmRSS in /proc), in bytes. */
export const processRssBytes = (pid: number): number | undefined => {
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
    return kb === undefined ? undefined : Number(kb) * 1024
  } catch {
    return undefined
  }
}

/** Linux: idle time of all the machine's cores together (idle + iowait in /proc/stat), in ms. */
export const machineIdleMs = (): number | undefined => {
  try {
    const cpu = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/)
    return (Number(cpu[4]) + Number(cpu[5])) * 10
  } catch {
    return undefined
  }
}

/** Linux: CPU time, in ms, of every process named `postgres` (the server's backends and its own workers). */
export const postgresCpuMs = (): number | undefined => {
  try {
    let total = 0
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === "postgres") total += processCpuMs(Number(entry)) ?? 0
      } catch {
        // The process ended between the listing and the read.
      }
    }
    return total
  } catch {
    return undefined
  }
}

/**
 * Starts the server as `npm start` does (startArguments) as a child process, so that the server and
 * the load generator do not share an event loop, and waits for its
 * "agentgov listening" log line and the bootstrap key it prints on first start.
 */
/** Rate limits the benchmarks' load never reaches; the counting still happens. */
export const UNREACHABLE_LIMITS = {
  AGENTGOV_RATE_LIMIT_FREE: "1000000000",
  AGENTGOV_RATE_LIMIT_PRO: "1000000000",
  AGENTGOV_RATE_LIMIT_ENTERPRISE: "1000000000",
  AGENTGOV_RATE_LIMIT_AGENT: "1000000000",
  AGENTGOV_RATE_LIMIT_ANONYMOUS: "1000000000",
  // The SSE benchmark holds 1,000 streams on one key: above the open-stream caps of every plan and key.
  AGENTGOV_STREAM_LIMIT_FREE: "1000000",
  AGENTGOV_STREAM_LIMIT_PRO: "1000000",
  AGENTGOV_STREAM_LIMIT_ENTERPRISE: "1000000",
  AGENTGOV_STREAM_LIMIT_KEY: "1000000",
}

/** What `npm start` runs: the bundled server, built first when its sources changed (apps/server/start.mjs). */
export const START_SCRIPT = "apps/server/start.mjs"

/**
 * The node arguments of the root package.json's `start` script (`node <flags> apps/server/start.mjs`), so that
 * the benchmarks run the server as `npm start` does: from its bundle, V8 flags included.
 */
export const startArguments = (root: string): Array<string> => {
  const start = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts.start as string
  const [node, ...args] = start.split(/\s+/)
  if (node !== "node" || args.at(-1) !== START_SCRIPT)
    throw new Error(`the start script is not "node [flags] ${START_SCRIPT}": ${start}`)
  return [...args.slice(0, -1), join(root, START_SCRIPT)]
}

export const startServer = async (options: StartOptions): Promise<BenchServer> => {
  const args = options.cpuProfDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfDir}`] : []
  const { DATABASE_URL: _inherited, ...inherited } = process.env
  const child = spawn(process.execPath, [...args, ...startArguments(options.root)], {
    cwd: options.root,
    env: {
      ...inherited,
      ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
      PORT: "0",
      HOST: "127.0.0.1",
      AGENTGOV_DATA_DIR: options.dataDir,
      AGENTGOV_BOOTSTRAP: "true",
      LOG_LEVEL: "info",
      // The minute's checkpoint signing would land inside whichever timed window is running then.
      AGENTGOV_CHECKPOINT_INTERVAL_MS: "86400000",
      // The webhook benchmark's receiver is on loopback, which only the operator's allowlist admits.
      AGENTGOV_WEBHOOK_ALLOWLIST: "127.0.0.1",
      // Limits are checked (their cost is part of every number) but set out of reach of the load.
      ...UNREACHABLE_LIMITS,
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  })
  const problems: Array<string> = []
  /** What the server printed while starting, for the error when it does not. */
  const output: Array<string> = []
  let signInLink: string | undefined
  const { url, key } = await new Promise<{ url: string; key: string }>((resolve, reject) => {
    let url: string | undefined
    let key: string | undefined
    const timer = setTimeout(() => fail(new Error("the server did not start within 60 s")), 60_000)
    const fail = (e: Error) => {
      clearTimeout(timer)
      child.kill("SIGKILL")
      reject(new Error(`${e.message}\n${output.join("\n")}`))
    }
    const check = () => {
      if (url && key) {
        clearTimeout(timer)
        child.off("exit", onExit)
        resolve({ url, key })
      }
    }
    const onExit = (code: number | null) => fail(new Error(`the server exited with ${code} while starting`))
    child.on("exit", onExit)
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (!(url && key)) output.push(line)
      key ??= /\b(svc_ws_(?:live|test)_\S+)/.exec(line)?.[1]
      signInLink ??= /(\S+\/auth\/first-run\?token=\S+)/.exec(line)?.[1]
      check()
    })
    createInterface({ input: child.stderr! }).on("line", (line) => {
      if (!(url && key)) output.push(line)
      let entry: { level?: string; msg?: string; url?: string } = {}
      try {
        entry = JSON.parse(line)
      } catch {
        problems.push(line)
      }
      if (entry.msg === "agentgov listening") url = entry.url
      else if (entry.level === "warn" || entry.level === "error") problems.push(line)
      check()
    })
  })

  const { call, close } = jsonClient(url, key, 256)

  const stop = async () => {
    close()
    await stopChild(child)
  }
  const link = () => {
    if (signInLink === undefined) return undefined
    const printed = new URL(signInLink)
    return `${url}${printed.pathname}${printed.search}`
  }
  return { url, key, pid: child.pid!, signInLink: link, problems, call, cpuMs: () => processCpuMs(child.pid!), stop }
}

/**
 * JSON requests with a Bearer key over keep-alive connections; a string body
 * is sent as is, and a body that is not JSON comes back as text.
 */
export const jsonClient = (base: string, key: string, maxSockets: number) => {
  const agent = new Agent({ keepAlive: true, maxSockets })
  const call = (method: string, path: string, body?: unknown): Promise<Response> =>
    send(method, path, body).catch((error: NodeJS.ErrnoException & { reusedSocket?: boolean }) => {
      // A kept-alive socket the server closed while idle (its keep-alive timeout) just as this request took
      // it: the request never reached the server (Node's documented case), so it is sent again, once.
      if (error.reusedSocket && error.code === "ECONNRESET") return send(method, path, body)
      throw error
    })
  const send = (method: string, path: string, body?: unknown) =>
    new Promise<Response>((resolve, reject) => {
      const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body)
      const req = request(`${base}${path}`, {
        method,
        agent,
        headers: {
          authorization: `Bearer ${key}`,
          ...(payload === undefined
            ? {}
            : { "content-type": "application/json", "content-length": Buffer.byteLength(payload) }),
        },
      })
      req.on("error", (error) => reject(Object.assign(error, { reusedSocket: req.reusedSocket })))
      req.on("response", (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("error", reject)
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) })
          } catch {
            resolve({ status: res.statusCode ?? 0, body: text })
          }
        })
      })
      req.end(payload)
    })
  return { call, close: () => agent.destroy() }
}

/** SIGTERM (a clean shutdown, which also writes the CPU profile), SIGKILL after 15 s. */
export const stopChild = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    child.kill("SIGTERM")
  })

/**
 * Another server child on a fresh store of its own (a new database on the run's PostgreSQL, or its own embedded
 * cluster), for the benchmarks that compare two configurations of the server in one run (trust worker on and
 * off, metrics on and off); `stop` ends it and drops its store.
 */
export type FreshServer = (
  tag: string,
  env: Readonly<Record<string, string>>,
) => Promise<{ readonly server: BenchServer; readonly stop: () => Promise<void> }>

/**
 * Waits until the server child is idle (at most 10 ms of CPU in each of two consecutive 250 ms windows, or
 * `maxMs`), so that its background work from one timed window (the trust worker reading the decisions just
 * made, a group commit) does not land in the next one, which may be another server's. Answers the CPU ms the
 * child used while settling.
 */
export const settle = async (server: Pick<BenchServer, "cpuMs">, maxMs = 30_000): Promise<number | undefined> => {
  const start = server.cpuMs()
  if (start === undefined) return undefined
  const deadline = performance.now() + maxMs
  let quiet = 0
  let last = start
  while (quiet < 2 && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250))
    const now = server.cpuMs() ?? last
    quiet = now - last <= 10 ? quiet + 1 : 0
    last = now
  }
  return last - start
}
