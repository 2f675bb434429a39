import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"

/**
 * The e-mail digest (issue 29): a daily digest of 100,000 events built as the connector builds it
 * (`DigestStore.assign` with `renderDigest`: every waiting event assigned to the digest, counted by type
 * and agent, sampled, rendered as text and HTML, the message stored) in a fresh child process, its time and
 * the child's peak RSS; median of ROUNDS builds of the same stored events. The baseline, in the same run
 * and the same kind of fresh process, is the floor of that work: the events' counts by type and agent in
 * one SQL query.
 */

const EVENTS = 100_000
const ROUNDS = 3
const run = promisify(execFile)

export async function runEmailDigestBenchmark(root: string, log: (line: string) => void): Promise<BenchmarkResult> {
  const dir = mkdtempSync(join(tmpdir(), "agentgov-bench-email-"))
  const step = async (name: string, ...args: Array<string>) => {
    const { stdout } = await run(
      process.execPath,
      ["--conditions=@agentgov/source", join(root, "tooling/bench/src/emailDigestChild.ts"), name, dir, ...args],
      { cwd: root, maxBuffer: 1 << 20 },
    )
    return JSON.parse(stdout.trim().split("\n").at(-1)!) as { ms: number; peakRssBytes: number } & Record<
      string,
      number
    >
  }
  try {
    log(`email-digest: storing ${EVENTS} events`)
    const fill = await step("fill", String(EVENTS))
    const builds = []
    const baselines = []
    for (let r = 1; r <= ROUNDS; r++) {
      const base = await step("baseline")
      const build = await step("build")
      await step("reset")
      log(
        `email-digest round ${r}: built in ${round(build.ms)} ms, peak RSS ${round(build.peakRssBytes / 2 ** 20)} MiB (${build.events} events, ${build.htmlBytes} HTML characters); counts alone ${round(base.ms)} ms, ${round(base.peakRssBytes / 2 ** 20)} MiB`,
      )
      builds.push(build)
      baselines.push(base)
    }
    const ms = median(builds.map((b) => b.ms))
    const peakMiB = Math.max(...builds.map((b) => b.peakRssBytes)) / 2 ** 20
    return benchmark({
      name: "email-digest",
      what: `a daily digest of ${EVENTS.toLocaleString("en-US")} stored events (10 types, 500 agents) built as the e-mail connector builds it (DigestStore.assign + renderDigest), in a fresh child process; median of ${ROUNDS} builds, peak RSS the largest`,
      unit: "ms",
      value: ms,
      baseline: {
        what: "the floor: the same events' counts by type and agent in one SQL query, in the same kind of fresh process (median)",
        value: round(median(baselines.map((b) => b.ms))),
      },
      targets: [
        target("build time (ms)", "max", 5_000, ms),
        target("peak RSS of the building process (MiB)", "max", 200, peakMiB),
        target("events in the digest", "min", EVENTS, Math.min(...builds.map((b) => b.events ?? 0))),
      ],
      details: {
        fillMs: round(fill.ms),
        builds: builds.map((b) => ({ ...b, ms: round(b.ms), peakRssMiB: round(b.peakRssBytes / 2 ** 20) })),
        baselines: baselines.map((b) => ({ ...b, ms: round(b.ms), peakRssMiB: round(b.peakRssBytes / 2 ** 20) })),
      },
    })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
