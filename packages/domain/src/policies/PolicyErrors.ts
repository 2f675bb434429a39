import { Schema } from "effect"

export class PolicyNotFound extends Schema.TaggedError<PolicyNotFound>()("PolicyNotFound", {
  policyId: Schema.String,
}) {}

export class PolicyNameTaken extends Schema.TaggedError<PolicyNameTaken>()("PolicyNameTaken", {
  name: Schema.String,
}) {}

/**
 * The workspace already has as many costly guard calls waiting as the slow lane holds for it
 * (`SlowLane.ts`): nothing was evaluated or recorded; retry after `retryAfterSeconds`.
 */
export class GuardBusy extends Schema.TaggedError<GuardBusy>()("GuardBusy", {
  waiting: Schema.Number,
  retryAfterSeconds: Schema.Number,
}) {}
