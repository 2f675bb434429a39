import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { acquireDataDirLock } from "../src/dataDirLock.ts"

/**
 * The data directory's lock (the operations review's third pass): one process holds it, however many start at once.
 * Two that read "no holder" together both wrote their pid and went on; the second's embedded PostgreSQL start then
 * took the first's running postmaster for a leftover of a crash and stopped it.
 */
const root = mkdtempSync(join(tmpdir(), "agentgov-lock-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const LOCK = fileURLToPath(new URL("../src/dataDirLock.ts", import.meta.url))
const NODE = process.execPath

/** A process that loads the lock's module, says "ready", and at the instant it is then sent takes the lock and says whether it got it. */
const contender = (dir: string) => {
  const script = `
    const { acquireDataDirLock } = await import(${JSON.stringify(LOCK)})
    process.stdout.write("ready\\n")
    process.stdin.once("data", (at) => {
      // Every contender spins to the same instant: the window between reading "no holder" and writing is microseconds.
      while (Date.now() < Number(String(at))) {}
      let got = "held"
      try { acquireDataDirLock(${JSON.stringify(dir)}); got = "got" } catch (e) { if (!/in use/.test(e.message)) got = e.message }
      process.stdout.write(got)
      setTimeout(() => process.exit(0), 1500)
    })`
  const child = spawn(NODE, ["--input-type=module", "-e", script], { stdio: ["pipe", "pipe", "inherit"] })
  let out = ""
  const ready = new Promise<void>((resolve) =>
    child.stdout.on("data", (b) => {
      out += b
      if (out.startsWith("ready\n")) resolve()
    }),
  )
  const result = new Promise<string>((resolve) => child.on("exit", () => resolve(out.replace(/^ready\n/, ""))))
  return { ready, go: (at: number) => child.stdin.end(String(at)), result }
}

describe("the data directory lock", () => {
  it("is taken by exactly one of several processes starting at once", { timeout: 180_000 }, async () => {
    for (let round = 0; round < 2; round++) {
      const dir = join(root, `race-${round}`)
      const contenders = Array.from({ length: 5 }, () => contender(dir))
      await Promise.all(contenders.map((c) => c.ready))
      const at = Date.now() + 500
      for (const c of contenders) c.go(at)
      const results = await Promise.all(contenders.map((c) => c.result))
      expect(
        results.filter((r) => r === "got"),
        results.join(", "),
      ).toHaveLength(1)
      expect(
        results.filter((r) => r !== "got" && r !== "held"),
        results.join(", "),
      ).toEqual([])
    }
  })

  it("takes over a lock whose process is gone, and its release leaves another holder's lock alone", () => {
    const dir = join(root, "stale")
    const release = acquireDataDirLock(dir)
    release()
    writeFileSync(join(dir, "agentgov.pid"), "999999999\n")
    const mine = acquireDataDirLock(dir)
    expect(readFileSync(join(dir, "agentgov.pid"), "utf8").split("\n")[0]).toBe(String(process.pid))
    // An empty lock (a crash between creating and writing it, or a full disk) is stale too, once it stays empty.
    mine()
    writeFileSync(join(dir, "agentgov.pid"), "")
    const again = acquireDataDirLock(dir)
    expect(readFileSync(join(dir, "agentgov.pid"), "utf8").split("\n")[0]).toBe(String(process.pid))
    again()
    expect(existsSync(join(dir, "agentgov.pid"))).toBe(false)
    acquireDataDirLock(dir)
    // Another process took the directory over since (this one seemed gone): releasing does not remove its lock.
    writeFileSync(join(dir, "agentgov.pid"), "1\n")
    mine()
    expect(readFileSync(join(dir, "agentgov.pid"), "utf8")).toBe("1\n")
  })
})
