import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type { CreatedOAuthClient, ListParams, OAuthClient, OAuthClientCreateParams, OAuthGrant } from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/** `/oauth/clients`: third-party apps registered in the workspace. */
export class OAuthClients extends Resource {
  /** A confidential client's secret is returned once, in `clientSecret`. */
  create(params: OAuthClientCreateParams, options?: RequestOptions): Promise<CreatedOAuthClient> {
    return this.one({ method: "POST", path: "/oauth/clients", body: params }, options)
  }

  list(params: ListParams = {}, options?: RequestOptions): PageIterator<OAuthClient> {
    return this.paginate("/oauth/clients", { ...params }, options)
  }

  /** Every grant of the app ends, and its tokens stop working at once. */
  delete(id: string, options?: RequestOptions): Promise<OAuthClient> {
    return this.one({ method: "DELETE", path: `/oauth/clients/${seg(id)}` }, options)
  }
}

/** `/oauth/grants`: what people allowed apps to do. */
export class OAuthGrants extends Resource {
  list(params: ListParams = {}, options?: RequestOptions): PageIterator<OAuthGrant> {
    return this.paginate("/oauth/grants", { ...params }, options)
  }

  revoke(id: string, options?: RequestOptions): Promise<OAuthGrant> {
    return this.one({ method: "DELETE", path: `/oauth/grants/${seg(id)}` }, options)
  }
}

/**
 * OAuth 2.0 for third-party apps (D16): register apps and manage grants. The protocol itself
 * (authorize, token, revoke) is at `<server>/oauth`; use any OAuth 2.0 client library with it.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const { client: app, clientSecret } = await client.oauth.clients.create({
 *   name: "Acme dashboard",
 *   redirectUris: ["https://acme.example/callback"],
 * })
 * ```
 */
export class OAuth {
  readonly clients: OAuthClients
  readonly grants: OAuthGrants

  constructor(http: ConstructorParameters<typeof OAuthClients>[0]) {
    this.clients = new OAuthClients(http)
    this.grants = new OAuthGrants(http)
  }
}
