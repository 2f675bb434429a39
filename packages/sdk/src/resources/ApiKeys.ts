import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type { ApiKey, ApiKeyCreateParams, ApiKeyListParams, ApiKeyRotateParams, ApiKeyWithSecret } from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/api-keys`: create, list, revoke and rotate API keys.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const key = await client.apiKeys.create({
 *   name: "billing-bot",
 *   type: "agent",
 *   agentId: "agt_…",
 *   scopes: ["guard:evaluate", "events:write", "events:read", "approvals:read"],
 * })
 * console.log(key.apiKey) // shown once: store it now
 * const rotated = await client.apiKeys.rotate(key.id, { overlapSeconds: 3600 })
 * ```
 */
export class ApiKeys extends Resource {
  /** Returns the full key once, in `apiKey`. */
  create(params: ApiKeyCreateParams, options?: RequestOptions): Promise<ApiKeyWithSecret> {
    return this.one({ method: "POST", path: "/api-keys", body: params }, options)
  }

  /** Never includes key values. */
  list(params: ApiKeyListParams = {}, options?: RequestOptions): PageIterator<ApiKey> {
    return this.paginate("/api-keys", { ...params }, options)
  }

  get(id: string, options?: RequestOptions): Promise<ApiKey> {
    return this.one({ method: "GET", path: `/api-keys/${seg(id)}` }, options)
  }

  /** Immediate, on every instance (its SDK tokens stop within seconds). Idempotent. */
  revoke(id: string, options?: RequestOptions): Promise<ApiKey> {
    return this.one({ method: "DELETE", path: `/api-keys/${seg(id)}` }, options)
  }

  /** A new key with the same type, scopes, binding and expiry; the old one works for `overlapSeconds`. */
  rotate(id: string, params: ApiKeyRotateParams = {}, options?: RequestOptions): Promise<ApiKeyWithSecret> {
    return this.one({ method: "POST", path: `/api-keys/${seg(id)}/rotate`, body: params }, options)
  }
}
