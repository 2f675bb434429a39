import { existsSync } from "node:fs"
import { isAbsolute, join, resolve } from "node:path"
import { BackupError, backupTo, restoreFrom, runningClusterUrl } from "@agentgov/db"
import { loadConfig } from "./config.ts"
import { configAndLock } from "./dataDirLock.ts"
import { refuse, refuseStart } from "./startupError.ts"
import { embeddedClusterDir, startEmbedded } from "./store.ts"

/**
 * `npm run cli -- backup <file>` and `restore <file>` (issue 34). With DATABASE_URL, that database.
 * With the embedded store: a backup reaches the cluster of a running server through its socket (a
 * consistent snapshot while it serves), or starts the cluster itself when no server runs; a restore
 * needs the server stopped and a data directory whose store is empty (a new AGENTGOV_DATA_DIR).
 */
export const runBackupCommand = async (
  command: "backup" | "restore",
  args: ReadonlyArray<string>,
  json: boolean,
): Promise<void> => {
  if (args.length !== 1) refuse(`${command} takes one file: npm run cli -- ${command} <file>`)
  // npm runs scripts from the package directory: a relative path is the caller's (INIT_CWD).
  const file = isAbsolute(args[0]!) ? args[0]! : resolve(process.env.INIT_CWD ?? process.cwd(), args[0]!)
  if (command === "restore" && !existsSync(file)) refuse(`${file}: no such file`)
  if (command === "backup" && existsSync(file)) refuse(`${file} exists: choose a new file (a backup never overwrites)`)

  const running = (dataDir: string) => runningClusterUrl(embeddedClusterDir(dataDir))
  const { config, release } = (() => {
    // The running server owns the data directory; a backup reads its cluster without taking the lock.
    const peek = configAndLockless()
    if (!peek.databaseUrl && command === "backup" && running(peek.dataDir)) return { config: peek, release: () => {} }
    if (!peek.databaseUrl && command === "restore" && running(peek.dataDir))
      refuse(`a server is running on ${peek.dataDir}: stop it, or restore into a new AGENTGOV_DATA_DIR`)
    return configAndLock()
  })()
  let stop: (() => Promise<void>) | undefined
  try {
    let url = config.databaseUrl ?? running(config.dataDir)
    if (url === undefined) {
      const cluster = await startEmbedded(config.dataDir)
      stop = cluster.stop
      url = cluster.url
    }
    const summary = command === "backup" ? await backupTo(url, file) : await restoreFrom(url, file)
    const keyHint =
      command === "restore" && !config.masterKey && !existsSync(join(config.dataDir, "master.key"))
        ? `\nBefore starting the server, put the original master key in place: copy master.key from the old data\n` +
          `directory into ${config.dataDir}, or set AGENTGOV_MASTER_KEY. Without it the signing keys cannot be read.`
        : ""
    process.stdout.write(
      json
        ? `${JSON.stringify({ file, ...summary }, null, 2)}\n`
        : `${command === "backup" ? "backed up to" : "restored from"} ${file}: ${summary.tables} tables, ${summary.rows} rows, ` +
            `schema at ${summary.migrations.at(-1) ?? "none"}${command === "restore" ? " (the server applies later migrations at its start)" : ""}${keyHint}\n`,
    )
  } catch (e) {
    if (e instanceof BackupError) refuse(e.message)
    throw e
  } finally {
    await stop?.()
    release()
  }
}

/** The configuration alone (refused as at start when invalid), without locking the data directory. */
const configAndLockless = () => {
  try {
    return loadConfig()
  } catch (e) {
    return refuseStart(e)
  }
}
