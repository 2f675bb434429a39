import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { join } from "node:path"
import { makeTestStore, pgConnect, reachableTempDir, type TestStore } from "@agentgov/testing"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { runCliToExit, runToExit, spawnServer, stopChildren } from "./childServer.ts"

/**
 * A start the operator must fix is refused in one `agentgov: …` line on stderr with exit 2, as the
 * real process does it. The store is this file's database, so that only the case under test fails.
 */

let store: TestStore
let dir: string
let busy: Server
let busyPort: number

beforeAll(async () => {
  store = await makeTestStore()
  dir = reachableTempDir("agentgov-startup-")
  busy = createServer()
  await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve))
  busyPort = (busy.address() as { port: number }).port
})
afterEach(stopChildren)
afterAll(async () => {
  await new Promise((resolve) => busy.close(resolve))
  await store.cleanup()
  rmSync(dir, { recursive: true, force: true })
})

const refusal = (result: { code: number | null; stderr: string }) => {
  expect(result.code, result.stderr).toBe(2)
  const lines = result.stderr.split("\n").filter((l) => l !== "")
  expect(lines, result.stderr).toHaveLength(1)
  expect(lines[0]).toMatch(/^agentgov: /)
  return lines[0]!
}

describe("a start that cannot go on", { timeout: 120_000 }, () => {
  it("a port in use: one line naming it, exit 2, and nothing bootstrapped (its key would be lost)", async () => {
    const env = { DATABASE_URL: store.url, AGENTGOV_DATA_DIR: join(dir, "port"), PORT: String(busyPort) }
    const line = refusal(await runToExit(env))
    expect(line).toContain(`port ${busyPort} on 127.0.0.1 is in use`)
    const sql = pgConnect(store.url)
    try {
      expect(await sql`SELECT id FROM workspaces`).toHaveLength(0)
    } finally {
      await sql.end()
    }
  })

  it("a HOST that does not resolve: one line naming it, exit 2, and nothing bootstrapped", async () => {
    const env = { DATABASE_URL: store.url, AGENTGOV_DATA_DIR: join(dir, "host"), HOST: "no-such-host.invalid" }
    const line = refusal(await runToExit(env))
    expect(line).toContain("HOST no-such-host.invalid does not resolve (ENOTFOUND)")
    const sql = pgConnect(store.url)
    try {
      expect(await sql`SELECT id FROM workspaces`).toHaveLength(0)
    } finally {
      await sql.end()
    }
  })

  it("an unreachable DATABASE_URL: one line naming its host (no password), exit 2", async () => {
    const line = refusal(
      await runToExit({ DATABASE_URL: "postgres://postgres:s3cret@127.0.0.1:1/x", AGENTGOV_DATA_DIR: join(dir, "db") }),
    )
    expect(line).toContain("the PostgreSQL at 127.0.0.1:1/x (DATABASE_URL) does not answer")
    expect(line).not.toContain("s3cret")
  })

  it("an unreachable REDIS_URL: one line naming it, exit 2", async () => {
    const line = refusal(
      await runToExit({
        DATABASE_URL: store.url,
        REDIS_URL: "redis://127.0.0.1:1",
        AGENTGOV_DATA_DIR: join(dir, "redis"),
      }),
    )
    expect(line).toContain("Redis at 127.0.0.1:1 (REDIS_URL) does not answer")
  })

  it("a store a later release migrated: one line naming the migration, exit 2", async () => {
    const later = await makeTestStore()
    try {
      const sql = pgConnect(later.url)
      await sql`INSERT INTO schema_migrations (version) VALUES ('9999_from_a_later_release')`
      await sql.end()
      const line = refusal(await runToExit({ DATABASE_URL: later.url, AGENTGOV_DATA_DIR: join(dir, "later") }))
      expect(line).toContain("the store was migrated by a later release (migration 9999_from_a_later_release;")
    } finally {
      await later.cleanup()
    }
  })

  it("a store whose sealed keys another master key made: one line, exit 2, and no master.key or signing key written", async () => {
    const own = await makeTestStore()
    try {
      const first = await spawnServer({ DATABASE_URL: own.url, AGENTGOV_DATA_DIR: join(dir, "made-with") })
      await first.waitForKey()
      first.proc.kill("SIGTERM")
      await first.exited
      const sql = pgConnect(own.url)
      const state = async () =>
        (
          await sql`SELECT (SELECT count(*)::int FROM signing_keys) AS keys, (SELECT count(*)::int FROM workspaces) AS workspaces`
        )[0]
      try {
        const before = await state()
        expect(before!.keys).toBeGreaterThan(0)
        // A restore started without its master.key: the data directory has none.
        const restored = join(dir, "restored-without-key")
        const line = refusal(await runToExit({ DATABASE_URL: own.url, AGENTGOV_DATA_DIR: restored }))
        expect(line).toContain(
          "this store's sealed secrets (the signing keys, the C2PA signing key) do not open with a new master key",
        )
        expect(line).toContain("no key was written")
        expect(existsSync(join(restored, "master.key"))).toBe(false)
        // The CLI too: a command on that data directory (a rotation would seal a signing key with the wrong key).
        const cli = await runCliToExit({ DATABASE_URL: own.url, AGENTGOV_DATA_DIR: restored }, [
          "signing-key",
          "rotate",
        ])
        expect(refusal(cli)).toContain("do not open with a new master key")
        expect(existsSync(join(restored, "master.key"))).toBe(false)
        // A damaged master.key: one line, not a stack.
        mkdirSync(join(dir, "damaged"), { recursive: true })
        writeFileSync(join(dir, "damaged", "master.key"), "not a key\n")
        expect(refusal(await runToExit({ DATABASE_URL: own.url, AGENTGOV_DATA_DIR: join(dir, "damaged") }))).toContain(
          "does not hold a master key",
        )
        // Another instance with another AGENTGOV_MASTER_KEY.
        const other = refusal(
          await runToExit({
            DATABASE_URL: own.url,
            AGENTGOV_DATA_DIR: join(dir, "other-key"),
            AGENTGOV_MASTER_KEY: randomBytes(32).toString("hex"),
          }),
        )
        expect(other).toContain("do not open with the master key of AGENTGOV_MASTER_KEY")
        expect(await state()).toEqual(before)
        // With the key it was made with, it starts.
        const again = await spawnServer({
          DATABASE_URL: own.url,
          AGENTGOV_DATA_DIR: restored,
          AGENTGOV_MASTER_KEY: readFileSync(join(dir, "made-with", "master.key"), "utf8").trim(),
        })
        again.proc.kill("SIGTERM")
        await again.exited
      } finally {
        await sql.end()
      }
    } finally {
      await own.cleanup()
    }
  })
})
