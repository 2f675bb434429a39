import { Schema } from "effect"
import { SCOPES } from "../auth/scopes.ts"
import { Id, Name, Timestamp } from "../shared/schemas.ts"

export const ScopeName = Schema.String.annotate({
  examples: ["agents:read"],
  description: `one of: ${SCOPES.join(", ")}; \`policies:evaluate\` is an alias of \`guard:evaluate\``,
})

export const ApiKey = Schema.Struct({
  id: Id("key"),
  name: Schema.String,
  type: Schema.Literals(["workspace", "agent"]),
  agentId: Schema.NullOr(Schema.String),
  environment: Schema.Literals(["live", "test"]),
  scopes: Schema.Array(Schema.String).annotate({
    description:
      "the scopes the key was given; a key made by a person acts with those of them that the person's role in the workspace holds at each use",
  }),
  prefix: Schema.String.annotate({ description: "first 6 characters of the secret, for recognising a key" }),
  status: Schema.Literals(["active", "revoked"]),
  expiresAt: Schema.NullOr(Timestamp),
  revokedAt: Schema.NullOr(Timestamp),
  revokedReason: Schema.NullOr(
    Schema.Literals([
      "revoked",
      "expired",
      "rotated",
      "agent_deregistered",
      "agent_revoked",
      "workspace_deleted",
      "member_removed",
    ]).annotate({
      description:
        "`member_removed`: the member who made the key (in the dashboard, or with a key they made) left or was removed from the workspace",
    }),
  ),
  rotatedTo: Schema.NullOr(Schema.String).annotate({ description: "id of the key that replaced this one" }),
  lastUsedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
}).annotate({ identifier: "ApiKey" })
export type ApiKey = typeof ApiKey.Type

/** A key record with its full value: returned only by create and rotate, once. */
export const ApiKeyWithSecret = Schema.Struct({
  ...ApiKey.fields,
  apiKey: Schema.String.annotate({ description: "the full key; shown once, store it now" }),
}).annotate({ identifier: "ApiKeyWithSecret" })
export type ApiKeyWithSecret = typeof ApiKeyWithSecret.Type

export const CreateApiKey = Schema.Struct({
  name: Name,
  type: Schema.Literals(["workspace", "agent"]),
  agentId: Schema.optionalKey(Schema.String).annotate({ description: "required for agent keys" }),
  scopes: Schema.Array(ScopeName).check(Schema.isMinLength(1), Schema.isMaxLength(50)),
  expiresAt: Schema.optionalKey(Timestamp),
}).annotate({ identifier: "CreateApiKey" })
export type CreateApiKey = typeof CreateApiKey.Type

export const RotateApiKey = Schema.Struct({
  overlapSeconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 30 * 86400 })).annotate({
      description: "how long the old key keeps working; default 86400, 0 revokes it now",
    }),
  ),
}).annotate({ identifier: "RotateApiKey" })
