import { readFileSync, rmSync, statSync, utimesSync } from "node:fs"
import { join } from "node:path"
import { makeTestStore, reachableTempDir, type TestStore } from "@agentgov/testing"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
// @ts-expect-error: plain JavaScript, run by `npm start` without the TypeScript stripper
import * as dashboard from "../../dashboard/build.mjs"
// @ts-expect-error: plain JavaScript, run by `npm start` without the TypeScript stripper
import { build, bundlePath, root, stale } from "../bundle.mjs"
import { type ChildServer, START, spawnServer, stopChildren } from "./childServer.ts"

/**
 * `npm start` as an operator runs it: `node apps/server/start.mjs` builds the server into one file
 * (apps/server/dist/main.mjs) when it is missing or older than any of its sources, then runs it. On the
 * selected store: a fresh database at DATABASE_URL, else its own embedded PostgreSQL.
 */

let store: { env: Record<string, string>; cleanup: () => Promise<void> }
beforeAll(async () => {
  // npm start also builds the dashboard when it is stale (apps/dashboard/build.mjs): done here, once, so that
  // the starts below time the server. The dashboard's own suite checks what it serves.
  if (dashboard.stale()) dashboard.build("pipe")
  if (process.env.DATABASE_URL) {
    const db: TestStore = await makeTestStore()
    store = { env: { DATABASE_URL: db.url! }, cleanup: db.cleanup }
  } else {
    const dir = reachableTempDir("agentgov-start-")
    store = {
      env: { AGENTGOV_DATA_DIR: join(dir, "data") },
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    }
  }
})
afterEach(stopChildren)
afterAll(async () => store?.cleanup())

const call = async (server: ChildServer, key: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as any }
}

describe("npm start: the bundled server", () => {
  it("is rebuilt when a source is newer than the bundle, and not otherwise", { timeout: 120_000 }, async () => {
    await build()
    expect(stale()).toBe(false)
    // ASCII only: V8 then keeps the script's source at one byte per character (5 MB, not 10, for its life).
    const nonAscii = readFileSync(bundlePath).findIndex((byte: number) => byte > 0x7f)
    expect(nonAscii, "the first byte beyond ASCII in the bundle").toBe(-1)
    // A source of a workspace package the server bundles, touched after the build.
    const source = join(root, "packages/domain/src/audit/AuditLog.ts")
    const { atime, mtime } = statSync(source)
    const later = new Date(statSync(bundlePath).mtimeMs + 5_000)
    utimesSync(source, later, later)
    try {
      expect(stale()).toBe(true)
    } finally {
      utimesSync(source, atime, mtime)
    }
    expect(stale()).toBe(false)
  })

  it("is built again by turbo when what it bundles changes: its cache key covers the metafile's sources", {
    timeout: 120_000,
  }, async () => {
    await build()
    // turbo.json is JSONC: its comments are whole lines.
    const turbo = JSON.parse(
      readFileSync(join(root, "turbo.json"), "utf8")
        .split("\n")
        .filter((line) => !line.trimStart().startsWith("//"))
        .join("\n"),
    ) as { tasks: Record<string, { inputs?: ReadonlyArray<string> }> }
    const inputs = turbo.tasks["@agentgov/server#build"]?.inputs ?? []
    // turbo's globs, relative to the package unless rooted at $TURBO_ROOT$, as expressions over root-relative paths;
    // a glob starting with "!" excludes what it matches.
    const expression = (glob: string) =>
      new RegExp(
        `^${(glob.startsWith("$TURBO_ROOT$/") ? glob.slice("$TURBO_ROOT$/".length) : `apps/server/${glob}`)
          .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
          .replace(/\*\*/g, "\u0000")
          .replace(/\*/g, "[^/]*")
          .replaceAll("\u0000", ".*")}$`,
      )
    const included = inputs.filter((glob) => !glob.startsWith("!")).map(expression)
    const excluded = inputs.filter((glob) => glob.startsWith("!")).map((glob) => expression(glob.slice(1)))
    const covered = (path: string) => included.some((p) => p.test(path)) && !excluded.some((p) => p.test(path))
    const meta = JSON.parse(readFileSync(join(root, "apps/server/dist/meta.json"), "utf8")) as {
      inputs: Record<string, unknown>
    }
    const sources = Object.keys(meta.inputs).filter((path) => !path.includes("node_modules/"))
    expect(sources.filter((path) => path.startsWith("packages/")).length).toBeGreaterThan(0)
    expect(sources.filter((path) => !covered(path))).toEqual([])
    // What the metafile does not list: the locked dependencies, the install-time patches of the bundled postgres.js
    // (node_modules/postgres/src, rewritten by tooling/patches/apply.mjs), the manifests that map the packages'
    // exports and the tsconfig chain.
    for (const path of [
      "package-lock.json",
      "tooling/patches/apply.mjs",
      "packages/domain/package.json",
      "tooling/tsconfig/base.json",
      "apps/server/tsconfig.json",
    ])
      expect(covered(path), path).toBe(true)
  })

  it("migrates, bootstraps and serves the API and the guard, from the bundle", async () => {
    const server = await spawnServer(store.env, START)
    const key = await server.waitForKey()
    const agent = await call(server, key, "POST", "/api/v1/agents", { name: "from-the-bundle" })
    expect(agent.status).toBe(201)
    const policy = await call(server, key, "POST", "/api/v1/policies", {
      name: "no deletes",
      rules: [{ id: "r1", effect: "deny", actions: ["files.delete"] }],
    })
    expect(policy.status).toBe(201)
    const denied = await call(server, key, "POST", "/api/v1/guard", {
      agentId: agent.body.data.id,
      action: "files.delete",
    })
    expect(denied.status).toBe(200)
    expect(denied.body.data).toMatchObject({ decision: "deny", allowed: false })
    const verified = await call(server, key, "POST", "/api/v1/events/verify")
    expect(verified.body.data).toMatchObject({ valid: true })
  })
})
