import { readFileSync, statSync, utimesSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
// @ts-expect-error: plain JavaScript, run by `npm start` without the TypeScript stripper
import { build, dashboardDir, indexPath, stale } from "../build.mjs"

/** `npm start` rebuilds the dashboard when a source is newer than dist/. */
describe("the dashboard's build for npm start", () => {
  it("is stale when a source is newer than dist/index.html, and not otherwise", () => {
    if (stale()) expect(build("pipe")).toBe(true)
    // Tests assert no timings: how long the check takes is the start-up benchmark's business.
    expect(stale()).toBe(false)
    const source = join(dashboardDir, "src/pages/Agents.tsx")
    const { atime, mtime } = statSync(source)
    const later = new Date(statSync(indexPath).mtimeMs + 5_000)
    utimesSync(source, later, later)
    try {
      expect(stale()).toBe(true)
    } finally {
      utimesSync(source, atime, mtime)
    }
    expect(stale()).toBe(false)
  })

  it("is the production build even under vitest (NODE_ENV=test): React's minified errors, not its development bundle", () => {
    expect(process.env.NODE_ENV).toBe("test")
    if (stale()) expect(build("pipe")).toBe(true)
    const entry = /<script type="module"[^>]*src="([^"]+)"/.exec(readFileSync(indexPath, "utf8"))?.[1]
    expect(entry).toBeDefined()
    const code = readFileSync(join(dashboardDir, "dist", entry!), "utf8")
    // Production React links its minified errors to react.dev/errors; the development bundle spells them out.
    expect(code).toContain("react.dev/errors/")
  })
})
