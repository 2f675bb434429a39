import { Schema } from "effect"

export class MemberNotFound extends Schema.TaggedError<MemberNotFound>()("MemberNotFound", {
  userId: Schema.String,
}) {}

export class InvitationNotFound extends Schema.TaggedError<InvitationNotFound>()("InvitationNotFound", {
  invitationId: Schema.String,
}) {}

/** A sign-in or an invitation that cannot be honoured; `code` says why, for the envelope. */
export class SignInRefused extends Schema.TaggedError<SignInRefused>()("SignInRefused", {
  code: Schema.String,
  message: Schema.String,
}) {}

/** No person behind the credential (an API key), or a user that no longer exists. */
export class UserNotFound extends Schema.TaggedError<UserNotFound>()("UserNotFound", {}) {}

/** An invitation token that names no invitation (garbage, or never issued). */
export class InvitationTokenUnknown extends Schema.TaggedError<InvitationTokenUnknown>()(
  "InvitationTokenUnknown",
  {},
) {}

/**
 * A workspace's invitations of the last 24 hours are at their limit: each is an e-mail the service sends, as itself,
 * to an address the caller names, so a leaked key must not make it a mailer for spam.
 */
export class InvitationLimitReached extends Schema.TaggedError<InvitationLimitReached>()("InvitationLimitReached", {
  limit: Schema.Number,
  retryAfterSeconds: Schema.Number,
}) {}
