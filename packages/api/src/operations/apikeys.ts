import { ApiKey, ApiKeyService, ApiKeyWithSecret, CreateApiKey, PageOf, RotateApiKey } from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { idAnd, idField, pageFields, REDACTED_SECRET } from "./common.ts"

const tag = "API keys"

export const apiKeyOperations = [
  defineOperation({
    name: "apiKeys.create",
    method: "POST",
    path: "/api-keys",
    scope: "apikeys:write",
    tag,
    summary: "Create an API key",
    description:
      "Returns the full key once, in `apiKey`; only its SHA-256 and a 6-character prefix are kept. A key can only be given scopes the calling credential holds; agent keys take the agent scopes of the spec's table. An app's OAuth token mints no key (403): a key would outlive its grant. No agent key is issued while a revocation of its agent is in force (409 `AGENT_REVOKED`): overturn it first.",
    successStatus: 201,
    errors: ["AGENT_NOT_FOUND", "AGENT_DEREGISTERED", "AGENT_REVOKED"],
    input: CreateApiKey,
    output: ApiKeyWithSecret,
    redactForReplay: (key: ApiKeyWithSecret) => ({ ...key, apiKey: REDACTED_SECRET }),
    handler: (input, actor) => ApiKeyService.use((s) => s.create(actor, input)),
  }),
  defineOperation({
    name: "apiKeys.list",
    method: "GET",
    path: "/api-keys",
    scope: "apikeys:read",
    tag,
    summary: "List API keys",
    description: "Never includes key values.",
    paginated: true,
    input: Schema.Struct({
      ...pageFields,
      agentId: Schema.optionalKey(Schema.String),
      status: Schema.optionalKey(Schema.Literals(["active", "revoked"])),
    }),
    output: PageOf(ApiKey),
    handler: (input, actor) => ApiKeyService.use((s) => s.list(actor, input)),
  }),
  defineOperation({
    name: "apiKeys.get",
    method: "GET",
    path: "/api-keys/:id",
    scope: "apikeys:read",
    tag,
    summary: "Get an API key",
    errors: ["API_KEY_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: ApiKey,
    handler: (input, actor) => ApiKeyService.use((s) => s.get(actor, input.id)),
  }),
  defineOperation({
    name: "apiKeys.revoke",
    method: "DELETE",
    path: "/api-keys/:id",
    scope: "apikeys:write",
    tag,
    summary: "Revoke an API key",
    description:
      "Immediate. The invitations sent with the key that are still pending are withdrawn with it (`invitation.revoked` each). Revoking a revoked key returns it unchanged.",
    errors: ["API_KEY_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: ApiKey,
    handler: (input, actor) => ApiKeyService.use((s) => s.revoke(actor, input.id)),
  }),
  defineOperation({
    name: "apiKeys.rotate",
    method: "POST",
    path: "/api-keys/:id/rotate",
    scope: "apikeys:write",
    tag,
    summary: "Rotate an API key",
    description:
      "Returns a new key with the same type, scopes, agent binding and expiry. The old key keeps working for `overlapSeconds` (default 86400; 0 revokes it now), then is revoked. Not with an app's OAuth token (403).",
    successStatus: 201,
    errors: ["API_KEY_NOT_FOUND", "API_KEY_NOT_ROTATABLE"],
    input: idAnd(RotateApiKey),
    output: ApiKeyWithSecret,
    redactForReplay: (key: ApiKeyWithSecret) => ({ ...key, apiKey: REDACTED_SECRET }),
    handler: ({ id, overlapSeconds }, actor) => ApiKeyService.use((s) => s.rotate(actor, id, overlapSeconds)),
  }),
]
