import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"
// @ts-expect-error: plain JavaScript, run by the bins without the TypeScript stripper
import { build, paths, root, stale } from "../../bundle.mjs"

/**
 * The rule by which a connector's bin rebuilds its bundle (connectors/bundle.mjs; every app's alike): stale when any
 * input its metafile lists, the connector SDK's sources among them, or the bundler itself, is newer than dist/main.mjs.
 */
describe("the Teams app's bundle", () => {
  const app = fileURLToPath(new URL("..", import.meta.url))

  it("is rebuilt when a source it bundles is newer than it, and not otherwise", { timeout: 60_000 }, async () => {
    await build(app)
    expect(stale(app)).toBe(false)
    const source = join(root, "packages/connector-sdk/src/runtime/Store.ts")
    const { atime, mtime } = statSync(source)
    const later = new Date(statSync(paths(app).bundle).mtimeMs + 5_000)
    utimesSync(source, later, later)
    try {
      expect(stale(app)).toBe(true)
    } finally {
      utimesSync(source, atime, mtime)
    }
    expect(stale(app)).toBe(false)
    // and when the bundler is newer than it (a bundle of an older bundler)
    const bundler = join(root, "connectors/bundle.mjs")
    const own = statSync(bundler)
    utimesSync(bundler, later, later)
    try {
      expect(stale(app)).toBe(true)
    } finally {
      utimesSync(bundler, own.atime, own.mtime)
    }
  })

  it("loads Node's builtins by require, so that Node's fetch (undici) is never loaded", {
    timeout: 60_000,
  }, async () => {
    // An ES module import of `node:http` makes its namespace, whose WebSocket getter loads undici (~13 MiB RSS).
    await build(app)
    const dir = mkdtempSync(join(tmpdir(), "agentgov-bundle-"))
    try {
      const probe = join(dir, "probe.mjs")
      writeFileSync(
        probe,
        `process.on("exit", () => process.stderr.write("MODULES " + JSON.stringify(process.moduleLoadList) + "\\n"))\n`,
      )
      const run = spawnSync(process.execPath, ["--import", pathToFileURL(probe).href, paths(app).bundle, "help"], {
        encoding: "utf8",
      })
      expect(run.status).toBe(0)
      const modules: Array<string> = JSON.parse(/^MODULES (.*)$/m.exec(run.stderr)![1]!)
      expect(modules).toContain("NativeModule http")
      expect(modules.filter((m) => m.includes("undici"))).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("bundles the connector SDK from its sources; Discord's REST client without undici", {
    timeout: 60_000,
  }, async () => {
    const inputs = async (dir: string) => {
      await build(dir)
      return Object.keys(JSON.parse(readFileSync(paths(dir).meta, "utf8")).inputs)
    }
    expect(await inputs(app)).toContain("packages/connector-sdk/src/runtime/vendorFetch.ts")
    const discord = await inputs(join(root, "connectors/discord"))
    expect(discord).toContain("node_modules/@discordjs/rest/dist/web.mjs")
    expect(discord.filter((i) => i.includes("node_modules/undici/"))).toEqual([])
  })
})
