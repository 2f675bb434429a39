import { spawnSync } from "node:child_process"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs"
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

  it("builds when run as `node bundle.mjs <app>` on a Node without import.meta.main, also through a symlink", {
    timeout: 60_000,
  }, () => {
    // Node before 22.18 / 24.2 has no import.meta.main: a load hook takes it out of bundle.mjs's source
    const dir = mkdtempSync(join(tmpdir(), "agentgov-bundle-entry-"))
    try {
      const hook = join(dir, "no-import-meta-main.mjs")
      writeFileSync(
        hook,
        `import { registerHooks } from "node:module"
registerHooks({
  load(url, context, next) {
    const loaded = next(url, context)
    if (!url.endsWith("/connectors/bundle.mjs")) return loaded
    return { ...loaded, source: String(loaded.source).replaceAll("import.meta.main", "undefined") }
  },
})
`,
      )
      const bundler = join(root, "connectors/bundle.mjs")
      const link = join(dir, "bundle-link.mjs")
      symlinkSync(bundler, link)
      for (const [name, script] of [
        ["direct", bundler],
        ["linked", link],
      ] as const) {
        // a tiny app of its own, so that no real app's dist/ is touched
        const app = join(dir, name)
        mkdirSync(join(app, "src"), { recursive: true })
        writeFileSync(join(app, "package.json"), "{}")
        writeFileSync(join(app, "src/main.ts"), `console.log("${name}")\n`)
        const run = spawnSync(process.execPath, ["--import", pathToFileURL(hook).href, script, app], {
          encoding: "utf8",
        })
        expect(run.status, run.stderr).toBe(0)
        expect(existsSync(paths(app).bundle), `${name}: ${paths(app).bundle}`).toBe(true)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("fails in one line, not a stack trace, when the bundle is still missing after the build", () => {
    const dir = mkdtempSync(join(tmpdir(), "agentgov-bundle-missing-"))
    try {
      // a build child that exits 0 having built nothing (what a Node without import.meta.main did)
      const noop = join(dir, "noop-build.mjs")
      writeFileSync(noop, `if (process.argv[1]?.endsWith("bundle.mjs")) process.exit(0)\n`)
      const app = join(dir, "app")
      mkdirSync(app)
      const bin = join(app, "bin.mjs")
      writeFileSync(
        bin,
        `import { runBundled } from ${JSON.stringify(pathToFileURL(join(root, "connectors/bundle.mjs")).href)}\nawait runBundled(new URL(".", import.meta.url))\n`,
      )
      const run = spawnSync(process.execPath, [bin, "check"], {
        encoding: "utf8",
        env: { ...process.env, NODE_OPTIONS: `--import=${pathToFileURL(noop).href}` },
      })
      expect(run.status).toBe(1)
      expect(run.stderr.trim().split("\n"), run.stderr).toEqual([
        expect.stringMatching(/^agentgov: .*dist\/main\.mjs is still missing after the build \(node v[\d.]+\)/),
      ])
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
