import { readFileSync } from "node:fs"
import { resolve } from "node:path"

/**
 * Prints bench-results/results.json as the Markdown table of the README's benchmark section: each benchmark's
 * headline, its baseline, and every target with what was measured and whether it was met.
 *   node tooling/bench/src/table.ts [results.json]
 */
interface Target {
  readonly description: string
  readonly kind: "min" | "max"
  readonly value: number
  readonly measured: number
  readonly pass: boolean
}
interface Result {
  readonly name: string
  readonly unit?: string
  readonly value?: number
  readonly baseline?: { readonly value?: number }
  readonly targets?: ReadonlyArray<Target>
  readonly pass: boolean
  readonly error?: string
  /** Set when the benchmark could not run on this machine (e.g. no Chromium); it then has no value. */
  readonly notRun?: string
}

const path = process.argv[2] ?? resolve(import.meta.dirname, "../../../bench-results/results.json")
const report = JSON.parse(readFileSync(path, "utf8")) as {
  date: string
  revision?: { commit: string }
  machine?: { loadAverage?: ReadonlyArray<number> }
  benchmarks: ReadonlyArray<Result>
}

const num = (x: number | null | undefined) =>
  x === undefined || x === null || Number.isNaN(x)
    ? "—"
    : Math.abs(x) >= 100
      ? Math.round(x).toLocaleString("en-US")
      : String(Math.round(x * 1000) / 1000)

const rows = report.benchmarks.map((b) => {
  const targets = (b.targets ?? [])
    .map(
      (t) =>
        `${t.description} ${t.kind === "min" ? "≥" : "≤"} ${num(t.value)}: ${num(t.measured)} ${t.pass ? "met" : "**missed**"}`,
    )
    .join("; ")
  if (b.notRun !== undefined) return `| ${b.name} | not run: ${b.notRun} | — | — | not run |`
  const measured = b.error ? `did not finish: ${b.error}` : `${num(b.value)} ${b.unit ?? ""}`.trim()
  return `| ${b.name} | ${measured} | ${num(b.baseline?.value)} | ${targets || "—"} | ${b.pass ? "met" : "**missed**"} |`
})
process.stdout.write(
  [
    `Run of ${report.date.slice(0, 16).replace("T", " ")} UTC at \`${report.revision?.commit.slice(0, 7) ?? "?"}\`, load average ${report.machine?.loadAverage?.join(", ") ?? "?"} at its start.`,
    "",
    "| Benchmark | Measured | Baseline | Targets (measured) | Result |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
    "",
  ].join("\n"),
)
