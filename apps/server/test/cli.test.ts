import { existsSync, rmSync } from "node:fs"
import { join } from "node:path"
import { makeTestStore, pgConnect, reachableTempDir, type TestStore } from "@agentgov/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runCliToExit, stopChildren } from "./childServer.ts"

/** The operator CLI as an operator runs it: a process, configured by environment, against the selected store. */

let store: TestStore
let dir: string
let env: Record<string, string>

beforeAll(async () => {
  store = await makeTestStore()
  dir = reachableTempDir("agentgov-cli-")
  // With DATABASE_URL, a database of its own there; else the embedded default, as an operator runs it:
  // the CLI starts the data directory's embedded PostgreSQL itself.
  env = { AGENTGOV_DATA_DIR: join(dir, "data"), ...(process.env.DATABASE_URL ? { DATABASE_URL: store.url } : {}) }
})
afterAll(async () => {
  await store.cleanup()
  rmSync(dir, { recursive: true, force: true })
})

/**
 * No CLI process outlives its test: each is killed at its own bound (a hung one would hold the data
 * directory), and any left when the file ends. Not in afterEach: the argument cases run concurrently,
 * and one case's end must not kill another's process.
 */
afterAll(stopChildren)
const exec = (args: Array<string>, env_: Record<string, string>) => runCliToExit(env_, args, 100_000)

const cli = async (...args: Array<string>) => {
  const result = await exec([...args, "--json"], env)
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout)
}

// Each call is a process that loads the server's modules and, on the embedded default, starts the
// data directory's PostgreSQL (creating it on the first call): generous bounds for a loaded machine.
describe("signing-key", { timeout: 120_000 }, () => {
  it("rotate publishes a key that signs from the given moment; list shows every key's state", async () => {
    const pending = await cli("signing-key", "rotate", "--activate-in", "3600")
    expect(pending.kid).toMatch(/^key_/)
    expect(Date.parse(pending.activatesAt) - Date.now()).toBeGreaterThan(3_500_000)
    const now = await cli("signing-key", "rotate", "--activate-in", "0")
    const keys: Array<{ kid: string; state: string }> = await cli("signing-key", "list")
    const state = Object.fromEntries(keys.map((k) => [k.kid, k.state]))
    expect(state[now.kid]).toBe("active")
    // The later rotation supersedes the pending key: it will sign briefly at most, then retire.
    expect(state[pending.kid]).toBe("pending")
  })
})

// Arguments are checked before the store is opened: with a store that does not answer (DATABASE_URL on
// port 1) and a data directory that does not exist, only the argument can be what is refused.
describe("arguments", { timeout: 60_000, concurrent: true }, () => {
  // A data directory of each case's own: the cases run concurrently.
  let cases = 0
  const unopened = (): Record<string, string> => ({
    DATABASE_URL: "postgres://postgres@127.0.0.1:1/x",
    AGENTGOV_DATA_DIR: join(dir, `never-opened-${++cases}`),
  })
  it.each([
    [["signing-key", "rotate", "--activate-in", "soon"], "--activate-in must be whole seconds, 0 to 2592000"],
    [["signing-key", "list", "--name", "x"], "--name does not apply to signing-key list"],
    [["workspace", "list", "--plan", "pro"], "--plan does not apply to workspace list"],
    [["workspace", "create"], "--name: "],
    [["workspace", "create", "--name", "a", "--plan", "gold"], "--plan: "],
    [["workspace", "create", "--name", "a", "--environment", "prod"], "--environment: "],
    [["key", "create", "--name", "a", "--scopes", "all"], "--workspace is required"],
    [
      ["key", "create", "--workspace", "ws_1", "--name", "a", "--scopes", "agents:fly"],
      "--scopes: unknown scope agents:fly",
    ],
    [["key", "create", "--workspace", "ws_1", "--name", "a"], "--scopes: "],
    [["key", "create", "--workspace", "ws_1", "--name", "a", "--scopes", "all", "--type", "x"], "--type: "],
    [
      ["key", "create", "--workspace", "ws_1", "--name", "a", "--scopes", "all", "--expires-at", "tomorrow"],
      "--expires-at: ",
    ],
    [["workspace", "create", "--nme", "a"], "Unknown option '--nme'"],
    [["workspaces", "list"], 'unknown command "workspaces list"'],
  ])("%j is refused in one line, exit 2, before the store", async (args, message) => {
    const env_ = unopened()
    const result = await exec(args, env_)
    expect(result.code, result.stderr).toBe(2)
    const lines = result.stderr.split("\n").filter((l) => l !== "")
    expect(lines, result.stderr).toHaveLength(1)
    expect(lines[0]).toContain(`agentgov: ${message}`)
    expect(existsSync(env_.AGENTGOV_DATA_DIR!)).toBe(false)
  })

  it("a store that does not answer is one line and exit 2 too (what the cases above would say had they opened it)", async () => {
    const result = await exec(["workspace", "list"], unopened())
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(
      "agentgov: the PostgreSQL at 127.0.0.1:1/x (DATABASE_URL) does not answer: connect ECONNREFUSED 127.0.0.1:1\n",
    )
  })
})

describe("migrate", { timeout: 120_000 }, () => {
  it("reports the migrations it applied (the store comes up migrated before the command runs)", async () => {
    const behind = await makeTestStore()
    try {
      const sql = pgConnect(behind.url)
      await sql`ALTER TABLE webhook_deliveries DROP COLUMN trace_parent`
      await sql`DELETE FROM schema_migrations WHERE version = '0026_webhook_trace_parent'`
      await sql.end()
      const first = await exec(["migrate", "--json"], { ...env, DATABASE_URL: behind.url })
      expect(first.code, first.stderr).toBe(0)
      expect(JSON.parse(first.stdout).applied).toEqual(["0026_webhook_trace_parent"])
      const again = await exec(["migrate", "--json"], { ...env, DATABASE_URL: behind.url })
      expect(JSON.parse(again.stdout).applied).toEqual([])
    } finally {
      await behind.cleanup()
    }
  })
})
