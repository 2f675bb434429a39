import { loadavg } from "node:os"
import { drive, requestBytes } from "./load.ts"
import { type BenchmarkResult, benchmark, round, summarise, target } from "./report.ts"
import { type BenchServer, jsonClient } from "./server.ts"

/**
 * Fairness of the guard between tenants (issue 24, finding 2): workspace A hammers, over
 * CONNECTIONS keep-alive connections, the costliest policy set the save check lets it hold (as
 * many rules of nested comprehensions over literal lists as fit the evaluation budget on one
 * action: every call does that work whatever its context), while workspace B, with one trivial
 * rule, makes guard calls one after another. Target: B's p99 under 50 ms.
 */

const CONNECTIONS = 50
const ROUND_MS = 5_000
/** A's load starts this much before B's calls and ends this much after them. */
const MARGIN_MS = 500
const range = (n: number) => `[${Array.from({ length: n }, (_, i) => i + 1).join(",")}]`
/** The review's shape: 12³ inner steps, under one expression's own limit. */
const NESTED = `${range(12)}.all(x, ${range(12)}.all(y, ${range(12)}.all(z, x + y + z > 0)))`

const expectStatus = (res: { status: number; body: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data
}

/** A workspace, an agent in it, and the guard request bytes of that agent with an SDK token. */
const tenant = async (server: BenchServer, name: string) => {
  const ws = expectStatus(
    await server.call("POST", "/api/v1/workspaces", {
      name: `${name}-${Date.now()}`,
      environment: "test",
      plan: "enterprise",
    }),
    201,
    `creating workspace ${name}`,
  )
  const api = jsonClient(server.url, ws.apiKey.apiKey as string, 4)
  const agentId = expectStatus(await api.call("POST", "/api/v1/agents", { name }), 201, "registering the agent").id
  const token = expectStatus(await api.call("POST", "/api/v1/tokens"), 201, "getting a token").token as string
  const guard = (action: string, context: Record<string, unknown>) =>
    requestBytes(
      server.url,
      "/v1/guard",
      { authorization: `Bearer ${token}` },
      JSON.stringify({ agentId, action, context }),
    )
  return { api, guard }
}

export const runGuardFairnessBenchmark = async (
  server: BenchServer,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const a = await tenant(server, "bench-fair-a")
  const b = await tenant(server, "bench-fair-b")
  try {
    // A: one rule per policy, added until the save check refuses the next.
    let rules = 0
    for (;;) {
      const res = await a.api.call("POST", "/api/v1/policies", {
        name: `costly-${rules}`,
        rules: [{ id: "nested", effect: "deny", actions: ["costly.*"], when: { cel: NESTED } }],
      })
      if (res.status === 422) break
      expectStatus(res, 201, "saving A's policy")
      rules++
      if (rules > 1_000) throw new Error("the save check accepted 1,000 costly rules on one action")
    }
    if (rules === 0) throw new Error("the save check refused even one costly rule")
    expectStatus(
      await b.api.call("POST", "/api/v1/policies", {
        name: "trivial",
        rules: [{ id: "no-delete", effect: "deny", actions: ["files.delete"] }],
      }),
      201,
      "saving B's policy",
    )
    const aRequest = a.guard("costly.call", { amount: 1 })
    const bRequests = [b.guard("files.read", { path: "/a" }), b.guard("files.delete", { path: "/a" })]
    log(`guard fairness: A holds ${rules} rule(s) of nested comprehensions on costly.*; warm-up`)
    await drive(server.url, 4, 1_000, () => aRequest)
    await drive(server.url, 1, 1_000, (i) => bRequests[i % 2]!)
    const alone = await drive(server.url, 1, 2_000, (i) => bRequests[i % 2]!)
    const loadAverage = loadavg().map((x) => round(x, 2))
    const hammer = drive(server.url, CONNECTIONS, ROUND_MS + 2 * MARGIN_MS, () => aRequest)
    await new Promise((resolve) => setTimeout(resolve, MARGIN_MS))
    const measured = await drive(server.url, 1, ROUND_MS, (i) => bRequests[i % 2]!)
    const hammered = await hammer
    const bLatency = summarise(measured.latenciesMs)
    const aLatency = summarise(hammered.latenciesMs)
    const aloneLatency = summarise(alone.latenciesMs)
    log(
      `guard fairness: B p50 ${bLatency.p50} ms, p99 ${bLatency.p99} ms (${bLatency.count} calls; alone p99 ${aloneLatency.p99} ms); ` +
        `A ${round(hammered.requests / hammered.seconds, 0)} req/s, p99 ${aLatency.p99} ms; load average ${loadAverage.join(" ")}`,
    )
    return benchmark({
      name: "guard-fairness",
      what:
        `workspace B's sequential POST /v1/guard calls (one trivial rule) while workspace A keeps ${CONNECTIONS} ` +
        `connections on its costliest accepted set (${rules} nested-comprehension rule(s) on one action); ${ROUND_MS} ms`,
      unit: "ms (B's p99)",
      value: bLatency.p99,
      targets: [target("B's p99 latency (ms)", "max", 50, bLatency.p99)],
      details: {
        rules,
        loadAverageAtStart: loadAverage,
        b: bLatency,
        bAlone: aloneLatency,
        a: { ...aLatency, requestsPerSecond: round(hammered.requests / hammered.seconds) },
      },
    })
  } finally {
    a.api.close()
    b.api.close()
  }
}
