import { isJsonObject } from "../../shared/schemas.ts"
import { type CompiledCondition, compileCondition, conditionCost, EVALUATION_BUDGET } from "./conditions.ts"
import type { ApprovalRequirement, DecisionReason, MatchedRule } from "./Decision.ts"
import { compileGlob, type Glob } from "./glob.ts"
import {
  GUARD_ACTION_MAX_LENGTH,
  LIMITS,
  type Mode,
  type PolicyDocument,
  type RuleEffect,
  type RuleEnforcement,
} from "./language.ts"
import { type PolicyIssue, type PolicyValidation, validatePolicyDocument } from "./validate.ts"

/** A stored policy as the engine takes it. */
export interface PolicyInput {
  readonly id: string
  readonly version: number
  readonly document: PolicyDocument
}

export interface CompiledPolicy {
  readonly id: string
  readonly version: number
  readonly name: string
  readonly mode: Mode
  /** Undefined: every agent. */
  readonly targetIds: ReadonlySet<string> | undefined
  readonly targetLabels: ReadonlySet<string> | undefined
  readonly targeted: boolean
  /** Set when the stored document no longer validates: its first issue (see {@link invalidStandIn}). */
  readonly invalid?: PolicyIssue | undefined
}

export interface CompiledRule {
  /** Position over the whole set: policy order, then rule order. */
  readonly ordinal: number
  readonly policy: CompiledPolicy
  readonly id: string
  readonly effect: RuleEffect
  readonly condition: CompiledCondition | undefined
  /** What evaluating this rule can cost at most ({@link conditionCost}, plus 1 for the rule itself). */
  readonly cost: number
  /** Built once and shared by every decision that reports them. */
  readonly matched: MatchedRule
  readonly reason: DecisionReason
  readonly monitorNote: DecisionReason
  readonly approval: ApprovalRequirement | undefined
  /** A deny rule's automatic enforcement; undefined in monitor mode, where it is inert. */
  readonly enforce: RuleEnforcement | undefined
}

/**
 * What compiling one stored policy version gave: its validation and each rule's compiled condition. A set keeps
 * them ({@link CompiledPolicySet.compilations}) so that compiling the workspace again (a change to another policy,
 * the 30 s refresh, a save's budget check) reuses them instead of parsing and checking every CEL expression again:
 * the process-wide CEL cache holds 4,096 expressions, fewer than one workspace may have, and a workspace of
 * thousands of distinct expressions recompiled them all, seconds of blocked event loop, at every load.
 */
export interface PolicyCompilation {
  /** The document as compiled, encoded: a row edited in place at the same version is compiled again. */
  readonly json: string
  readonly validation: PolicyValidation
  /** By rule index; undefined for a rule without `when` (and for an invalid document). */
  readonly conditions: ReadonlyArray<CompiledCondition | undefined>
}

const compilationKey = (input: PolicyInput) => `${input.id}\u0000${input.version}`

/** The action a policy set costs most on, and the rules that call reaches. */
export interface WorstCase {
  readonly cost: number
  /** Of which: trying an action not seen before against every pattern the index cannot look up ({@link CompiledPolicySet.scanCost}). */
  readonly scan: number
  /** An action that reaches these rules, or a pattern for a family of them (`tool.*`). */
  readonly action: string
  readonly rules: ReadonlyArray<CompiledRule>
}

const costOfRules = (rules: ReadonlyArray<CompiledRule>) => {
  let total = 0
  for (const r of rules) total += r.cost
  return total
}

/**
 * Exact actions × general globs past which `worstCost` stops trying each exact action against each glob and counts
 * every general rule for it instead (about 50 ms of glob tests at most).
 */
const PRECISE_PAIRS = 200_000

/** How many distinct actions keep their candidate rules cached; past it the cache starts over. */
export const ACTION_CACHE_SIZE = 10_000
const CACHEABLE_ACTION_LENGTH = 512

/**
 * Policies compiled and indexed by action. Immutable apart from a memo of the candidate rules
 * of each action seen (bounded), so one set may serve any number of evaluations.
 */
export class CompiledPolicySet {
  readonly policies: ReadonlyArray<CompiledPolicy>
  readonly rules: ReadonlyArray<CompiledRule>
  /** Each policy version's compilation, by `id \u0000 version`: what the next compilation of the workspace reuses. */
  readonly compilations: ReadonlyMap<string, PolicyCompilation>
  readonly #exact = new Map<string, Array<CompiledRule>>()
  /** `P.*`, keyed by `P.`. */
  readonly #segment = new Map<string, Array<CompiledRule>>()
  /** `P.**`, keyed by `P.`. */
  readonly #deep = new Map<string, Array<CompiledRule>>()
  readonly #everything: Array<CompiledRule> = []
  /** Patterns the index cannot look up, each distinct pattern once with the rules naming it: tried one by one. */
  readonly #general: Array<{ readonly glob: Glob; readonly rules: Array<CompiledRule> }> = []
  /** What trying an action against every one of {@link #general} can cost at most. */
  readonly scanCost: number
  /** What {@link patternsTried} reads: general patterns tried, summed over lookups. */
  #tried = 0
  readonly #cache = new Map<string, ReadonlyArray<CompiledRule>>()
  readonly #costs = new Map<string, number>()
  /** Rules with an automatic enforcement, by `policyId \u0000 ruleId`. */
  readonly #enforcing = new Map<string, RuleEnforcement>()
  #worst: WorstCase | undefined

  constructor(
    policies: ReadonlyArray<CompiledPolicy>,
    rules: ReadonlyArray<{ rule: CompiledRule; actions: ReadonlyArray<string> }>,
    compilations: ReadonlyMap<string, PolicyCompilation> = new Map(),
  ) {
    this.policies = policies
    this.compilations = compilations
    this.rules = rules.map((r) => r.rule)
    const push = (map: Map<string, Array<CompiledRule>>, key: string, rule: CompiledRule) => {
      const list = map.get(key)
      if (list) list.push(rule)
      else map.set(key, [rule])
    }
    const general = new Map<string, { readonly glob: Glob; readonly rules: Array<CompiledRule> }>()
    for (const { rule, actions } of rules) {
      if (rule.enforce) this.#enforcing.set(`${rule.policy.id}\u0000${rule.id}`, rule.enforce)
      for (const pattern of actions) {
        const glob = compileGlob(pattern)
        switch (glob.kind) {
          case "all":
            this.#everything.push(rule)
            break
          case "exact":
            push(this.#exact, glob.prefix, rule)
            break
          case "segment":
            push(this.#segment, glob.prefix, rule)
            break
          case "deep":
            push(this.#deep, glob.prefix, rule)
            break
          case "general": {
            const known = general.get(pattern)
            if (known) known.rules.push(rule)
            else general.set(pattern, { glob, rules: [rule] })
          }
        }
      }
    }
    let scan = 0
    for (const entry of general.values()) {
      this.#general.push(entry)
      scan += entry.glob.cost(GUARD_ACTION_MAX_LENGTH)
    }
    this.scanCost = scan
  }

  /**
   * How many times this set has tried an action against one of the patterns the index cannot look up (each such
   * pattern, at every lookup not served from the cache): what tests count to show that a path does not try every
   * pair, instead of timing it.
   */
  get patternsTried(): number {
    return this.#tried
  }

  /** The automatic enforcement of a rule (deny rules of enforce-mode policies only), if it has one. */
  enforcementOf(policyId: string, ruleId: string): RuleEnforcement | undefined {
    return this.#enforcing.size === 0 ? undefined : this.#enforcing.get(`${policyId}\u0000${ruleId}`)
  }

  /** The enabled rules whose actions match `action`, in policy order then rule order, each once. */
  candidates(action: string): ReadonlyArray<CompiledRule> {
    const cached = this.#cache.get(action)
    if (cached !== undefined) return cached
    const found = this.#lookup(action)
    if (action.length <= CACHEABLE_ACTION_LENGTH) {
      if (this.#cache.size >= ACTION_CACHE_SIZE) this.#cache.clear()
      this.#cache.set(action, found)
    }
    return found
  }

  /**
   * What one evaluation of `action` can cost at most: the static costs of the rules it reaches
   * (targets aside), and the scan of the patterns ({@link scanCost}) while its candidates are not cached.
   * Memoized like {@link candidates}.
   */
  costOf(action: string): number {
    const scan = this.scanCost === 0 || this.#cache.has(action) ? 0 : this.scanCost
    const known = this.#costs.get(action)
    if (known !== undefined) return known + scan
    const cost = costOfRules(this.candidates(action))
    if (action.length <= CACHEABLE_ACTION_LENGTH) {
      if (this.#costs.size >= ACTION_CACHE_SIZE) this.#costs.clear()
      this.#costs.set(action, cost)
    }
    return cost + scan
  }

  /**
   * The most one evaluation can cost, over every action, as the sum of the static costs of the
   * rules it reaches (targets aside: an upper bound). Actions are probed by family: each exact
   * action; for each `P.*` and `P.**` prefix an action just under it that no exact rule names
   * (which reaches every `**` rule above it too); and one with no dot. Other globs may match
   * anything, so a family probe counts all of them. Every probe also pays the scan of those globs
   * ({@link scanCost}): an action no call named before is tried against each of them. Computed once per set.
   */
  worstCost(): WorstCase {
    if (this.#worst !== undefined) return this.#worst
    const scan = this.scanCost
    let worst: WorstCase = { cost: scan, scan, action: "*", rules: [] }
    const consider = (action: string, rules: ReadonlyArray<CompiledRule>) => {
      const cost = costOfRules(rules) + scan
      if (cost > worst.cost) worst = { cost, scan, action, rules }
    }
    const general = new Set(this.#general.flatMap((g) => g.rules))
    const generalCost = costOfRules([...general])
    /** The rules `probe` reaches without the general globs, and every general rule: an upper bound. */
    const upTo = (probe: string, shown: string) => {
      const own = this.#lookup(probe, false).filter((r) => !general.has(r))
      const cost = costOfRules(own) + generalCost + scan
      if (cost > worst.cost)
        worst = { cost, scan, action: shown, rules: [...own, ...general].sort((a, b) => a.ordinal - b.ordinal) }
    }
    // Each exact action is tried against each general glob while the pairs stay few; past that, as if every general
    // glob matched it (the family probes' bound): 50,000 exact actions × 50,000 globs took minutes, at a save's
    // budget check and at the first guard call after each load.
    const precise = this.#exact.size * this.#general.length <= PRECISE_PAIRS
    for (const action of this.#exact.keys())
      if (precise) consider(action, this.#lookup(action))
      else upTo(action, action)
    upTo("\u0000", "*")
    for (const prefix of new Set([...this.#segment.keys(), ...this.#deep.keys()])) upTo(`${prefix}\u0000`, `${prefix}*`)
    this.#worst = worst
    return worst
  }

  #lookup(action: string, withGeneral = true): ReadonlyArray<CompiledRule> {
    const found: Array<CompiledRule> = []
    const add = (list: ReadonlyArray<CompiledRule> | undefined) => {
      if (list) for (const r of list) found.push(r)
    }
    add(this.#everything)
    add(this.#exact.get(action))
    const lastDot = action.lastIndexOf(".")
    if (lastDot >= 0) {
      if (this.#segment.size > 0) add(this.#segment.get(action.slice(0, lastDot + 1)))
      if (this.#deep.size > 0) {
        for (let i = action.indexOf("."); i >= 0; i = action.indexOf(".", i + 1)) {
          add(this.#deep.get(action.slice(0, i + 1)))
        }
      }
    }
    if (withGeneral) {
      this.#tried += this.#general.length
      for (const { glob, rules } of this.#general) if (glob.test(action)) add(rules)
    }
    if (found.length < 2) return found
    found.sort((a, b) => a.ordinal - b.ordinal)
    // A rule with several matching patterns is found once per pattern.
    let n = 1
    for (let i = 1; i < found.length; i++) if (found[i] !== found[n - 1]) found[n++] = found[i]!
    found.length = n
    return found
  }
}

const defaultMessage = (effect: RuleEffect, ruleId: string, policyName: string) =>
  effect === "deny"
    ? `denied by rule "${ruleId}" of policy "${policyName}"`
    : effect === "require_approval"
      ? `rule "${ruleId}" of policy "${policyName}" requires approval`
      : `allowed by rule "${ruleId}" of policy "${policyName}"`

const REASON_CODE_OF: Readonly<Record<RuleEffect, "POLICY_DENIED" | "APPROVAL_REQUIRED" | "POLICY_ALLOWED">> = {
  deny: "POLICY_DENIED",
  require_approval: "APPROVAL_REQUIRED",
  allow: "POLICY_ALLOWED",
}

/** The parts of a document that no longer validates that still do, each checked alone in a minimal document. */
const salvage = (raw: unknown) => {
  const r: Record<string, unknown> = isJsonObject(raw) ? raw : {}
  const alone = (field: "name" | "mode" | "target") => {
    if (r[field] === undefined) return undefined
    const v = validatePolicyDocument({
      name: "salvaged",
      rules: [{ id: "r", effect: "deny", actions: ["*"] }],
      [field]: r[field],
    })
    return v.ok ? v.document : undefined
  }
  return {
    name: alone("name")?.name,
    mode: alone("mode")?.mode,
    target: alone("target")?.target,
    // A target that is there but does not validate cannot say whom the policy meant: every agent, then.
    targetBroken: r.target !== undefined && alone("target") === undefined,
  }
}

/**
 * The stand-in for a stored policy whose document no longer validates (a stricter check after
 * an upgrade, a hand-edited row): one deny rule on every action, whose reason names the policy
 * and its first issue. It fails closed for that policy only, as for a condition that cannot be
 * evaluated (D6): within the policy's target when the target still validates (every agent when
 * it does not), and in its mode (a `monitor` policy still only reports). Updating or deleting the
 * policy lifts it. A document that still says `enabled: false` is left out, as when it was valid.
 */
const invalidStandIn = (input: PolicyInput, issue: PolicyIssue | undefined, ordinal: number): CompiledRule => {
  const kept = salvage(input.document)
  const mode: Mode = kept.mode ?? "enforce"
  const target = kept.targetBroken ? undefined : kept.target
  const policy: CompiledPolicy = {
    id: input.id,
    version: input.version,
    name: kept.name ?? input.id,
    mode,
    targetIds: target?.agentIds ? new Set(target.agentIds) : undefined,
    targetLabels: target?.labels ? new Set(target.labels) : undefined,
    targeted: target !== undefined,
    invalid: issue ?? { field: "", issue: "does not validate" },
  }
  const ruleId = "(invalid)"
  const whom = target !== undefined ? "the agents it targets" : "every agent"
  return {
    ordinal,
    policy,
    id: ruleId,
    effect: "deny",
    condition: undefined,
    cost: 1,
    matched: Object.freeze({
      effect: "deny" as const,
      mode,
      policyId: input.id,
      policyVersion: input.version,
      ruleId,
    }),
    reason: Object.freeze({
      code: "CONDITION_ERROR" as const,
      message:
        `policy ${input.id} (version ${input.version}) no longer validates` +
        (issue ? ` (${issue.field || "document"}: ${issue.issue})` : "") +
        `; every action of ${whom} is denied until it is updated or deleted (fail closed)`,
      policyId: input.id,
      ruleId,
    }),
    monitorNote: Object.freeze({
      code: "POLICY_MONITORED" as const,
      message:
        `monitor-mode policy ${input.id} (version ${input.version}) no longer validates` +
        (issue ? ` (${issue.field || "document"}: ${issue.issue})` : "") +
        "; it would deny every action until it is updated or deleted; not enforced",
      policyId: input.id,
      ruleId,
    }),
    approval: undefined,
    enforce: undefined,
  }
}

/**
 * Compiles a workspace's policies, once, when they are saved or loaded: documents are
 * validated again (a stored document that no longer validates becomes a fail-closed deny,
 * see {@link invalidStandIn}), conditions become trees for one interpreter, CEL is parsed and checked, and rules are
 * indexed by action. Disabled policies are left out. Order matters only for reporting: it is
 * the order of `matched`, of reasons, and which approval rule names the approval (see `combineApprovals`).
 */
export const compilePolicies = (
  policies: ReadonlyArray<PolicyInput>,
  reuse?: ReadonlyMap<string, PolicyCompilation>,
): CompiledPolicySet => {
  const compiled: Array<CompiledPolicy> = []
  const rules: Array<{ rule: CompiledRule; actions: ReadonlyArray<string> }> = []
  const compilations = new Map<string, PolicyCompilation>()
  for (const input of policies) {
    const key = compilationKey(input)
    const json = JSON.stringify(input.document) ?? ""
    const known = compilations.get(key) ?? reuse?.get(key)
    const hit = known?.json === json ? known : undefined
    const validation = hit?.validation ?? validatePolicyDocument(input.document)
    const conditions: Array<CompiledCondition | undefined> = []
    if (!validation.ok) {
      compilations.set(key, hit ?? { json, validation, conditions })
      const raw = input.document as { enabled?: unknown } | null
      if (typeof raw === "object" && raw !== null && raw.enabled === false) continue
      const standIn = invalidStandIn(input, validation.issues[0], rules.length)
      compiled.push(standIn.policy)
      rules.push({ rule: standIn, actions: ["*"] })
      continue
    }
    const doc = validation.document
    if (!doc.enabled) {
      compilations.set(key, hit ?? { json, validation, conditions })
      continue
    }
    const policy: CompiledPolicy = {
      id: input.id,
      version: input.version,
      name: doc.name,
      mode: doc.mode,
      targetIds: doc.target?.agentIds ? new Set(doc.target.agentIds) : undefined,
      targetLabels: doc.target?.labels ? new Set(doc.target.labels) : undefined,
      targeted: doc.target !== undefined,
    }
    compiled.push(policy)
    doc.rules.forEach((r, i) => {
      const rateKey = `${input.id}\u0000${r.id}`
      const condition = hit ? hit.conditions[i] : r.when === undefined ? undefined : compileCondition(r.when, rateKey)
      conditions.push(condition)
      const rule: CompiledRule = {
        ordinal: rules.length,
        policy,
        id: r.id,
        effect: r.effect,
        condition,
        cost: 1 + (condition === undefined ? 0 : conditionCost(condition)),
        // Keys in code-unit order, as in `reason` and `monitorNote`: the guard's events carry these objects, and
        // data listing its keys in order is canonicalized by JSON.stringify (`canonicalize`'s fast path).
        matched: Object.freeze({
          effect: r.effect,
          mode: doc.mode,
          policyId: input.id,
          policyVersion: input.version,
          ruleId: r.id,
        }),
        reason: Object.freeze({
          code: REASON_CODE_OF[r.effect],
          message: r.reason ?? defaultMessage(r.effect, r.id, doc.name),
          policyId: input.id,
          ruleId: r.id,
        }),
        monitorNote: Object.freeze({
          code: "POLICY_MONITORED" as const,
          message: `monitor-mode policy "${doc.name}" matched rule "${r.id}" (${r.effect}${r.reason ? `: ${r.reason}` : ""}); not enforced`,
          policyId: input.id,
          ruleId: r.id,
        }),
        approval:
          r.effect === "require_approval"
            ? Object.freeze({
                policyId: input.id,
                ruleId: r.id,
                timeoutSeconds: r.approval?.timeoutSeconds ?? LIMITS.approvalTimeoutSeconds.default,
                ...(r.approval?.approvers ? { approvers: Object.freeze([...r.approval.approvers]) } : {}),
              })
            : undefined,
        enforce:
          r.effect === "deny" && doc.mode === "enforce" && r.enforce ? Object.freeze({ ...r.enforce }) : undefined,
      }
      rules.push({ rule, actions: r.actions })
    })
    compilations.set(key, hit ?? { json, validation, conditions })
  }
  return new CompiledPolicySet(compiled, rules, compilations)
}

/**
 * Why saving `saved` among a workspace's `others` would put one evaluation over
 * {@link EVALUATION_BUDGET}: an issue for each of its rules that the costliest action reaches
 * (`rules[3].when`), and for each of its patterns the index tries one by one when that scan is part
 * of the cost (`rules[3].actions[1]`); none when the set fits. Only the saved policy's rules and
 * patterns are named, and only when they are part of the excess: a set already over (saved before
 * this check) does not stop unrelated saves; its calls are still held to the budget at run time.
 */
export const budgetIssues = (
  others: ReadonlyArray<PolicyInput>,
  saved: PolicyInput,
  reuse?: ReadonlyMap<string, PolicyCompilation>,
): ReadonlyArray<PolicyIssue> => {
  const worst = compilePolicies([...others.filter((p) => p.id !== saved.id), saved], reuse).worstCost()
  if (worst.cost <= EVALUATION_BUDGET) return []
  const over =
    `the workspace's policies could cost up to ${worst.cost} units on one call of action "${worst.action}", ` +
    `over the budget of ${EVALUATION_BUDGET} per evaluation`
  const index = new Map(saved.document.rules.map((r, i) => [r.id, i]))
  const rules: Array<PolicyIssue> = worst.rules
    .filter((r) => r.policy.id === saved.id)
    .map((r) => {
      const i = index.get(r.id)!
      return {
        field: saved.document.rules[i]?.when === undefined ? `rules[${i}]` : `rules[${i}].when`,
        issue:
          `${over}; this rule costs up to ${r.cost} (a comprehension is counted at the largest list a request can ` +
          "hold, a `glob` condition whose pattern has two wildcards or more at the longest string it applies to)",
      }
    })
  const patterns: Array<PolicyIssue> = []
  if (worst.scan > 0 && saved.document.enabled) {
    const seen = new Set<string>()
    saved.document.rules.forEach((rule, i) => {
      rule.actions.forEach((pattern, j) => {
        if (seen.has(pattern)) return
        seen.add(pattern)
        const glob = compileGlob(pattern)
        if (glob.kind !== "general") return
        patterns.push({
          field: `rules[${i}].actions[${j}]`,
          issue:
            `${over}, of which ${worst.scan} for trying an action not seen before against each pattern with a ` +
            `wildcard other than a trailing \`.*\` or \`.**\`; this pattern costs up to ` +
            `${glob.cost(GUARD_ACTION_MAX_LENGTH)} (for an action of ${GUARD_ACTION_MAX_LENGTH} characters)`,
        })
      })
    })
  }
  // The larger part of the cost first.
  const issues = worst.scan > worst.cost - worst.scan ? [...patterns, ...rules] : [...rules, ...patterns]
  return issues.slice(0, LIMITS.issues)
}
