import { CONCURRENCY, startAuthChild, THROUGHPUT_MS, throughput } from "./auth.ts"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"

/**
 * Issue 32: `GET /v1/ping` through the REST facade authenticated by an OAuth access token (`svc_oauth_at_…`,
 * from authServer.ts's code flow with PKCE) against the token-auth benchmark's baseline, the same route and
 * facade with no credential check, in the same child (auth.ts), rounds interleaved, the order swapped every
 * round. The SDK token on the same route is recorded beside it. Target: ≥ 0.6× the baseline.
 */

const ROUNDS = 5

export const runOAuthAuthBenchmark = async (
  root: string,
  databaseUrl: string,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const child = await startAuthChild(root, databaseUrl)
  try {
    const { ports, token, oauthToken } = child
    // Warm-up: the first reads of the grant and the JIT settle here.
    await throughput(ports.open!, undefined)
    await throughput(ports.token!, oauthToken)
    await throughput(ports.token!, token)
    const rounds: Array<{ open: number; oauth: number; sdkToken: number }> = []
    for (let r = 1; r <= ROUNDS; r++) {
      let open = 0
      let oauth = 0
      if (r % 2 === 1) {
        open = await throughput(ports.open!, undefined)
        oauth = await throughput(ports.token!, oauthToken)
      } else {
        oauth = await throughput(ports.token!, oauthToken)
        open = await throughput(ports.open!, undefined)
      }
      const sdkToken = await throughput(ports.token!, token)
      log(
        `oauth-auth round ${r}: open ${round(open, 0)} req/s, OAuth access token ${round(oauth, 0)} req/s (${round(oauth / open, 3)}×), SDK token ${round(sdkToken, 0)} req/s`,
      )
      rounds.push({ open: round(open), oauth: round(oauth), sdkToken: round(sdkToken) })
    }
    const value = median(rounds.map((r) => r.oauth))
    const baseline = median(rounds.map((r) => r.open))
    return benchmark({
      name: "oauth-auth",
      what: `GET /v1/ping through the REST facade authenticated by an OAuth access token (svc_oauth_at_…, scope agents:read, in-process rate limits), ${CONCURRENCY} keep-alive connections, ${THROUGHPUT_MS} ms per round; median of ${ROUNDS} interleaved rounds`,
      unit: "requests/s",
      value,
      baseline: {
        what: "the token-auth benchmark's baseline: the same route and facade with no credential check (authServer.ts's open port), same child and load generator",
        value: round(baseline),
      },
      targets: [target("ratio to no authentication", "min", 0.6, value / baseline)],
      details: {
        rounds,
        ratios: rounds.map((r) => round(r.oauth / r.open, 3)),
        sdkToken: {
          what: "the same route with a cached SDK token (what token-auth measures), in the same rounds; informational",
          requestsPerSecond: median(rounds.map((r) => r.sdkToken)),
          ratio: round(median(rounds.map((r) => r.sdkToken)) / baseline, 3),
        },
      },
    })
  } finally {
    child.stop()
  }
}
