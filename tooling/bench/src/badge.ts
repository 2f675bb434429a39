import { CONCURRENCY, rateAndCpu, startAuthChild } from "./auth.ts"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"
import type { BenchServer } from "./server.ts"

/**
 * Issue 27: `GET /api/v1/badge/:agentId` (the SVG, public, answered from the trust module's badge cache) on the
 * server child as `npm start` runs it, for an agent holding a bronze badge, against the token-auth benchmark's
 * baseline route (authServer.ts's `GET /v1/ping` with no credential check, auth.ts): short windows, interleaved,
 * the order swapped every round, same load generator and connections; the headline is the median of the rounds'
 * ratios. `GET /healthz` on the same server is recorded as information (what that server answers for nothing),
 * and each side's CPU per request. Target: ≥ 0.6× the baseline.
 */

const ROUNDS = 10
const WINDOW_MS = 1_500

type Side = "open" | "badge" | "healthz"

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
    const window = (side: Side, ms = WINDOW_MS) =>
      side === "open"
        ? rateAndCpu(`http://127.0.0.1:${child.ports.open!}`, "/v1/ping", {}, ms, child.pid)
        : rateAndCpu(server.url, side === "badge" ? path : "/healthz", { accept: "image/svg+xml" }, ms, server.pid)
    for (const side of ["open", "badge", "healthz"] as const) await window(side, 3_000)
    const rounds: Array<Record<Side, Awaited<ReturnType<typeof window>>>> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const order: Array<Side> = r % 2 === 1 ? ["open", "badge", "healthz"] : ["healthz", "badge", "open"]
      const got: Partial<Record<Side, Awaited<ReturnType<typeof window>>>> = {}
      for (const side of order) got[side] = await window(side)
      const { open, badge, healthz } = got as Record<Side, Awaited<ReturnType<typeof window>>>
      log(
        `badge round ${r}: baseline ${round(open.perSecond, 0)} req/s (${open.cpuUsPerRequest ?? "?"} µs CPU each), badge SVG ${round(badge.perSecond, 0)} req/s (${badge.cpuUsPerRequest ?? "?"} µs), ${round(badge.perSecond / open.perSecond, 3)}×; /healthz ${round(healthz.perSecond, 0)} req/s (${healthz.cpuUsPerRequest ?? "?"} µs)`,
      )
      rounds.push({ open, badge, healthz })
    }
    const rate = (side: Side) => round(median(rounds.map((r) => r[side].perSecond)))
    const cpu = (side: Side) => {
      const xs = rounds.map((r) => r[side].cpuUsPerRequest).filter((x): x is number => x !== undefined)
      return xs.length === 0 ? undefined : round(median(xs), 1)
    }
    const ratios = rounds.map((r) => round(r.badge.perSecond / r.open.perSecond, 3))
    const ratio = median(ratios)
    const baseline = rate("open")
    return benchmark({
      name: "badge",
      what: `GET /api/v1/badge/:agentId (SVG, public, no credential) on the server child for an agent holding a bronze badge, ${CONCURRENCY} keep-alive connections; ${ROUNDS} rounds of ${WINDOW_MS} ms windows interleaved with the baseline, the value the baseline's median times the median of the rounds' ratios`,
      unit: "requests/s",
      value: baseline * ratio,
      baseline: {
        what: "the token-auth benchmark's baseline: GET /v1/ping through the REST facade with no credential check (authServer.ts's open port, child process), same load generator and connections, median of the rounds",
        value: baseline,
      },
      targets: [
        target("ratio to the unauthenticated baseline route (median of the rounds' ratios)", "min", 0.6, ratio),
      ],
      details: {
        svg: sample,
        medians: { open: baseline, badge: rate("badge"), healthz: rate("healthz") },
        ratios,
        serverCpuUsPerRequest: {
          what: "CPU µs the serving process spent per request (median of the rounds): the server child for the badge and /healthz, authServer.ts's child for the baseline",
          open: cpu("open"),
          badge: cpu("badge"),
          healthz: cpu("healthz"),
        },
        healthz: {
          what: "GET /healthz on the same server in the same rounds: the server's floor per request; informational",
          ratio: median(rounds.map((r) => round(r.badge.perSecond / r.healthz.perSecond, 3))),
        },
        rounds,
      },
    })
  } finally {
    await child.stop()
  }
}
