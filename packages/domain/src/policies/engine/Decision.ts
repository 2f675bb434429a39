import { Schema } from "effect"
import { EFFECTS, MODES } from "./language.ts"

/**
 * Reason codes of a guard decision: a fixed set, so that clients can branch on them.
 *
 * - `POLICY_DENIED`: an enforced deny rule matched (its `reason` is the message).
 * - `APPROVAL_REQUIRED`: an enforced require_approval rule matched and no deny did.
 * - `POLICY_ALLOWED`: an enforced allow rule matched and no deny or require_approval did.
 * - `NO_MATCHING_POLICY`: no enforced rule matched; the workspace's `guardDefault` decided.
 * - `CONDITION_ERROR`: a rule's condition could not be evaluated. For deny and
 *   require_approval rules the rule counts as matched (fail closed); an allow rule does not.
 * - `POLICY_MONITORED`: a rule of a monitor-mode policy matched; it did not change the decision.
 * - `AGENT_SUSPENDED` / `AGENT_DEREGISTERED`: the agent may not act; no rule was evaluated.
 */
export const REASON_CODES = [
  "POLICY_DENIED",
  "APPROVAL_REQUIRED",
  "POLICY_ALLOWED",
  "NO_MATCHING_POLICY",
  "CONDITION_ERROR",
  "POLICY_MONITORED",
  "AGENT_SUSPENDED",
  "AGENT_DEREGISTERED",
] as const
export type ReasonCode = (typeof REASON_CODES)[number]
export const ReasonCode = Object.fromEntries(REASON_CODES.map((c) => [c, c])) as { readonly [C in ReasonCode]: C }

export const DECISIONS = ["allow", "deny", "require_approval"] as const
export type DecisionKind = (typeof DECISIONS)[number]

export const DecisionReason = Schema.Struct({
  code: Schema.Literals(REASON_CODES),
  message: Schema.String,
  policyId: Schema.optionalKey(Schema.String),
  ruleId: Schema.optionalKey(Schema.String),
}).annotate({ identifier: "DecisionReason" })
export type DecisionReason = typeof DecisionReason.Type

export const MatchedRule = Schema.Struct({
  policyId: Schema.String,
  policyVersion: Schema.Int,
  ruleId: Schema.String,
  effect: Schema.Literals(EFFECTS),
  mode: Schema.Literals(MODES),
}).annotate({ identifier: "MatchedRule" })
export type MatchedRule = typeof MatchedRule.Type

export const ApprovalRequirement = Schema.Struct({
  policyId: Schema.String,
  ruleId: Schema.String,
  timeoutSeconds: Schema.Int,
  approvers: Schema.optionalKey(Schema.Array(Schema.String)),
}).annotate({ identifier: "ApprovalRequirement" })
export type ApprovalRequirement = typeof ApprovalRequirement.Type

/**
 * The engine's answer. `reasons` lists the deciding reasons first, then notes (condition
 * errors of rules that did not decide, monitor matches). `matched` lists every matched rule,
 * monitor ones included, in policy order then rule order.
 */
export const Decision = Schema.Struct({
  decision: Schema.Literals(DECISIONS),
  allowed: Schema.Boolean,
  reasons: Schema.Array(DecisionReason),
  matched: Schema.Array(MatchedRule),
  approval: Schema.optionalKey(ApprovalRequirement),
}).annotate({ identifier: "GuardDecision" })
export type Decision = typeof Decision.Type
