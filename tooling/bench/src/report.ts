import { mkdirSync, renameSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"
import { type BenchServer, machineIdleMs, postgresCpuMs, processCpuMs } from "./server.ts"

/**
 * Wall time of a timed window, and the CPU time the server, this process and PostgreSQL used in it, with
 * the time the machine's cores sat idle: on two shared cores, what a rate is made of.
 */
export interface Measured {
  readonly ms: number
  readonly serverCpuMs: number | undefined
  readonly benchCpuMs: number | undefined
  readonly postgresCpuMs: number | undefined
  /** Summed over the cores. */
  readonly idleMs: number | undefined
}

/** Times `f`; `server` is whichever process serves it (the bench server, or another child such as the echo). */
export const measure = async (server: Pick<BenchServer, "cpuMs">, f: () => Promise<unknown>): Promise<Measured> => {
  const cpu0 = server.cpuMs()
  const self0 = processCpuMs(process.pid)
  const pg0 = postgresCpuMs()
  const idle0 = machineIdleMs()
  const start = performance.now()
  await f()
  const ms = performance.now() - start
  const cpu1 = server.cpuMs()
  const self1 = processCpuMs(process.pid)
  const pg1 = postgresCpuMs()
  const idle1 = machineIdleMs()
  const delta = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined ? undefined : b - a
  return {
    ms: round(ms),
    serverCpuMs: delta(cpu0, cpu1),
    benchCpuMs: delta(self0, self1),
    postgresCpuMs: delta(pg0, pg1),
    idleMs: delta(idle0, idle1),
  }
}

/** Where a window's CPU went, per unit of work: each side's µs, and the share of the cores left idle. */
export const cpuPer = (m: Measured, units: number, cores: number) => {
  const us = (ms: number | undefined) => (ms === undefined ? undefined : round((ms * 1000) / units, 1))
  return {
    serverUs: us(m.serverCpuMs),
    loadUs: us(m.benchCpuMs),
    postgresUs: us(m.postgresCpuMs),
    idle: m.idleMs === undefined ? undefined : round(m.idleMs / (m.ms * cores), 2),
  }
}

/** `cpuPer` as a log line. */
export const cpuLine = (c: ReturnType<typeof cpuPer>) =>
  `server ${c.serverUs ?? "?"}, load ${c.loadUs ?? "?"}, PostgreSQL ${c.postgresUs ?? "?"} µs CPU each; ${c.idle === undefined ? "?" : Math.round(c.idle * 100)}% idle`

export const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

/** Count, p50, p90, p99 and max (nearest rank), rounded to 0.1. */
export const summarise = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return {
    count: sorted.length,
    p50: round(percentile(sorted, 50)),
    p90: round(percentile(sorted, 90)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted.at(-1) ?? Number.NaN),
  }
}

export const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export interface Target {
  readonly description: string
  /** "min": the measured value must be at least `value`; "max": below it. */
  readonly kind: "min" | "max"
  readonly value: number
  readonly measured: number
  readonly pass: boolean
}

export const target = (description: string, kind: "min" | "max", value: number, measured: number): Target => ({
  description,
  kind,
  value,
  measured: round(measured, 3),
  pass: kind === "min" ? measured >= value : measured < value,
})

export interface BenchmarkResult {
  readonly name: string
  readonly what: string
  readonly unit: string
  readonly value: number
  readonly baseline?: { readonly what: string; readonly value: number } | undefined
  /** value / baseline.value */
  readonly ratio?: number | undefined
  readonly targets: ReadonlyArray<Target>
  readonly pass: boolean
  readonly details: Record<string, unknown>
  /** Set when the benchmark could not run here (a missing browser): why. It neither passes nor fails a target. */
  readonly notRun?: string | undefined
  /** Set when the benchmark could not finish; it then fails. */
  readonly error?: string | undefined
}

export const benchmark = (r: Omit<BenchmarkResult, "pass" | "ratio">): BenchmarkResult => ({
  ...r,
  value: round(r.value),
  ratio: r.baseline ? round(r.value / r.baseline.value, 3) : undefined,
  pass: r.targets.every((t) => t.pass),
})

/** A benchmark that threw: recorded as failed, so that the others still run and report. */
export const failed = (name: string, what: string, cause: unknown): BenchmarkResult => ({
  name,
  what,
  unit: "",
  value: Number.NaN,
  targets: [],
  pass: false,
  details: {},
  error: cause instanceof Error ? cause.message : String(cause),
})

/** Written to a temporary file first, so that a crashed run never leaves half a report. */
export const writeReport = (path: string, report: unknown) => {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(`${path}.tmp`, `${JSON.stringify(report, null, 2)}\n`)
  renameSync(`${path}.tmp`, path)
}

const fmt = (x: number | undefined) => (x === undefined ? "" : x.toLocaleString("en-US", { maximumFractionDigits: 3 }))

/** A plain-text table of every benchmark and target. */
export const printSummary = (results: ReadonlyArray<BenchmarkResult>, path: string) => {
  const rows = [["benchmark", "value", "baseline", "ratio", "target", "result"]]
  for (const r of results) {
    for (const [i, t] of r.targets.entries()) {
      rows.push([
        i === 0 ? r.name : "",
        i === 0 ? `${fmt(r.value)} ${r.unit}` : "",
        i === 0 && r.baseline ? `${fmt(r.baseline.value)} ${r.unit}` : "",
        i === 0 ? fmt(r.ratio) : "",
        `${t.description} ${t.kind === "min" ? "≥" : "<"} ${fmt(t.value)} (${fmt(t.measured)})`,
        t.pass ? "pass" : "FAIL",
      ])
    }
    if (r.notRun !== undefined) rows.push([r.name, "", "", "", `not run: ${r.notRun.slice(0, 100)}`, "skipped"])
    if (r.error !== undefined) rows.push([r.name, "", "", "", `error: ${r.error.slice(0, 100)}`, "FAIL"])
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)))
  const line = (row: ReadonlyArray<string>) => row.map((cell, c) => cell.padEnd(widths[c]!)).join("  ")
  process.stdout.write(`\n${line(rows[0]!)}\n${widths.map((w) => "-".repeat(w)).join("  ")}\n`)
  for (const row of rows.slice(1)) process.stdout.write(`${line(row)}\n`)
  const missed = results.flatMap((r) => r.targets).filter((t) => !t.pass).length
  const errors = results.filter((r) => r.error !== undefined).length
  const verdict =
    missed + errors === 0
      ? "every target met"
      : [missed > 0 ? `${missed} target(s) missed` : "", errors > 0 ? `${errors} benchmark(s) failed to run` : ""]
          .filter((s) => s !== "")
          .join(", ")
  process.stdout.write(`\n${verdict}; results in ${path}\n`)
}
