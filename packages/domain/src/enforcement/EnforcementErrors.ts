import { Schema } from "effect"
import { EnforcementStatus } from "./Enforcement.ts"

export class EnforcementNotFound extends Schema.TaggedError<EnforcementNotFound>()("EnforcementNotFound", {
  enforcementId: Schema.String,
}) {}

/** The enforcement was resolved or has expired: the change asked for no longer applies to it. */
export class EnforcementClosed extends Schema.TaggedError<EnforcementClosed>()("EnforcementClosed", {
  enforcementId: Schema.String,
  status: EnforcementStatus,
  message: Schema.String,
}) {}

/** An enforcement is appealed once; the appeal is then resolved. */
export class EnforcementAlreadyAppealed extends Schema.TaggedError<EnforcementAlreadyAppealed>()(
  "EnforcementAlreadyAppealed",
  { enforcementId: Schema.String },
) {}
