import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type {
  CreatedInvitation,
  Invitation,
  InvitationCreateParams,
  ListParams,
  Me,
  Member,
  MemberUpdateParams,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `GET /users/me`: the person behind the credential. For a dashboard session or an OAuth access token;
 * an API key is not a person (404).
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_OAUTH_TOKEN!, baseUrl: "http://127.0.0.1:3000" })
 * const { user, memberships } = await client.users.me()
 * ```
 */
export class Users extends Resource {
  me(options?: RequestOptions): Promise<Me> {
    return this.one({ method: "GET", path: "/users/me" }, options)
  }
}

/**
 * `/workspaces/:id/members` (D16): the people of a workspace and their roles.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * for await (const member of client.members.list("ws_…")) console.log(member.email, member.role)
 * ```
 */
export class Members extends Resource {
  list(workspaceId: string, params: ListParams = {}, options?: RequestOptions): PageIterator<Member> {
    return this.paginate(`/workspaces/${seg(workspaceId)}/members`, { ...params }, options)
  }

  /** Granting or taking `owner` needs an owner; the last owner cannot be demoted. */
  update(workspaceId: string, userId: string, params: MemberUpdateParams, options?: RequestOptions): Promise<Member> {
    return this.one(
      { method: "PATCH", path: `/workspaces/${seg(workspaceId)}/members/${seg(userId)}`, body: params },
      options,
    )
  }

  /** Removes a member (or yourself: leaving); their sessions and OAuth tokens stop acting there at once. */
  remove(workspaceId: string, userId: string, options?: RequestOptions): Promise<Member> {
    return this.one({ method: "DELETE", path: `/workspaces/${seg(workspaceId)}/members/${seg(userId)}` }, options)
  }
}

/**
 * `/workspaces/:id/invitations` (D16): invite by e-mail; the link is e-mailed when the operator set
 * SMTP, else returned once in `link`.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const { delivery, link } = await client.invitations.create("ws_…", { email: "ada@example.com", role: "member" })
 * ```
 */
export class Invitations extends Resource {
  create(workspaceId: string, params: InvitationCreateParams, options?: RequestOptions): Promise<CreatedInvitation> {
    return this.one({ method: "POST", path: `/workspaces/${seg(workspaceId)}/invitations`, body: params }, options)
  }

  list(workspaceId: string, params: ListParams = {}, options?: RequestOptions): PageIterator<Invitation> {
    return this.paginate(`/workspaces/${seg(workspaceId)}/invitations`, { ...params }, options)
  }

  revoke(workspaceId: string, invitationId: string, options?: RequestOptions): Promise<Invitation> {
    return this.one(
      { method: "DELETE", path: `/workspaces/${seg(workspaceId)}/invitations/${seg(invitationId)}` },
      options,
    )
  }

  /** For a signed-in person whose verified address is the one invited; `token` is the link's `invitation`. */
  accept(params: { readonly token: string }, options?: RequestOptions): Promise<Member> {
    return this.one({ method: "POST", path: "/invitations/accept", body: params }, options)
  }
}
