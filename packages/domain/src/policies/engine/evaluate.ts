import { isJsonObject } from "../../shared/schemas.ts"
import type { CompiledPolicy, CompiledPolicySet, CompiledRule } from "./compile.ts"
import { type AgentFacts, ERROR, EVALUATION_BUDGET, type EvalState, evalCondition, FALSE } from "./conditions.ts"
import type { ApprovalRequirement, Decision, DecisionKind, DecisionReason, MatchedRule } from "./Decision.ts"
import type { RateCounter } from "./RateCounter.ts"

/** What is being asked: may this agent do this action, with these details? */
export interface GuardRequest {
  readonly action: string
  /** Free-form details of the action (a JSON object). */
  readonly context?: Readonly<Record<string, unknown>> | undefined
  readonly agent: AgentFacts
}

export interface EvaluationEnv {
  /** Milliseconds since the epoch: the clock of time windows and rate conditions. */
  readonly now: number
  /** The workspace's decision when no enforced rule matches. */
  readonly guardDefault: "allow" | "deny"
  readonly rate: RateCounter
}

let lastSteps = 0
/**
 * The work the last {@link evaluate} did, in `EVALUATION_BUDGET`'s units (0 for an agent refused
 * before any rule): what the guard's slow lane watches, since a large request can make a set
 * that is cheap on paper costly.
 */
export const evaluationCostSpent = (): number => lastSteps

const EMPTY_CONTEXT: Readonly<Record<string, unknown>> = Object.freeze({})
const NOTHING: ReadonlyArray<never> = Object.freeze([])

const applies = (policy: CompiledPolicy, agent: AgentFacts): boolean => {
  if (policy.targetIds?.has(agent.id)) return true
  const labels = policy.targetLabels
  if (labels) for (let i = 0; i < agent.labels.length; i++) if (labels.has(agent.labels[i]!)) return true
  return false
}

const refused = (code: "AGENT_SUSPENDED" | "AGENT_DEREGISTERED", agent: AgentFacts): Decision => ({
  decision: "deny",
  allowed: false,
  reasons: [
    {
      code,
      message:
        code === "AGENT_SUSPENDED"
          ? `agent ${agent.id} is suspended; it may not act until reinstated`
          : `agent ${agent.id} is deregistered`,
    },
  ],
  matched: NOTHING,
})

const conditionError = (rule: CompiledRule, error: string | undefined, failClosed: boolean): DecisionReason => ({
  code: "CONDITION_ERROR",
  message:
    `rule "${rule.id}" of policy "${rule.policy.name}": ${error ?? "the condition could not be evaluated"}; ` +
    (failClosed ? `the ${rule.effect} rule counts as matched (fail closed)` : "the allow rule does not apply"),
  policyId: rule.policy.id,
  ruleId: rule.id,
})

/**
 * An evaluation that went past {@link EVALUATION_BUDGET} stops where it is and denies (fail
 * closed): the rules it did not reach might have denied.
 */
const overBudget = (rule: CompiledRule, matched: ReadonlyArray<MatchedRule> | undefined): Decision => ({
  decision: "deny",
  allowed: false,
  reasons: [
    {
      code: "CONDITION_ERROR",
      message:
        `evaluation budget exceeded: the call cost more than ${EVALUATION_BUDGET} units by rule "${rule.id}" of ` +
        `policy "${rule.policy.name}", and the rules after it were not evaluated; denied (fail closed)`,
      policyId: rule.policy.id,
      ruleId: rule.id,
    },
  ],
  matched: matched ?? NOTHING,
})

/**
 * The approval that satisfies every enforced require_approval rule that matched, not only the first: the first
 * rule names it (policy, rule), the shortest time-out applies, and when rules name `approvers`, only a credential
 * every such rule names may decide (the intersection). Otherwise a broader rule matched first (an older policy
 * asking anyone's approval for `payments.*`) let anyone with `approvals:manage` pass a later rule that names who may
 * approve (`payments.transfer`, the CFO's key). Rules whose named approvers share nobody cannot be satisfied by one
 * approval: a `conflict`, denied (fail closed) with `CONDITION_ERROR` naming both rules.
 */
const combineApprovals = (
  rules: ReadonlyArray<CompiledRule>,
): ApprovalRequirement | { readonly conflict: DecisionReason } => {
  const first = rules[0]!.approval!
  if (rules.length === 1) return first
  let timeoutSeconds = first.timeoutSeconds
  let approvers: ReadonlyArray<string> | undefined
  let namedBy: CompiledRule | undefined
  for (const rule of rules) {
    const a = rule.approval!
    if (a.timeoutSeconds < timeoutSeconds) timeoutSeconds = a.timeoutSeconds
    if (a.approvers === undefined) continue
    if (approvers === undefined) {
      approvers = a.approvers
      namedBy = rule
      continue
    }
    const named = new Set(a.approvers)
    approvers = approvers.filter((x) => named.has(x))
    if (approvers.length === 0)
      return {
        conflict: {
          code: "CONDITION_ERROR",
          message:
            `rule "${rule.id}" of policy "${rule.policy.name}" and rule "${namedBy!.id}" of policy ` +
            `"${namedBy!.policy.name}" both require approval but name no approver in common: no approval can ` +
            "satisfy both; denied (fail closed)",
          policyId: rule.policy.id,
          ruleId: rule.id,
        },
      }
  }
  return {
    policyId: first.policyId,
    ruleId: first.ruleId,
    timeoutSeconds,
    ...(approvers === undefined ? {} : { approvers }),
  }
}

/**
 * Decides a guard request (decision D6). A suspended or deregistered agent is denied before
 * any rule. Otherwise every rule whose actions match and whose policy targets the agent is
 * evaluated (so each rate condition it reaches counts the call once), and enforced matches
 * combine: any deny wins; else any require_approval; else any allow; else the workspace's
 * `guardDefault` with `NO_MATCHING_POLICY`. Monitor-mode matches are reported, never decide.
 * A condition that cannot be evaluated matches deny and require_approval rules (fail closed)
 * and not allow rules; either way a `CONDITION_ERROR` reason says so. A call whose evaluation
 * costs more than {@link EVALUATION_BUDGET} is denied ({@link overBudget}).
 */
export const evaluate = (set: CompiledPolicySet, request: GuardRequest, env: EvaluationEnv): Decision => {
  const agent = request.agent
  lastSteps = 0
  if (agent.status === "suspended") return refused("AGENT_SUSPENDED", agent)
  if (agent.status === "deregistered") return refused("AGENT_DEREGISTERED", agent)

  const candidates = set.candidates(request.action)
  const context = request.context
  const state: EvalState = {
    action: request.action,
    context: isJsonObject(context) ? context : EMPTY_CONTEXT,
    agent,
    now: env.now,
    rate: env.rate,
    error: undefined,
    cel: undefined,
    steps: 0,
  }

  // Arrays are made only when something lands in them: most calls match a rule or two.
  let matched: Array<MatchedRule> | undefined
  // Enforced matches by effect; a rule that matched by failing closed brings its error reason instead.
  let denies: Array<DecisionReason> | undefined
  let approvals: Array<DecisionReason> | undefined
  let approvalRules: Array<CompiledRule> | undefined
  let allows: Array<DecisionReason> | undefined
  let notes: Array<DecisionReason> | undefined

  for (let i = 0; i < candidates.length; i++) {
    const rule = candidates[i]!
    const policy = rule.policy
    if (policy.targeted && !applies(policy, agent)) continue
    let reason = rule.reason
    if (rule.condition !== undefined) {
      const outcome = evalCondition(state, rule.condition)
      if (state.steps > EVALUATION_BUDGET) {
        lastSteps = state.steps
        return overBudget(rule, matched)
      }
      if (outcome === FALSE) continue
      if (outcome === ERROR) {
        const failClosed = rule.effect !== "allow"
        const error = conditionError(rule, state.error, failClosed)
        if (!failClosed || policy.mode === "monitor") {
          if (notes === undefined) notes = [error]
          else notes.push(error)
        }
        if (!failClosed) continue
        reason = error
      }
    }
    if (matched === undefined) matched = [rule.matched]
    else matched.push(rule.matched)
    if (policy.mode === "monitor") {
      if (notes === undefined) notes = [rule.monitorNote]
      else notes.push(rule.monitorNote)
      continue
    }
    if (rule.effect === "deny") {
      if (denies === undefined) denies = [reason]
      else denies.push(reason)
    } else if (rule.effect === "require_approval") {
      if (approvals === undefined) {
        approvals = [reason]
        approvalRules = [rule]
      } else {
        approvals.push(reason)
        approvalRules!.push(rule)
      }
    } else if (allows === undefined) allows = [reason]
    else allows.push(reason)
  }

  lastSteps = state.steps
  let decision: DecisionKind
  let deciding: ReadonlyArray<DecisionReason>
  let approval: ApprovalRequirement | undefined
  if (denies === undefined && approvalRules !== undefined) {
    const combined = combineApprovals(approvalRules)
    if ("conflict" in combined) denies = [combined.conflict]
    else approval = combined
  }
  if (denies !== undefined) {
    decision = "deny"
    deciding = denies
  } else if (approvals !== undefined) {
    decision = "require_approval"
    deciding = approvals
  } else if (allows !== undefined) {
    decision = "allow"
    deciding = allows
  } else {
    decision = env.guardDefault
    deciding = [
      {
        code: "NO_MATCHING_POLICY",
        message: `no enforced policy rule matched action "${request.action}"; the workspace default is ${env.guardDefault}`,
      },
    ]
  }
  const reasons = notes === undefined ? deciding : [...deciding, ...notes]
  const result: {
    decision: DecisionKind
    allowed: boolean
    reasons: ReadonlyArray<DecisionReason>
    matched: ReadonlyArray<MatchedRule>
    approval?: Decision["approval"]
  } = { decision, allowed: decision === "allow", reasons, matched: matched ?? NOTHING }
  if (decision === "require_approval" && approval !== undefined) result.approval = approval
  return result
}
