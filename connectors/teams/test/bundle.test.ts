import { readFileSync, statSync, utimesSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
// @ts-expect-error: plain JavaScript, run by the bins without the TypeScript stripper
import { build, paths, root, stale } from "../../bundle.mjs"

/**
 * The rule by which a connector's bin rebuilds its bundle (connectors/bundle.mjs; every app's alike): stale when any
 * input its metafile lists, the connector SDK's sources among them, is newer than dist/main.mjs.
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
