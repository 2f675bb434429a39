/**
 * The dashboard's build as `npm start` runs it: `vite build` into dist/ when dist/index.html is missing or older
 * than any of its sources. Plain JavaScript (no TypeScript stripper), and cheap when nothing changed: one walk
 * of src/ comparing modification times. Types are checked by `npm run typecheck` and `npm run build`.
 */
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

export const dashboardDir = import.meta.dirname
export const indexPath = join(dashboardDir, "dist", "index.html")
const inputs = ["src", "public", "index.html", "vite.config.ts", "package.json"]

const newest = (path) => {
  const s = statSync(path, { throwIfNoEntry: false })
  if (!s) return 0
  if (!s.isDirectory()) return s.mtimeMs
  let max = s.mtimeMs
  for (const entry of readdirSync(path)) max = Math.max(max, newest(join(path, entry)))
  return max
}

/** Whether dist/index.html is missing or older than a source of the dashboard. */
export const stale = () => {
  const built = statSync(indexPath, { throwIfNoEntry: false })?.mtimeMs
  if (built === undefined) return true
  return inputs.some((i) => newest(join(dashboardDir, i)) > built)
}

/** Runs `vite build` in a child process; returns whether it succeeded (false when vite is not installed). */
export const build = (stdio = "inherit") => {
  let vite
  try {
    // vite's exports do not name its bin: find it beside its package.json.
    vite = join(
      dirname(createRequire(join(dashboardDir, "package.json")).resolve("vite/package.json")),
      "bin",
      "vite.js",
    )
  } catch {
    return false
  }
  if (!existsSync(vite)) return false
  // Always the production build: vite takes NODE_ENV from the environment, and under vitest (NODE_ENV=test) it built
  // React's development bundle (twice the size, effects run twice under StrictMode), which `npm start` then served.
  const run = spawnSync(process.execPath, [vite, "build", "--logLevel", "warn"], {
    cwd: dashboardDir,
    stdio,
    env: { ...process.env, NODE_ENV: "production" },
  })
  return run.status === 0
}

if (import.meta.main) process.exit(build() ? 0 : 1)
