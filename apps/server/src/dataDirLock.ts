import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { processAlive } from "@agentgov/db"
import { loadConfig, type ServerConfig } from "./config.ts"
import { refuseStart, StartupError } from "./startupError.ts"

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
  if (pid && pid !== process.pid && processAlive(pid))
    throw new StartupError(
      `the data directory ${dataDir} is in use by process ${pid}: stop it first, or set AGENTGOV_DATA_DIR`,
    )
  writeFileSync(file, String(process.pid))
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
