import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"

interface Entry {
  readonly hash: string
  readonly firstSeenAt: string
}

/**
 * The first definition seen of each tool, per server, in a local JSON file: a definition that differs later is a
 * rug pull (the server changed what the tool says after it was trusted). The first hash is kept, never
 * replaced by a later one, so a changed tool stays flagged until someone accepts the change by deleting its
 * entry (or the file). Written atomically (temporary file, then rename).
 */
export class DefinitionStore {
  private entries: Record<string, Record<string, Entry>>
  readonly path: string | undefined

  constructor(path: string | undefined) {
    this.path = path
    this.entries = {}
    if (path === undefined) return
    try {
      const parsed = JSON.parse(readFileSync(path, "utf8"))
      if (parsed && typeof parsed === "object" && parsed.version === 1 && parsed.servers) this.entries = parsed.servers
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT")
        throw new Error(`cannot read the definition store ${path}: ${(error as Error).message}`)
    }
  }

  /** The first hash seen of this tool, recording `hash` as it when the tool is new. */
  firstSeen(server: string, tool: string, hash: string): string {
    this.entries[server] ??= {}
    const tools = this.entries[server]
    const known = tools[tool]
    if (known) return known.hash
    tools[tool] = { hash, firstSeenAt: new Date().toISOString() }
    this.save()
    return hash
  }

  private save() {
    if (this.path === undefined) return
    mkdirSync(dirname(this.path), { recursive: true })
    const tmp = `${this.path}.${process.pid}.tmp`
    writeFileSync(tmp, `${JSON.stringify({ version: 1, servers: this.entries }, null, 2)}\n`, { mode: 0o600 })
    renameSync(tmp, this.path)
  }
}
