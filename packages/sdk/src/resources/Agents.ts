import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type {
  Agent,
  AgentCreateParams,
  AgentListParams,
  AgentUpdateParams,
  AgentVersion,
  AgentVersionCreateParams,
  ListParams,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/agents/:id/versions`: an agent's versions; the newest is its `currentVersion`.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * await client.agents.versions.create("agt_…", { version: "1.4.0" })
 * for await (const v of client.agents.versions.list("agt_…")) console.log(v.version)
 * ```
 */
export class AgentVersions extends Resource {
  /** Emits `agent.updated`; the version string is unique per agent (409 `CONFLICT`). */
  create(agentId: string, params: AgentVersionCreateParams, options?: RequestOptions): Promise<AgentVersion> {
    return this.one({ method: "POST", path: `/agents/${seg(agentId)}/versions`, body: params }, options)
  }

  list(agentId: string, params: ListParams = {}, options?: RequestOptions): PageIterator<AgentVersion> {
    return this.paginate(`/agents/${seg(agentId)}/versions`, { ...params }, options)
  }
}

/**
 * `/agents`: register, read, update and deregister agents.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const agent = await client.agents.create({ name: "billing-bot", labels: ["finance"] })
 * await client.agents.update(agent.id, { description: "sends invoices" })
 * for await (const a of client.agents.list({ label: "finance" })) console.log(a.name, a.trustScore)
 * ```
 */
export class Agents extends Resource {
  readonly versions: AgentVersions = new AgentVersions(this.http)

  /** Registers an agent (emits `agent.registered`). Names are unique among registered agents (409 `CONFLICT`). */
  create(params: AgentCreateParams, options?: RequestOptions): Promise<Agent> {
    return this.one({ method: "POST", path: "/agents", body: params }, options)
  }

  /** Newest first; deregistered agents only with `status: "deregistered"`. */
  list(params: AgentListParams = {}, options?: RequestOptions): PageIterator<Agent> {
    return this.paginate("/agents", { ...params }, options)
  }

  /** Rejects with `AGENT_NOT_FOUND` (404) for an unknown id or another workspace's agent. */
  get(id: string, options?: RequestOptions): Promise<Agent> {
    return this.one({ method: "GET", path: `/agents/${seg(id)}` }, options)
  }

  update(id: string, params: AgentUpdateParams, options?: RequestOptions): Promise<Agent> {
    return this.one({ method: "PATCH", path: `/agents/${seg(id)}`, body: params }, options)
  }

  /** Deregisters (soft): the record stays readable, its API keys are revoked. Idempotent. */
  delete(id: string, options?: RequestOptions): Promise<Agent> {
    return this.one({ method: "DELETE", path: `/agents/${seg(id)}` }, options)
  }
}
