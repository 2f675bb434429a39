import {
  CreatedInvitation,
  CreateInvitation,
  INVITATIONS_PER_DAY,
  Invitation,
  Me,
  Member,
  PageOf,
  PeopleService,
  UpdateMember,
} from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { BODY_SCHEMA, idField, pageFields } from "./common.ts"

const tag = "People"

const userIdField = {
  userId: Schema.String.annotate({ description: "the member's user id, `usr_…` (path parameter)" }),
}
const invitationIdField = {
  invitationId: Schema.String.annotate({ description: "the invitation's id, `inv_…` (path parameter)" }),
}

export const peopleOperations = [
  defineOperation({
    name: "users.me",
    method: "GET",
    path: "/users/me",
    scope: null,
    tag,
    summary: "The signed-in person",
    description:
      "The user behind a dashboard session or an OAuth access token, with their workspaces and roles. An API key is not a person: 404 `USER_NOT_FOUND`.",
    errors: ["USER_NOT_FOUND"],
    input: Schema.Struct({}),
    output: Me,
    handler: (_, actor) => PeopleService.use((s) => s.me(actor)),
  }),
  defineOperation({
    name: "members.list",
    method: "GET",
    path: "/workspaces/:id/members",
    scope: "members:read",
    tag,
    summary: "List a workspace's members",
    paginated: true,
    errors: ["WORKSPACE_NOT_FOUND"],
    input: Schema.Struct({ ...idField, ...pageFields }),
    output: PageOf(Member),
    handler: ({ id, ...page }, actor) => PeopleService.use((s) => s.listMembers(actor, id, page)),
  }),
  defineOperation({
    name: "members.update",
    method: "PATCH",
    path: "/workspaces/:id/members/:userId",
    scope: "members:write",
    tag,
    summary: "Change a member's role",
    description:
      "Granting or taking the `owner` role needs an owner (`workspaces:write`). The last owner cannot be demoted (409 `LAST_OWNER`). The pending invitations the member sent that the new role could not send are withdrawn.",
    errors: ["WORKSPACE_NOT_FOUND", "MEMBER_NOT_FOUND", "LAST_OWNER"],
    input: Schema.Struct({ ...idField, ...userIdField, ...UpdateMember.fields }).annotate({
      [BODY_SCHEMA]: UpdateMember,
    }),
    output: Member,
    handler: ({ id, userId, role }, actor) => PeopleService.use((s) => s.updateMember(actor, id, userId, role)),
  }),
  defineOperation({
    name: "members.remove",
    method: "DELETE",
    path: "/workspaces/:id/members/:userId",
    scope: "members:read",
    tag,
    summary: "Remove a member, or leave",
    description:
      "A person may always remove themselves (leave); removing someone else needs `members:write`, an owner needs an owner. The last owner cannot leave (409 `LAST_OWNER`). Their sessions and OAuth tokens stop acting in the workspace at once, on every instance; their API keys are revoked, and the pending invitations they sent, or that were sent to them, are withdrawn.",
    errors: ["WORKSPACE_NOT_FOUND", "MEMBER_NOT_FOUND", "LAST_OWNER"],
    input: Schema.Struct({ ...idField, ...userIdField }),
    output: Member,
    handler: ({ id, userId }, actor) => PeopleService.use((s) => s.removeMember(actor, id, userId)),
  }),
  defineOperation({
    name: "invitations.create",
    method: "POST",
    path: "/workspaces/:id/invitations",
    scope: "members:write",
    tag,
    summary: "Invite a person by e-mail",
    description:
      'Sends the invitation link over SMTP when the operator configured it (`delivery: email`); otherwise returns it once in `link` for you to pass on. Inviting an owner needs an owner. Refused (403, `details.field: "credential"`) when the person behind the credential was removed, or demoted below the role, meanwhile. ' +
      `A workspace sends at most ${INVITATIONS_PER_DAY} invitations in any 24 hours (withdrawn ones count): beyond, 429 \`RATE_LIMITED\` with \`Retry-After\`, and nothing is recorded or sent.`,
    successStatus: 201,
    errors: ["WORKSPACE_NOT_FOUND", "ALREADY_MEMBER", "RATE_LIMITED"],
    input: Schema.Struct({ ...idField, ...CreateInvitation.fields }).annotate({ [BODY_SCHEMA]: CreateInvitation }),
    output: CreatedInvitation,
    redactForReplay: (created: CreatedInvitation) => {
      const { link: _, ...rest } = created
      return rest
    },
    handler: ({ id, ...input }, actor) => PeopleService.use((s) => s.invite(actor, id, input)),
  }),
  defineOperation({
    name: "invitations.list",
    method: "GET",
    path: "/workspaces/:id/invitations",
    scope: "members:read",
    tag,
    summary: "List a workspace's invitations",
    paginated: true,
    errors: ["WORKSPACE_NOT_FOUND"],
    input: Schema.Struct({ ...idField, ...pageFields }),
    output: PageOf(Invitation),
    handler: ({ id, ...page }, actor) => PeopleService.use((s) => s.listInvitations(actor, id, page)),
  }),
  defineOperation({
    name: "invitations.revoke",
    method: "DELETE",
    path: "/workspaces/:id/invitations/:invitationId",
    scope: "members:write",
    tag,
    summary: "Withdraw a pending invitation",
    description:
      "Withdrawing an invitation to the `owner` role needs an owner (`workspaces:write`), as sending it did: refused with 403 `FORBIDDEN` otherwise, and the invitation stays pending.",
    errors: ["WORKSPACE_NOT_FOUND", "INVITATION_NOT_FOUND", "INVITATION_CLOSED"],
    input: Schema.Struct({ ...idField, ...invitationIdField }),
    output: Invitation,
    handler: ({ id, invitationId }, actor) => PeopleService.use((s) => s.revokeInvitation(actor, id, invitationId)),
  }),
  defineOperation({
    name: "invitations.accept",
    method: "POST",
    path: "/invitations/accept",
    scope: null,
    tag,
    summary: "Accept an invitation",
    description:
      "For a signed-in person whose verified e-mail address is the one invited. The token is the `invitation` value of the link's fragment.",
    errors: ["INVITATION_NOT_FOUND", "INVITATION_CLOSED", "ALREADY_MEMBER"],
    input: Schema.Struct({ token: Schema.String.annotate({ description: "`svc_inv_…`" }) }).annotate({
      identifier: "AcceptInvitation",
    }),
    output: Member,
    handler: ({ token }, actor) => PeopleService.use((s) => s.acceptInvitation(actor, token)),
  }),
]
