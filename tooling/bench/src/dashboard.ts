import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { gzipSync } from "node:zlib"
import { type BenchmarkResult, benchmark, round, target } from "./report.ts"

/**
 * The dashboard's production bundle (issue 33): `vite build`, then the JavaScript a first visit loads before
 * any route's chunk, gzipped: the scripts of dist/index.html (the entry and early.js) and every module the entry preloads. Routes are
 * code-split (React.lazy), so a page's own code and the chart library are not in it. Target ≤ 250 KB.
 * The first paint against 10,000 agents and 1,000,000 events is dashboardPaint.ts.
 */
export const measureDashboardBundle = (root: string) => {
  const dir = join(root, "apps/dashboard")
  const vite = join(dirname(createRequire(join(dir, "package.json")).resolve("vite/package.json")), "bin", "vite.js")
  const started = performance.now()
  execFileSync(process.execPath, [vite, "build", "--logLevel", "warn"], {
    cwd: dir,
    stdio: "pipe",
    env: { ...process.env, NODE_ENV: "production" },
  })
  const buildMs = performance.now() - started
  const html = readFileSync(join(dir, "dist/index.html"), "utf8")
  const initial = [
    // The entry module, and any classic script (public/early.js, which starts the first reads).
    ...html.matchAll(/<script[^>]*src="([^"]+)"/g),
    ...html.matchAll(/<link[^>]*rel="modulepreload"[^>]*href="([^"]+)"/g),
  ].map((m) => m[1]!)
  const files = [...new Set(initial)].map((src) => {
    const bytes = readFileSync(join(dir, "dist", src))
    return { src, bytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length }
  })
  return {
    initialGzipKB: files.reduce((a, f) => a + f.gzipBytes, 0) / 1024,
    initialKB: files.reduce((a, f) => a + f.bytes, 0) / 1024,
    files,
    buildMs,
  }
}

export const runDashboardBenchmark = (root: string): BenchmarkResult => {
  const m = measureDashboardBundle(root)
  return benchmark({
    name: "dashboard-bundle",
    what: "the dashboard's production build: the JavaScript a first visit loads (entry script and its preloaded modules), gzipped at level 9; routes are code-split",
    unit: "KB gzipped",
    value: round(m.initialGzipKB, 1),
    targets: [target("initial JavaScript, KB gzipped", "max", 250, m.initialGzipKB)],
    details: { initialKB: round(m.initialKB, 1), files: m.files, buildMs: round(m.buildMs) },
  })
}

if (import.meta.main) {
  const root = join(import.meta.dirname, "../../..")
  const r = runDashboardBenchmark(root)
  process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
}
