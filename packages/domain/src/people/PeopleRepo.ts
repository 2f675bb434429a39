import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { KEYS_CHANNEL } from "../apikeys/ApiKeyRepo.ts"
import type { Plan } from "../workspaces/Workspace.ts"
import type { Invitation, Member, User } from "./Person.ts"
import type { Role } from "./roles.ts"

interface UserRow {
  readonly id: string
  readonly email: string
  readonly email_verified: boolean
  readonly name: string | null
  readonly created_at: Date
}
const toUser = (r: UserRow): User => ({
  id: r.id,
  email: r.email,
  emailVerified: r.email_verified,
  name: r.name,
  createdAt: r.created_at.toISOString(),
})

interface MemberRow {
  readonly workspace_id: string
  readonly user_id: string
  readonly email: string
  readonly name: string | null
  readonly role: Role
  readonly created_at: Date
  readonly updated_at: Date
}
const toMember = (r: MemberRow): Member => ({
  workspaceId: r.workspace_id,
  userId: r.user_id,
  email: r.email,
  name: r.name,
  role: r.role,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
})

interface InvitationRow {
  readonly id: string
  readonly workspace_id: string
  readonly email: string
  readonly role: Role
  readonly status: "pending" | "accepted" | "revoked"
  readonly invited_by: string
  readonly expires_at: Date
  readonly created_at: Date
  readonly accepted_by: string | null
  readonly accepted_at: Date | null
}
const toInvitation = (r: InvitationRow, nowMs: number): Invitation => ({
  id: r.id,
  workspaceId: r.workspace_id,
  email: r.email,
  role: r.role,
  status: r.status === "pending" && r.expires_at.getTime() <= nowMs ? "expired" : r.status,
  invitedBy: r.invited_by,
  expiresAt: r.expires_at.toISOString(),
  createdAt: r.created_at.toISOString(),
  acceptedBy: r.accepted_by,
  acceptedAt: r.accepted_at?.toISOString() ?? null,
})

const ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
const ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz"

/** A membership as authentication needs it: the role, and whether the workspace still exists. */
export interface MembershipGrant {
  readonly role: Role
  readonly environment: "live" | "test"
  readonly plan: Plan
}

/** SQL for users, identities, memberships and invitations. Every membership query names its workspace. */
export class PeopleRepo extends Context.Service<
  PeopleRepo,
  {
    readonly findUser: (id: string) => Effect.Effect<User | undefined>
    readonly findUserByEmail: (email: string) => Effect.Effect<User | undefined>
    readonly findUserByIdentity: (provider: string, subject: string) => Effect.Effect<User | undefined>
    readonly insertUser: (u: User) => Effect.Effect<void>
    readonly insertIdentity: (provider: string, subject: string, userId: string, at: string) => Effect.Effect<void>
    readonly membershipsOf: (
      userId: string,
    ) => Effect.Effect<ReadonlyArray<{ workspaceId: string; workspaceName: string; plan: Plan; role: Role }>>
    readonly grant: (workspaceId: string, userId: string) => Effect.Effect<MembershipGrant | undefined>
    readonly findMember: (workspaceId: string, userId: string, forUpdate?: boolean) => Effect.Effect<Member | undefined>
    readonly listMembers: (
      workspaceId: string,
      opts: { before?: string | undefined; limit: number },
    ) => Effect.Effect<ReadonlyArray<Member>>
    /**
     * The role of `userId` in the workspace, holding their membership (FOR SHARE) until the transaction ends: a removal
     * or role change of theirs waits for it, then sees what it wrote. Undefined when they are not a member.
     */
    readonly holdMember: (workspaceId: string, userId: string) => Effect.Effect<Role | undefined>
    /** Locks the workspace's owner rows and counts them: two demotions at once cannot both pass. */
    readonly lockOwners: (workspaceId: string) => Effect.Effect<number>
    /** The workspace's owners, oldest membership first. */
    readonly ownersOf: (workspaceId: string) => Effect.Effect<ReadonlyArray<Member>>
    readonly insertMember: (workspaceId: string, userId: string, role: Role, at: string) => Effect.Effect<boolean>
    readonly setRole: (workspaceId: string, userId: string, role: Role, at: string) => Effect.Effect<void>
    readonly deleteMember: (workspaceId: string, userId: string) => Effect.Effect<void>
    readonly insertInvitation: (i: Invitation, tokenHash: string) => Effect.Effect<void>
    readonly findInvitation: (workspaceId: string, id: string, nowMs: number) => Effect.Effect<Invitation | undefined>
    readonly findInvitationByToken: (tokenHash: string, nowMs: number) => Effect.Effect<Invitation | undefined>
    readonly listInvitations: (
      workspaceId: string,
      opts: { before?: string | undefined; limit: number; nowMs: number },
    ) => Effect.Effect<ReadonlyArray<Invitation>>
    /**
     * Withdraws the workspace's pending invitations sent by `userId`: in person or through an app (invited by their
     * user id), or with a key they made (by the key's id). Given a key's id instead, the invitations sent with that
     * key (ApiKeyService.revoke). Returns the withdrawn ones.
     */
    readonly withdrawInvitationsOf: (
      workspaceId: string,
      userId: string,
      at: string,
      options?: { readonly roles?: ReadonlyArray<Role> },
    ) => Effect.Effect<ReadonlyArray<Invitation>>
    /**
     * Withdraws the workspace's pending invitations to `email` (equal but for ASCII case, as `sameAddress`): a way
     * back in for a person just removed. Returns the withdrawn ones.
     */
    readonly withdrawInvitationsTo: (
      workspaceId: string,
      email: string,
      at: string,
    ) => Effect.Effect<ReadonlyArray<Invitation>>
    /** Marks a pending invitation; false when it was no longer pending (a concurrent accept or revoke). */
    readonly closeInvitation: (
      id: string,
      status: "accepted" | "revoked",
      by: string | null,
      at: string,
    ) => Effect.Effect<boolean>
  }
>()("@agentgov/domain/people/PeopleRepo") {
  static readonly layer = Layer.effect(
    PeopleRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const one = <A, R>(rows: ReadonlyArray<R>, f: (r: R) => A) => (rows[0] ? f(rows[0]) : undefined)
      const memberSelect = sql`SELECT m.workspace_id, m.user_id, u.email, u.name, m.role, m.created_at, m.updated_at
          FROM memberships m JOIN users u ON u.id = m.user_id`
      return PeopleRepo.of({
        findUser: (id) =>
          sql<UserRow>`SELECT * FROM users WHERE id = ${id}`.pipe(
            Effect.map((r) => one(r, toUser)),
            Effect.orDie,
          ),
        findUserByEmail: (email) =>
          sql<UserRow>`SELECT * FROM users WHERE lower(email) = lower(${email})`.pipe(
            Effect.map((r) => one(r, toUser)),
            Effect.orDie,
          ),
        findUserByIdentity: (provider, subject) =>
          sql<UserRow>`SELECT u.* FROM user_identities i JOIN users u ON u.id = i.user_id
              WHERE i.provider = ${provider} AND i.subject = ${subject}`.pipe(
            Effect.map((r) => one(r, toUser)),
            Effect.orDie,
          ),
        insertUser: (u) =>
          sql`INSERT INTO users (id, email, email_verified, name, created_at, updated_at)
              VALUES (${u.id}, ${u.email}, ${u.emailVerified}, ${u.name}, ${u.createdAt}::timestamptz, ${u.createdAt}::timestamptz)`.pipe(
            Effect.asVoid,
            Effect.orDie,
          ),
        insertIdentity: (provider, subject, userId, at) =>
          sql`INSERT INTO user_identities (provider, subject, user_id, created_at)
              VALUES (${provider}, ${subject}, ${userId}, ${at}::timestamptz) ON CONFLICT DO NOTHING`.pipe(
            Effect.asVoid,
            Effect.orDie,
          ),
        membershipsOf: (userId) =>
          sql<{ workspace_id: string; name: string; plan: Plan; role: Role }>`
              SELECT m.workspace_id, w.name, w.plan, m.role FROM memberships m JOIN workspaces w ON w.id = m.workspace_id
              WHERE m.user_id = ${userId} AND w.deleted_at IS NULL ORDER BY m.workspace_id`.pipe(
            Effect.map((rows) =>
              rows.map((r) => ({ workspaceId: r.workspace_id, workspaceName: r.name, plan: r.plan, role: r.role })),
            ),
            Effect.orDie,
          ),
        grant: (workspaceId, userId) =>
          sql<{ role: Role; environment: "live" | "test"; plan: Plan }>`
              SELECT m.role, w.environment, w.plan FROM memberships m JOIN workspaces w ON w.id = m.workspace_id
              WHERE m.workspace_id = ${workspaceId} AND m.user_id = ${userId} AND w.deleted_at IS NULL`.pipe(
            Effect.map((r) => r[0]),
            Effect.orDie,
          ),
        findMember: (workspaceId, userId, forUpdate = false) =>
          sql<MemberRow>`${memberSelect} WHERE m.workspace_id = ${workspaceId} AND m.user_id = ${userId}
              ${forUpdate ? sql`FOR UPDATE OF m` : sql``}`.pipe(
            Effect.map((r) => one(r, toMember)),
            Effect.orDie,
          ),
        listMembers: (workspaceId, { before, limit }) =>
          sql<MemberRow>`${memberSelect} WHERE m.workspace_id = ${workspaceId}
              ${before ? sql`AND m.user_id < ${before}` : sql``} ORDER BY m.user_id DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) => rows.map(toMember)),
            Effect.orDie,
          ),
        holdMember: (workspaceId, userId) =>
          sql<{ role: Role }>`SELECT role FROM memberships WHERE workspace_id = ${workspaceId} AND user_id = ${userId}
              FOR SHARE`.pipe(
            Effect.map((r) => r[0]?.role),
            Effect.orDie,
          ),
        lockOwners: (workspaceId) =>
          sql<{ user_id: string }>`SELECT user_id FROM memberships
              WHERE workspace_id = ${workspaceId} AND role = 'owner' FOR UPDATE`.pipe(
            Effect.map((r) => r.length),
            Effect.orDie,
          ),
        ownersOf: (workspaceId) =>
          sql<MemberRow>`${memberSelect} WHERE m.workspace_id = ${workspaceId} AND m.role = 'owner'
              ORDER BY m.created_at, m.user_id`.pipe(
            Effect.map((rows) => rows.map(toMember)),
            Effect.orDie,
          ),
        insertMember: (workspaceId, userId, role, at) =>
          sql<{ user_id: string }>`INSERT INTO memberships (workspace_id, user_id, role, created_at, updated_at)
              VALUES (${workspaceId}, ${userId}, ${role}, ${at}::timestamptz, ${at}::timestamptz)
              ON CONFLICT DO NOTHING RETURNING user_id`.pipe(
            Effect.map((r) => r.length === 1),
            Effect.orDie,
          ),
        setRole: (workspaceId, userId, role, at) =>
          Effect.gen(function* () {
            // Announced by the user's id: their open event streams read their role again.
            yield* sql`WITH r AS (UPDATE memberships SET role = ${role}, updated_at = ${at}::timestamptz
                WHERE workspace_id = ${workspaceId} AND user_id = ${userId} RETURNING user_id)
                SELECT pg_notify(${KEYS_CHANNEL}, user_id) FROM r`
            // The role bounds the person's OAuth grants and the API keys they made in the workspace: each is
            // announced like a revocation, so that every instance reads their tokens' scopes again (OAuthService's
            // cache) and forgets the SDK tokens minted from the keys (the next use reads the role with the key,
            // ApiKeyRepo.findWithWorkspace).
            yield* sql`SELECT pg_notify(${KEYS_CHANNEL}, id) FROM (
                SELECT id FROM oauth_grants
                  WHERE workspace_id = ${workspaceId} AND user_id = ${userId} AND revoked_at IS NULL
                UNION ALL
                SELECT id FROM api_keys
                  WHERE workspace_id = ${workspaceId} AND created_by_user = ${userId} AND status = 'active') AS bound`
          }).pipe(Effect.orDie),
        deleteMember: (workspaceId, userId) =>
          Effect.gen(function* () {
            // Announced by the user's id: the event streams their sessions opened in the workspace end.
            yield* sql`WITH r AS (DELETE FROM memberships WHERE workspace_id = ${workspaceId} AND user_id = ${userId}
                RETURNING user_id) SELECT pg_notify(${KEYS_CHANNEL}, user_id) FROM r`
            // The OAuth grants the person gave in the workspace end with the membership (a later invitation
            // does not bring them back), announced like a key's revocation.
            yield* sql`WITH r AS (UPDATE oauth_grants SET revoked_at = now(), revoked_reason = 'member_removed'
                WHERE workspace_id = ${workspaceId} AND user_id = ${userId} AND revoked_at IS NULL RETURNING id)
                SELECT pg_notify(${KEYS_CHANNEL}, id) FROM r`
          }).pipe(Effect.orDie),
        insertInvitation: (i, tokenHash) =>
          sql`INSERT INTO invitations (id, workspace_id, email, role, token_hash, status, invited_by, expires_at, created_at)
              VALUES (${i.id}, ${i.workspaceId}, ${i.email}, ${i.role}, ${tokenHash}, 'pending', ${i.invitedBy},
                      ${i.expiresAt}::timestamptz, ${i.createdAt}::timestamptz)`.pipe(Effect.asVoid, Effect.orDie),
        findInvitation: (workspaceId, id, nowMs) =>
          sql<InvitationRow>`SELECT * FROM invitations WHERE workspace_id = ${workspaceId} AND id = ${id}`.pipe(
            Effect.map((r) => one(r, (row) => toInvitation(row, nowMs))),
            Effect.orDie,
          ),
        findInvitationByToken: (tokenHash, nowMs) =>
          sql<InvitationRow>`SELECT i.* FROM invitations i JOIN workspaces w ON w.id = i.workspace_id
              WHERE i.token_hash = ${tokenHash} AND w.deleted_at IS NULL`.pipe(
            Effect.map((r) => one(r, (row) => toInvitation(row, nowMs))),
            Effect.orDie,
          ),
        listInvitations: (workspaceId, { before, limit, nowMs }) =>
          sql<InvitationRow>`SELECT * FROM invitations WHERE workspace_id = ${workspaceId}
              ${before ? sql`AND id < ${before}` : sql``} ORDER BY id DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) => rows.map((r) => toInvitation(r, nowMs))),
            Effect.orDie,
          ),
        withdrawInvitationsOf: (workspaceId, userId, at, options = {}) =>
          sql<InvitationRow>`UPDATE invitations SET status = 'revoked'
              WHERE workspace_id = ${workspaceId} AND status = 'pending' AND expires_at > ${at}::timestamptz
                AND (invited_by = ${userId} OR invited_by IN (
                  SELECT id FROM api_keys WHERE workspace_id = ${workspaceId} AND created_by_user = ${userId}))
                ${options.roles === undefined ? sql`` : sql`AND role IN ${sql.in(options.roles)}`}
              RETURNING *`.pipe(
            Effect.map((rows) => rows.map((r) => toInvitation(r, Date.parse(at)))),
            Effect.orDie,
          ),
        withdrawInvitationsTo: (workspaceId, email, at) =>
          // ASCII case only (translate, not lower): a look-alike address beyond ASCII is another person's.
          sql<InvitationRow>`UPDATE invitations SET status = 'revoked'
              WHERE workspace_id = ${workspaceId} AND status = 'pending' AND expires_at > ${at}::timestamptz
                AND translate(email, ${ASCII_UPPER}, ${ASCII_LOWER}) = translate(${email}, ${ASCII_UPPER}, ${ASCII_LOWER})
              RETURNING *`.pipe(
            Effect.map((rows) => rows.map((r) => toInvitation(r, Date.parse(at)))),
            Effect.orDie,
          ),
        closeInvitation: (id, status, by, at) =>
          sql<{ id: string }>`UPDATE invitations SET status = ${status}, accepted_by = ${by},
              accepted_at = ${status === "accepted" ? at : null}::timestamptz
              WHERE id = ${id} AND status = 'pending' RETURNING id`.pipe(
            Effect.map((r) => r.length === 1),
            Effect.orDie,
          ),
      })
    }),
  )
}
