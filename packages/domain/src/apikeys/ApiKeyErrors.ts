import { Schema } from "effect"

export class ApiKeyNotFound extends Schema.TaggedError<ApiKeyNotFound>()("ApiKeyNotFound", { keyId: Schema.String }) {}

/** Rotating a key that is revoked, or was already replaced. */
export class ApiKeyNotRotatable extends Schema.TaggedError<ApiKeyNotRotatable>()("ApiKeyNotRotatable", {
  keyId: Schema.String,
  reason: Schema.String,
}) {}

/** The request carries no usable credential: missing, malformed, unknown, revoked or expired. */
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {
  message: Schema.String,
}) {}
