import { CONCURRENCY, rateAndCpu, startAuthChild } from "./auth.ts"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"

/**
 * Issue 32: `GET /v1/ping` through the REST facade authenticated by an OAuth access token (`svc_oauth_at_…`,
 * from authServer.ts's code flow with PKCE) against the token-auth benchmark's baseline, the same route and
 * facade with no credential check, in the same child (auth.ts): short windows, interleaved, the order swapped
 * every round, so that a neighbour's burst on the shared machine falls on both sides alike; the headline is the
 * median of the rounds' ratios. The SDK token on the same route, and the child's CPU per request on each side,
 * are recorded beside it. Target: ≥ 0.6× the baseline.
 */

const ROUNDS = 10
const WINDOW_MS = 1_500

type Side = "open" | "oauth" | "sdkToken"

export const runOAuthAuthBenchmark = async (
  root: string,
  databaseUrl: string,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const child = await startAuthChild(root, databaseUrl)
  try {
    const { ports, token, oauthToken, pid } = child
    const url = (side: Side) => `http://127.0.0.1:${side === "open" ? ports.open! : ports.token!}`
    const bearer: Record<Side, string | undefined> = { open: undefined, oauth: oauthToken, sdkToken: token }
    const window = (side: Side, ms = WINDOW_MS) =>
      rateAndCpu(url(side), "/v1/ping", bearer[side] ? { authorization: `Bearer ${bearer[side]}` } : {}, ms, pid)
    // Warm-up: the first read of the grant, and the JIT, settle here.
    for (const side of ["open", "oauth", "sdkToken"] as const) await window(side, 3_000)
    const rounds: Array<Record<Side, Awaited<ReturnType<typeof window>>>> = []
    for (let r = 1; r <= ROUNDS; r++) {
      const order: Array<Side> = r % 2 === 1 ? ["open", "oauth", "sdkToken"] : ["sdkToken", "oauth", "open"]
      const got: Partial<Record<Side, Awaited<ReturnType<typeof window>>>> = {}
      for (const side of order) got[side] = await window(side)
      const { open, oauth, sdkToken } = got as Record<Side, Awaited<ReturnType<typeof window>>>
      log(
        `oauth-auth round ${r}: open ${round(open.perSecond, 0)} req/s (${open.cpuUsPerRequest ?? "?"} µs CPU each), OAuth access token ${round(oauth.perSecond, 0)} req/s (${oauth.cpuUsPerRequest ?? "?"} µs), ${round(oauth.perSecond / open.perSecond, 3)}×; SDK token ${round(sdkToken.perSecond, 0)} req/s`,
      )
      rounds.push({ open, oauth, sdkToken })
    }
    const rate = (side: Side) => round(median(rounds.map((r) => r[side].perSecond)))
    const cpu = (side: Side) => {
      const xs = rounds.map((r) => r[side].cpuUsPerRequest).filter((x): x is number => x !== undefined)
      return xs.length === 0 ? undefined : round(median(xs), 1)
    }
    const ratios = rounds.map((r) => round(r.oauth.perSecond / r.open.perSecond, 3))
    const ratio = median(ratios)
    const baseline = rate("open")
    return benchmark({
      name: "oauth-auth",
      what: `GET /v1/ping through the REST facade authenticated by an OAuth access token (svc_oauth_at_…, scope agents:read, in-process rate limits), ${CONCURRENCY} keep-alive connections; ${ROUNDS} rounds of ${WINDOW_MS} ms windows interleaved with the baseline, the value the baseline's median times the median of the rounds' ratios`,
      unit: "requests/s",
      value: baseline * ratio,
      baseline: {
        what: "the token-auth benchmark's baseline: the same route and facade with no credential check (authServer.ts's open port), same child and load generator, median of the rounds",
        value: baseline,
      },
      targets: [target("ratio to no authentication (median of the rounds' ratios)", "min", 0.6, ratio)],
      details: {
        medians: { open: baseline, oauth: rate("oauth"), sdkToken: rate("sdkToken") },
        ratios,
        serverCpuUsPerRequest: {
          what: "CPU µs the child spent per request (median of the rounds): what each credential costs, steadier than the rate on a shared machine",
          open: cpu("open"),
          oauth: cpu("oauth"),
          sdkToken: cpu("sdkToken"),
        },
        sdkToken: {
          what: "the same route with a cached SDK token (what token-auth measures), in the same rounds; informational",
          ratio: median(rounds.map((r) => round(r.sdkToken.perSecond / r.open.perSecond, 3))),
        },
        rounds,
      },
    })
  } finally {
    await child.stop()
  }
}
