import { execFileSync } from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { availableParallelism, cpus, loadavg, platform, release, tmpdir, totalmem } from "node:os"
import { join, resolve } from "node:path"
import { connectionOptions } from "@agentgov/db"
import postgres from "postgres"
import { runAuthBenchmarks } from "./auth.ts"
import { runBadgeBenchmark } from "./badge.ts"
import { runComplianceReportBenchmark } from "./complianceReport.ts"
import { runConnectorLatencyBenchmark, runConnectorMemoryBenchmark } from "./connectors.ts"
import { runContentImageScanBenchmark, runContentRegisterBenchmark, runContentTextScanBenchmark } from "./content.ts"
import { runDashboardBenchmark } from "./dashboard.ts"
import { runDashboardPaintBenchmark } from "./dashboardPaint.ts"
import { startDurable } from "./durable.ts"
import { runEmailDigestBenchmark } from "./emailDigest.ts"
import { runEmbeddedBenchmark } from "./embedded.ts"
import { runGuardHttpBenchmark } from "./guard.ts"
import { runGuardEvalBenchmark } from "./guardEval.ts"
import { runGuardFairnessBenchmark } from "./guardFairness.ts"
import { createBaselineTables, fetchRows, type IngestShape, runIngest, runPlainInsert, serialShape } from "./ingest.ts"
import { runMcpOverheadBenchmark } from "./mcpOverhead.ts"
import { runMetricsOnBenchmark } from "./metricsOn.ts"
import { runOAuthAuthBenchmark } from "./oauthAuth.ts"
import { runPagingBenchmark } from "./paging.ts"
import {
  type BenchmarkResult,
  benchmark,
  cpuLine,
  cpuPer,
  failed,
  type Measured,
  median,
  printSummary,
  round,
  target,
  writeReport,
} from "./report.ts"
import { runSdkBenchmarks } from "./sdk.ts"
import { type BenchServer, type FreshServer, processRssBytes, startServer } from "./server.ts"
import { runSse, type SseShape } from "./sse.ts"
import { runTrustEvalBenchmark } from "./trustEval.ts"
import { runTrustImpactBenchmark } from "./trustImpact.ts"
import { runVerify, runVerifyBaseline } from "./verify.ts"
import { runWebhookBenchmark } from "./webhooks.ts"

/**
 * Every benchmark of the issues, on a fresh PostgreSQL database dropped at
 * the end, against the server as a child process; results in
 * bench-results/results.json, each with its baseline measured in the same run:
 * - audit trail: ingest against the minimal durable design (durableServer.ts: the same durable work
 *   in a bare node:http + postgres.js server, no chain), with the plain INSERTs of the same rows as
 *   information; chain verification; SSE delivery to 1,000 subscribers, and the server's memory
 *   (idle RSS, and what those 1,000 open streams add);
 * - credentials (auth.ts): SDK-token authentication against none, and the
 *   latency a Redis rate-limit check adds (when REDIS_URL is set);
 * - the guard: in-process evaluation at 1,000 rules against a naive scan, and beside Cedar and
 *   casbin (guardEval.ts), POST /guard over HTTP against the minimal durable design at 1, 16 and
 *   64 connections (guard.ts), and one tenant's guard latency while another hammers its costliest
 *   set (guardFairness.ts);
 * - webhooks: event written → delivered, and sustained deliveries/s;
 * - the agent SDK: guard() against its raw fetch, track() enqueue rate.
 * - the connectors (connectors.ts, paging.ts, emailDigest.ts): event → Slack, Discord and Teams fakes and
 *   each app's RSS after 10,000 events (connectors-latency, connectors-memory), enforcement
 *   → PagerDuty fake, a daily digest of 100,000 events built;
 * - the MCP gateway (mcpOverhead.ts): what agentgov-mcp-gateway adds to a tools/call over stdio, against the
 *   same MCP server called directly, with the service on its embedded default.
 *
 * - the embedded default (embedded.ts): a fresh `npm start`, its idle RSS, and its guard against PostgreSQL's;
 * - trust (issue 27): the guard in process with trust conditions against the same rules reading the context
 *   (trustEval.ts); guard-http and ingest with the trust worker on against a second server with it off
 *   (trustImpact.ts); the public SVG badge against the token-auth baseline route (badge.ts);
 * - people (issue 32): a route authenticated by an OAuth access token against the same baseline (oauthAuth.ts);
 * - operations (issue 34): the guard over HTTP with metrics on against a second server with them off (metricsOn.ts).
 * - a compliance report over 1,000,000 chained events (complianceReport.ts): time to ready, server RSS growth;
 * - content protection (content.ts): registering a 2 MP JPEG with watermark and C2PA, an image scan against
 *   1,000,000 images (the multi-index against a linear scan), a 10,000-word text scan against 100,000 texts.
 * - the dashboard (dashboard.ts): its production bundle's initial JavaScript, gzipped; the overview's first meaningful
 *   paint in Chromium against 10,000 agents and 1,000,000 events, and the most records one tRPC response carries
 *   (dashboardPaint.ts, after compliance-report, on its workspace).
 *
 * AGENTGOV_BENCH_ONLY=ingest,verify,sse,auth,guard-eval,guard,guard-fairness,embedded,webhooks,sdk,trust-eval,
 * trust-impact,badge,oauth-auth,metrics-on,connectors-latency,connectors-memory,paging,email-digest,mcp-overhead,
 * content-register,content-image-scan,content-text-scan,dashboard,compliance-report,dashboard-paint picks benchmarks (sse also
 * measures memory); AGENTGOV_BENCH_METRICS_AA=1 runs metrics-on with metrics off on both sides (its noise);
 * AGENTGOV_BENCH_CPU_PROF=1
 * writes a V8 CPU profile of the server to bench-results/profiles/ (and of the minimal durable server of ingest and
 * guard to bench-results/profiles/durable/durable_ingest/ and durable_guard/); AGENTGOV_BENCH_KEEP_DB=1 keeps the
 * database at the end (its name is logged), to read its rows and statistics afterwards.
 */

const INGEST: IngestShape = { clients: 8, calls: 50, batch: 100 }
const WARMUP: IngestShape = { clients: 8, calls: 5, batch: 100 }
const ROUNDS = 3
const VERIFY_EVENTS = 200_000
const VERIFY_RUNS = 5
const SSE: SseShape = { subscribers: 1_000, events: 50, intervalMs: 100 }

const root = resolve(import.meta.dirname, "../../..")
const output = join(root, "bench-results/results.json")
const adminUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres"
const only = process.env.AGENTGOV_BENCH_ONLY?.split(",").map((s) => s.trim())
const enabled = (name: string) => !only || only.includes(name)
const log = (line: string) => process.stdout.write(`bench: ${line}\n`)

/** Flushes dirty pages now, so that a checkpoint of earlier writes does not land in a timed window (needs superuser). */
const checkpoint = (sql: postgres.Sql) => sql`CHECKPOINT`.catch(() => undefined)

const ingestBenchmark = async (
  server: BenchServer,
  sql: postgres.Sql,
  workspaceId: string,
  databaseUrl: string,
  cpuProfDir: string | undefined,
) => {
  await createBaselineTables(sql)
  const durable = await startDurable(sql, databaseUrl, "durable_ingest", cpuProfDir)
  try {
    const toDurable = (shape: IngestShape, tag: string) => runIngest(durable, shape, tag, "/v1/events/ingest")
    log(`ingest warm-up (${WARMUP.clients * WARMUP.calls * WARMUP.batch} events, every path)`)
    const warm = await runIngest(server, WARMUP, "warmup")
    await toDurable(WARMUP, "warmup")
    const warmRows = await fetchRows(sql, workspaceId, warm)
    await runPlainInsert(sql, server, "bench_plain", warmRows, WARMUP)
    await runPlainInsert(sql, server, "bench_indexed", warmRows, WARMUP)
    await runPlainInsert(sql, server, "bench_serial", warmRows, serialShape(WARMUP))

    const rounds = []
    for (let r = 1; r <= ROUNDS; r++) {
      // Interleaved, the order swapped every round, so that neither side always follows the other's writes.
      await checkpoint(sql)
      const first = r % 2 === 1 ? await toDurable(INGEST, `round${r}`) : undefined
      await checkpoint(sql)
      const ingest = await runIngest(server, INGEST, `round${r}`)
      await checkpoint(sql)
      const base = first ?? (await toDurable(INGEST, `round${r}`))
      const rows = await fetchRows(sql, workspaceId, ingest)
      const plain = await runPlainInsert(sql, server, "bench_plain", rows, INGEST)
      const indexed = await runPlainInsert(sql, server, "bench_indexed", rows, INGEST)
      const serial = await runPlainInsert(sql, server, "bench_serial", rows, serialShape(INGEST))
      log(
        `ingest round ${r}: ${round(ingest.eventsPerSecond, 0)} events/s; minimal durable server ${round(base.eventsPerSecond, 0)}; ` +
          `plain INSERT ${round(plain.eventsPerSecond, 0)}, with the events table's indexes ${round(indexed.eventsPerSecond, 0)}, ` +
          `one ordered writer with them ${round(serial.eventsPerSecond, 0)}`,
      )
      log(`  ingest: ${cpuLine(cpuPer(ingest, ingest.events, cpus().length))}`)
      log(`  durable: ${cpuLine(cpuPer(base, base.events, cpus().length))}`)
      rounds.push({ ingest, durable: base, plain, indexed, serial })
    }
    const value = median(rounds.map((r) => r.ingest.eventsPerSecond))
    const baseline = median(rounds.map((r) => r.durable.eventsPerSecond))
    const info = (runs: ReadonlyArray<{ eventsPerSecond: number }>) => {
      const eventsPerSecond = median(runs.map((x) => x.eventsPerSecond))
      return { eventsPerSecond: round(eventsPerSecond), ratio: round(value / eventsPerSecond, 3) }
    }
    const withCpu = (run: Measured & { events: number; eventsPerSecond: number }) => ({
      ...run,
      eventsPerSecond: round(run.eventsPerSecond),
      cpuPerEvent: cpuPer(run, run.events, cpus().length),
    })
    return benchmark({
      name: "ingest",
      what: `POST /events/ingest, ${INGEST.clients} concurrent clients × ${INGEST.calls} calls × ${INGEST.batch} events; median of ${ROUNDS} interleaved rounds`,
      unit: "events/s",
      value,
      baseline: {
        what: `the minimal durable design (durableServer.ts, child process): node:http + postgres.js, the same bodies and clients; per call one multi-row INSERT of the ${INGEST.batch} rows, a SHA-256 each, no chain, synchronous_commit on, into a copy of events with all its indexes`,
        value: round(baseline),
      },
      targets: [
        target("events/s", "min", 20_000, value),
        target("ratio to the minimal durable server", "min", 0.9, value / baseline),
      ],
      details: {
        shape: INGEST,
        plainBaseline: {
          what: `the server's own rows as multi-row INSERTs of ${INGEST.batch}, ${INGEST.clients} connections from this process, no chaining, into a copy of events with only its primary key (bench_plain); informational`,
          ...info(rounds.map((r) => r.plain)),
        },
        indexedBaseline: {
          what: "the same INSERTs into a copy of events with all its indexes (bench_indexed); informational",
          ...info(rounds.map((r) => r.indexed)),
        },
        serialBaseline: {
          what: `the same rows into a copy of events with all its indexes by one connection, ${INGEST.clients * INGEST.batch} rows per INSERT (bench_serial): one ordered writer, as a chain has per workspace; informational`,
          ...info(rounds.map((r) => r.serial)),
        },
        rounds: rounds.map(({ ingest, durable, plain, indexed, serial }) => ({
          ingest: withCpu(ingest),
          durable: withCpu(durable),
          plain: withCpu(plain),
          indexed: { ...indexed, eventsPerSecond: round(indexed.eventsPerSecond) },
          serial: { ...serial, eventsPerSecond: round(serial.eventsPerSecond) },
          ratio: round(ingest.eventsPerSecond / durable.eventsPerSecond, 3),
        })),
      },
    })
  } finally {
    await durable.stop()
  }
}

const verifyBenchmark = async (server: BenchServer, sql: postgres.Sql, workspaceId: string) => {
  const [head] = await sql`SELECT sequence FROM chain_heads WHERE workspace_id = ${workspaceId}`
  const missing = VERIFY_EVENTS - (head?.sequence ?? 0)
  if (missing > 0) {
    const fill: IngestShape = { clients: 16, calls: Math.ceil(missing / 1_600), batch: 100 }
    log(`ingesting ${fill.clients * fill.calls * fill.batch} more events for verification`)
    await runIngest(server, fill, "fill")
  }
  // Right after the bulk ingest autovacuum has not analysed events yet, and the plan of the verification's
  // page query may differ: recorded, not the headline. Then settled, as for the verification every 6 hours.
  const unanalysed = await runVerify(server)
  log(`verify before ANALYZE (recorded, not the headline): ${round(unanalysed.eventsPerSecond, 0)} events/s`)
  await sql`VACUUM (ANALYZE) events`
  await checkpoint(sql)
  const runs = []
  const baselines = []
  for (let r = 1; r <= VERIFY_RUNS; r++) {
    const run = await runVerify(server)
    const base = await runVerifyBaseline(sql, server, workspaceId)
    log(
      `verify run ${r}: ${run.checked} events, ${round(run.eventsPerSecond, 0)} events/s; plain script ${round(base.eventsPerSecond, 0)}`,
    )
    runs.push({ ...run, eventsPerSecond: round(run.eventsPerSecond) })
    baselines.push({ ...base, eventsPerSecond: round(base.eventsPerSecond) })
  }
  const value = median(runs.map((r) => r.eventsPerSecond))
  // What an event costs on disk, for the sizing in docs/operations.md: the table with its indexes and TOAST, and
  // the Merkle nodes its checkpoints and proofs keep (none unless a checkpoint or proof was made).
  const [size] = await sql`SELECT (SELECT count(*) FROM events)::int8 AS events,
      pg_total_relation_size('events')::int8 AS events_bytes, pg_total_relation_size('merkle_nodes')::int8 AS merkle_bytes`
  const storage = {
    events: Number(size!.events),
    eventsBytes: Number(size!.events_bytes),
    merkleBytes: Number(size!.merkle_bytes),
    bytesPerEvent: round(
      (Number(size!.events_bytes) + Number(size!.merkle_bytes)) / Math.max(1, Number(size!.events)),
      0,
    ),
  }
  log(`storage: ${storage.events} events take ${storage.bytesPerEvent} bytes each (table, indexes, Merkle nodes)`)
  return benchmark({
    name: "verify",
    what: `POST /events/verify over a chain of ${runs[0]!.checked} events, after VACUUM (ANALYZE); median of ${VERIFY_RUNS} runs`,
    unit: "events/s",
    value,
    baseline: {
      what: "a floor, no target on the ratio: a plain script reading the same rows (keyset pages of 5,000 over postgres.js, data as text) and computing one SHA-256 per event, without JCS",
      value: median(baselines.map((r) => r.eventsPerSecond)),
    },
    targets: [target("events/s", "min", 200_000, value)],
    details: {
      storage,
      runs,
      baselineRuns: baselines,
      beforeAnalyze: {
        what: "one run right after the ingest, before VACUUM (ANALYZE): events has no planner statistics yet",
        ...unanalysed,
        eventsPerSecond: round(unanalysed.eventsPerSecond),
      },
    },
  })
}

const MiB = 2 ** 20

const sseBenchmark = async (server: BenchServer, sql: postgres.Sql, idleRssBytes: number | undefined) => {
  await checkpoint(sql)
  log(`SSE: ${SSE.subscribers} streams, then ${SSE.events} events, one every ${SSE.intervalMs} ms`)
  const r = await runSse(server, SSE)
  const mib = (bytes: number | undefined) => (bytes === undefined ? Number.NaN : round(bytes / MiB))
  const streamsMiB = mib(r.rssOpenBytes) - mib(r.rssBeforeBytes)
  log(
    `memory: server RSS ${mib(idleRssBytes)} MiB idle after start; ${mib(r.rssBeforeBytes)} MiB before the streams, ${mib(r.rssOpenBytes)} MiB with ${SSE.subscribers} open`,
  )
  return [
    benchmark({
      name: "sse",
      what: `GET /events/stream, ${SSE.subscribers} subscribers; ${SSE.events} events, one ingest call every ${SSE.intervalMs} ms; latency from before the ingest call to arrival on each stream`,
      unit: "ms (p99)",
      value: r.latencyMs.p99,
      targets: [
        target("delivery p99 (ms)", "max", 100, r.latencyMs.p99),
        target("share delivered", "min", 1, r.delivered / r.expected),
      ],
      details: { shape: SSE, ...r },
    }),
    benchmark({
      name: "memory",
      what: `RSS of the server child on PostgreSQL (VmRSS): idle right after start, and what ${SSE.subscribers} open SSE streams add (from before opening them, the first benchmark of the run, to all open and primed)`,
      unit: "MiB (idle)",
      value: mib(idleRssBytes),
      targets: [
        target("idle RSS MiB", "max", 120, mib(idleRssBytes)),
        target(`RSS MiB added by ${SSE.subscribers} streams`, "max", 50, streamsMiB),
      ],
      details: {
        idleRssMiB: mib(idleRssBytes),
        beforeStreamsRssMiB: mib(r.rssBeforeBytes),
        streamsOpenRssMiB: mib(r.rssOpenBytes),
        addedByStreamsMiB: round(streamsMiB),
      },
    }),
  ]
}

/** The code measured: the commit, and the files that differed from it. */
const revision = () => {
  const git = (...args: Array<string>) => execFileSync("git", args, { cwd: root, encoding: "utf8" }).trim()
  try {
    return {
      commit: git("rev-parse", "HEAD"),
      changed: git("status", "--porcelain", "--untracked-files=no")
        .split("\n")
        .filter((l) => l !== ""),
    }
  } catch {
    return undefined
  }
}

const machine = async (sql: postgres.Sql) => {
  const [pg] = await sql`SELECT version() AS version, current_setting('shared_buffers') AS shared_buffers,
      current_setting('synchronous_commit') AS synchronous_commit, current_setting('fsync') AS fsync`
  return {
    cpu: cpus()[0]?.model,
    cores: availableParallelism(),
    memoryGiB: round(totalmem() / 2 ** 30),
    os: `${platform()} ${release()}`,
    /** 1, 5 and 15 minute load averages when the run started: anything else running skews the numbers. */
    loadAverage: loadavg().map((x) => round(x, 2)),
    node: process.version,
    postgres: pg,
  }
}

/**
 * AGENTGOV_BENCH_STORE=embedded: the server on its embedded default (no DATABASE_URL, PostgreSQL in
 * its data directory), the bench reading that cluster through its socket; else a fresh database on
 * DATABASE_URL's server (or the machine's PostgreSQL), dropped at the end.
 */
const embedded = process.env.AGENTGOV_BENCH_STORE === "embedded"

const main = async () => {
  const date = new Date().toISOString()
  const code = revision()
  const admin = embedded ? undefined : postgres(adminUrl, { max: 1, onnotice: () => {} })
  const database = `agentgov_bench_${Date.now()}`
  await admin?.unsafe(`CREATE DATABASE ${database}`)
  const url = new URL(adminUrl)
  url.pathname = `/${database}`
  // 0755: as root the embedded cluster runs as the `postgres` user, which must enter it
  const dataDir = mkdtempSync(join(tmpdir(), "agentgov-bench-"))
  chmodSync(dataDir, 0o755)
  const databaseUrl = embedded
    ? `postgresql://postgres@localhost:5432/postgres?host=${encodeURIComponent(join(dataDir, "pg"))}`
    : url.href
  const cpuProfDir = process.env.AGENTGOV_BENCH_CPU_PROF === "1" ? join(root, "bench-results/profiles") : undefined
  if (cpuProfDir) mkdirSync(cpuProfDir, { recursive: true })
  log(`${embedded ? `embedded PostgreSQL in ${dataDir}` : `database ${database}`}; starting the server`)

  let server: BenchServer | undefined
  let sql: postgres.Sql | undefined
  const results: Array<BenchmarkResult> = []
  let info: Awaited<ReturnType<typeof machine>>
  let problems: Array<string> = []
  try {
    server = await startServer({ root, databaseUrl: embedded ? undefined : databaseUrl, dataDir, cpuProfDir })
    /** Another server on a fresh store: a database of its own beside the run's, or its own embedded cluster. */
    const fresh: FreshServer = async (tag, env) => {
      const dir = mkdtempSync(join(tmpdir(), `agentgov-bench-${tag}-`))
      chmodSync(dir, 0o755)
      const name = `${database}_${tag}`
      let url: string | undefined
      if (admin) {
        await admin.unsafe(`CREATE DATABASE ${name}`)
        const u = new URL(adminUrl)
        u.pathname = `/${name}`
        url = u.href
      }
      const drop = async () => {
        await admin?.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
        rmSync(dir, { recursive: true, force: true })
      }
      try {
        const child = await startServer({ root, databaseUrl: url, dataDir: dir, cpuProfDir, env })
        return {
          server: child,
          stop: async () => {
            problems.push(...child.problems.map((p) => `${tag}: ${p}`))
            await child.stop()
            await drop()
          },
        }
      } catch (e) {
        await drop()
        throw e
      }
    }
    problems = server.problems
    // Idle: started, migrated, nothing served yet but the bench's own connection.
    const idleRssBytes = processRssBytes(server.pid)
    const target = connectionOptions(databaseUrl)
    const db = postgres(target.url, {
      ...(target.host ? { host: target.host } : {}),
      max: INGEST.clients,
      onnotice: () => {},
      // int8 as number, as the server reads it.
      types: { bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) } },
    })
    sql = db
    const [workspace] = await db`SELECT id FROM workspaces WHERE name = 'default'`
    const workspaceId = workspace!.id as string
    info = await machine(db)
    const benchmarks = [
      // First: what 1,000 streams add is measured on a heap the other benchmarks have not grown yet.
      ["sse", () => sseBenchmark(server!, db, idleRssBytes)],
      ["ingest", () => ingestBenchmark(server!, db, workspaceId, databaseUrl, cpuProfDir)],
      ["verify", () => verifyBenchmark(server!, db, workspaceId)],
      ["auth", () => runAuthBenchmarks(root, databaseUrl, log)],
      ["guard-eval", () => runGuardEvalBenchmark()],
      ["guard", () => runGuardHttpBenchmark(server!, db, databaseUrl, log, cpuProfDir)],
      ["guard-fairness", () => runGuardFairnessBenchmark(server!, log)],
      ["embedded", () => runEmbeddedBenchmark(root, server!, log)],
      ["webhooks", () => runWebhookBenchmark(server!)],
      ["sdk", () => runSdkBenchmarks(server!, log)],
      ["trust-eval", () => runTrustEvalBenchmark()],
      ["trust-impact", () => runTrustImpactBenchmark(fresh, log)],
      ["badge", () => runBadgeBenchmark(server!, root, databaseUrl, log)],
      ["oauth-auth", () => runOAuthAuthBenchmark(root, databaseUrl, log)],
      ["metrics-on", () => runMetricsOnBenchmark(fresh, log)],
      ["connectors-latency", () => runConnectorLatencyBenchmark(root, server!, log)],
      ["connectors-memory", () => runConnectorMemoryBenchmark(root, server!, log)],
      ["paging", () => runPagingBenchmark(root, server!, log)],
      ["email-digest", () => runEmailDigestBenchmark(root, log)],
      ["mcp-overhead", () => runMcpOverheadBenchmark(root, log)],
      ["content-register", () => runContentRegisterBenchmark(server!, log)],
      ["content-image-scan", () => runContentImageScanBenchmark(server!, db, log)],
      ["content-text-scan", () => runContentTextScanBenchmark(server!, db, log)],
      ["dashboard", async () => runDashboardBenchmark(root)],
      // Last: it adds 1,000,000 events to the workspace the others share.
      ["compliance-report", () => runComplianceReportBenchmark(server!, db, log)],
      // After it, on its workspace of 1,000,000 events (the bootstrap workspace when it did not run): 10,000
      // agents are added, then the overview is loaded in Chromium.
      [
        "dashboard-paint",
        () => {
          const report = results.find((r) => r.name === "compliance-report" && r.error === undefined)
          const paintWorkspace = (report?.details.workspaceId as string | undefined) ?? workspaceId
          return runDashboardPaintBenchmark(server!, db, paintWorkspace, log)
        },
      ],
    ] as const
    for (const [name, run] of benchmarks) {
      if (!enabled(name)) continue
      try {
        results.push(...[await run()].flat())
      } catch (cause) {
        log(`${name} failed: ${cause instanceof Error ? cause.stack : cause}`)
        results.push(failed(name, "did not finish", cause))
      }
    }
  } finally {
    await sql?.end({ timeout: 5 })
    await server?.stop()
    if (process.env.AGENTGOV_BENCH_KEEP_DB) log(`kept database ${database}`)
    else await admin?.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await admin?.end({ timeout: 5 })
    rmSync(dataDir, { recursive: true, force: true })
  }

  writeReport(output, {
    suite: "agentgov",
    date,
    revision: code,
    machine: info,
    notes: [
      `Server: as npm start runs it (the bundle apps/server/dist/main.mjs, apps/server/start.mjs) as a child process on ${embedded ? "its embedded PostgreSQL (AGENTGOV_BENCH_STORE=embedded)" : "a fresh PostgreSQL database"}, LOG_LEVEL=info, background checkpoint signing off (AGENTGOV_CHECKPOINT_INTERVAL_MS=86400000) so that it does not land inside a timed window.`,
      "Load generator, server and PostgreSQL share this machine's cores. serverCpuMs/benchCpuMs: CPU time of the server child and of this process in each timed window.",
    ],
    pass: results.every((r) => r.pass),
    benchmarks: results,
    serverProblems: problems,
  })
  printSummary(results, output)
  if (problems.length > 0) log(`the server logged ${problems.length} warning(s) or error(s); see serverProblems`)
  if (cpuProfDir) log(`server CPU profile in ${cpuProfDir}`)
  if (!results.every((r) => r.pass)) process.exitCode = 1
}

await main()
