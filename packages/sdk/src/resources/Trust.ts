import type { RequestOptions } from "../core/HttpClient.ts"
import type {
  Adjustment,
  AdjustmentCreateParams,
  Badge,
  BadgeVerification,
  Reputation,
  ReputationParams,
  TrustScore,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * Trust scores, reputation, adjustments and badges (D11–D13). Badges and their checks are public:
 * they need no scope (a stranger's client may call them with any key, or none over plain HTTP).
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const { score, tier } = await client.trust.score("agt_…")
 * const badge = await client.trust.badge("agt_…")
 * const check = await client.trust.verifyBadge("agt_…", badge.signature)
 * ```
 */
export class Trust extends Resource {
  /** The composite score 0–1000 with its components (scope `trust:read` or `agents:read`). */
  score(agentId: string, options?: RequestOptions): Promise<TrustScore> {
    return this.one({ method: "GET", path: `/trust/score/${seg(agentId)}` }, options)
  }

  /** The score, the evidence counts and the history of announced scores, oldest first (`agents:read`). */
  reputation(agentId: string, params: ReputationParams = {}, options?: RequestOptions): Promise<Reputation> {
    return this.one({ method: "GET", path: `/agents/${seg(agentId)}/reputation`, query: { ...params } }, options)
  }

  /** Adds `delta` points (`trust:write`); applied by the trust worker within moments. */
  adjust(agentId: string, params: AdjustmentCreateParams, options?: RequestOptions): Promise<Adjustment> {
    return this.one({ method: "POST", path: `/trust/score/${seg(agentId)}/adjustments`, body: params }, options)
  }

  /** The agent's badge as JSON (`GET /badge/:agentId?format=json`); 404 `BADGE_NOT_FOUND` when it holds none. */
  badge(agentId: string, options?: RequestOptions): Promise<Badge> {
    return this.one({ method: "GET", path: `/badge/${seg(agentId)}`, query: { format: "json" } }, options)
  }

  /** The same badge at `GET /trust/badges/:agentId`. */
  badgeData(agentId: string, options?: RequestOptions): Promise<Badge> {
    return this.one({ method: "GET", path: `/trust/badges/${seg(agentId)}` }, options)
  }

  /** Whether the agent holds a badge now (`GET /badge/:agentId/verify`). */
  badgeStatus(agentId: string, options?: RequestOptions): Promise<BadgeVerification> {
    return this.one({ method: "GET", path: `/badge/${seg(agentId)}/verify` }, options)
  }

  /** Checks a badge someone presents: its JSON (object or text), its SVG, or its JWS. */
  verifyBadge(agentId: string, badge: string | Badge, options?: RequestOptions): Promise<BadgeVerification> {
    const presented = typeof badge === "string" ? badge : JSON.stringify(badge)
    return this.one({ method: "POST", path: `/badge/${seg(agentId)}/verify`, body: { badge: presented } }, options)
  }
}
