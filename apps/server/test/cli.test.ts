import { existsSync, rmSync } from "node:fs"
import { join } from "node:path"
import { newId } from "@agentgov/domain"
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
    [["workspace", "create", "--name", "a", "--name", "b"], "--name is given twice"],
    [["workspace", "create", "--name", "evil\u001b]0;owned\u0007"], "--name: must not contain control characters"],
    [["workspace", "create", "--name", " padded"], "--name: must not begin or end with whitespace"],
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

// Against a database of the test's own (on the run's cluster in either mode), seeded in SQL where the CLI has no command.
describe("workspaces and keys", { timeout: 180_000 }, () => {
  let own: TestStore
  let sql: ReturnType<typeof pgConnect>
  const run = (...args: Array<string>) => exec(args, { ...env, DATABASE_URL: own.url })
  const json = async (...args: Array<string>) => {
    const result = await run(...args, "--json")
    expect(result.code, result.stderr).toBe(0)
    return JSON.parse(result.stdout)
  }
  const seedWorkspace = async (name: string) => {
    const id = newId("ws")
    await sql`INSERT INTO workspaces (id, name, environment, created_at, updated_at)
      VALUES (${id}, ${name}, 'live', now(), now())`
    return id
  }
  beforeAll(async () => {
    own = await makeTestStore()
    sql = pgConnect(own.url)
  })
  afterAll(async () => {
    await sql?.end()
    await own?.cleanup()
  })

  it("key create --scopes all gives every scope but workspaces:admin, which is given only by name", async () => {
    const { workspace, apiKey } = await json("workspace", "create", "--name", "tenant")
    expect(apiKey.scopes).not.toContain("workspaces:admin")
    const all = await json("key", "create", "--workspace", workspace.id, "--name", "all", "--scopes", "all")
    expect(all.scopes).not.toContain("workspaces:admin")
    expect(all.scopes).toContain("workspaces:write")
    const admin = await json(
      "key",
      "create",
      ...["--workspace", workspace.id, "--name", "admin", "--scopes", "all,workspaces:admin"],
    )
    expect(admin.scopes).toContain("workspaces:admin")
    // For an agent key, `all` is every scope an agent key may hold.
    const agentId = newId("agt")
    await sql`INSERT INTO agents (id, workspace_id, name, trust_score, created_at, updated_at)
      VALUES (${agentId}, ${workspace.id}, 'bot', 400, now(), now())`
    const bound = await json(
      "key",
      "create",
      ...["--workspace", workspace.id, "--name", "bot", "--agent", agentId, "--scopes", "all"],
    )
    expect(bound).toMatchObject({ type: "agent", agentId })
    expect(bound.scopes).toContain("guard:evaluate")
    expect(bound.scopes).not.toContain("agents:write")
    const human = await run("workspace", "create", "--name", "tenant 2")
    expect(human.stdout).toContain("every scope but workspaces:admin")
  })

  it("workspace list shows every workspace, past the first hundred, and escapes control characters in names", async () => {
    const before: Array<unknown> = await json("workspace", "list")
    const evil = await seedWorkspace("evil\u001b[2J\u001b]0;pwned\u0007\u202e")
    for (let i = 0; i < 105; i++) await seedWorkspace(`bulk ${i}`)
    const listed: Array<{ id: string; name: string }> = await json("workspace", "list")
    expect(listed).toHaveLength(before.length + 106)
    expect(new Set(listed.map((w) => w.id)).size).toBe(listed.length)
    const human = await run("workspace", "list")
    expect(human.code, human.stderr).toBe(0)
    expect(human.stdout.split("\n").filter((l) => l !== "")).toHaveLength(listed.length)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not reach the terminal
    expect(human.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u202e]/)
    expect(human.stdout).toContain(`${evil}  live  free  evil\\u001b[2J\\u001b]0;pwned\\u0007\\u202e`)
  })

  it("a domain refusal names the option, not the field", async () => {
    const { workspace } = await json("workspace", "create", "--name", "refusals")
    const result = await run(
      "key",
      "create",
      "--workspace",
      workspace.id,
      "--name",
      "k",
      "--scopes",
      "all",
      "--type",
      "agent",
    )
    expect(result.code).toBe(2)
    expect(result.stderr).toBe("agentgov: InvalidInput: --agent: required for agent keys\n")
  })

  it("an unknown workspace is named in one line, exit 2", async () => {
    const result = await run("key", "create", "--workspace", "ws_nope", "--name", "k", "--scopes", "all")
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(
      "agentgov: WorkspaceNotFound: workspace ws_nope not found (npm run cli -- workspace list)\n",
    )
  })
})
