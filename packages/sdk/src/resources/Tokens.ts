import type { RequestOptions } from "../core/HttpClient.ts"
import type { SdkToken } from "../types.ts"
import { Resource } from "./Resource.ts"

/**
 * `POST /tokens`: exchange the client's API key for a short-lived SDK token (D5). The agent
 * runtime (`client.agent()`) does this for you and refreshes it; call it yourself only to hand a
 * token to another process.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const { token, expiresAt } = await client.tokens.create()
 * ```
 */
export class Tokens extends Resource {
  create(options?: RequestOptions): Promise<SdkToken> {
    return this.one({ method: "POST", path: "/tokens", replaySafe: true, autoIdempotencyKey: false }, options)
  }
}
