import { existsSync } from "node:fs"
import { isAbsolute, join, resolve } from "node:path"
import { BackupError, backupTo, EmbeddedPostgresError, restoreFrom, runningClusterUrl } from "@agentgov/db"
import { firstChainProblem } from "@agentgov/domain"
import type postgres from "postgres"
import { loadConfig } from "./config.ts"
import { configAndLock } from "./dataDirLock.ts"
import { refuse, refuseStart, StartupError } from "./startupError.ts"
import { embeddedClusterDir, startEmbedded, storeName } from "./store.ts"

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
  /** A restore loads a file whose chains do not hold (to examine it), rather than refusing it. */
  unverified = false,
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
    // A backup of a directory that holds no cluster would create one there (a mistyped AGENTGOV_DATA_DIR): refused
    // before anything is written.
    const cluster = embeddedClusterDir(peek.dataDir)
    if (!peek.databaseUrl && command === "backup" && !existsSync(join(cluster, "PG_VERSION")))
      refuse(`${peek.dataDir} holds no store (no ${cluster}): check AGENTGOV_DATA_DIR`)
    return configAndLock()
  })()
  let stop: (() => Promise<void>) | undefined
  // Said once the cluster this command started is stopped and the lock released (refuse() exits the process).
  let refusal: string | undefined
  try {
    let url = config.databaseUrl ?? running(config.dataDir)
    if (url === undefined) {
      const cluster = await startEmbedded(config.dataDir)
      stop = cluster.stop
      url = cluster.url
    }
    const summary =
      command === "backup"
        ? await backupTo(url, file)
        : await restoreFrom(url, file, { check: unverified ? undefined : chainsHold(file) })
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
    // A store that cannot be reached or refuses the connection is the operator's to fix, as at the server's start.
    const failure = connectionFailure(e)
    if (e instanceof BackupError) refusal = e.message
    else if (failure !== undefined) refusal = `${storeName(config)} does not answer: ${failure}`
    else if (isStartupFailure(e)) refusal = (e as Error).message
    else throw e
  } finally {
    await stop?.()
    release()
  }
  if (refusal !== undefined) refuse(refusal)
}

/**
 * A restore's check that every chain of the file holds (its events as hashed and linked, each head at its last):
 * a file edited behind its chains is refused, and nothing is restored.
 */
const chainsHold = (file: string) => async (tx: postgres.TransactionSql) => {
  const problem = await firstChainProblem((text, params) => tx.unsafe(text, params as Array<never>))
  if (problem !== undefined)
    throw new BackupError(
      `${file} holds a chain that does not verify (${problem}): it was changed after it was made, or damaged; ` +
        "nothing was restored (--unverified restores it all the same, to examine it)",
    )
}

/** The configuration alone (refused as at start when invalid), without locking the data directory. */
const configAndLockless = () => {
  try {
    return loadConfig()
  } catch (e) {
    return refuseStart(e)
  }
}

/**
 * Why the store could not be reached, when that is the failure: the connection refused, timed out, closed or its
 * host unknown, or PostgreSQL refusing the login or the database (classes 08, 28, 3D). Undefined for anything else.
 */
const connectionFailure = (e: unknown): string | undefined => {
  if (!(e instanceof Error)) return undefined
  const { code, syscall } = e as { code?: unknown; syscall?: unknown }
  if (syscall === "connect" || syscall === "getaddrinfo") return e.message
  if (typeof code !== "string") return undefined
  if (/^(CONNECT_TIMEOUT|CONNECTION_)/.test(code)) return e.message
  if (e.name === "PostgresError" && /^(08|28|3D)/.test(code)) return e.message
  return undefined
}

/** A failure the operator fixes that the embedded cluster's start reports (as refuseStart says it at the server's). */
const isStartupFailure = (e: unknown): boolean => e instanceof EmbeddedPostgresError || e instanceof StartupError
