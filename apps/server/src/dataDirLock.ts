import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { processAlive } from "@agentgov/db"
import { loadConfig, type ServerConfig } from "./config.ts"
import { refuseStart, StartupError } from "./startupError.ts"

/**
 * When a process started (field 22 of /proc/<pid>/stat, in clock ticks since boot), or undefined where there is no
 * /proc: with the pid, it tells the process that wrote a lock from another that was given its pid later.
 */
const startTime = (pid: number): string | undefined => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[19]
  } catch {
    return undefined
  }
}

/** Whether the process could be one of ours (a Node.js process), when its command line can be read. */
const mayBeOurs = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("node")
  } catch {
    return true
  }
}

/** The pid in the lock file and, when it was recorded, that process's start time; undefined when there is none. */
const holder = (file: string): { readonly pid: number; readonly started: string | undefined } | undefined => {
  try {
    const [pid, started] = readFileSync(file, "utf8").trim().split("\n")
    return { pid: Number(pid), started: started || undefined }
  } catch {
    return undefined
  }
}

/**
 * The data directory is one process's: its embedded PostgreSQL is started and
 * stopped by that process, and a second one would take it for a leftover of a
 * crash. A pid file refuses the second opener; a stale one (its process gone, or
 * its pid now another process's, as after a container restart) is taken over.
 * Returns the release function; a held directory is a StartupError.
 */
export const acquireDataDirLock = (dataDir: string): (() => void) => {
  mkdirSync(dataDir, { recursive: true })
  const file = join(dataDir, "agentgov.pid")
  const held = holder(file)
  const running = held?.pid ? startTime(held.pid) : undefined
  if (
    held?.pid &&
    held.pid !== process.pid &&
    processAlive(held.pid) &&
    (held.started === undefined || running === undefined || running === held.started) &&
    mayBeOurs(held.pid)
  )
    throw new StartupError(
      `the data directory ${dataDir} is in use by process ${held.pid}: stop it first, or set AGENTGOV_DATA_DIR`,
    )
  const started = startTime(process.pid)
  writeFileSync(file, started === undefined ? String(process.pid) : `${process.pid}\n${started}`)
  return () => rmSync(file, { force: true })
}

/**
 * The configuration, and the embedded store's data directory locked for this process (none with
 * `DATABASE_URL`); what the operator must fix is refused in one line (`refuseStart`). The server's
 * and the CLI's first step.
 */
export const configAndLock = (): { readonly config: ServerConfig; readonly release: () => void } => {
  try {
    const config = loadConfig()
    return { config, release: config.databaseUrl ? () => {} : acquireDataDirLock(config.dataDir) }
  } catch (e) {
    return refuseStart(e)
  }
}
