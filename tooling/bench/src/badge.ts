import { CONCURRENCY, startAuthChild, THROUGHPUT_MS, throughput } from "./auth.ts"
import { drive, requestBytes } from "./load.ts"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"
import type { BenchServer } from "./server.ts"

/**
 * Issue 27: `GET /api/v1/badge/:agentId` (the SVG, public, answered from the trust module's badge cache) on the
 * server child as `npm start` runs it, for an agent holding a bronze badge, against the token-auth benchmark's
 * baseline route (authServer.ts's `GET /v1/ping` with no credential check, auth.ts), rounds interleaved, the order
 * swapped every round, same load generator and connections. `GET /healthz` on the same server is recorded as
 * information: what that server answers for nothing. Target: ≥ 0.6× the baseline.
 */

const ROUNDS = 5

/** An agent of the server's workspace with a bronze badge: 400 at registration, +150 by an operator adjustment. */
const badgeHolder = async (server: BenchServer) => {
  const agent = await server.call("POST", "/api/v1/agents", { name: `bench-badge-${Date.now()}` })
  if (agent.status !== 201) throw new Error(`agent: ${agent.status} ${JSON.stringify(agent.body)}`)
  const id = agent.body.data.id as string
  const adjusted = await server.call("POST", `/api/v1/trust/score/${id}/adjustments`, {
    delta: 150,
    reason: "benchmark",
  })
  if (adjusted.status !== 201) throw new Error(`adjustment: ${adjusted.status} ${JSON.stringify(adjusted.body)}`)
  // The trust worker announces the new tier; the badge exists from then on.
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const res = await fetch(`${server.url}/api/v1/badge/${id}?format=json`)
    const body = (await res.json()) as { data?: { tier?: string } }
    if (res.status === 200) {
      if (body.data?.tier !== "bronze") throw new Error(`badge of tier ${body.data?.tier}, expected bronze`)
      return id
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error("the agent never earned its badge (is the trust worker on?)")
}

export const runBadgeBenchmark = async (
  server: BenchServer,
  root: string,
  databaseUrl: string,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const agentId = await badgeHolder(server)
  const path = `/api/v1/badge/${agentId}`
  const svg = await fetch(`${server.url}${path}`, { headers: { accept: "image/svg+xml" } })
  const svgBody = await svg.text()
  if (svg.status !== 200 || !svg.headers.get("content-type")?.startsWith("image/svg+xml") || !svgBody.includes("<svg"))
    throw new Error(`the badge is not an SVG: ${svg.status} ${svg.headers.get("content-type")}`)
  const sample = { bytes: Buffer.byteLength(svgBody), cacheControl: svg.headers.get("cache-control") }

  const child = await startAuthChild(root, databaseUrl)
  try {
    const badgeRequest = requestBytes(server.url, path, { accept: "image/svg+xml" })
    const healthRequest = requestBytes(server.url, "/healthz", {})
    const rate = async (request: Buffer) => {
      const load = await drive(server.url, CONCURRENCY, THROUGHPUT_MS, () => request)
      return load.requests / load.seconds
    }
    const open = () => throughput(child.ports.open!, undefined)
    await open()
    await rate(badgeRequest)
    await rate(healthRequest)
    const rounds: Array<{ open: number; badge: number; healthz: number }> = []
    for (let r = 1; r <= ROUNDS; r++) {
      let base = 0
      let badge = 0
      if (r % 2 === 1) {
        base = await open()
        badge = await rate(badgeRequest)
      } else {
        badge = await rate(badgeRequest)
        base = await open()
      }
      const healthz = await rate(healthRequest)
      log(
        `badge round ${r}: baseline ${round(base, 0)} req/s, badge SVG ${round(badge, 0)} req/s (${round(badge / base, 3)}×); /healthz ${round(healthz, 0)} req/s`,
      )
      rounds.push({ open: round(base), badge: round(badge), healthz: round(healthz) })
    }
    const value = median(rounds.map((r) => r.badge))
    const baseline = median(rounds.map((r) => r.open))
    return benchmark({
      name: "badge",
      what: `GET /api/v1/badge/:agentId (SVG, public, no credential) on the server child for an agent holding a bronze badge, ${CONCURRENCY} keep-alive connections, ${THROUGHPUT_MS} ms per round; median of ${ROUNDS} interleaved rounds`,
      unit: "requests/s",
      value,
      baseline: {
        what: "the token-auth benchmark's baseline: GET /v1/ping through the REST facade with no credential check (authServer.ts's open port, child process), same load generator and connections",
        value: round(baseline),
      },
      targets: [target("ratio to the unauthenticated baseline route", "min", 0.6, value / baseline)],
      details: {
        svg: sample,
        rounds,
        ratios: rounds.map((r) => round(r.badge / r.open, 3)),
        healthz: {
          what: "GET /healthz on the same server in the same rounds: the server's floor per request; informational",
          requestsPerSecond: median(rounds.map((r) => r.healthz)),
          ratio: round(value / median(rounds.map((r) => r.healthz)), 3),
        },
      },
    })
  } finally {
    child.stop()
  }
}
