import { loadavg } from "node:os"
import type postgres from "postgres"
import { type BenchmarkResult, benchmark, round, target } from "./report.ts"
import { type BenchServer, jsonClient, postgresCpuMs, processRssBytes } from "./server.ts"

/**
 * A compliance report (issue 30) over 1,000,000 events of one workspace: from `POST /compliance/reports` to
 * the report `ready`, and how much the server's RSS grows while the worker builds it.
 *
 * The workspace's history is real and chained (the report verifies the chain): its governance activity goes
 * through the API (guard decisions of four agents under an enforcing policy, approvals required and decided
 * by a person, warnings issued and resolved, API keys created, rotated and revoked, policies and agent
 * versions saved), spread through the bulk, which is the agents' own activity ingested as 100-event calls
 * from eight clients.
 */

const EVENTS = 1_000_000
const INGEST_CLIENTS = 8
const BATCH = 100
const AGENTS = 4
/** Guard decisions: reads allowed, deletes denied, one in twenty a deploy that needs approval. */
const DECISIONS = 10_000
const GUARD_CLIENTS = 16
const WARNINGS = 40
const KEY_CHANGES = 20
const FRAMEWORK = "soc2"
const RSS_SAMPLE_MS = 20

const expectStatus = (res: { status: number; body: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body).slice(0, 500)}`)
  return res.body.data
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** `total` tasks run by `workers` concurrent loops. */
const pool = async (total: number, workers: number, task: (i: number) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = next++; i < total; i = next++) await task(i)
    }),
  )
}

export const runComplianceReportBenchmark = async (
  server: BenchServer,
  sql: postgres.Sql,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const from = new Date(Date.now() - 1000).toISOString()
  const made = expectStatus(
    await server.call("POST", "/api/v1/workspaces", {
      name: `bench-compliance-${Date.now()}`,
      environment: "test",
      plan: "enterprise",
      guardDefault: "deny",
    }),
    201,
    "creating the workspace",
  )
  const workspaceId = made.workspace.id as string
  const api = jsonClient(server.url, made.apiKey.apiKey as string, Math.max(INGEST_CLIENTS, GUARD_CLIENTS))
  const call = async (method: string, path: string, body: unknown, status: number) =>
    expectStatus(await api.call(method, path, body), status, `${method} ${path}`)

  const seedStart = performance.now()
  const policy = await call(
    "POST",
    "/api/v1/policies",
    {
      name: "production",
      rules: [
        { id: "reads", effect: "allow", actions: ["read.*"] },
        { id: "no-deletes", effect: "deny", actions: ["delete.*"] },
        { id: "human", effect: "require_approval", actions: ["deploy.prod"] },
      ],
    },
    201,
  )
  const agents: Array<{ id: string; guard: ReturnType<typeof jsonClient> }> = []
  for (let a = 0; a < AGENTS; a++) {
    const agent = await call("POST", "/api/v1/agents", { name: `agent ${a}` }, 201)
    const key = await call(
      "POST",
      "/api/v1/api-keys",
      {
        name: `agent ${a}`,
        type: "agent",
        agentId: agent.id,
        scopes: ["guard:evaluate"],
        expiresAt: new Date(Date.now() + 30 * 86_400_000).toISOString(),
      },
      201,
    )
    agents.push({ id: agent.id, guard: jsonClient(server.url, key.apiKey as string, GUARD_CLIENTS) })
  }

  // The governance activity, in slices between slices of the bulk ingest.
  const governance = async (slice: number, slices: number) => {
    const share = (n: number) => Math.floor((n * (slice + 1)) / slices) - Math.floor((n * slice) / slices)
    const base = Math.floor((DECISIONS * slice) / slices)
    const approvals: Array<string> = []
    await pool(share(DECISIONS), GUARD_CLIENTS, async (i) => {
      const n = base + i
      const agent = agents[n % AGENTS]!
      const action = n % 20 === 0 ? "deploy.prod" : n % 7 === 0 ? "delete.db" : "read.file"
      const decided = expectStatus(
        await agent.guard.call("POST", "/v1/guard", { agentId: agent.id, action, context: { n } }),
        200,
        "guard",
      )
      if (decided.decision === "require_approval") approvals.push(decided.approvalId)
    })
    for (const [i, approvalId] of approvals.entries()) {
      await call(
        "POST",
        `/api/v1/approvals/${approvalId}/decide`,
        { decision: i % 4 === 3 ? "denied" : "approved", reason: "reviewed by the on-call engineer" },
        200,
      )
    }
    for (let i = 0; i < share(WARNINGS); i++) {
      const warning = await call(
        "POST",
        "/api/v1/enforcement",
        { agentId: agents[i % AGENTS]!.id, type: "warning", reason: "tried to delete the database" },
        201,
      )
      await call("PATCH", `/api/v1/enforcement/${warning.id}`, { resolution: "upheld" }, 200)
    }
    for (let i = 0; i < share(KEY_CHANGES); i++) {
      const key = await call(
        "POST",
        "/api/v1/api-keys",
        {
          name: `service key ${slice}.${i}`,
          type: "workspace",
          scopes: ["events:read"],
          expiresAt: new Date(Date.now() + 90 * 86_400_000).toISOString(),
        },
        201,
      )
      if (i % 2 === 0) await call("POST", `/api/v1/api-keys/${key.id}/rotate`, { overlapSeconds: 0 }, 201)
      else await call("DELETE", `/api/v1/api-keys/${key.id}`, undefined, 200)
    }
    await call("POST", `/api/v1/agents/${agents[slice % AGENTS]!.id}/versions`, { version: `1.${slice}.0` }, 201)
    await call("PATCH", `/api/v1/policies/${policy.id}`, { description: `reviewed, slice ${slice}` }, 200)
  }

  const head = async () =>
    Number((await sql`SELECT sequence FROM chain_heads WHERE workspace_id = ${workspaceId}`)[0]?.sequence ?? 0)
  const ingest = async (events: number, tag: string) => {
    const calls = Math.ceil(events / BATCH)
    await pool(calls, INGEST_CLIENTS, async (c) => {
      const size = Math.min(BATCH, events - c * BATCH)
      await call(
        "POST",
        "/api/v1/events/ingest",
        {
          events: Array.from({ length: size }, (_, i) => ({
            type: "app.tool.called",
            agentId: agents[(c + i) % AGENTS]!.id,
            data: { run: tag, call: c, i, tool: "search", input: { query: "quarterly revenue by region" }, ok: true },
          })),
        },
        201,
      )
    })
  }

  const SLICES = 5
  for (let slice = 0; slice < SLICES; slice++) {
    await governance(slice, SLICES)
    const have = await head()
    const left = EVENTS - have
    if (left > 0) await ingest(Math.ceil(left / (SLICES - slice)), `slice${slice}`)
    log(`compliance-report: ${await head()} events after slice ${slice + 1}/${SLICES}`)
  }
  const seeded = await head()
  const seedSeconds = (performance.now() - seedStart) / 1000
  log(`compliance-report: ${seeded} events seeded in ${round(seedSeconds)} s`)
  await sleep(5)
  const to = new Date().toISOString()
  await sleep(5)

  // RSS of the server while the report builds: sampled from before the request to ready.
  const before = processRssBytes(server.pid)
  let peak = before ?? 0
  const sampler = setInterval(() => {
    peak = Math.max(peak, processRssBytes(server.pid) ?? 0)
  }, RSS_SAMPLE_MS)
  // CPU time of the server and of PostgreSQL (every postgres process: the machine's other work included) in
  // the window: on a shared machine the wall time says as much about the load as about the report.
  const cpuBefore = { server: server.cpuMs(), postgres: postgresCpuMs() }
  const start = performance.now()
  let report: any
  try {
    const requested = await call("POST", "/api/v1/compliance/reports", { framework: FRAMEWORK, from, to }, 202)
    for (;;) {
      await sleep(100)
      report = await call("GET", `/api/v1/compliance/reports/${requested.id}`, undefined, 200)
      if (report.status !== "generating") break
      if (performance.now() - start > 300_000) throw new Error("the report was not ready within 5 minutes")
    }
  } finally {
    clearInterval(sampler)
  }
  const seconds = (performance.now() - start) / 1000
  const cpuSeconds = (after: number | undefined, before: number | undefined) =>
    after === undefined || before === undefined ? null : round((after - before) / 1000, 2)
  const serverCpuSeconds = cpuSeconds(server.cpuMs(), cpuBefore.server)
  const postgresCpuSeconds = cpuSeconds(postgresCpuMs(), cpuBefore.postgres)
  if (report.status !== "ready") throw new Error(`the report ${report.status}: ${report.error}`)
  const doc = report.report
  const growthMiB = before === undefined ? Number.NaN : (peak - before) / 2 ** 20
  const controls = Object.fromEntries(doc.controls.map((c: any) => [c.id, c.status]))
  log(
    `compliance-report: ready in ${round(seconds)} s over ${doc.counted.count} events (chain ${doc.chain.valid ? "valid" : "INVALID"}); RSS +${round(growthMiB)} MiB; CPU: server ${serverCpuSeconds} s, postgres ${postgresCpuSeconds} s; ${doc.summary.result}`,
  )
  if (!doc.chain.valid) throw new Error(`the chain did not verify: ${JSON.stringify(doc.chain)}`)
  return benchmark({
    name: "compliance-report",
    what: `POST /compliance/reports (${FRAMEWORK}, the workspace) over ${doc.counted.count.toLocaleString("en")} chained events of one workspace, to status ready (the worker verifies the chain, counts, judges, signs); server RSS (VmRSS every ${RSS_SAMPLE_MS} ms) from before the request to ready; CPU seconds of the server and of every postgres process in that window (details)`,
    unit: "s",
    value: round(seconds, 2),
    targets: [
      target("seconds to ready", "max", 30, seconds),
      target("server RSS growth (MiB)", "max", 150, growthMiB),
      target("events counted", "min", EVENTS, doc.counted.count),
    ],
    details: {
      workspaceId,
      seededEvents: seeded,
      seedSeconds: round(seedSeconds),
      rssBeforeMiB: before === undefined ? null : round(before / 2 ** 20),
      rssPeakMiB: round(peak / 2 ** 20),
      rssGrowthMiB: round(growthMiB),
      serverCpuSeconds,
      postgresCpuSeconds,
      loadAverage: loadavg().map((x) => round(x, 2)),
      metrics: doc.metrics,
      summary: doc.summary,
      controls,
    },
  })
}
