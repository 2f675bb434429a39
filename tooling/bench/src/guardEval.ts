import {
  type AgentFacts,
  type CompiledPolicySet,
  compilePolicies,
  type Decision,
  evaluate,
  InMemoryRateCounter,
  type PolicyDocument,
  validatePolicyDocument,
} from "@agentgov/domain"
import { casbinEngine, cedarEngine, type PortableRule } from "./guardPeers.ts"
import { type BenchmarkResult, benchmark, round, summarise, target } from "./report.ts"

/**
 * Guard evaluation in process (decision D6): 1,000 rules (100 policies × 10) compiled once,
 * then a realistic stream of requests, each call timed on its own with hrtime. The baseline,
 * in the same run, is a naive evaluator: a linear scan over every rule that matches globs by
 * backtracking and interprets the JSON conditions on each call (what the engine would be
 * without compilation and the action index). Both must reach the same decisions.
 */

const POLICIES = 100
const RULES_PER_POLICY = 10
const WARMUP_CALLS = 50_000
/** Timed in rounds; the median round is reported, as the other benchmarks do, so that one burst of noise from a neighbour on the machine does not decide the result. */
const ROUNDS = 5
const CALLS_PER_ROUND = 50_000
const BASELINE_ROUNDS = 3
const BASELINE_CALLS_PER_ROUND = 5_000
const REQUEST_POOL = 4_096

/** Deterministic, so that every run measures the same policies and requests. */
export const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const SERVICES = Array.from({ length: 40 }, (_, i) => `svc${i}`)
const RESOURCES = ["users", "orders", "files", "tickets", "reports"]
const VERBS = ["read", "list", "create", "update", "delete", "export", "send", "approve"]
const REGIONS = ["eu", "us", "apac", "latam"]
const LABELS = ["prod", "staging", "finance", "support", "internal"]

export type Rand = () => number
export const pick = <T>(r: Rand, xs: ReadonlyArray<T>): T => xs[Math.floor(r() * xs.length)]!

const leafFor = (r: Rand): Record<string, unknown> => {
  switch (Math.floor(r() * 9)) {
    case 0:
      return { field: "context.amount", op: "gt", value: Math.floor(r() * 10_000) }
    case 1:
      return { field: "context.region", op: "in", value: [pick(r, REGIONS), pick(r, REGIONS)] }
    case 2:
      return { field: "context.env", op: "eq", value: pick(r, ["prod", "staging"]) }
    case 3:
      return { field: "context.recipients", op: "contains", value: `user${Math.floor(r() * 20)}@corp.example` }
    case 4:
      return { field: "context.path", op: "startsWith", value: pick(r, ["/etc/", "/var/", "/home/"]) }
    case 5:
      return { field: "agent.trustScore", op: "lt", value: Math.floor(r() * 1_000) }
    case 6:
      return { field: "agent.labels", op: "contains", value: pick(r, LABELS) }
    case 7:
      return { field: "context.amount", op: "between", value: [100, 100 + Math.floor(r() * 5_000)] }
    default:
      return { field: "context.dryRun", op: "exists", value: false }
  }
}

const conditionFor = (r: Rand): Record<string, unknown> | undefined => {
  const roll = r()
  if (roll < 0.1) return undefined
  if (roll < 0.12) {
    const n = Math.floor(r() * 5_000)
    const cel = pick(r, [
      `context.amount > ${n}.0 && "${pick(r, LABELS)}" in agent.labels`,
      `context.region == "${pick(r, REGIONS)}" || agent.trustScore < ${n % 1_000}.0`,
      `context.recipients.exists(x, x.endsWith("@corp.example")) && context.amount >= ${n}.0`,
      `has(context.dryRun) || context.path.startsWith("/${pick(r, ["etc", "var", "home"])}/")`,
      `size(context.recipients) > 1 && context.env != "${pick(r, ["prod", "staging"])}"`,
    ])
    return { cel }
  }
  if (roll < 0.14)
    return {
      all: [
        leafFor(r),
        { time: { days: ["mon", "tue", "wed", "thu", "fri"], from: "09:00", to: "17:00", tz: "America/New_York" } },
      ],
    }
  if (roll < 0.15) return { all: [leafFor(r), { rate: { max: 1_000, per: "minute" } }] }
  const leaves = Array.from({ length: 2 + Math.floor(r() * 4) }, () => leafFor(r))
  if (r() < 0.5) return { all: leaves }
  return { any: [leaves[0], { all: leaves.slice(1) }] }
}

/**
 * Most rules name one tool's actions: exactly (60 %), by prefix (25 %) or by a glob within the
 * tool (12 %); a few are workspace-wide guardrails such as `*.*.delete` (3 %, about 30 rules).
 */
const actionsFor = (r: Rand): Array<string> => {
  const roll = r()
  const svc = pick(r, SERVICES)
  if (roll < 0.6)
    return [`${svc}.${pick(r, RESOURCES)}.${pick(r, VERBS)}`, `${svc}.${pick(r, RESOURCES)}.${pick(r, VERBS)}`]
  if (roll < 0.85) return [r() < 0.5 ? `${svc}.${pick(r, RESOURCES)}.*` : `${svc}.**`]
  if (roll < 0.97)
    return [pick(r, [`${svc}.*.${pick(r, VERBS)}`, `${svc}.**.${pick(r, VERBS)}`, `${svc}.${pick(r, RESOURCES)}.*e`])]
  return [pick(r, ["*.*.delete", "**.approve", "*.users.*", "**.export"])]
}

export const makePolicies = (r: Rand): Array<unknown> =>
  Array.from({ length: POLICIES }, (_, p) => ({
    name: `policy ${p}`,
    mode: r() < 0.1 ? "monitor" : "enforce",
    ...(r() < 0.2
      ? { target: r() < 0.5 ? { labels: [pick(r, LABELS)] } : { agentIds: [`agt_${Math.floor(r() * 8)}`] } }
      : {}),
    rules: Array.from({ length: RULES_PER_POLICY }, (_, i) => {
      const when = conditionFor(r)
      const effect = r() < 0.5 ? "deny" : r() < 0.6 ? "require_approval" : "allow"
      return { id: `r${i}`, effect, actions: actionsFor(r), ...(when ? { when } : {}) }
    }),
  }))

export interface Request {
  readonly action: string
  readonly context: Record<string, unknown>
  readonly agent: AgentFacts
}

export const makeRequests = (r: Rand): Array<Request> => {
  const agents: Array<AgentFacts> = Array.from({ length: 8 }, (_, i) => ({
    id: `agt_${i}`,
    name: `agent ${i}`,
    status: "active",
    labels: [pick(r, LABELS), pick(r, LABELS)],
    version: "1.4.2",
    trustScore: Math.floor(r() * 1_000),
    trustTier: "trusted",
  }))
  return Array.from({ length: REQUEST_POOL }, () => ({
    // Agents call a limited set of actions; a few are unknown to every policy.
    action:
      r() < 0.05 ? `other${Math.floor(r() * 50)}.ping` : `${pick(r, SERVICES)}.${pick(r, RESOURCES)}.${pick(r, VERBS)}`,
    context: {
      amount: Math.floor(r() * 10_000),
      region: pick(r, REGIONS),
      env: pick(r, ["prod", "staging"]),
      recipients: [`user${Math.floor(r() * 20)}@corp.example`, `user${Math.floor(r() * 20)}@corp.example`],
      path: `${pick(r, ["/etc/", "/var/", "/home/"])}file${Math.floor(r() * 100)}`,
      ...(r() < 0.3 ? { dryRun: true } : {}),
    },
    agent: pick(r, agents),
  }))
}

// ── the naive baseline ─────────────────────────────────────────────────────
const naiveGlob = (p: string, s: string): boolean => {
  if (p === "*") return true
  const go = (i: number, j: number): boolean => {
    if (i === p.length) return j === s.length
    if (p.startsWith("**", i)) {
      for (let k = j; k <= s.length; k++) if (go(i + 2, k)) return true
      return false
    }
    if (p[i] === "*") {
      for (let k = j; k <= s.length; k++) {
        if (go(i + 1, k)) return true
        if (s[k] === ".") return false
      }
      return false
    }
    return j < s.length && p[i] === s[j] && go(i + 1, j + 1)
  }
  return go(0, 0)
}

/** Interprets the JSON on every call; true / false / "error". CEL and time conditions are delegated to a compiled copy. */
const naiveCondition = (c: any, req: Request, compiledOnly: (c: unknown) => boolean | "error"): boolean | "error" => {
  if (c.all) {
    let err = false
    for (const x of c.all) {
      const v = naiveCondition(x, req, compiledOnly)
      if (v === false) return false
      if (v === "error") err = true
    }
    return err ? "error" : true
  }
  if (c.any) {
    let err = false
    for (const x of c.any) {
      const v = naiveCondition(x, req, compiledOnly)
      if (v === true) return true
      if (v === "error") err = true
    }
    return err ? "error" : false
  }
  if (c.cel || c.time || c.rate) return compiledOnly(c)
  const path: Array<string> = c.field.split(".")
  let v: any = path[0] === "agent" ? req.agent : path[0] === "context" ? req.context : req.action
  for (const key of path.slice(1)) v = v != null && Object.hasOwn(v, key) ? v[key] : undefined
  if (c.op === "exists") return (v !== undefined) === (c.value ?? true)
  if (v === undefined) return "error"
  switch (c.op) {
    case "eq":
      return typeof v !== typeof c.value ? "error" : v === c.value
    case "gt":
      return typeof v !== typeof c.value ? "error" : v > c.value
    case "lt":
      return typeof v !== typeof c.value ? "error" : v < c.value
    case "between":
      return typeof v !== typeof c.value[0] ? "error" : v >= c.value[0] && v <= c.value[1]
    case "in":
      return Array.isArray(v) ? v.some((x) => c.value.includes(x)) : c.value.includes(v)
    case "contains":
      return Array.isArray(v) || typeof v === "string" ? v.includes(c.value) : "error"
    case "startsWith":
      return typeof v === "string" ? v.startsWith(c.value) : "error"
  }
  return "error"
}

const naiveEvaluate = (
  docs: ReadonlyArray<PolicyDocument>,
  req: Request,
  compiledOnly: (c: unknown) => boolean | "error",
): Decision["decision"] => {
  let deny = false
  let approve = false
  let allow = false
  for (const doc of docs) {
    const t = doc.target
    if (t && !(t.agentIds?.includes(req.agent.id) || t.labels?.some((l) => req.agent.labels.includes(l)))) continue
    for (const rule of doc.rules) {
      if (!rule.actions.some((p) => naiveGlob(p, req.action))) continue
      const v = rule.when ? naiveCondition(rule.when, req, compiledOnly) : true
      if (v === false || (v === "error" && rule.effect === "allow")) continue
      if (doc.mode === "monitor") continue
      if (rule.effect === "deny") deny = true
      else if (rule.effect === "require_approval") approve = true
      else allow = true
    }
  }
  return deny ? "deny" : approve ? "require_approval" : allow ? "allow" : "allow"
}

export const timeCalls = (calls: number, call: (i: number) => void): Float64Array => {
  const ns = new Float64Array(calls)
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint()
    call(i)
    ns[i] = Number(process.hrtime.bigint() - t0)
  }
  return ns
}

export const microseconds = (ns: Float64Array) => summarise(Array.from(ns, (x) => x / 1_000))

// ── the rule set shared with Cedar and casbin (guardPeers.ts says what it is restricted to and why) ──
const portableLeaf = (r: Rand): Record<string, unknown> => {
  switch (Math.floor(r() * 8)) {
    case 0:
      return { field: "context.amount", op: "gt", value: Math.floor(r() * 10_000) }
    case 1:
      return { field: "context.amount", op: "lt", value: Math.floor(r() * 10_000) }
    case 2:
      return { field: "context.region", op: "eq", value: pick(r, REGIONS) }
    case 3:
      return { field: "context.region", op: "in", value: [pick(r, REGIONS), pick(r, REGIONS)] }
    case 4:
      return { field: "context.env", op: "eq", value: pick(r, ["prod", "staging"]) }
    case 5:
      return { field: "context.amount", op: "between", value: [100, 100 + Math.floor(r() * 5_000)] }
    case 6:
      return { field: "agent.trustScore", op: "lt", value: Math.floor(r() * 1_000) }
    default:
      return { field: "agent.trustScore", op: "gt", value: Math.floor(r() * 1_000) }
  }
}

/** 90 % of the rules carry a condition of 2–5 leaves. */
const portableCondition = (r: Rand): Record<string, unknown> | undefined => {
  if (r() < 0.1) return undefined
  const leaves = Array.from({ length: 2 + Math.floor(r() * 4) }, () => portableLeaf(r))
  return r() < 0.5 ? { all: leaves } : { any: [leaves[0], { all: leaves.slice(1) }] }
}

/** As {@link actionsFor}, without `**` (which only the engine has). */
const portableActions = (r: Rand): Array<string> => {
  const roll = r()
  const svc = pick(r, SERVICES)
  if (roll < 0.6)
    return [`${svc}.${pick(r, RESOURCES)}.${pick(r, VERBS)}`, `${svc}.${pick(r, RESOURCES)}.${pick(r, VERBS)}`]
  if (roll < 0.85) return [`${svc}.${pick(r, RESOURCES)}.*`]
  if (roll < 0.97) return [pick(r, [`${svc}.*.${pick(r, VERBS)}`, `${svc}.${pick(r, RESOURCES)}.*e`])]
  return [pick(r, ["*.*.delete", "*.*.approve", "*.users.*", "*.*.export"])]
}

const makePortablePolicies = (r: Rand) =>
  Array.from({ length: POLICIES }, (_, p) => ({
    name: `portable ${p}`,
    rules: Array.from({ length: RULES_PER_POLICY }, (_, i) => {
      const when = portableCondition(r)
      const effect = r() < 0.3 ? "deny" : r() < 0.3 ? "require_approval" : "allow"
      return { id: `r${i}`, effect, actions: portableActions(r), ...(when ? { when } : {}) }
    }),
  }))

const PEER_ROUNDS = 3
const CEDAR_CALLS_PER_ROUND = 2_000
const CASBIN_CALLS_PER_ROUND = 500

/**
 * The engine beside Cedar and casbin on one rule set all three express (guardPeers.ts): 1,000
 * rules, 90 % with conditions of 2–5 leaves, the same requests; decisions checked to agree over
 * the whole request pool. Target: the engine's p99 ≤ 10 µs; the peers are reported as ratios.
 */
const runGuardPeersBenchmark = async (): Promise<BenchmarkResult> => {
  const r = prng(20261125)
  const documents = makePortablePolicies(r).map((d, i) => {
    const v = validatePolicyDocument(d)
    if (!v.ok) throw new Error(`portable policy ${i} is invalid: ${JSON.stringify(v.issues[0])}`)
    return v.document
  })
  const set = compilePolicies(documents.map((document, i) => ({ id: `pol_${i}`, version: 1, document })))
  const rules = documents.flatMap((d) => d.rules as unknown as ReadonlyArray<PortableRule>)
  const withConditions = rules.filter((x) => x.when !== undefined).length
  const requests = makeRequests(r)
  const rate = new InMemoryRateCounter()
  const engine = (i: number) =>
    evaluate(set, requests[i % REQUEST_POOL]!, { now: 0, guardDefault: "deny", rate }).decision
  const cedar = cedarEngine(rules)
  const cedarCalls = requests.map(cedar.callOf)
  const casbin = await casbinEngine(rules)
  const casbinArgs = requests.map(casbin.argsOf)

  const disagreements = { cedar: 0, casbin: 0 }
  const decisions: Record<string, number> = { allow: 0, deny: 0, require_approval: 0 }
  for (let i = 0; i < REQUEST_POOL; i++) {
    const d = engine(i)
    decisions[d] = (decisions[d] ?? 0) + 1
    if (cedar.decide(cedarCalls[i]!) !== d) disagreements.cedar++
    if (casbin.decide(casbinArgs[i]!) !== d) disagreements.casbin++
  }

  const medianByP99 = (rounds: Array<ReturnType<typeof microseconds>>) =>
    [...rounds].sort((a, b) => a.p99 - b.p99)[Math.floor(rounds.length / 2)]!
  for (let i = 0; i < WARMUP_CALLS; i++) engine(i)
  const engineRounds = Array.from({ length: ROUNDS }, (_, k) =>
    microseconds(timeCalls(CALLS_PER_ROUND, (i) => engine(k * CALLS_PER_ROUND + i))),
  )
  const cedarRounds = Array.from({ length: PEER_ROUNDS }, (_, k) =>
    microseconds(
      timeCalls(CEDAR_CALLS_PER_ROUND, (i) =>
        cedar.decide(cedarCalls[(k * CEDAR_CALLS_PER_ROUND + i) % REQUEST_POOL]!),
      ),
    ),
  )
  const casbinRounds = Array.from({ length: PEER_ROUNDS }, (_, k) =>
    microseconds(
      timeCalls(CASBIN_CALLS_PER_ROUND, (i) =>
        casbin.decide(casbinArgs[(k * CASBIN_CALLS_PER_ROUND + i) % REQUEST_POOL]!),
      ),
    ),
  )
  // Cedar's fixed cost per call (the request's conversion into the wasm module and back): one policy only.
  const cedarOne = cedarEngine(rules.slice(0, 1))
  const cedarOneCalls = requests.map(cedarOne.callOf)
  const cedarFixed = microseconds(
    timeCalls(CEDAR_CALLS_PER_ROUND, (i) => cedarOne.decide(cedarOneCalls[i % REQUEST_POOL]!)),
  )
  const ours = medianByP99(engineRounds)
  const cedarUs = medianByP99(cedarRounds)
  const casbinUs = medianByP99(casbinRounds)
  return benchmark({
    name: "guard-eval-peers",
    what: `per call, in process, on ${rules.length} rules (${withConditions} with conditions of 2–5 leaves) all three express (guardPeers.ts), ${REQUEST_POOL} requests, guardDefault deny: evaluate() in ${ROUNDS} rounds of ${CALLS_PER_ROUND.toLocaleString("en-US")} calls after ${WARMUP_CALLS.toLocaleString("en-US")} warm-up; p99 of the median round`,
    unit: "µs",
    value: ours.p99,
    baseline: {
      what: `Cedar 4.13 (@cedar-policy/cedar-wasm, statefulIsAuthorized over a preparsed policy set, one call object per request built beforehand) on the same rules and requests, ${PEER_ROUNDS} rounds of ${CEDAR_CALLS_PER_ROUND.toLocaleString("en-US")} calls after the agreement pass; p99 of the median round`,
      value: cedarUs.p99,
    },
    targets: [
      target("p99 µs", "max", 10, ours.p99),
      target("decisions disagreeing with Cedar", "max", 1, disagreements.cedar),
      target("decisions disagreeing with casbin", "max", 1, disagreements.casbin),
    ],
    details: {
      engineMicroseconds: ours,
      engineRoundsP99: engineRounds.map((x) => x.p99),
      cedarMicroseconds: cedarUs,
      cedarRoundsP99: cedarRounds.map((x) => x.p99),
      cedarOnePolicyMicroseconds: {
        what: "the same Cedar calls over a policy set of one rule: its fixed cost per call",
        ...cedarFixed,
      },
      casbin: {
        what: `casbin 5.51 (node-casbin, enforceExSync; regexMatch on the action, eval() of the condition per policy line, lines ordered deny, require_approval, allow, stopping at the first match) on the same rules and requests, ${PEER_ROUNDS} rounds of ${CASBIN_CALLS_PER_ROUND} calls; p99 of the median round`,
        microseconds: casbinUs,
        roundsP99: casbinRounds.map((x) => x.p99),
      },
      ratios: {
        what: "the peer's time over the engine's (greater is slower than the engine)",
        cedarP50: round(cedarUs.p50 / ours.p50, 1),
        cedarP99: round(cedarUs.p99 / ours.p99, 1),
        casbinP50: round(casbinUs.p50 / ours.p50, 1),
        casbinP99: round(casbinUs.p99 / ours.p99, 1),
      },
      decisionsOverRequestPool: decisions,
      disagreements,
    },
  })
}

export async function runGuardEvalBenchmark(): Promise<Array<BenchmarkResult>> {
  return [await runEngineBenchmark(), await runGuardPeersBenchmark()]
}

async function runEngineBenchmark(): Promise<BenchmarkResult> {
  const r = prng(20261120)
  const raw = makePolicies(r)
  const documents = raw.map((d, i) => {
    const v = validatePolicyDocument(d)
    if (!v.ok) throw new Error(`generated policy ${i} is invalid: ${JSON.stringify(v.issues[0])}`)
    return v.document
  })
  const compileStart = performance.now()
  const set: CompiledPolicySet = compilePolicies(
    documents.map((document, i) => ({ id: `pol_${i}`, version: 1, document })),
  )
  const compileMs = performance.now() - compileStart
  const requests = makeRequests(r)
  const start = Date.parse("2026-11-18T15:00:00Z")
  const rate = new InMemoryRateCounter()
  const guard = (i: number) =>
    evaluate(set, requests[i % REQUEST_POOL]!, { now: start + i, guardDefault: "allow", rate })

  // The baseline hands CEL, time and rate conditions to single-condition compiled sets, so that
  // both sides agree; they are a small share of the rules.
  const single = new Map<unknown, CompiledPolicySet>()
  let current: Request | undefined
  let currentNow = start
  const baselineRate = new InMemoryRateCounter()
  const compiledOnly = (c: unknown): boolean | "error" => {
    let s = single.get(c)
    if (!s) {
      s = compilePolicies([
        {
          id: `pol_c${single.size}`,
          version: 1,
          document: {
            name: "c",
            enabled: true,
            mode: "enforce",
            rules: [{ id: "c", effect: "deny", actions: ["*"], when: c as never }],
          },
        },
      ])
      single.set(c, s)
    }
    const d = evaluate(s, current!, { now: currentNow, guardDefault: "allow", rate: baselineRate })
    return d.decision === "allow" ? false : d.reasons[0]!.code === "CONDITION_ERROR" ? "error" : true
  }
  const naive = (i: number) => {
    current = requests[i % REQUEST_POOL]!
    currentNow = start + i
    return naiveEvaluate(documents, current, compiledOnly)
  }

  // Agreement on the decisions (the rate conditions count apart in each, same calls, same clock).
  let disagreements = 0
  const decisions: Record<string, number> = { allow: 0, deny: 0, require_approval: 0 }
  const agreeRate = new InMemoryRateCounter()
  for (let i = 0; i < REQUEST_POOL; i++) {
    const d = evaluate(set, requests[i]!, { now: start + i, guardDefault: "allow", rate: agreeRate }).decision
    decisions[d] = (decisions[d] ?? 0) + 1
    if (d !== naive(i)) disagreements++
  }

  const medianRound = (rounds: Array<ReturnType<typeof microseconds>>) => {
    const byP99 = [...rounds].sort((a, b) => a.p99 - b.p99)
    return { median: byP99[Math.floor(byP99.length / 2)]!, rounds }
  }
  for (let i = 0; i < WARMUP_CALLS; i++) guard(i)
  const engineRounds = Array.from({ length: ROUNDS }, (_, r) =>
    microseconds(timeCalls(CALLS_PER_ROUND, (i) => guard(WARMUP_CALLS + r * CALLS_PER_ROUND + i))),
  )
  const engine = medianRound(engineRounds).median
  for (let i = 0; i < 2_000; i++) naive(i)
  const baselineRounds = Array.from({ length: BASELINE_ROUNDS }, (_, r) =>
    microseconds(timeCalls(BASELINE_CALLS_PER_ROUND, (i) => naive(r * BASELINE_CALLS_PER_ROUND + i))),
  )
  const baseline = medianRound(baselineRounds).median

  const matchedPerCall =
    requests
      .slice(0, 1_000)
      .reduce(
        (n, q, i) =>
          n +
          evaluate(set, q, { now: start + i, guardDefault: "allow", rate: new InMemoryRateCounter() }).matched.length,
        0,
      ) / 1_000

  return benchmark({
    name: "guard-eval",
    what: `evaluate() per call, in process: ${POLICIES} policies × ${RULES_PER_POLICY} rules, ${ROUNDS} rounds of ${CALLS_PER_ROUND.toLocaleString("en-US")} calls over ${REQUEST_POOL} requests after ${WARMUP_CALLS.toLocaleString("en-US")} warm-up; p99 of the median round`,
    unit: "µs",
    value: engine.p99,
    baseline: {
      what: `a naive evaluator over the same rules: linear scan, backtracking globs, JSON conditions interpreted per call (${BASELINE_ROUNDS} rounds of ${BASELINE_CALLS_PER_ROUND.toLocaleString("en-US")} calls); p99 of the median round`,
      value: baseline.p99,
    },
    targets: [
      target("p99 µs", "max", 10, engine.p99),
      target("decisions agree with the baseline (disagreements)", "max", 1, disagreements),
    ],
    details: {
      rules: set.rules.length,
      policies: set.policies.length,
      compileMs: round(compileMs),
      engineMicroseconds: engine,
      engineRoundsP99: engineRounds.map((r) => r.p99),
      baselineMicroseconds: baseline,
      baselineRoundsP99: baselineRounds.map((r) => r.p99),
      p50Ratio: round(engine.p50 / baseline.p50, 3),
      decisionsOverRequestPool: decisions,
      matchedRulesPerCall: round(matchedPerCall, 2),
      disagreements,
      note: "per-call times include two process.hrtime.bigint() calls (~0.05 µs)",
    },
  })
}
