import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import type postgres from "postgres"
import { jsonClient, processCpuMs, type Response, stopChild } from "./server.ts"

/** A child process that prints `{"port":N}` when it listens: the durable baseline, or the echo server. */
export interface Child {
  readonly url: string
  readonly pid: number
  readonly cpuMs: () => number | undefined
  /** Resolves once the child has exited. */
  readonly stop: () => Promise<void>
}

/**
 * Starts a child; with `profileDir`, under V8's CPU profiler, stopped by SIGTERM so that it exits itself and
 * writes the profile (the durable server ends on SIGTERM; the echo server is never profiled), SIGKILL after 15 s.
 * Either way `stop` waits for the exit, so that a benchmark's next window does not share the cores with it.
 */
export const startChild = (args: ReadonlyArray<string>, profileDir?: string): Promise<Child> =>
  new Promise((resolve, reject) => {
    const flags = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : []
    const child: ChildProcess = spawn(process.execPath, [...flags, ...args], { stdio: ["ignore", "pipe", "inherit"] })
    const onExit = (code: number | null) => reject(new Error(`${args.at(-1)} exited with ${code} while starting`))
    child.once("exit", onExit)
    child.once("error", reject)
    child.stdout!.setEncoding("utf8").once("data", (line: string) => {
      child.off("exit", onExit)
      resolve({
        url: `http://127.0.0.1:${JSON.parse(line).port}`,
        pid: child.pid!,
        cpuMs: () => processCpuMs(child.pid!),
        stop: () =>
          profileDir
            ? stopChild(child)
            : new Promise<void>((resolve) => {
                if (child.exitCode !== null || child.signalCode !== null) return resolve()
                child.once("exit", () => resolve())
                child.kill("SIGKILL")
              }),
      })
    })
  })

export interface DurableServer extends Child {
  readonly key: string
  readonly call: (method: string, path: string, body?: unknown) => Promise<Response>
}

/**
 * The minimal durable design (durableServer.ts) as a child process, writing into a new copy of `events`
 * with all its indexes (`table`), on the bench's database. With `profileDir` (AGENTGOV_BENCH_CPU_PROF=1) it runs
 * under V8's CPU profiler like the server, its profile written to `profileDir/durable/<table>` when stopped, to be
 * compared with the server's side by side.
 */
export const startDurable = async (
  sql: postgres.Sql,
  databaseUrl: string,
  table: string,
  profileDir?: string,
): Promise<DurableServer> => {
  await sql.unsafe(`CREATE TABLE ${table} (LIKE events INCLUDING ALL)`)
  const key = randomBytes(24).toString("base64url")
  const child = await startChild(
    [join(import.meta.dirname, "durableServer.ts"), databaseUrl, table, key],
    profileDir && join(profileDir, "durable", table),
  )
  const { call, close } = jsonClient(child.url, key, 256)
  return {
    ...child,
    key,
    call,
    stop: () => {
      close()
      return child.stop()
    },
  }
}
