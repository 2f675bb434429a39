import { Schema } from "effect"
import { Id, Timestamp } from "../shared/schemas.ts"
import { Role } from "./roles.ts"

export const Email = Schema.String.check(
  Schema.isMaxLength(320),
  Schema.isPattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/),
).annotate({ description: "an e-mail address", examples: ["ada@example.com"] })

export const User = Schema.Struct({
  id: Id("usr"),
  email: Schema.String,
  emailVerified: Schema.Boolean,
  name: Schema.NullOr(Schema.String),
  createdAt: Timestamp,
}).annotate({ identifier: "User" })
export type User = typeof User.Type

export const Member = Schema.Struct({
  workspaceId: Id("ws"),
  userId: Id("usr"),
  email: Schema.String,
  name: Schema.NullOr(Schema.String),
  role: Role,
  createdAt: Timestamp,
  updatedAt: Timestamp,
}).annotate({ identifier: "Member" })
export type Member = typeof Member.Type

export const Me = Schema.Struct({
  user: User,
  memberships: Schema.Array(
    Schema.Struct({ workspaceId: Schema.String, workspaceName: Schema.String, plan: Schema.String, role: Role }),
  ),
}).annotate({ identifier: "Me" })
export type Me = typeof Me.Type

export const InvitationStatus = Schema.Literals(["pending", "accepted", "revoked", "expired"])

export const Invitation = Schema.Struct({
  id: Id("inv"),
  workspaceId: Id("ws"),
  email: Schema.String,
  role: Role,
  status: InvitationStatus,
  invitedBy: Schema.String.annotate({ description: "the user (`usr_…`) or key (`key_…`) that invited" }),
  expiresAt: Timestamp,
  createdAt: Timestamp,
  acceptedBy: Schema.NullOr(Schema.String),
  acceptedAt: Schema.NullOr(Timestamp),
}).annotate({ identifier: "Invitation" })
export type Invitation = typeof Invitation.Type

export const CreateInvitation = Schema.Struct({
  email: Email,
  role: Role,
}).annotate({ identifier: "CreateInvitation" })
export type CreateInvitation = typeof CreateInvitation.Type

export const CreatedInvitation = Schema.Struct({
  invitation: Invitation,
  delivery: Schema.Literals(["email", "link"]).annotate({
    description: "`email`: sent over SMTP; `link`: no SMTP is configured, hand `link` to the invitee yourself",
  }),
  link: Schema.optionalKey(Schema.String).annotate({
    description: "the invitation link, shown once and only when it was not e-mailed; the token is in the fragment",
  }),
}).annotate({ identifier: "CreatedInvitation" })
export type CreatedInvitation = typeof CreatedInvitation.Type

export const UpdateMember = Schema.Struct({ role: Role }).annotate({ identifier: "UpdateMember" })
export type UpdateMember = typeof UpdateMember.Type

/** What a provider's ID token says about the person signing in. */
export interface VerifiedIdentity {
  readonly provider: string
  readonly subject: string
  readonly email: string | undefined
  readonly emailVerified: boolean
  readonly name: string | undefined
}
