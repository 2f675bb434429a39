import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { StartupError } from "./startupError.ts"

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The pid in the lock file, or undefined when there is none. */
const holder = (file: string): number | undefined => {
  try {
    return Number(readFileSync(file, "utf8").trim())
  } catch {
    return undefined
  }
}

/**
 * The data directory is one process's: its embedded PostgreSQL is started and
 * stopped by that process, and a second one would take it for a leftover of a
 * crash. A pid file refuses the second opener; a stale one (its process gone)
 * is taken over. Returns the release function; a held directory is a StartupError.
 */
export const acquireDataDirLock = (dataDir: string): (() => void) => {
  mkdirSync(dataDir, { recursive: true })
  const file = join(dataDir, "agentgov.pid")
  const pid = holder(file)
  if (pid && pid !== process.pid && alive(pid))
    throw new StartupError(
      `the data directory ${dataDir} is in use by process ${pid}: stop it first, or set AGENTGOV_DATA_DIR`,
    )
  writeFileSync(file, String(process.pid))
  return () => rmSync(file, { force: true })
}
