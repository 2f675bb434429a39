import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { gunzipSync, gzipSync } from "node:zlib"
import { runningClusterUrl } from "@agentgov/db"
import { pgConnect, reachableTempDir } from "@agentgov/testing"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { type ChildServer, runCliToExit, spawnServer, stopChildren } from "./childServer.ts"

/**
 * Backup and restore of the embedded default (issue 34), as an operator runs them: a backup taken
 * with `npm run cli -- backup` while the server serves and writes, a restore into a new data
 * directory (with the original master key beside it), and then the restored trail verifies, its
 * checkpoints are the ones signed before, and its export passes agentgov-verify offline.
 */

const VERIFY = fileURLToPath(new URL("../../../packages/verifier/src/cli.ts", import.meta.url))

const enabled = !process.env.DATABASE_URL && process.platform === "linux"
const dir = enabled ? reachableTempDir("agentgov-backup-") : ""
const original = join(dir, "original")
const restored = join(dir, "restored")
const file = join(dir, "agentgov.backup.gz")
/** The original store's key (the first test's): the restored stores are the same store. */
let originalKey = ""

afterEach(stopChildren)
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const call = async (server: ChildServer, key: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as any }
}
/** The operator CLI on a data directory: its exit code and what it wrote (a refusal is exit 2, not a throw). */
const cli = (dataDir: string, ...args: Array<string>) => runCliToExit({ AGENTGOV_DATA_DIR: dataDir }, args)
/** `cli`, which must succeed. */
const cliOk = async (dataDir: string, ...args: Array<string>) => {
  const result = await cli(dataDir, ...args)
  expect(result.code, result.stderr).toBe(0)
  return result
}

interface CheckpointRow {
  workspace_id: string
  tree_size: string
  root_hash: string
  head_hash: string
  signature: string
  kid: string
}
const checkpointsOf = async (dataDir: string) => {
  const sql = pgConnect(runningClusterUrl(join(dataDir, "pg"))!)
  try {
    return await sql<Array<CheckpointRow>>`SELECT workspace_id, tree_size::text, root_hash, head_hash, signature, kid
      FROM checkpoints ORDER BY workspace_id, tree_size`
  } finally {
    await sql.end()
  }
}

// Each test runs several processes that each start the embedded cluster, and each process may take up to 90 s on a
// loaded machine (childServer.ts): past that, it is killed and the test fails naming it, with its output. The suite's
// 30 s would cut the test off first, without saying which process hung (a CI run timed one out so, 2026-11-29).
describe.skipIf(!enabled)("backup and restore on the embedded default", { timeout: 240_000 }, () => {
  it("backs up while serving and writing; the restore verifies, keeps its checkpoints and exports a verifiable trail", async () => {
    const first = await spawnServer({ AGENTGOV_DATA_DIR: original })
    const key = await first.waitForKey()
    originalKey = key
    const agent = await call(first, key, "POST", "/api/v1/agents", { name: "backed-up" })
    expect(agent.status).toBe(201)
    for (let i = 0; i < 5; i++)
      expect(
        (await call(first, key, "POST", "/api/v1/guard", { agentId: agent.body.data.id, action: `read.${i}` })).status,
      ).toBe(200)
    const signed = await call(first, key, "GET", "/api/v1/events/checkpoint")
    expect(signed.status, JSON.stringify(signed.body)).toBe(200)

    // Writes go on while the backup reads: it holds one instant of the chain, whichever that is.
    let writing = true
    const writer = (async () => {
      let n = 0
      while (writing) {
        const r = await call(first, key, "POST", "/api/v1/events/ingest", {
          events: [{ type: "backup.during", data: { n: n++ } }],
        })
        expect(r.status).toBe(201)
      }
      return n
    })()
    writer.catch(() => {}) // awaited below; a refused write during the backup must fail the test, not the run
    const backup = await cliOk(original, "backup", file, "--json").finally(() => {
      writing = false
    })
    expect(await writer).toBeGreaterThan(0)
    const summary = JSON.parse(backup.stdout)
    expect(summary.tables).toBeGreaterThan(10)
    expect(summary.rows).toBeGreaterThan(10)
    // A second backup to the same file is refused: a backup never overwrites.
    const again = await cli(original, "backup", file)
    expect(again.code).toBe(2)
    expect(again.stderr).toMatch(/exists/)
    const before = await checkpointsOf(original)
    first.proc.kill("SIGTERM")
    await first.exited

    // A restore into a store that has data is refused, and changes nothing.
    const intoUsed = await cli(original, "restore", file)
    expect(intoUsed.code).toBe(2)
    expect(intoUsed.stderr).toMatch(/empty/)

    const restore = await cliOk(restored, "restore", file)
    expect(restore.stdout).toMatch(/restored from .*: \d+ tables/)
    expect(restore.stdout).toMatch(/master key/)
    copyFileSync(join(original, "master.key"), join(restored, "master.key"))

    const second = await spawnServer({ AGENTGOV_DATA_DIR: restored })
    // The original key still works: the restore is the same store, not a new one (no bootstrap).
    const verified = await call(second, key, "POST", "/api/v1/events/verify", {})
    expect(verified.status, JSON.stringify(verified.body)).toBe(200)
    expect(verified.body.data.valid).toBe(true)
    const after = await checkpointsOf(restored)
    expect(after.length).toBeGreaterThan(0)
    for (const c of after) expect(before, `checkpoint ${c.workspace_id}@${c.tree_size}`).toContainEqual(c)
    // The checkpoint the API serves for the restored chain is signed over the same tree.
    const latest = await call(second, key, "GET", "/api/v1/events/checkpoint")
    expect(latest.status).toBe(200)
    // New work continues the restored chain.
    expect((await call(second, key, "POST", "/api/v1/agents", { name: "after-restore" })).status).toBe(201)

    const exported = await call(second, key, "GET", "/api/v1/events/export")
    expect(exported.status).toBe(200)
    const bundle = join(dir, "bundle.json")
    writeFileSync(bundle, JSON.stringify(exported.body.data))
    const offline = spawnSync(process.execPath, [VERIFY, bundle], { encoding: "utf8" })
    expect(offline.status, offline.stderr + offline.stdout).toBe(0)
    expect(offline.stdout).toMatch(/OK/)
    expect(existsSync(`${file}.partial`)).toBe(false)
  })

  it("refuses a file edited behind its chains, restoring nothing; --unverified restores it all the same", async () => {
    // One event's data changed in the file (its hash and the chain after it left as they were), as an edit of a
    // backup by hand would, and the file still well-formed.
    const lines = gunzipSync(readFileSync(file)).toString("utf8").split("\n")
    const section = lines.findIndex((l) => l.startsWith('{"table":"events"'))
    expect(section).toBeGreaterThan(0)
    const data = (JSON.parse(lines[section]!).columns as Array<string>).indexOf("data")
    let edited = -1
    for (let i = section + 1; lines[i] !== "\\." && edited < 0; i++) {
      const fields = lines[i]!.split("\t")
      if (!fields[data]!.includes('"n":0')) continue
      fields[data] = fields[data]!.replace('"n":0', '"n":1000')
      lines[i] = fields.join("\t")
      edited = i
    }
    expect(edited).toBeGreaterThan(section)
    const tampered = join(dir, "tampered.gz")
    writeFileSync(tampered, gzipSync(lines.join("\n")))

    const target = join(dir, "tampered-target")
    const refused = await cli(target, "restore", tampered)
    expect(refused.code, refused.stderr).toBe(2)
    expect(refused.stderr).toMatch(
      /holds a chain that does not verify \(workspace ws_\w+, event \d+: hash does not match/,
    )
    expect(refused.stderr).toMatch(/nothing was restored/)
    // Nothing was: the same directory takes the untouched file.
    await cliOk(target, "restore", file)

    const examined = join(dir, "examined")
    await cliOk(examined, "restore", tampered, "--unverified")
    copyFileSync(join(original, "master.key"), join(examined, "master.key"))
    const server = await spawnServer({ AGENTGOV_DATA_DIR: examined })
    try {
      const verified = await call(server, originalKey, "POST", "/api/v1/events/verify", {})
      expect(verified.status, JSON.stringify(verified.body)).toBe(200)
      expect(verified.body.data.valid).toBe(false)
    } finally {
      server.proc.kill("SIGTERM")
      await server.exited
    }
    // Other commands do not take the flag.
    expect((await cli(examined, "backup", join(dir, "x.gz"), "--unverified")).code).toBe(2)
  })

  it("refuses a file that is not a backup, and a restore while a server runs on the directory", async () => {
    const junk = join(dir, "junk.gz")
    writeFileSync(junk, "not a backup")
    const fresh = join(dir, "fresh")
    const bad = await cli(fresh, "restore", junk)
    expect(bad.code).toBe(2)
    // Refused after the cluster it started was stopped and its lock released (third pass: the lock stayed).
    expect(existsSync(join(fresh, "agentgov.pid"))).toBe(false)
    expect(runningClusterUrl(join(fresh, "pg"))).toBeUndefined()
    const server = await spawnServer({ AGENTGOV_DATA_DIR: fresh })
    const busy = await cli(fresh, "restore", file)
    expect(busy.code).toBe(2)
    expect(busy.stderr).toMatch(/running/)
    server.proc.kill("SIGTERM")
    await server.exited
  })
})

describe("the backup commands' refusals (third pass)", () => {
  it.skipIf(process.platform !== "linux")(
    "a backup of a data directory that holds no store creates none there (a mistyped AGENTGOV_DATA_DIR)",
    async () => {
      const base = reachableTempDir("agentgov-typo-")
      try {
        const typo = join(base, "dtaa")
        const r = await runCliToExit({ AGENTGOV_DATA_DIR: typo }, ["backup", join(base, "b.gz")])
        expect(r.code, r.stderr).toBe(2)
        expect(r.stderr.trim()).toBe(
          `agentgov: ${typo} holds no store (no ${join(typo, "pg")}): check AGENTGOV_DATA_DIR`,
        )
        expect(existsSync(typo)).toBe(false)
        // A directory that exists but holds no cluster: refused alike, and left as it was (no lock file).
        mkdirSync(typo)
        const again = await runCliToExit({ AGENTGOV_DATA_DIR: typo }, ["backup", join(base, "b.gz")])
        expect(again.code, again.stderr).toBe(2)
        expect(readdirSync(typo)).toEqual([])
      } finally {
        rmSync(base, { recursive: true, force: true })
      }
    },
  )

  it("say in one line that a DATABASE_URL does not answer, without its password, rather than a stack trace", async () => {
    const out = join(tmpdir(), `agentgov-unreachable-${process.pid}.gz`)
    const env = { DATABASE_URL: "postgres://postgres:hunter2secret@127.0.0.1:1/agentgov" }
    const backup = await runCliToExit(env, ["backup", out])
    expect(backup.code, backup.stderr).toBe(2)
    expect(backup.stderr.trim()).toBe(
      "agentgov: the PostgreSQL at 127.0.0.1:1/agentgov (DATABASE_URL) does not answer: connect ECONNREFUSED 127.0.0.1:1",
    )
    expect(existsSync(`${out}.partial`)).toBe(false)
    const restore = await runCliToExit(env, ["restore", fileURLToPath(import.meta.url)])
    expect(restore.code, restore.stderr).toBe(2)
    expect(restore.stderr.trim()).toMatch(/^agentgov: .*ECONNREFUSED 127\.0\.0\.1:1$/)
    for (const r of [backup, restore]) expect(r.stderr).not.toContain("hunter2secret")
  })
})
