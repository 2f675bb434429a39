import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"

interface Entry {
  readonly hash: string
  readonly firstSeenAt: string
}

type Entries = Record<string, Record<string, Entry>>

/** A lock older than this is taken to be a crashed process's, and removed. */
const STALE_LOCK_MS = 10_000
/** How long a pin waits for the lock before it fails (the listing then fails, naming the lock file). */
const LOCK_WAIT_MS = 5_000

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/**
 * The first definition seen of each tool, per server, in a local JSON file: a definition that differs later is a
 * rug pull (the server changed what the tool says after it was trusted). The first hash is kept, never
 * replaced by a later one, so a changed tool stays flagged until someone accepts the change by deleting its
 * entry (or the file).
 *
 * Several gateways may share one file (one per wrapped server, the default path): a tool is pinned under a lock
 * file (`<path>.lock`), against the file as it is then, not as this process read it at start, so no gateway's
 * write drops another's pins. Written atomically (temporary file, then rename).
 */
export class DefinitionStore {
  private entries: Entries
  readonly path: string | undefined

  constructor(path: string | undefined) {
    this.path = path
    this.entries = path === undefined ? {} : read(path)
  }

  /** The first hash seen of this tool, recording `hash` as it when the tool is new. */
  firstSeen(server: string, tool: string, hash: string): string {
    return this.firstSeenAll(server, [[tool, hash]]).get(tool)!
  }

  /**
   * The first hash seen of each tool, recording the first hash given for each new one: a listing's new tools are
   * pinned together, in one read and one write of the file under its lock (one write per tool was quadratic: a
   * listing of 3,000 new tools held the gateway, and every call, for 44 s).
   */
  firstSeenAll(server: string, definitions: ReadonlyArray<readonly [tool: string, hash: string]>): Map<string, string> {
    const firstHashes = (entries: Entries) => {
      const first = new Map<string, string>()
      const fresh: Array<readonly [string, string]> = []
      for (const [tool, hash] of definitions) {
        if (first.has(tool)) continue
        const known = entries[server]?.[tool]
        first.set(tool, known ? known.hash : hash)
        if (!known) fresh.push([tool, hash])
      }
      return { first, fresh }
    }
    const known = firstHashes(this.entries)
    if (known.fresh.length === 0) return known.first
    const path = this.path
    if (path === undefined) {
      for (const [tool, hash] of known.fresh) this.pin(this.entries, server, tool, hash)
      return known.first
    }
    return withLock(`${path}.lock`, () => {
      // Another gateway may have pinned tools (these among them) since this process read the file.
      this.entries = read(path)
      const { first, fresh } = firstHashes(this.entries)
      if (fresh.length === 0) return first
      for (const [tool, hash] of fresh) this.pin(this.entries, server, tool, hash)
      mkdirSync(dirname(path), { recursive: true })
      const tmp = `${path}.${process.pid}.tmp`
      writeFileSync(tmp, `${JSON.stringify({ version: 1, servers: this.entries }, null, 2)}\n`, { mode: 0o600 })
      renameSync(tmp, path)
      return first
    })
  }

  private pin(entries: Entries, server: string, tool: string, hash: string): string {
    entries[server] ??= {}
    entries[server][tool] = { hash, firstSeenAt: new Date().toISOString() }
    return hash
  }
}

const read = (path: string): Entries => {
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8"))
    return parsed && typeof parsed === "object" && parsed.version === 1 && parsed.servers ? parsed.servers : {}
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {}
    throw new Error(`cannot read the definition store ${path}: ${(error as Error).message}`)
  }
}

/** `f` while holding `lock` (created exclusively; a stale one, left by a crash, removed). */
const withLock = <A>(lock: string, f: () => A): A => {
  mkdirSync(dirname(lock), { recursive: true })
  const deadline = Date.now() + LOCK_WAIT_MS
  let fd: number
  for (;;) {
    try {
      fd = openSync(lock, "wx", 0o600)
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      try {
        if (Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS) rmSync(lock, { force: true })
      } catch {
        // gone meanwhile: try again
      }
      if (Date.now() > deadline)
        throw new Error(`the definition store is locked (${lock}): remove it if no gateway runs`)
      sleepSync(5 + Math.random() * 20)
    }
  }
  try {
    return f()
  } finally {
    closeSync(fd)
    rmSync(lock, { force: true })
  }
}
