import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type { CreatedWorkspace, ListParams, Workspace, WorkspaceCreateParams, WorkspaceUpdateParams } from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/workspaces`. Without `workspaces:admin` a credential sees only its own workspace.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const { workspace, apiKey } = await client.workspaces.create({ name: "staging", environment: "test" })
 * console.log(workspace.id, apiKey.apiKey) // the key is shown once
 * ```
 */
export class Workspaces extends Resource {
  /** Creates a workspace and its first all-scope key (shown once). Needs `workspaces:admin`. */
  create(params: WorkspaceCreateParams, options?: RequestOptions): Promise<CreatedWorkspace> {
    return this.one({ method: "POST", path: "/workspaces", body: params }, options)
  }

  /** The caller's workspace; every workspace with `workspaces:admin`. */
  list(params: ListParams = {}, options?: RequestOptions): PageIterator<Workspace> {
    return this.paginate("/workspaces", { ...params }, options)
  }

  get(id: string, options?: RequestOptions): Promise<Workspace> {
    return this.one({ method: "GET", path: `/workspaces/${seg(id)}` }, options)
  }

  /** Renames it or changes `guardDefault`; changing `plan` needs `workspaces:admin`. */
  update(id: string, params: WorkspaceUpdateParams, options?: RequestOptions): Promise<Workspace> {
    return this.one({ method: "PATCH", path: `/workspaces/${seg(id)}`, body: params }, options)
  }

  /** Soft-deletes it and revokes its keys; the audit chain is kept. */
  delete(id: string, options?: RequestOptions): Promise<Workspace> {
    return this.one({ method: "DELETE", path: `/workspaces/${seg(id)}` }, options)
  }
}
