import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type {
  EnforcementAppealParams,
  EnforcementCreateParams,
  EnforcementListParams,
  Enforcement as EnforcementRecord,
  EnforcementUpdateParams,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/enforcement` (D7): warnings, throttles, suspensions and revocations, with appeals.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const e = await client.enforcement.create({ agentId: "agt_…", type: "suspension", reason: "spam", durationSeconds: 3600 })
 * await client.enforcement.update(e.id, { resolution: "overturned", note: "false positive" })
 * ```
 */
export class Enforcements extends Resource {
  create(params: EnforcementCreateParams, options?: RequestOptions): Promise<EnforcementRecord> {
    return this.one({ method: "POST", path: "/enforcement", body: params }, options)
  }

  /** Those in force, newest first, unless `status` says otherwise. */
  list(params: EnforcementListParams = {}, options?: RequestOptions): PageIterator<EnforcementRecord> {
    return this.paginate("/enforcement", { ...params }, options)
  }

  get(id: string, options?: RequestOptions): Promise<EnforcementRecord> {
    return this.one({ method: "GET", path: `/enforcement/${seg(id)}` }, options)
  }

  /** Change `reason` or the expiry, or resolve with `resolution` (`upheld` | `overturned`). */
  update(id: string, params: EnforcementUpdateParams, options?: RequestOptions): Promise<EnforcementRecord> {
    return this.one({ method: "PATCH", path: `/enforcement/${seg(id)}`, body: params }, options)
  }

  /** Once per enforcement, while it is `active`; an agent may appeal its own with its agent key. */
  appeal(id: string, params: EnforcementAppealParams, options?: RequestOptions): Promise<EnforcementRecord> {
    return this.one({ method: "POST", path: `/enforcement/${seg(id)}/appeal`, body: params }, options)
  }
}
