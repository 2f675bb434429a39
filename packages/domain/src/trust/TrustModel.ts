import { systemNamespaceOf } from "../audit/eventCatalog.ts"
import { DAY_MS } from "../shared/time.ts"
import { type Tier, tierOf } from "./Tier.ts"

/**
 * The trust model of D12, pure: evidence read from a workspace's audit trail is folded, one event
 * at a time, into a few decayed counters per agent (`applyEvent`), and the score is a function of
 * those counters, a few facts read from the agent's keys and versions, and the clock
 * (`computeScore`). docs/trust.md gives every formula with a worked example; the constants below
 * are the ones it quotes.
 *
 * Every counter decays exponentially with one half-life: a counter is stored as its value `v` at
 * time `t`, and its value at `now` is `v · 2^(−(now − t)/H)`. Adding evidence is O(1) and exact,
 * so no read ever replays the history.
 */

/** Old evidence counts half after this long. */
export const HALF_LIFE_DAYS = 30
const HALF_LIFE_MS = HALF_LIFE_DAYS * DAY_MS
/** Allowed guard calls counted per agent and UTC day; more are recorded but earn nothing (anti-flooding). */
export const DAILY_ALLOWED_CAP = 100

export const WEIGHTS = {
  policy_compliance: 0.3,
  enforcement_history: 0.25,
  human_oversight: 0.15,
  tenure_activity: 0.2,
  identity_keys: 0.1,
} as const
export type ComponentName = keyof typeof WEIGHTS | "operator_adjustment"

/** What an enforcement costs the enforcement-history component when issued (before decay). */
export const ENFORCEMENT_COST = { warning: 100, throttle: 250, suspension: 500, revocation: 1000 } as const
type EnforcementType = keyof typeof ENFORCEMENT_COST

/** Reason codes of a denial that an enforcement or the agent's status caused: the enforcement already costs. */
const STATUS_DENIALS = new Set(["AGENT_SUSPENDED", "AGENT_DEREGISTERED", "AGENT_THROTTLED"])

export interface Decayed {
  readonly v: number
  readonly t: number
}

/**
 * The revision of the rules that fold events into evidence. Evidence folded under an earlier revision (or stored
 * without one) is folded again from the audit trail by the worker (TrustRecompute's rebuild), so every event is
 * scored by the current rules, not by those in force when it was first read. Raise it with every change to how an
 * event is read; docs/decisions.md lists the revisions ("Trust fixes, second pass").
 */
export const EVIDENCE_RULES = 2

export interface Evidence {
  /** The EVIDENCE_RULES it was folded under; absent: before revisions were kept (revision 1). */
  rules?: number
  /** When the agent was registered (ms). */
  registeredAt: number
  allowed: Decayed
  denied: Decayed
  monitorViolations: Decayed
  enforcementCost: Decayed
  /** Enforcements not yet resolved, so that an overturn can take back exactly what it cost. */
  open: Record<string, { readonly type: EnforcementType; readonly at: number }>
  /**
   * Enforcements resolved as upheld: a later review may still overturn one (the only resolution that reopens), and
   * that overturn takes back its cost as for an open one. Absent in evidence stored before it was kept.
   */
  upheld?: Record<string, { readonly type: EnforcementType; readonly at: number }>
  approved: Decayed
  humanDenied: Decayed
  expiredApprovals: Decayed
  activeDays: Decayed
  lastActiveDay: number
  /** The UTC day (days since the epoch) `dayAllowed` counts for. */
  day: number
  dayAllowed: number
  /** Net operator adjustment (not decayed: a human's explicit decision) and how many made it. */
  adjustment: number
  /** Plain totals since registration, for the reputation's counts (not used by the score). */
  totals: Record<string, number>
}

export interface Facts {
  readonly hasVersion: boolean
  readonly activeAgentKeys: number
  readonly keysWithoutExpiry: number
  /** Age in days of the newest active agent key; null without one. */
  readonly newestKeyAgeDays: number | null
}

export const NO_FACTS: Facts = { hasVersion: false, activeAgentKeys: 0, keysWithoutExpiry: 0, newestKeyAgeDays: null }

export interface Component {
  readonly name: ComponentName
  readonly score: number
  readonly weight: number
  readonly detail: Record<string, unknown>
}

export interface Score {
  readonly score: number
  readonly tier: Tier
  readonly components: ReadonlyArray<Component>
}

const ZERO: Decayed = { v: 0, t: 0 }

export const valueAt = (c: Decayed, now: number): number => (c.v === 0 ? 0 : c.v * 2 ** (-(now - c.t) / HALF_LIFE_MS))

/** `c` plus `w` of evidence recorded at `at`; exact whichever of the two is older. */
export const addAt = (c: Decayed, w: number, at: number): Decayed =>
  at >= c.t ? { v: valueAt(c, at) + w, t: at } : { v: c.v + w * 2 ** (-(c.t - at) / HALF_LIFE_MS), t: c.t }

export const emptyEvidence = (registeredAt: number): Evidence => ({
  rules: EVIDENCE_RULES,
  registeredAt,
  allowed: ZERO,
  denied: ZERO,
  monitorViolations: ZERO,
  enforcementCost: ZERO,
  open: {},
  upheld: {},
  approved: ZERO,
  humanDenied: ZERO,
  expiredApprovals: ZERO,
  activeDays: ZERO,
  lastActiveDay: -1,
  day: -1,
  dayAllowed: 0,
  adjustment: 0,
  totals: {},
})

const count = (e: Evidence, name: string, by = 1) => {
  e.totals[name] = (e.totals[name] ?? 0) + by
}

/**
 * Marks the agent active on the day of `at` (in place): what an event of the agent's own software (a type outside
 * the system's namespaces) is evidence of. Only the first such event of a day counts, so one call per agent and day,
 * with that day's first time, folds a day's events as one call each would (the worker's aggregate).
 */
export const markActive = (e: Evidence, at: number) => {
  const day = Math.floor(at / DAY_MS)
  if (day === e.lastActiveDay) return
  e.activeDays = addAt(e.activeDays, 1, at)
  if (day > e.lastActiveDay) e.lastActiveDay = day
}

/** Whether an event type is read as evidence about its agent (others only ask for a recomputation). */
export const EVIDENCE_TYPES: ReadonlySet<string> = new Set([
  "policy.evaluated",
  "policy.denied",
  "policy.violated",
  "enforcement.created",
  "enforcement.issued",
  "enforcement.resolved",
  "approval.decided",
  "trust.score.adjusted",
])

/**
 * Folds `evaluations` guard decisions (`policy.evaluated`) of the agent into its evidence (in place), `allowed` of
 * them allows, `allowedAt` the times of those allows in order (at most DAILY_ALLOWED_CAP of them a day are read:
 * the rest earn nothing). One call per event, or one per agent and day for many (the worker's aggregate): the
 * evidence comes out the same.
 */
export const applyEvaluations = (
  e: Evidence,
  evaluations: number,
  allowed: number,
  allowedAt: ReadonlyArray<number>,
): void => {
  count(e, "evaluations", evaluations)
  // Only an allowed call earns: a denied one must never raise the score, not even as activity.
  if (allowed === 0) return
  count(e, "allowed", allowed)
  for (const at of allowedAt) {
    markActive(e, at)
    const day = Math.floor(at / DAY_MS)
    if (day !== e.day) {
      if (day < e.day) continue // an older day's call arriving late: its day is closed
      e.day = day
      e.dayAllowed = 0
    }
    if (e.dayAllowed >= DAILY_ALLOWED_CAP) continue
    e.dayAllowed += 1
    e.allowed = addAt(e.allowed, 1, at)
  }
}

/** What the worker knows of an event beyond its type, data and time. */
export interface EventContext {
  /**
   * `approval.decided`: the party that decided is the party that asked (TrustRecompute's partyOf): the decision is no
   * oversight of the agent and counts neither way (only in the totals, as `approvalsSelfDecided`).
   */
  readonly selfDecided?: boolean
}

/**
 * Folds one event about the agent into its evidence (in place). `at` is the event's time (ms).
 * Types of the system's own catalog not listed in EVIDENCE_TYPES change nothing here; any other
 * type (an event the agent's software ingested) counts as activity.
 */
export const applyEvent = (
  e: Evidence,
  type: string,
  data: Record<string, unknown>,
  at: number,
  context: EventContext = {},
): void => {
  switch (type) {
    case "policy.evaluated": {
      const allowed = data.decision === "allow"
      applyEvaluations(e, 1, allowed ? 1 : 0, allowed ? [at] : [])
      return
    }
    case "policy.denied": {
      const reasons = Array.isArray(data.reasons) ? (data.reasons as Array<{ code?: unknown }>) : []
      if (reasons.length > 0 && reasons.every((r) => STATUS_DENIALS.has(String(r?.code)))) return
      // Denied because an approver denied this request (asked again, or the denied approval presented): the
      // approver's denial already costs (human_oversight), once; a retry loop must not cost 60 points a call.
      if (String(reasons[0]?.code) === "APPROVAL_DENIED") {
        count(e, "deniedByApproval")
        return
      }
      count(e, "denied")
      e.denied = addAt(e.denied, 1, at)
      return
    }
    case "policy.violated": {
      // A deny's violation is counted as the denial; only monitor-only violations count here.
      if (data.decision === "deny") return
      count(e, "monitorViolations")
      e.monitorViolations = addAt(e.monitorViolations, 1, at)
      return
    }
    case "enforcement.created":
    case "enforcement.issued": {
      const type_ = data.type as EnforcementType
      const id = String(data.enforcementId)
      if (!(type_ in ENFORCEMENT_COST) || id in e.open) return
      count(e, "enforcements")
      e.open[id] = { type: type_, at }
      e.enforcementCost = addAt(e.enforcementCost, ENFORCEMENT_COST[type_], at)
      return
    }
    case "enforcement.resolved": {
      const id = String(data.enforcementId)
      const issued = e.open[id] ?? e.upheld?.[id]
      if (issued === undefined) return
      delete e.open[id]
      if (e.upheld !== undefined) delete e.upheld[id]
      // Upheld, it keeps its cost; kept aside, since a later review may still overturn it (EnforcementService).
      if (data.resolution === "upheld") e.upheld = { ...e.upheld, [id]: issued }
      if (data.resolution !== "overturned") return
      // An overturned enforcement costs nothing: take back exactly what it added, as decayed since.
      count(e, "overturned")
      const { v, t } = addAt(e.enforcementCost, -ENFORCEMENT_COST[issued.type], issued.at)
      e.enforcementCost = { v: Math.max(0, v), t }
      return
    }
    case "approval.decided": {
      if (data.expired !== true && context.selfDecided === true) {
        count(e, "approvalsSelfDecided")
        return
      }
      if (data.expired === true) {
        count(e, "approvalsExpired")
        e.expiredApprovals = addAt(e.expiredApprovals, 1, at)
      } else if (data.decision === "approved") {
        count(e, "approvalsApproved")
        e.approved = addAt(e.approved, 1, at)
      } else if (data.decision === "denied") {
        count(e, "approvalsDenied")
        e.humanDenied = addAt(e.humanDenied, 1, at)
      }
      return
    }
    case "trust.score.adjusted": {
      const delta = Number(data.delta)
      if (!Number.isInteger(delta)) return
      count(e, "adjustments")
      e.adjustment += delta
      return
    }
    default:
      if (systemNamespaceOf(type) === undefined) markActive(e, at)
  }
}

const clamp = (n: number) => Math.max(0, Math.min(1000, Math.round(n)))
const saturate = (x: number, scale: number) => 1 - Math.exp(-x / scale)
const r1 = (n: number) => Math.round(n * 10) / 10

/** The score of the evidence at `now` (ms), with each component and the numbers it used. */
export const computeScore = (e: Evidence, facts: Facts, now: number): Score => {
  const A = valueAt(e.allowed, now)
  const D = valueAt(e.denied, now)
  const M = valueAt(e.monitorViolations, now)
  const compliance = clamp(200 + 800 * saturate(A, 1000) - 60 * D - 30 * M)

  const C = valueAt(e.enforcementCost, now)
  const enforcement = clamp(1000 - C)

  const P = valueAt(e.approved, now)
  const H = valueAt(e.humanDenied, now)
  const X = valueAt(e.expiredApprovals, now)
  const oversight = clamp(600 + 400 * saturate(P, 20) - 100 * H - 25 * X)

  const ageDays = Math.max(0, (now - e.registeredAt) / DAY_MS)
  const act = valueAt(e.activeDays, now)
  const tenure = clamp(500 * Math.min(1, ageDays / 90) + 500 * saturate(act, 30))

  const keyed = facts.activeAgentKeys > 0
  const identity =
    (facts.hasVersion ? 250 : 0) +
    (keyed ? 250 : 0) +
    (keyed && facts.keysWithoutExpiry === 0 ? 250 : 0) +
    (keyed && facts.newestKeyAgeDays !== null && facts.newestKeyAgeDays < 90 ? 250 : 0)

  const components: Array<Component> = [
    {
      name: "policy_compliance",
      score: compliance,
      weight: WEIGHTS.policy_compliance,
      detail: {
        allowed: r1(A),
        denied: r1(D),
        monitorViolations: r1(M),
        dailyAllowedCap: DAILY_ALLOWED_CAP,
        halfLifeDays: HALF_LIFE_DAYS,
        formula: "200 + 800·(1 − e^(−allowed/1000)) − 60·denied − 30·monitorViolations",
      },
    },
    {
      name: "enforcement_history",
      score: enforcement,
      weight: WEIGHTS.enforcement_history,
      detail: {
        cost: r1(C),
        open: Object.keys(e.open).length,
        halfLifeDays: HALF_LIFE_DAYS,
        formula: "1000 − Σ cost (warning 100, throttle 250, suspension 500, revocation 1000; overturned 0)",
      },
    },
    {
      name: "human_oversight",
      score: oversight,
      weight: WEIGHTS.human_oversight,
      detail: {
        approved: r1(P),
        denied: r1(H),
        expired: r1(X),
        halfLifeDays: HALF_LIFE_DAYS,
        formula: "600 + 400·(1 − e^(−approved/20)) − 100·denied − 25·expired",
      },
    },
    {
      name: "tenure_activity",
      score: tenure,
      weight: WEIGHTS.tenure_activity,
      detail: {
        ageDays: r1(ageDays),
        activeDays: r1(act),
        halfLifeDays: HALF_LIFE_DAYS,
        formula: "500·min(1, ageDays/90) + 500·(1 − e^(−activeDays/30))",
      },
    },
    {
      name: "identity_keys",
      score: identity,
      weight: WEIGHTS.identity_keys,
      detail: {
        hasVersion: facts.hasVersion,
        activeAgentKeys: facts.activeAgentKeys,
        keysWithoutExpiry: facts.keysWithoutExpiry,
        newestKeyAgeDays: facts.newestKeyAgeDays === null ? null : r1(facts.newestKeyAgeDays),
        formula: "250 each: a registered version; an agent key; every agent key expires; newest key < 90 days old",
      },
    },
  ]
  const weighted = Math.round(components.reduce((sum, c) => sum + c.score * c.weight, 0))
  const score = clamp(weighted + e.adjustment)
  components.push({
    name: "operator_adjustment",
    score: clamp(500 + e.adjustment),
    weight: 0,
    detail: {
      net: e.adjustment,
      adjustments: e.totals.adjustments ?? 0,
      neutral: 500,
      formula: "net = Σ delta of operator adjustments, added to the weighted sum (score shows 500 + net)",
    },
  })
  return { score, tier: tierOf(score), components }
}

/** A copy that `applyEvent` may change without touching the original. */
export const cloneEvidence = (e: Evidence): Evidence => ({
  ...e,
  open: { ...e.open },
  upheld: { ...e.upheld },
  totals: { ...e.totals },
})
