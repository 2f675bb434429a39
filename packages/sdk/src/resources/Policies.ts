import { checkGuardResult } from "../core/answers.ts"
import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type {
  GuardRequest,
  GuardResult,
  ListParams,
  Policy,
  PolicyCreateParams,
  PolicyListParams,
  PolicySimulation,
  PolicySimulationRequest,
  PolicyUpdateParams,
  PolicyVersion,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/policies/:id/versions`: every stored version of a policy, newest first, each with its document as saved.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * for await (const v of client.policies.versions.list("pol_…")) console.log(v.version, v.rules.length)
 * ```
 */
export class PolicyVersions extends Resource {
  list(policyId: string, params: ListParams = {}, options?: RequestOptions): PageIterator<PolicyVersion> {
    return this.paginate(`/policies/${seg(policyId)}/versions`, { ...params }, options)
  }
}

/**
 * `/policies`: the documents the guard evaluates (D6).
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * await client.policies.create({
 *   name: "payments",
 *   rules: [
 *     { id: "big", effect: "require_approval", actions: ["payment.send"], when: { field: "context.amount", op: "gt", value: 1000 } },
 *     { id: "never-crypto", effect: "deny", actions: ["payment.*"], when: { field: "context.currency", op: "eq", value: "BTC" } },
 *   ],
 * })
 * ```
 */
export class Policies extends Resource {
  readonly versions: PolicyVersions = new PolicyVersions(this.http)

  /** Validated and compiled when saved; an invalid document is 422 naming the exact field (`rules[2].when.op`). */
  create(params: PolicyCreateParams, options?: RequestOptions): Promise<Policy> {
    return this.one({ method: "POST", path: "/policies", body: params }, options)
  }

  list(params: PolicyListParams = {}, options?: RequestOptions): PageIterator<Policy> {
    return this.paginate("/policies", { ...params }, options)
  }

  get(id: string, options?: RequestOptions): Promise<Policy> {
    return this.one({ method: "GET", path: `/policies/${seg(id)}` }, options)
  }

  /** Saved as the next `version`. */
  update(id: string, params: PolicyUpdateParams, options?: RequestOptions): Promise<Policy> {
    return this.one({ method: "PATCH", path: `/policies/${seg(id)}`, body: params }, options)
  }

  delete(id: string, options?: RequestOptions): Promise<Policy> {
    return this.one({ method: "DELETE", path: `/policies/${seg(id)}` }, options)
  }

  /** `POST /policies/evaluate`: the guard, with this client's API key. Records the decision like the guard. */
  evaluate(params: GuardRequest, options?: RequestOptions): Promise<GuardResult> {
    return this.one({ method: "POST", path: "/policies/evaluate", body: params, check: checkGuardResult }, options)
  }

  /**
   * `POST /policies/simulate`: what the saved policies would decide for this agent, action and context, with
   * nothing recorded, no approval created and nothing counted (`policies:read`). For trying a policy out.
   *
   * @example
   * ```ts
   * const would = await client.policies.simulate({ agentId: "agt_…", action: "payments.refund", context: { amount: 80 } })
   * if (would.decision === "require_approval") console.log("refunds of 80 need a human")
   * ```
   */
  simulate(params: PolicySimulationRequest, options?: RequestOptions): Promise<PolicySimulation> {
    return this.one({ method: "POST", path: "/policies/simulate", body: params }, options)
  }
}

/**
 * `POST /guard` with the client's API key. Agents should use `client.agent().guard()`, which
 * uses short-lived SDK tokens, fails closed, and waits for approvals.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const result = await client.guard.evaluate({ action: "payment.send", context: { amount: 50 }, agentId: "agt_…" })
 * if (!result.allowed) console.log(result.reasons)
 * ```
 */
export class Guard extends Resource {
  evaluate(params: GuardRequest, options?: RequestOptions): Promise<GuardResult> {
    return this.one({ method: "POST", prefix: "/v1", path: "/guard", body: params, check: checkGuardResult }, options)
  }
}
