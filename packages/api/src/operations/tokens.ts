import { SdkTokens } from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"

const TokenResult = Schema.Struct({
  token: Schema.String.annotate({
    description:
      "JWT signed with Ed25519 (`kid` in the header; keys at `/.well-known/jwks.json`); send it as `Authorization: Bearer <token>`",
  }),
  expiresAt: Schema.String.annotate({ description: "ISO 8601; 900 s after issue unless the operator set otherwise" }),
}).annotate({ identifier: "SdkToken" })

export const tokenOperations = [
  defineOperation({
    name: "tokens.create",
    method: "POST",
    path: "/tokens",
    scope: null,
    tag: "Tokens",
    summary: "Exchange an API key for an SDK token",
    description:
      "Claims: `iss`, `aud`, `sub` (the key's id), `jti`, `iat`, `nbf`, `exp`, `workspaceId`, `agentId` (agent keys), `environment` and the key's `scopes`. The token acts with the key's scopes and binding, verified locally on every instance, and stops working within seconds when the key is revoked. Verify it yourself with `jose.jwtVerify(token, createRemoteJWKSet(<origin>/.well-known/jwks.json), {issuer, audience})`.",
    successStatus: 201,
    // A replay would have to store the token (a bearer secret) or send it back redacted; a second token is harmless.
    ignoresIdempotencyKey: true,
    input: Schema.Struct({}),
    output: TokenResult,
    handler: (_input, actor) => SdkTokens.use((t) => t.issue(actor)),
  }),
]
