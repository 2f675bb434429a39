import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { stopLeftoverPostmaster } from "@agentgov/db"
import { sinkLine } from "./logScan.ts"

/**
 * Real server processes (`node apps/server/src/main.ts`) for the tests that
 * need several instances or a kill -9. Configured by environment, like
 * production; rate limits and the trust worker are off unless the test's `env` sets them.
 */

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url))
/** The operator CLI (`npm run cli`). */
const CLI = fileURLToPath(new URL("../src/cli.ts", import.meta.url))
/** What `npm start` runs: the bundle, built first when stale (apps/server/start.mjs). */
export const START = fileURLToPath(new URL("../start.mjs", import.meta.url))

export interface ChildServer {
  readonly proc: ChildProcess
  readonly url: string
  readonly output: () => string
  /** The bootstrap key, once this process has printed it (first start on an empty store only). */
  readonly waitForKey: (ms?: number) => Promise<string>
  /** Resolves once stdout matches (what the server prints after it listens). */
  readonly waitForStdout: (pattern: RegExp, ms?: number) => Promise<void>
  readonly exited: Promise<void>
}

const live = new Set<ChildProcess>()
/** The embedded clusters of the children started without DATABASE_URL, stopped with them in `stopChildren`. */
const clusters = new Set<string>()
const killAll = () => {
  for (const proc of live) proc.kill("SIGKILL")
}
// Last resort if the worker goes away without running the hooks.
process.once("exit", killAll)

export const KEY_LINE = /^\s+(svc_[A-Za-z0-9_]+)\s*$/m

/**
 * `node apps/server/src/main.ts` (or another entry, with its arguments) with the tests' environment, tracked until
 * it exits (killed by `stopChildren`).
 */
const start = (env: Record<string, string>, entry = MAIN, args: ReadonlyArray<string> = []) => {
  const base = { ...process.env }
  for (const name of ["DATABASE_URL", "AGENTGOV_DATA_DIR", "PORT", "HOST", "REDIS_URL", "AGENTGOV_PUBLIC_URL"])
    delete base[name]
  const proc = spawn(process.execPath, [entry, ...args], {
    env: {
      ...base,
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      AGENTGOV_BOOTSTRAP: "true",
      AGENTGOV_RATE_LIMITS: "false",
      // As in helpers.ts: the trust worker's appends would race suites that count events.
      AGENTGOV_TRUST_WORKER: "false",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  })
  live.add(proc)
  const dataDir = env.AGENTGOV_DATA_DIR
  if (!env.DATABASE_URL && dataDir) clusters.add(join(dataDir, "pg"))
  const out = { stdout: "", stderr: "", exitedWith: undefined as string | undefined }
  const listeners = new Set<() => void>()
  const notify = () => {
    for (const l of listeners) l()
  }
  proc.stdout!.setEncoding("utf8").on("data", (c: string) => {
    out.stdout += c
    notify()
  })
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => {
    out.stderr += c
    sinkLine(c)
    notify()
  })
  const exited = new Promise<number | null>((resolve) =>
    // "close": the exit, and every byte it wrote read
    proc.once("close", (code, signal) => {
      live.delete(proc)
      out.exitedWith = signal ?? String(code)
      notify()
      resolve(code)
    }),
  )
  return { proc, out, listeners, exited }
}

/**
 * Runs the server until it exits by itself (a start it refuses), within `ms`; killed past that.
 * Resolves with its exit code and what it wrote.
 */
export const runToExit = (env: Record<string, string>, ms = 90_000) => runEntryToExit(env, MAIN, [], ms)

/** Runs an operator CLI command (`npm run cli -- <args>`) to its end, as `runToExit` runs the server. */
export const runCliToExit = (env: Record<string, string>, args: ReadonlyArray<string>, ms = 90_000) =>
  runEntryToExit(env, CLI, args, ms)

const runEntryToExit = async (
  env: Record<string, string>,
  entry: string,
  args: ReadonlyArray<string>,
  ms: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> => {
  const { proc, out, exited } = start(env, entry, args)
  const timer = setTimeout(() => proc.kill("SIGKILL"), ms)
  try {
    const code = await exited
    if (out.exitedWith === "SIGKILL") throw new Error(`${entry} did not exit within ${ms} ms\n${out.stderr}`)
    return { code, stdout: out.stdout, stderr: out.stderr }
  } finally {
    clearTimeout(timer)
  }
}

/** Starts `node apps/server/src/main.ts` and resolves once it logs "agentgov listening"; killed if it does not. */
export const spawnServer = async (env: Record<string, string>, entry = MAIN): Promise<ChildServer> => {
  const { proc, out, listeners, exited } = start(env, entry)
  const output = () => `--- stdout\n${out.stdout}\n--- stderr\n${out.stderr}`
  const waitFor = <A>(find: () => A | undefined, what: string, ms: number) =>
    new Promise<A>((resolve, reject) => {
      const check = () => {
        const found = find()
        if (found !== undefined) done(() => resolve(found))
        else if (out.exitedWith !== undefined)
          done(() => reject(new Error(`server exited (${out.exitedWith}) ${what}\n${output()}`)))
      }
      const timer = setTimeout(() => {
        // A server that never got there must not outlive the wait: it would hold its port and data directory.
        proc.kill("SIGKILL")
        done(() => reject(new Error(`timed out ${what}\n${output()}`)))
      }, ms)
      const done = (settle: () => void) => {
        clearTimeout(timer)
        listeners.delete(check)
        settle()
      }
      listeners.add(check)
      check()
    })
  const url = await waitFor(
    () => {
      for (const line of out.stderr.split("\n")) {
        if (!line.includes("agentgov listening")) continue
        try {
          return JSON.parse(line).url as string
        } catch {
          // a partial line; wait for the rest
        }
      }
      return undefined
    },
    "waiting for 'agentgov listening'",
    // a first start creates the embedded cluster; generous for a loaded machine
    90_000,
  )
  return {
    proc,
    url,
    output,
    waitForKey: (ms = 10_000) => waitFor(() => KEY_LINE.exec(out.stdout)?.[1], "waiting for the bootstrap key", ms),
    waitForStdout: (pattern, ms = 10_000) =>
      waitFor(() => (pattern.test(out.stdout) ? true : undefined), `waiting for ${pattern}`, ms).then(() => {}),
    exited: exited.then(() => {}),
  }
}

export const kill9 = async (child: ChildServer) => {
  child.proc.kill("SIGKILL")
  await child.exited
}

/**
 * Kills every child server still running and waits for them to exit, and for their embedded
 * PostgreSQL (which shuts itself down when its server dies) to be gone before the test removes its files.
 */
export const stopChildren = async () => {
  const running = [...live]
  killAll()
  await Promise.all(
    running.map((p) =>
      p.exitCode !== null || p.signalCode !== null
        ? undefined
        : new Promise<void>((resolve) => p.once("exit", () => resolve())),
    ),
  )
  for (const dir of clusters) await stopLeftoverPostmaster(dir)
  clusters.clear()
}
