import { Schema } from "effect"
import { ApprovalStatus } from "./Approval.ts"

export class ApprovalNotFound extends Schema.TaggedError<ApprovalNotFound>()("ApprovalNotFound", {
  approvalId: Schema.String,
}) {}

/** Deciding an approval that was already decided, or that expired undecided. */
export class ApprovalNotPending extends Schema.TaggedError<ApprovalNotPending>()("ApprovalNotPending", {
  approvalId: Schema.String,
  status: ApprovalStatus,
}) {}

/** The approval names its approvers, and the deciding credential is not one of them. */
export class ApproverNotListed extends Schema.TaggedError<ApproverNotListed>()("ApproverNotListed", {
  approvalId: Schema.String,
}) {}
