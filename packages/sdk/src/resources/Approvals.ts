import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type { Approval, ApprovalCreateParams, ApprovalDecideParams, ApprovalListParams } from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/approvals` (D7): requests for an operator's decision. Agents get them from the guard
 * (`require_approval`) and wait with `client.agent().waitForApproval()`; operators decide here.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * for await (const approval of client.approvals.list()) {
 *   await client.approvals.decide(approval.id, { decision: "approved", reason: "looks fine" })
 * }
 * ```
 */
export class Approvals extends Resource {
  /** Needs `approvals:write` (agent keys cannot hold it: agents ask through the guard). */
  create(params: ApprovalCreateParams, options?: RequestOptions): Promise<Approval> {
    return this.one({ method: "POST", path: "/approvals", body: params }, options)
  }

  /** Pending ones, newest first, unless `status` says otherwise. */
  list(params: ApprovalListParams = {}, options?: RequestOptions): PageIterator<Approval> {
    return this.paginate("/approvals", { ...params }, options)
  }

  get(id: string, options?: RequestOptions): Promise<Approval> {
    return this.one({ method: "GET", path: `/approvals/${seg(id)}` }, options)
  }

  /** Once: a decided or expired approval is 409 `APPROVAL_NOT_PENDING`. Needs `approvals:manage`. */
  decide(id: string, params: ApprovalDecideParams, options?: RequestOptions): Promise<Approval> {
    return this.one({ method: "POST", path: `/approvals/${seg(id)}/decide`, body: params }, options)
  }
}
