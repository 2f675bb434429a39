import { checkSdkToken } from "../core/answers.ts"
import type { RequestOptions } from "../core/HttpClient.ts"
import { decodeClaims } from "../core/TokenManager.ts"
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
 * const { token, expiresAt, expiresIn } = await client.tokens.create() // expiresIn: 900 by default
 * ```
 */
export class Tokens extends Resource {
  async create(options?: RequestOptions): Promise<SdkToken> {
    const issued = await this.one<{ token: string; expiresAt: string }>(
      { method: "POST", path: "/tokens", replaySafe: true, autoIdempotencyKey: false, check: checkSdkToken },
      options,
    )
    const { iat, exp } = decodeClaims(issued.token)
    const expiresIn =
      typeof iat === "number" && typeof exp === "number"
        ? exp - iat
        : Math.max(0, Math.round((Date.parse(issued.expiresAt) - Date.now()) / 1000))
    return { token: issued.token, expiresAt: issued.expiresAt, expiresIn }
  }
}
