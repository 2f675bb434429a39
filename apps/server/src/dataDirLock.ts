import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs"
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

/** Whether the lock file's holder is a live process that still holds it (else the lock is stale). */
const heldByOther = (held: ReturnType<typeof holder>): boolean => {
  if (!held?.pid || held.pid === process.pid || !processAlive(held.pid)) return false
  const running = startTime(held.pid)
  return (held.started === undefined || running === undefined || running === held.started) && mayBeOurs(held.pid)
}

/**
 * The data directory is one process's: its embedded PostgreSQL is started and
 * stopped by that process, and a second one would take it for a leftover of a
 * crash. A pid file refuses the second opener; a stale one (its process gone, or
 * its pid now another process's, as after a container restart) is taken over.
 * The file is created exclusively (O_EXCL), so of processes starting at once exactly
 * one takes it; a stale one is removed and the creation tried again.
 * Returns the release function, which removes the file only while it is still this
 * process's; a held directory is a StartupError.
 */
export const acquireDataDirLock = (dataDir: string): (() => void) => {
  mkdirSync(dataDir, { recursive: true })
  const file = join(dataDir, "agentgov.pid")
  const started = startTime(process.pid)
  const content = started === undefined ? String(process.pid) : `${process.pid}\n${started}`
  for (let attempt = 0; ; attempt++) {
    let fd: number
    try {
      fd = openSync(file, "wx", 0o644)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
      const held = holder(file)
      if (heldByOther(held))
        throw new StartupError(
          `the data directory ${dataDir} is in use by process ${held!.pid}: stop it first, or set AGENTGOV_DATA_DIR`,
        )
      if (attempt >= 100) throw new StartupError(`cannot take the lock ${file}: remove it if no server runs`)
      // A file being written right now reads as empty (another starter, which gets it): looked at again shortly. One
      // still empty after a second was left so by a crash (or a full disk) and is stale.
      if ((held === undefined || !(held.pid > 0)) && attempt < 50) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
        continue
      }
      // Stale (its process gone, this one's, or naming none): removed, and the creation tried again, which one starter wins.
      rmStaleLock(file, held?.pid)
      continue
    }
    try {
      writeSync(fd, content)
    } catch (e) {
      rmSync(file, { force: true })
      throw e
    } finally {
      closeSync(fd)
    }
    return () => {
      if (holder(file)?.pid === process.pid) rmSync(file, { force: true })
    }
  }
}

/** Removes the lock file if it still names `pid` (another starter may have replaced it meanwhile). */
const rmStaleLock = (file: string, pid: number | undefined) => {
  const now = holder(file)?.pid
  if (now === pid || (!(now! > 0) && !(pid! > 0))) rmSync(file, { force: true })
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
