import { Schema } from "effect"

/** No such item in the caller's workspace (another workspace's item is indistinguishable from none). */
export class ContentNotFound extends Schema.TaggedError<ContentNotFound>()("ContentNotFound", {
  contentId: Schema.String,
}) {}

/**
 * A workspace's takedown notices of the last 24 hours are at their limit: each is an e-mail the service sends, as
 * itself, to an address the caller names, so a leaked key must not make it a mailer for spam.
 */
export class TakedownLimitReached extends Schema.TaggedError<TakedownLimitReached>()("TakedownLimitReached", {
  limit: Schema.Number,
  retryAfterSeconds: Schema.Number,
}) {}
