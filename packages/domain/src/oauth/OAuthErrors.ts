import { Schema } from "effect"

export class OAuthClientNotFound extends Schema.TaggedError<OAuthClientNotFound>()("OAuthClientNotFound", {
  clientId: Schema.String,
}) {}

export class OAuthGrantNotFound extends Schema.TaggedError<OAuthGrantNotFound>()("OAuthGrantNotFound", {
  grantId: Schema.String,
}) {}

/**
 * A refusal of the OAuth protocol (RFC 6749 5.2, 4.1.2.1): `error` is the RFC's code. `redirect`: the
 * client and redirect URI were verified, so the refusal may go back to the app; otherwise it is shown to
 * the person and never redirected (an unverified redirect URI is an open redirector).
 */
export class OAuthRefused extends Schema.TaggedError<OAuthRefused>()("OAuthRefused", {
  error: Schema.String,
  description: Schema.String,
  status: Schema.Number,
  redirect: Schema.Boolean,
}) {}
