import { AgentGov, type FetchLike } from "../../../packages/sdk/src/index.ts"
import { type BenchmarkResult, benchmark, median, round, summarise, target } from "./report.ts"
import type { BenchServer } from "./server.ts"

/**
 * The SDK benchmarks of issue 7 (imported from the SDK's source, which is what `dist` is built from):
 *
 * - `sdk-guard`: `agent.guard()` against the bare `fetch` call it makes (same server, same SDK
 *   token, same headers including an Idempotency-Key, same body, the answer read and parsed),
 *   sequential calls, interleaved call by call so that load from elsewhere hits both alike.
 *   Target: the SDK's median latency (and total time) ≤ 1.1× the bare call's.
 * - `sdk-track`: `agent.track()` enqueue rate in-process, the flush target a no-op `fetch` so
 *   that only the enqueue is measured. Target ≥ 1,000,000 events/s.
 */

const GUARD_ROUNDS = 5
const GUARD_CALLS = 1_000
const GUARD_WARMUP = 500
const TRACK_EVENTS = 1_000_000
const TRACK_ROUNDS = 5

const ACTION = "bench.report.read"
const CONTEXT = { report: "q3", rows: 120 }

/** Per-call latencies in ms of `n` sequential calls. */
const timed = async (n: number, call: () => Promise<unknown>): Promise<Array<number>> => {
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await call()
    out.push(performance.now() - t0)
  }
  return out
}

const guardBenchmark = async (server: Pick<BenchServer, "url" | "key">, log: (line: string) => void) => {
  const admin = new AgentGov({ apiKey: server.key, baseUrl: server.url })
  const bot = await admin.agents.create({ name: `bench-sdk-${Date.now()}` })
  await admin.policies.create({
    name: `bench-sdk-${Date.now()}`,
    rules: [{ id: "no-delete", effect: "deny", actions: ["bench.*.delete"] }],
  })

  // The SDK's own token, read off its first request, is the one the bare calls send too.
  let token: string | undefined
  const capture: FetchLike = (input, init) => {
    if (token === undefined && String(input).endsWith("/v1/guard")) {
      token = (init?.headers as Record<string, string> | undefined)?.authorization?.slice("Bearer ".length)
    }
    return globalThis.fetch(input, init)
  }
  const client = new AgentGov({ apiKey: server.key, baseUrl: server.url, fetch: capture })
  const agent = client.agent({ agentId: bot.id })
  const sdk = async () => {
    const d = await agent.guard(ACTION, CONTEXT)
    if (!d.allowed) throw new Error(`guard answered ${d.decision}`)
  }
  const url = `${server.url}/v1/guard`
  const body = { action: ACTION, context: CONTEXT, agentId: bot.id }
  const bare = (idempotent: boolean) => async () => {
    const res = await fetch(url, {
      method: "POST",
      headers: {
        accept: "application/json",
        "content-type": "application/json",
        ...(idempotent ? { "idempotency-key": crypto.randomUUID() } : {}),
        authorization: `Bearer ${token}`,
      },
      body: JSON.stringify(body),
    })
    const parsed = JSON.parse(await res.text())
    if (!parsed.data.allowed) throw new Error(`guard answered ${res.status}`)
  }

  log(`sdk guard: warm-up (${GUARD_WARMUP} calls each)`)
  await timed(GUARD_WARMUP, sdk)
  await timed(GUARD_WARMUP, bare(true))
  await timed(GUARD_WARMUP, bare(false))
  const sdkAll: Array<number> = []
  const bareAll: Array<number> = []
  const noKeyAll: Array<number> = []
  const rounds = []
  const once = async (call: () => Promise<unknown>, into: Array<number>, sink: Array<number>) => {
    const t0 = performance.now()
    await call()
    const ms = performance.now() - t0
    into.push(ms)
    sink.push(ms)
  }
  const withKey = bare(true)
  const withoutKey = bare(false)
  for (let r = 1; r <= GUARD_ROUNDS; r++) {
    const s: Array<number> = []
    const b: Array<number> = []
    const k: Array<number> = []
    // Call by call, in rotating order, so that whatever else loads the machine weighs on all three alike.
    for (let i = 0; i < GUARD_CALLS; i++) {
      const order = [() => once(sdk, s, sdkAll), () => once(withKey, b, bareAll), () => once(withoutKey, k, noKeyAll)]
      for (let j = 0; j < 3; j++) await order[(i + j) % 3]!()
    }
    const row = {
      sdkMedianMs: round(median(s), 3),
      fetchMedianMs: round(median(b), 3),
      fetchWithoutKeyMedianMs: round(median(k), 3),
      sdkTotalMs: round(s.reduce((a, x) => a + x, 0)),
      fetchTotalMs: round(b.reduce((a, x) => a + x, 0)),
    }
    log(
      `sdk guard round ${r}: SDK median ${row.sdkMedianMs} ms, bare fetch ${row.fetchMedianMs} ms (without Idempotency-Key ${row.fetchWithoutKeyMedianMs} ms)`,
    )
    rounds.push(row)
  }
  await agent.shutdown()
  const value = median(sdkAll)
  const baseline = median(bareAll)
  const totalRatio = sdkAll.reduce((a, x) => a + x, 0) / bareAll.reduce((a, x) => a + x, 0)
  const ms = (xs: Array<number>) => {
    const s = summarise(xs.map((x) => x * 1000))
    return { count: s.count, p50Us: s.p50, p90Us: s.p90, p99Us: s.p99, maxUs: s.max }
  }
  return benchmark({
    name: "sdk-guard",
    what: `agent.guard() (SDK token, Idempotency-Key, decision parsed), ${GUARD_CALLS} sequential calls per round interleaved call by call with the baseline, ${GUARD_ROUNDS} rounds; median latency`,
    unit: "ms",
    value: round(value, 3),
    baseline: {
      what: "the bare fetch the SDK makes: same URL, token, headers (fresh Idempotency-Key) and body, answer read and JSON-parsed",
      value: round(baseline, 3),
    },
    targets: [
      target("ratio of medians", "max", 1.1, value / baseline),
      target("ratio of totals", "max", 1.1, totalRatio),
    ],
    details: {
      rounds,
      sdk: ms(sdkAll),
      fetch: ms(bareAll),
      fetchWithoutIdempotencyKey: {
        what: "informational: the same bare call without an Idempotency-Key (the server then stores no replay record)",
        ...ms(noKeyAll),
      },
      totalRatio: round(totalRatio, 3),
    },
  })
}

/** A `fetch` that answers every request at once, as the service would: only the SDK's own work remains. */
const noopFetch = (): FetchLike => {
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url")
  const now = Math.floor(Date.now() / 1000)
  const token = `${b64({ alg: "EdDSA" })}.${b64({ iat: now, exp: now + 900 })}.sig`
  const tokenBody = JSON.stringify({ ok: true, data: { token, expiresAt: new Date((now + 900) * 1000).toISOString() } })
  // One entry per event sent, as the service's IngestResult: the SDK counts a batch stored only then.
  const ingestBody = (body: unknown) => {
    const sent = (JSON.parse(String(body)) as { events: Array<unknown> }).events.length
    const timestamp = new Date().toISOString()
    const events = Array.from({ length: sent }, (_, i) => ({
      id: `evt_${i}`,
      sequence: i + 1,
      hash: "0".repeat(64),
      timestamp,
    }))
    return JSON.stringify({ ok: true, data: { events } })
  }
  return async (input, init) =>
    new Response(String(input).endsWith("/tokens") ? tokenBody : ingestBody(init?.body), {
      status: 201,
      headers: { "content-type": "application/json" },
    })
}

const trackBenchmark = async (log: (line: string) => void) => {
  const rates: Array<number> = []
  for (let r = 0; r <= TRACK_ROUNDS; r++) {
    const client = new AgentGov({ apiKey: "svc_ws_live_bench", baseUrl: "http://bench.invalid", fetch: noopFetch() })
    const agent = client.agent({
      agentId: "agt_bench",
      maxQueueSize: TRACK_EVENTS * 2,
      // All of them held at once (the default bound, 64 MiB, is below a million events' bytes): enqueueing is timed.
      maxQueueBytes: 1024 * 1024 * 1024,
      flushIntervalMs: 3_600_000,
    })
    const t0 = performance.now()
    for (let i = 0; i < TRACK_EVENTS; i++) agent.track({ type: "bench.tool.called", data: { i } })
    const ms = performance.now() - t0
    const stats = await agent.shutdown()
    if (stats.sent + stats.dropped !== TRACK_EVENTS || stats.dropped !== 0) {
      throw new Error(`track lost events: ${JSON.stringify(stats)}`)
    }
    // Round 0 warms the JIT up; it is not counted.
    if (r === 0) continue
    const rate = TRACK_EVENTS / (ms / 1000)
    log(`sdk track round ${r}: ${round(rate, 0)} events/s enqueued`)
    rates.push(rate)
  }
  const value = median(rates)
  return benchmark({
    name: "sdk-track",
    what: `agent.track({type, data: {i}}) of ${TRACK_EVENTS} events in a loop, in-process, flushing to a no-op fetch after the timed loop; median of ${TRACK_ROUNDS} rounds`,
    unit: "events/s",
    value: round(value),
    targets: [target("events/s enqueued", "min", 1_000_000, value)],
    details: { rates: rates.map((x) => round(x)) },
  })
}

/** Both SDK benchmarks against a running server (`url`, bootstrap `key`). */
export async function runSdkBenchmarks(
  server: Pick<BenchServer, "url" | "key">,
  log: (line: string) => void = (line) => process.stdout.write(`bench: ${line}\n`),
): Promise<BenchmarkResult[]> {
  const guard = await guardBenchmark(server, log)
  const track = await trackBenchmark(log)
  return [guard, track]
}
