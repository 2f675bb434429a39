import {
  type AgentFacts,
  compilePolicies,
  evaluate,
  InMemoryRateCounter,
  TIERS,
  tierOf,
  validatePolicyDocument,
} from "@agentgov/domain"
import {
  makePolicies,
  makeRequests,
  microseconds,
  pick,
  prng,
  type Rand,
  type Request,
  timeCalls,
} from "./guardEval.ts"
import { type BenchmarkResult, benchmark, median, round, target } from "./report.ts"

/**
 * Issue 27: the guard in process with trust conditions (D6's `agent.trust.tier` and `agent.trust.score`) at
 * 1,000 rules. guard-eval's policy set (guardEval.ts: 100 policies × 10 rules over exact, prefix and glob actions,
 * CEL, time and rate conditions) with a trust leaf added to half its rules: a tier test ("below silver": `in`
 * the tiers under it) or a score threshold, beside the rule's own condition, and the agents' scores and tiers
 * spread over every tier. The baseline, in the same run, interleaved in blocks of calls, is the same set with each added
 * trust leaf reading the same value from the request's context instead (`context.trustTier`,
 * `context.trustScore`): what the trust fields add over any other field. Both must reach the same decisions.
 * Target (issue 27): p99 ≤ 10 µs.
 */

const ROUNDS = 7
const CALLS_PER_ROUND = 50_000
const WARMUP_CALLS = 50_000
const TRUST_SHARE = 0.5
const BLOCK = 1_000

/** A trust leaf: a tier below (or from) one of D11's tiers, or a score threshold; `prefix` names where it reads. */
const trustLeaf = (r: Rand, prefix: "agent.trust" | "context.trust") => {
  const tierField = prefix === "agent.trust" ? "agent.trust.tier" : "context.trustTier"
  const scoreField = prefix === "agent.trust" ? "agent.trust.score" : "context.trustScore"
  const roll = r()
  const at = 1 + Math.floor(r() * (TIERS.length - 1))
  if (roll < 0.35) return { field: tierField, op: "in", value: TIERS.slice(0, at) }
  if (roll < 0.5) return { field: tierField, op: "eq", value: pick(r, TIERS) }
  if (roll < 0.8) return { field: scoreField, op: "lt", value: Math.floor(r() * 1_000) }
  return { field: scoreField, op: "gt", value: Math.floor(r() * 1_000) }
}

/** guard-eval's policies with a trust leaf ANDed onto TRUST_SHARE of the rules, reading from `prefix`. */
const withTrust = (prefix: "agent.trust" | "context.trust") => {
  const base = makePolicies(prng(20261127)) as Array<{ rules: Array<{ when?: unknown }> }>
  const r = prng(27)
  let added = 0
  const policies = base.map((p) => ({
    ...p,
    rules: p.rules.map((rule) => {
      if (r() >= TRUST_SHARE) return rule
      added++
      const leaf = trustLeaf(r, prefix)
      return { ...rule, when: rule.when === undefined ? leaf : { all: [leaf, rule.when] } }
    }),
  }))
  const documents = policies.map((d, i) => {
    const v = validatePolicyDocument(d)
    if (!v.ok) throw new Error(`trust policy ${i} is invalid: ${JSON.stringify(v.issues[0])}`)
    return v.document
  })
  return { set: compilePolicies(documents.map((document, i) => ({ id: `pol_${i}`, version: 1, document }))), added }
}

/** guard-eval's requests, their agents' scores spread over 0–1000 with the tier of each, and both in the context too. */
const requests = (): Array<Request> => {
  const r = prng(20261120)
  const agents = new Map<AgentFacts, AgentFacts>()
  return makeRequests(r).map((q) => {
    let agent = agents.get(q.agent)
    if (agent === undefined) {
      const score = 100 + agents.size * 125
      agent = { ...q.agent, trustScore: score, trustTier: tierOf(score) }
      agents.set(q.agent, agent)
    }
    return { ...q, agent, context: { ...q.context, trustScore: agent.trustScore, trustTier: agent.trustTier } }
  })
}

export const runTrustEvalBenchmark = async (): Promise<BenchmarkResult> => {
  const trust = withTrust("agent.trust")
  const plain = withTrust("context.trust")
  const pool = requests()
  const start = Date.parse("2026-11-18T15:00:00Z")
  const rates = { trust: new InMemoryRateCounter(), plain: new InMemoryRateCounter() }
  const call = (side: "trust" | "plain", i: number) =>
    evaluate(side === "trust" ? trust.set : plain.set, pool[i % pool.length]!, {
      now: start + i,
      guardDefault: "allow",
      rate: rates[side],
    })

  // Agreement over the whole pool (each side its own rate counter, the same calls, the same clock).
  let disagreements = 0
  const decisions: Record<string, number> = { allow: 0, deny: 0, require_approval: 0 }
  const trustMatched = { rules: 0 }
  for (let i = 0; i < pool.length; i++) {
    const d = call("trust", i)
    decisions[d.decision] = (decisions[d.decision] ?? 0) + 1
    trustMatched.rules += d.matched.length
    if (d.decision !== call("plain", i).decision) disagreements++
  }
  const tiers: Record<string, number> = {}
  for (const q of pool) tiers[q.agent.trustTier!] = (tiers[q.agent.trustTier!] ?? 0) + 1

  for (let i = 0; i < WARMUP_CALLS; i++) {
    call("trust", pool.length + i)
    call("plain", pool.length + i)
  }
  // Within a round the two sides alternate in blocks of BLOCK calls (the first side swapped every block), so that
  // a neighbour's burst on this shared machine falls on both alike.
  const rounds: Array<{ trust: ReturnType<typeof microseconds>; plain: ReturnType<typeof microseconds> }> = []
  for (let k = 0; k < ROUNDS; k++) {
    const offset = pool.length + WARMUP_CALLS + k * CALLS_PER_ROUND
    const ns = { trust: new Float64Array(CALLS_PER_ROUND), plain: new Float64Array(CALLS_PER_ROUND) }
    for (let b = 0; b < CALLS_PER_ROUND / BLOCK; b++) {
      const order = b % 2 === 0 ? (["plain", "trust"] as const) : (["trust", "plain"] as const)
      for (const side of order)
        ns[side].set(
          timeCalls(BLOCK, (i) => call(side, offset + b * BLOCK + i)),
          b * BLOCK,
        )
    }
    rounds.push({ trust: microseconds(ns.trust), plain: microseconds(ns.plain) })
  }
  const medianRound = (side: "trust" | "plain") =>
    [...rounds.map((r) => r[side])].sort((a, b) => a.p99 - b.p99)[Math.floor(ROUNDS / 2)]!
  const withTrustUs = medianRound("trust")
  const plainUs = medianRound("plain")
  return benchmark({
    name: "trust-eval",
    what: `evaluate() per call, in process: ${trust.set.rules.length} rules (guard-eval's set), ${trust.added} of them with a trust leaf (agent.trust.tier in/eq, agent.trust.score lt/gt) ANDed onto their condition; ${ROUNDS} rounds of ${CALLS_PER_ROUND.toLocaleString("en-US")} calls over ${pool.length} requests after ${WARMUP_CALLS.toLocaleString("en-US")} warm-up; p99 of the median round`,
    unit: "µs",
    value: withTrustUs.p99,
    baseline: {
      what: `the same rules with each added trust leaf reading the same value from the request's context (context.trustTier, context.trustScore), the same requests, interleaved with the trust side in blocks of ${BLOCK.toLocaleString("en-US")} calls; p99 of the median round`,
      value: plainUs.p99,
    },
    targets: [
      target("p99 µs", "max", 10, withTrustUs.p99),
      target("decisions agree with the baseline (disagreements)", "max", 1, disagreements),
    ],
    details: {
      rules: trust.set.rules.length,
      rulesWithTrustLeaf: trust.added,
      withTrustMicroseconds: withTrustUs,
      baselineMicroseconds: plainUs,
      roundsP99: rounds.map((r) => ({ trust: r.trust.p99, plain: r.plain.p99 })),
      p50Ratio: round(withTrustUs.p50 / plainUs.p50, 3),
      medianP99Ratio: round(median(rounds.map((r) => r.trust.p99 / r.plain.p99)), 3),
      decisionsOverRequestPool: decisions,
      matchedRulesPerCall: round(trustMatched.rules / pool.length, 2),
      requestsByTier: tiers,
      disagreements,
      note: "per-call times include two process.hrtime.bigint() calls (~0.05 µs)",
    },
  })
}
