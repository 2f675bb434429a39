import { Schema } from "effect"

export class ReportNotFound extends Schema.TaggedError<ReportNotFound>()("ReportNotFound", {
  reportId: Schema.String,
}) {}

/** A certification was asked of a report that does not support it: unmet required controls, or not ready. */
export class CertificationRefused extends Schema.TaggedError<CertificationRefused>()("CertificationRefused", {
  message: Schema.String,
  unmetControls: Schema.Array(Schema.String),
}) {}

export class CertificationNotFound extends Schema.TaggedError<CertificationNotFound>()("CertificationNotFound", {
  certificationId: Schema.String,
}) {}
