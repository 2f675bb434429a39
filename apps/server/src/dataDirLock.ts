import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * The data directory is one process's: its embedded PostgreSQL is started and
 * stopped by that process, and a second one would take it for a leftover of a
 * crash. A pid file refuses the second opener; a stale one (its process gone)
 * is taken over. Returns the release function.
 */
export const acquireDataDirLock = (dataDir: string): (() => void) => {
  mkdirSync(dataDir, { recursive: true })
  const file = join(dataDir, "agentgov.pid")
  try {
    const pid = Number(readFileSync(file, "utf8").trim())
    if (pid && pid !== process.pid && alive(pid)) {
      process.stderr.write(
        `agentgov: the data directory ${dataDir} is in use by process ${pid}. Stop it first, or set AGENTGOV_DATA_DIR.\n`,
      )
      process.exit(3)
    }
  } catch {
    // no pid file: free
  }
  writeFileSync(file, String(process.pid))
  return () => rmSync(file, { force: true })
}
