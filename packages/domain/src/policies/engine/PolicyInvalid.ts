import { Schema } from "effect"
import type { PolicyIssue } from "./validate.ts"

export const PolicyIssueSchema = Schema.Struct({ field: Schema.String, issue: Schema.String }).annotate({
  identifier: "PolicyIssue",
})

/**
 * A policy document that is not valid: `field` and `issue` are the first problem (for the
 * envelope's `details`), `issues` all of them in document order (at most 100).
 */
export class PolicyInvalid extends Schema.TaggedError<PolicyInvalid>()("PolicyInvalid", {
  field: Schema.String,
  issue: Schema.String,
  issues: Schema.Array(PolicyIssueSchema),
  /** Set when a stored policy fails to compile. */
  policyId: Schema.optional(Schema.String),
}) {}

/** The error for a non-empty list of issues. */
export const policyInvalid = (issues: ReadonlyArray<PolicyIssue>, policyId?: string): PolicyInvalid =>
  new PolicyInvalid({
    field: issues[0]?.field ?? "",
    issue: issues[0]?.issue ?? "is not a valid policy document",
    issues,
    ...(policyId === undefined ? {} : { policyId }),
  })
