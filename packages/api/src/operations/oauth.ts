import { CreatedOAuthClient, CreateOAuthClient, OAuthClient, OAuthGrant, OAuthService, PageOf } from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { idField, pageFields, REDACTED_SECRET } from "./common.ts"

const tag = "OAuth"

export const oauthOperations = [
  defineOperation({
    name: "oauth.clients.create",
    method: "POST",
    path: "/oauth/clients",
    scope: "apikeys:write",
    tag,
    summary: "Register a third-party app",
    description:
      "Registers an OAuth 2.0 client in the caller's workspace. Redirect URIs are matched exactly (a loopback IP literal's but for the port, RFC 8252 7.3). A confidential client's secret is returned once; a public client has none and must use PKCE S256.",
    successStatus: 201,
    input: CreateOAuthClient,
    output: CreatedOAuthClient,
    redactForReplay: (created: CreatedOAuthClient) =>
      created.clientSecret === undefined ? created : { ...created, clientSecret: REDACTED_SECRET },
    handler: (input, actor) => OAuthService.use((s) => s.createClient(actor, input)),
  }),
  defineOperation({
    name: "oauth.clients.list",
    method: "GET",
    path: "/oauth/clients",
    scope: "apikeys:read",
    tag,
    summary: "List the workspace's third-party apps",
    paginated: true,
    input: Schema.Struct(pageFields),
    output: PageOf(OAuthClient),
    handler: (input, actor) => OAuthService.use((s) => s.listClients(actor, input)),
  }),
  defineOperation({
    name: "oauth.clients.delete",
    method: "DELETE",
    path: "/oauth/clients/:id",
    scope: "apikeys:write",
    tag,
    summary: "Remove a third-party app",
    description: "Every grant of the app ends: its tokens stop working at once on every instance.",
    errors: ["OAUTH_CLIENT_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: OAuthClient,
    handler: (input, actor) => OAuthService.use((s) => s.deleteClient(actor, input.id)),
  }),
  defineOperation({
    name: "oauth.grants.list",
    method: "GET",
    path: "/oauth/grants",
    scope: "apikeys:read",
    tag,
    summary: "List the apps authorised in the workspace",
    description:
      "A person sees the grants they gave; a credential with `apikeys:write`, every grant of the workspace. A grant is listed while it can act: its code was exchanged, or is still unused and unexpired (a consent whose app never came back for the code is not, and is deleted an hour after its code expired).",
    paginated: true,
    input: Schema.Struct(pageFields),
    output: PageOf(OAuthGrant),
    handler: (input, actor) => OAuthService.use((s) => s.listGrants(actor, input)),
  }),
  defineOperation({
    name: "oauth.grants.revoke",
    method: "DELETE",
    path: "/oauth/grants/:id",
    scope: "apikeys:read",
    tag,
    summary: "Revoke an app's access",
    description:
      "Ends the grant and every token of it, at once on every instance. Signed in to the dashboard, a person revokes their own grants; anything else (an app's token included, even for its own person) needs `apikeys:write`.",
    errors: ["OAUTH_GRANT_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: OAuthGrant,
    handler: (input, actor) => OAuthService.use((s) => s.revokeGrant(actor, input.id)),
  }),
]
