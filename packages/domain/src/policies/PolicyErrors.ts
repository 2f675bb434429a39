import { Schema } from "effect"

export class PolicyNotFound extends Schema.TaggedError<PolicyNotFound>()("PolicyNotFound", {
  policyId: Schema.String,
}) {}

export class PolicyNameTaken extends Schema.TaggedError<PolicyNameTaken>()("PolicyNameTaken", {
  name: Schema.String,
}) {}
