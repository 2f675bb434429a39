import type { RequestOptions } from "../core/HttpClient.ts"
import type { WorkspaceOverview } from "../types.ts"
import { Resource } from "./Resource.ts"

/**
 * `/overview`: the workspace at a glance, counted workspace-wide — agents by tier, decisions per hour over the
 * last day, pending approvals, the chain's state. Not for agent-bound keys.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const { agents, chain } = await client.overview.get()
 * console.log(agents?.total, chain.events)
 * ```
 */
export class Overview extends Resource {
  get(options?: RequestOptions): Promise<WorkspaceOverview> {
    return this.one({ method: "GET", path: "/overview" }, options)
  }
}
