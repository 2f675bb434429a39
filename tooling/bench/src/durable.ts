import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import type postgres from "postgres"
import { jsonClient, processCpuMs, type Response } from "./server.ts"

/** A child process that prints `{"port":N}` when it listens: the durable baseline, or the echo server. */
export interface Child {
  readonly url: string
  readonly pid: number
  readonly cpuMs: () => number | undefined
  readonly stop: () => void
}

export const startChild = (args: ReadonlyArray<string>): Promise<Child> =>
  new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] })
    const onExit = (code: number | null) => reject(new Error(`${args.at(-1)} exited with ${code} while starting`))
    child.once("exit", onExit)
    child.once("error", reject)
    child.stdout!.setEncoding("utf8").once("data", (line: string) => {
      child.off("exit", onExit)
      resolve({
        url: `http://127.0.0.1:${JSON.parse(line).port}`,
        pid: child.pid!,
        cpuMs: () => processCpuMs(child.pid!),
        stop: () => child.kill("SIGKILL"),
      })
    })
  })

export interface DurableServer extends Child {
  readonly key: string
  readonly call: (method: string, path: string, body?: unknown) => Promise<Response>
}

/**
 * The minimal durable design (durableServer.ts) as a child process, writing into a new copy of `events`
 * with all its indexes (`table`), on the bench's database.
 */
export const startDurable = async (sql: postgres.Sql, databaseUrl: string, table: string): Promise<DurableServer> => {
  await sql.unsafe(`CREATE TABLE ${table} (LIKE events INCLUDING ALL)`)
  const key = randomBytes(24).toString("base64url")
  const child = await startChild([join(import.meta.dirname, "durableServer.ts"), databaseUrl, table, key])
  const { call, close } = jsonClient(child.url, key, 256)
  return {
    ...child,
    key,
    call,
    stop: () => {
      close()
      child.stop()
    },
  }
}
