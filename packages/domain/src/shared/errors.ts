import { Schema } from "effect"

/** The caller lacks a scope, or an agent-bound credential reaches outside its agent. */
export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()("PermissionDenied", {
  message: Schema.String,
  /** The scope the credential lacks, when that is the reason. */
  scope: Schema.optional(Schema.String),
  /** What the refusal is about, when it is neither a scope nor the credential's agent binding. */
  field: Schema.optional(Schema.String),
  issue: Schema.optional(Schema.String),
}) {}

/** A well-formed request that breaks a rule only the domain knows (422, naming the field). */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  field: Schema.String,
  message: Schema.String,
}) {}

/** A state conflict that is not a duplicate: deleting what is in use, deciding what was decided. */
export class StateConflict extends Schema.TaggedError<StateConflict>()("StateConflict", {
  code: Schema.String,
  message: Schema.String,
}) {}
