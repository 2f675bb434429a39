import { Schema } from "effect"
import { GuardAction, MAX_APPROVAL_CONTEXT_BYTES } from "../approvals/Approval.ts"
import { jsonObject } from "../shared/schemas.ts"
import { DECISIONS, MatchedRule } from "./engine/index.ts"

/** POST /guard and POST /policies/evaluate (D6): `{action, context, agentId}`, plus an approval to use. */
export const GuardRequestInput = Schema.Struct({
  action: GuardAction,
  context: Schema.optionalKey(
    jsonObject({
      description: `what the action would do, as a JSON object (at most ${MAX_APPROVAL_CONTEXT_BYTES / 1024} KiB encoded); rules read it as \`context.*\``,
    }),
  ),
  agentId: Schema.optionalKey(
    Schema.String.annotate({
      description: "the acting agent; required with a workspace credential, implied by an agent-bound one",
      examples: ["agt_example"],
    }),
  ),
  approvalId: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "an approved approval (`apr_…`) for this very agent, action and context: lets exactly one call through",
    }),
  ),
}).annotate({ identifier: "GuardRequest" })
export type GuardRequestInput = typeof GuardRequestInput.Type

/**
 * Reason codes: the engine's (POLICY_DENIED, APPROVAL_REQUIRED, POLICY_ALLOWED, NO_MATCHING_POLICY,
 * CONDITION_ERROR, POLICY_MONITORED, AGENT_SUSPENDED, AGENT_DEREGISTERED) and the approval's:
 * APPROVAL_GRANTED (this call used an approved approval), APPROVAL_PENDING, APPROVAL_DENIED,
 * APPROVAL_EXPIRED, APPROVAL_USED, APPROVAL_MISMATCH, APPROVAL_NOT_APPROVER, APPROVAL_NOT_FOUND, APPROVAL_QUEUE_FULL.
 */
export const GuardReason = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  policyId: Schema.optionalKey(Schema.String),
  ruleId: Schema.optionalKey(Schema.String),
}).annotate({ identifier: "GuardReason" })
export type GuardReason = typeof GuardReason.Type

export const GuardResult = Schema.Struct({
  decision: Schema.Literals(DECISIONS),
  allowed: Schema.Boolean,
  reasons: Schema.Array(GuardReason),
  matched: Schema.Array(MatchedRule),
  approvalId: Schema.optionalKey(
    Schema.String.annotate({ description: "the approval created (require_approval) or used (allowed) by this call" }),
  ),
  eventId: Schema.String.annotate({ description: "the `policy.evaluated` event that records this decision" }),
}).annotate({ identifier: "GuardResult" })
export type GuardResult = typeof GuardResult.Type

/** What `POST /policies/simulate` asks: the guard's request without an approval (nothing is spent or recorded). */
export const PolicySimulationInput = Schema.Struct({
  action: GuardRequestInput.fields.action,
  context: GuardRequestInput.fields.context,
  agentId: GuardRequestInput.fields.agentId,
}).annotate({ identifier: "PolicySimulationRequest" })
export type PolicySimulationInput = typeof PolicySimulationInput.Type

/** What the saved policies would decide: the guard's answer without an approval or an event, since none is made. */
export const PolicySimulation = Schema.Struct({
  decision: GuardResult.fields.decision,
  allowed: GuardResult.fields.allowed,
  reasons: GuardResult.fields.reasons,
  matched: GuardResult.fields.matched,
}).annotate({ identifier: "PolicySimulation" })
export type PolicySimulation = typeof PolicySimulation.Type
