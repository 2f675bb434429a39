import { execFile } from "node:child_process"
import { rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { makeTestStore, reachableTempDir, type TestStore } from "@agentgov/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** The operator CLI as an operator runs it: a process, configured by environment, against the selected store. */

const CLI = fileURLToPath(new URL("../src/cli.ts", import.meta.url))
const run = promisify(execFile)

let store: TestStore
let dir: string
let env: Record<string, string | undefined>

beforeAll(async () => {
  store = await makeTestStore()
  dir = reachableTempDir("agentgov-cli-")
  // With DATABASE_URL, a database of its own there; else the embedded default, as an operator runs it:
  // the CLI starts the data directory's embedded PostgreSQL itself.
  env = { ...process.env, AGENTGOV_DATA_DIR: join(dir, "data"), DATABASE_URL: store.url, REDIS_URL: undefined }
  if (!process.env.DATABASE_URL) delete env.DATABASE_URL
})
afterAll(async () => {
  await store.cleanup()
  rmSync(dir, { recursive: true, force: true })
})

const cli = async (...args: Array<string>) => {
  const { stdout } = await run(process.execPath, [CLI, ...args, "--json"], { env, timeout: 60_000 })
  return JSON.parse(stdout)
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

  it("refuses a bad --activate-in with a clear message and exit code 2", async () => {
    const failed = await run(process.execPath, [CLI, "signing-key", "rotate", "--activate-in", "soon"], {
      env,
      timeout: 60_000,
    }).catch((e: { code: number; stderr: string }) => e)
    expect("code" in failed && failed.code).toBe(2)
    expect((failed as { stderr: string }).stderr).toMatch(/--activate-in must be whole seconds/)
  })
})
