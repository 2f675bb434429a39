import { Schema } from "effect"
import { GUARD_ACTION_MAX_LENGTH } from "../policies/engine/language.ts"
import { Cursor, Description, Id, isReadable, jsonObject, Limit, Timestamp, UNSEEN } from "../shared/schemas.ts"

export const ApprovalStatus = Schema.Literals(["pending", "approved", "denied", "expired"])
export type ApprovalStatus = typeof ApprovalStatus.Type

/** Undecided approvals are denied after this long unless the request or the rule says otherwise (D7). */
export const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 3600
/** The shortest time-out: a machine approver can answer within seconds. */
export const MIN_APPROVAL_TIMEOUT_SECONDS = 1
/** The longest time-out, 30 days: an approval older than that decides a situation that no longer exists. */
export const MAX_APPROVAL_TIMEOUT_SECONDS = 30 * 86_400
/**
 * Approvals of one agent awaiting a decision past which the guard requests no more (it answers deny,
 * `APPROVAL_QUEUE_FULL`): an agent varying its context could otherwise fill the approvers' queue.
 */
export const MAX_PENDING_APPROVALS_PER_AGENT = 100
/**
 * `decisionReason` of an approval that was pending when its agent was deregistered: it expired then (D7's "expire
 * as denied"; no approval of an agent that can no longer act awaits anyone), and `approval.decided` says why.
 */
export const AGENT_DEREGISTERED_REASON = "the agent was deregistered"
/** `context` of an explicit request, encoded. */
export const MAX_APPROVAL_CONTEXT_BYTES = 32 * 1024

export const ApprovalTimeout = Schema.Int.check(
  Schema.isBetween({ minimum: MIN_APPROVAL_TIMEOUT_SECONDS, maximum: MAX_APPROVAL_TIMEOUT_SECONDS }),
).annotate({
  description: `seconds until an undecided approval expires as denied, ${MIN_APPROVAL_TIMEOUT_SECONDS}..${MAX_APPROVAL_TIMEOUT_SECONDS}, default ${DEFAULT_APPROVAL_TIMEOUT_SECONDS}`,
})

export const ActionName = Schema.String.check(
  Schema.isMinLength(1),
  Schema.isMaxLength(GUARD_ACTION_MAX_LENGTH),
).annotate({
  description: "the action name, as the agent sends it to the guard",
})

/** Printable ASCII without the space: nearly every action, accepted without a closer look. */
const PLAIN_ACTION = /^[\x21-\x7e]*$/

/**
 * Why an action cannot be asked about, or undefined. A policy's action patterns cannot hold whitespace or control
 * characters, and its exact names are matched as written: an action carrying an invisible character, or spelled in
 * another Unicode normalization form (decomposed accents), is one no exact rule can name, yet it reads the same as
 * the named one in the audit trail and the dashboard. Refused rather than decided by the workspace's default.
 */
const guardActionProblem = (action: string): string | undefined => {
  if (PLAIN_ACTION.test(action)) return undefined
  if (UNSEEN.test(action)) return "must not contain whitespace, control characters or invisible formatting characters"
  if (action.normalize("NFC") !== action) return "must be in Unicode normalization form C (NFC), as policies name it"
  return undefined
}

/** An optional note or reason of an approval: a {@link Description} that says something. */
const Note = Description.check(isReadable)

/**
 * The action a guard call asks about, and an explicit approval request names: an {@link ActionName} that a policy's
 * exact name could match. One definition for both (an approval for an action the guard refuses could never be used).
 */
export const GuardAction = ActionName.check(Schema.makeFilter((s: string) => guardActionProblem(s) ?? true)).annotate({
  description:
    "the action name, as policies name it: 1–200 characters, no whitespace, control or invisible formatting " +
    "characters, in Unicode NFC",
})

export const Approval = Schema.Struct({
  id: Id("apr"),
  workspaceId: Schema.String,
  agentId: Schema.String,
  action: Schema.String,
  context: Schema.Record(Schema.String, Schema.Unknown).annotate({
    description: "the action's details the approval is bound to",
  }),
  status: ApprovalStatus.annotate({
    description: "`expired`: nobody decided before `expiresAt`, which counts as denied",
  }),
  reason: Schema.NullOr(Schema.String).annotate({ description: "why approval is needed (the rule's or requester's)" }),
  policyId: Schema.NullOr(Schema.String).annotate({ description: "the policy whose rule asked, for guard requests" }),
  ruleId: Schema.NullOr(Schema.String).annotate({ description: "the `require_approval` rule, for guard requests" }),
  approvers: Schema.Array(Schema.String).annotate({
    description: "credential ids (`key_…`) that may decide; empty: any credential with `approvals:manage`",
  }),
  bindingHash: Schema.String.annotate({
    description: "hex SHA-256 of JCS({agentId, action, context}): the guard call it allows must hash the same",
  }),
  decidedBy: Schema.NullOr(Schema.String).annotate({ description: "the credential that decided" }),
  decisionReason: Schema.NullOr(Schema.String),
  decidedAt: Schema.NullOr(Timestamp).annotate({ description: "for `expired`, the moment it expired" }),
  expiresAt: Timestamp.annotate({
    description: "undecided by then, it is denied; approved, it must be used by the guard by then",
  }),
  usedAt: Schema.NullOr(Timestamp).annotate({
    description: "when a guard call used the approval (it allows one call only)",
  }),
  createdAt: Timestamp,
}).annotate({ identifier: "Approval" })
export type Approval = typeof Approval.Type

export const CreateApproval = Schema.Struct({
  agentId: Schema.String.annotate({ description: "the agent that wants to act" }),
  action: GuardAction,
  context: Schema.optionalKey(
    jsonObject({
      description: "the action's details, at most 32 KiB encoded; default `{}`. The guard call must send the same",
    }),
  ),
  reason: Schema.optionalKey(Note),
  timeoutSeconds: Schema.optionalKey(ApprovalTimeout),
}).annotate({ identifier: "CreateApproval" })
export type CreateApproval = typeof CreateApproval.Type

export const DecideApproval = Schema.Struct({
  decision: Schema.Literals(["approved", "denied"]),
  reason: Schema.optionalKey(Note),
}).annotate({ identifier: "DecideApproval" })
export type DecideApproval = typeof DecideApproval.Type

export const ApprovalListQuery = Schema.Struct({
  limit: Schema.optionalKey(Limit),
  cursor: Schema.optionalKey(Cursor),
  status: Schema.optionalKey(
    Schema.Array(Schema.Literals(["pending", "approved", "denied", "expired", "all"])).annotate({
      description: "one or more statuses, comma-separated or repeated, or `all`; default `pending`",
    }),
  ),
  agentId: Schema.optionalKey(Schema.String),
  action: Schema.optionalKey(ActionName),
}).annotate({ identifier: "ApprovalListQuery" })
export type ApprovalListQuery = typeof ApprovalListQuery.Type
