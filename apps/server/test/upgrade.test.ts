import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { loadMigrations, PostgresClient, restoreFrom } from "@agentgov/db"
import { type EmptyDatabase, makeEmptyDatabase, pgConnect } from "@agentgov/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunningServer, startServer } from "../src/server.ts"
import { testConfig } from "./helpers.ts"

/**
 * Upgrades (issue 34): migrations are forward-only, and a store made by the previous release
 * (831f051, packages/db/test/fixtures/release-831f051) is upgraded by the current server at its
 * start and still verifies, with its checkpoints and its old credentials intact.
 */

const FIXTURE = fileURLToPath(new URL("../../../packages/db/test/fixtures/release-831f051/", import.meta.url))
const VERIFY = fileURLToPath(new URL("../../../packages/verifier/src/cli.ts", import.meta.url))
const fixtureReadme = readFileSync(join(FIXTURE, "README.md"), "utf8")
const MASTER_KEY = Buffer.from(/master key: `([0-9a-f]{64})`/.exec(fixtureReadme)![1]!, "hex")
const OLD_KEY = /workspace key: `(svc_ws_live_[A-Za-z0-9]+)`/.exec(fixtureReadme)![1]!

describe("migrations are forward-only", () => {
  it("ships every released migration byte for byte, and adds new ones only after them", () => {
    const released = readdirSync(join(FIXTURE, "migrations")).sort()
    const current = new Map(loadMigrations().map((m) => [`${m.version}.sql`, m.sql]))
    for (const f of released) {
      expect(current.has(f), `${f} was removed`).toBe(true)
      expect(current.get(f), `${f} was edited after its release`).toBe(
        readFileSync(join(FIXTURE, "migrations", f), "utf8"),
      )
    }
    const order = [...current.keys()].sort()
    expect(order.slice(0, released.length), "a new migration sorts before a released one").toEqual(released)
  })
})

let db: EmptyDatabase
let url: string
let server: RunningServer
let dir: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentgov-upgrade-"))
  db = await makeEmptyDatabase()
  url = db.url
  // The previous release's store, as it was: its migrations (the same files, checked above) and its rows.
  const restored = await restoreFrom(url, join(FIXTURE, "store.backup.gz"))
  expect(restored.migrations.at(-1)).toBe("0011_attributed_leaves")
  server = await startServer(testConfig({ masterKey: MASTER_KEY }), { store: PostgresClient.layer({ url, max: 5 }) })
})
afterAll(async () => {
  await server?.close()
  await db?.cleanup()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${OLD_KEY}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as any }
}

describe("a store of the previous release", () => {
  it("is upgraded at start: every current migration applied, nothing bootstrapped", async () => {
    expect(server.bootstrapped).toBeUndefined()
    const sql = pgConnect(url)
    try {
      const versions = (
        await sql<Array<{ version: string }>>`SELECT version FROM schema_migrations ORDER BY version`
      ).map((r) => r.version)
      expect(versions).toEqual(loadMigrations().map((m) => m.version))
    } finally {
      await sql.end()
    }
  })

  it("still verifies, keeps its signed checkpoint, answers its old key, and extends its chain", async () => {
    const verified = await call("POST", "/api/v1/events/verify", {})
    expect(verified.status, JSON.stringify(verified.body)).toBe(200)
    expect(verified.body.data.valid).toBe(true)
    const sql = pgConnect(url)
    const [old] = await sql<Array<{ tree_size: string; root_hash: string; signature: string }>>`
      SELECT tree_size::text, root_hash, signature FROM checkpoints ORDER BY tree_size DESC LIMIT 1`
    await sql.end()
    expect(Number(old!.tree_size)).toBe(35)
    const agents = await call("GET", "/api/v1/agents")
    expect(agents.body.data.map((a: { name: string }) => a.name).sort()).toEqual([
      "old-release-agent",
      "old-release-bot",
    ])

    const added = await call("POST", "/api/v1/agents", { name: "after-upgrade" })
    expect(added.status, JSON.stringify(added.body)).toBe(201)
    const again = await call("POST", "/api/v1/events/verify", {})
    expect(again.body.data.valid).toBe(true)
    const checkpoint = await call("GET", "/api/v1/events/checkpoint")
    expect(checkpoint.status, JSON.stringify(checkpoint.body)).toBe(200)
    expect(checkpoint.body.data.treeSize).toBeGreaterThan(35)
    // The old checkpoint is still the signed statement of the first 35 events: a consistency proof links them.
    const proof = await call(
      "GET",
      `/api/v1/events/proofs/consistency?fromSize=35&toSize=${checkpoint.body.data.treeSize}`,
    )
    expect(proof.status, JSON.stringify(proof.body)).toBe(200)

    const exported = await call("GET", "/api/v1/events/export")
    expect(exported.status).toBe(200)
    const bundle = join(dir, "bundle.json")
    writeFileSync(bundle, JSON.stringify(exported.body.data))
    const offline = spawnSync(process.execPath, [VERIFY, bundle], { encoding: "utf8" })
    expect(offline.status, offline.stderr + offline.stdout).toBe(0)
  })
})
