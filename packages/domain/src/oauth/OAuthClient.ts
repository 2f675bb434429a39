import { Schema } from "effect"
import { SCOPES } from "../auth/scopes.ts"
import { Id, Name, Timestamp } from "../shared/schemas.ts"

const RedirectUri = Schema.String.check(
  Schema.isMaxLength(2000),
  Schema.makeFilter((s: string) => {
    try {
      const u = new URL(s)
      if (u.hash !== "") return "a redirect URI has no fragment (RFC 6749 3.1.2)"
      const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(u.hostname)
      if (u.protocol === "https:" || (u.protocol === "http:" && loopback)) return true
      // Native apps' private-use schemes (RFC 8252 7.1): `com.example.app:/callback`.
      if (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/.test(u.protocol)) return true
      return "expected https://, http:// on loopback, or a private-use scheme (com.example.app:/cb)"
    } catch {
      return "expected an absolute URI"
    }
  }),
).annotate({
  description:
    "matched exactly, character for character, at authorization and token time; on http://127.0.0.1 or http://[::1], but for the port, which a native app picks at each request (RFC 8252 7.3)",
  examples: ["https://app.example.com/callback"],
})

export const OAuthScope = Schema.Literals(SCOPES.filter((s) => s !== "workspaces:admin"))

export const OAuthClient = Schema.Struct({
  id: Id("oac"),
  workspaceId: Id("ws"),
  name: Schema.String,
  type: Schema.Literals(["confidential", "public"]).annotate({
    description: "`public` clients (single-page and native apps) have no secret and must use PKCE S256",
  }),
  redirectUris: Schema.Array(Schema.String),
  scopes: Schema.Array(Schema.String).annotate({ description: "the most the app may ask for" }),
  createdAt: Timestamp,
}).annotate({ identifier: "OAuthClient" })
export type OAuthClient = typeof OAuthClient.Type

export const CreateOAuthClient = Schema.Struct({
  name: Name,
  redirectUris: Schema.Array(RedirectUri)
    .check(Schema.isMinLength(1), Schema.isMaxLength(10))
    .annotate({ examples: [["https://app.example.com/callback"]] }),
  type: Schema.optionalKey(Schema.Literals(["confidential", "public"])).annotate({
    description: "default `confidential` (gets a secret, shown once)",
  }),
  scopes: Schema.optionalKey(Schema.Array(OAuthScope).check(Schema.isMinLength(1))).annotate({
    description: "the most the app may ask for; default every scope but workspaces:admin",
  }),
}).annotate({ identifier: "CreateOAuthClient" })
export type CreateOAuthClient = typeof CreateOAuthClient.Type

export const CreatedOAuthClient = Schema.Struct({
  client: OAuthClient,
  clientSecret: Schema.optionalKey(Schema.String).annotate({
    description: "confidential clients only: shown this once, stored only as a hash",
  }),
}).annotate({ identifier: "CreatedOAuthClient" })
export type CreatedOAuthClient = typeof CreatedOAuthClient.Type

export const OAuthGrant = Schema.Struct({
  id: Id("grt"),
  clientId: Schema.String,
  clientName: Schema.String,
  userId: Schema.String,
  workspaceId: Schema.String,
  scopes: Schema.Array(Schema.String),
  createdAt: Timestamp,
}).annotate({ identifier: "OAuthGrant" })
export type OAuthGrant = typeof OAuthGrant.Type
