import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { ApiKeyRepo } from "../apikeys/ApiKeyRepo.ts"
import { revokedEvent } from "../apikeys/ApiKeyService.ts"
import { hashKey, isSecretOf, mintSecret } from "../apikeys/keyFormat.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import type { Actor } from "../auth/Actor.ts"
import { dailyCapReached } from "../shared/dailyCap.ts"
import { PermissionDenied, StateConflict } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { encodeCursor, idCursor, type Page, type PageRequest, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { isoOf, nowIso } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { WorkspaceNotFound } from "../workspaces/WorkspaceErrors.ts"
import { WorkspaceRepo } from "../workspaces/WorkspaceRepo.ts"
import {
  InvitationLimitReached,
  InvitationNotFound,
  InvitationTokenUnknown,
  MemberNotFound,
  SignInRefused,
  UserNotFound,
} from "./PeopleErrors.ts"
import { PeopleRepo } from "./PeopleRepo.ts"
import { PeopleSettings } from "./PeopleSettings.ts"
import type { CreatedInvitation, CreateInvitation, Invitation, Me, Member, User, VerifiedIdentity } from "./Person.ts"
import { OWNER_SCOPE, ROLE_SCOPES, ROLES, type Role } from "./roles.ts"
import { Sessions } from "./Sessions.ts"

export const INVITATION_PREFIX = "svc_inv_"
/** The advisory lock class of first sign-ins, taken with the hash of the address (see userOfIdentity). */
const IDENTITY_LOCK = 72_410_016
/** The first-run owner: an address nobody can prove, so no provider identity is ever linked to it. */
export const BOOTSTRAP_OWNER_EMAIL = "owner@localhost"

/**
 * Invitations a workspace may send in any 24 hours (InvitationLimitReached beyond): each is an e-mail the service
 * sends as itself to an address the caller names, capped as takedown notices are (TAKEDOWNS_PER_DAY).
 */
export const INVITATIONS_PER_DAY = 100

const notAUser = () =>
  new PermissionDenied({
    message: "this operation is for a signed-in person, not an API key or token",
    field: "credential",
    issue: "not a user",
  })

const ownerOnly = () =>
  new PermissionDenied({
    message: `granting, changing or removing the owner role needs ${OWNER_SCOPE} (an owner)`,
    scope: OWNER_SCOPE,
  })

/**
 * The person themselves, signed in to the dashboard, acting on their own membership: leaving needs no scope and
 * reaches any of their workspaces. A third-party app acting for them (an OAuth token) does not: it is held to
 * its grant's workspace and scopes like any credential.
 */
const leavesInPerson = (actor: Actor, userId: string) => actor.credential.type === "user" && actor.userId === userId

/**
 * Whether two e-mail addresses are the same for linking and invitations: equal but for the case of ASCII letters.
 * Not Unicode case: `"\u212Aate".toLowerCase()` (K, KELVIN SIGN) is `"kate"`, and so is `lower()` in a store with a
 * Unicode collation, yet a provider vouching for that address vouches for no mailbox of Kate's.
 */
export const sameAddress = (a: string, b: string): boolean => asciiLower(a) === asciiLower(b)
const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (c) => c.toLowerCase())
/** An address with a capital letter beyond ASCII, which lower-casing could make another person's (K → k). */
const caseAmbiguous = (address: string): boolean => asciiLower(address) !== address.toLowerCase()
const ambiguousAddress = () =>
  new SignInRefused({
    code: "EMAIL_AMBIGUOUS",
    message:
      "this e-mail address has a capital letter outside ASCII, which lower-casing makes another address; sign in with an address without one",
  })

/**
 * The first scope granting or taking away `role` needs that `held` lacks: the owner scope for `owner`, then every
 * scope of the role (no escalation through invitations or role changes); undefined when `held` has them all.
 */
const missingForRole = (held: ReadonlySet<string>, role: Role): string | undefined => {
  if (role === "owner" && !held.has(OWNER_SCOPE)) return OWNER_SCOPE
  for (const scope of ROLE_SCOPES[role]) if (!held.has(scope)) return scope
  return undefined
}

/**
 * Whether a member of role `inviter` may invite to role `invited` (`invite`'s rule for a credential holding exactly
 * that role's scopes): `members:write`, and what `requireRole` asks for the invited role.
 */
const roleMayInvite = (inviter: Role, invited: Role): boolean =>
  ROLE_SCOPES[inviter].has("members:write") && missingForRole(ROLE_SCOPES[inviter], invited) === undefined

const lastOwner = () =>
  new StateConflict({
    code: "LAST_OWNER",
    message: "a workspace keeps at least one owner: make another member owner first",
  })

/**
 * People (D16): users, their memberships in workspaces with a role, and
 * invitations. A membership's role is a fixed scope set (ROLE_SCOPES); a
 * person acting in a workspace never holds more. A workspace keeps at least
 * one owner, and only an owner grants or takes the owner role. Every change is
 * an event of the workspace's audit trail, in the transaction of the change.
 */
export class PeopleService extends Context.Service<
  PeopleService,
  {
    readonly me: (actor: Actor) => Effect.Effect<Me, UserNotFound>
    readonly listMembers: (
      actor: Actor,
      workspaceId: string,
      page: PageRequest,
    ) => Effect.Effect<Page<Member>, WorkspaceNotFound | InvalidCursor>
    readonly updateMember: (
      actor: Actor,
      workspaceId: string,
      userId: string,
      role: Role,
    ) => Effect.Effect<Member, WorkspaceNotFound | MemberNotFound | PermissionDenied | StateConflict>
    readonly removeMember: (
      actor: Actor,
      workspaceId: string,
      userId: string,
    ) => Effect.Effect<Member, WorkspaceNotFound | MemberNotFound | PermissionDenied | StateConflict>
    readonly invite: (
      actor: Actor,
      workspaceId: string,
      input: CreateInvitation,
    ) => Effect.Effect<CreatedInvitation, WorkspaceNotFound | PermissionDenied | StateConflict | InvitationLimitReached>
    readonly listInvitations: (
      actor: Actor,
      workspaceId: string,
      page: PageRequest,
    ) => Effect.Effect<Page<Invitation>, WorkspaceNotFound | InvalidCursor>
    readonly revokeInvitation: (
      actor: Actor,
      workspaceId: string,
      invitationId: string,
    ) => Effect.Effect<Invitation, WorkspaceNotFound | InvitationNotFound | PermissionDenied | StateConflict>
    readonly acceptInvitation: (
      actor: Actor,
      token: string,
    ) => Effect.Effect<Member, PermissionDenied | InvitationTokenUnknown | StateConflict>
    /**
     * The user a provider's verified identity signs in as: the one linked to it, else the one with its
     * verified e-mail (linked now), else a new one. An identity without a verified e-mail is refused.
     */
    readonly userOfIdentity: (identity: VerifiedIdentity) => Effect.Effect<User, SignInRefused>
    /** The workspaces `userId` may act in; for a sign-in through an enterprise-only provider, enterprise ones. */
    readonly workspacesOf: (userId: string) => Effect.Effect<Me["memberships"]>
    /** Whether `userId` may sign in through an enterprise-only provider: a member, or invited, of an enterprise workspace. */
    readonly mayUseEnterpriseProvider: (user: User) => Effect.Effect<boolean>
    /**
     * The Actor of `userId` in `workspaceId`, with the scopes of their role (narrowed to `within`, for an
     * OAuth grant), or undefined when they are not a member (any more), or (enterprise-only sign-in) the
     * workspace is not on the enterprise plan.
     */
    readonly actorOf: (
      userId: string,
      workspaceId: string,
      credential: Actor["credential"],
      options?: { readonly enterpriseOnly?: boolean; readonly within?: ReadonlySet<string> },
    ) => Effect.Effect<Actor | undefined>
    /**
     * The operator's way back into the dashboard (the CLI's `signin-link`): a one-time sign-in link for an
     * owner of `workspaceId` (the one named by `email`, needed when there are several), audited as
     * `member.signin_link_created`. The token is returned once and stored only as a hash.
     */
    readonly ownerSignInLink: (
      actor: Actor,
      workspaceId: string,
      options: { readonly email?: string | undefined; readonly ttlMs: number },
    ) => Effect.Effect<
      { readonly userId: string; readonly email: string; readonly token: string; readonly expiresAt: string },
      WorkspaceNotFound | StateConflict
    >
    /** First run: the owner of the bootstrap workspace (one user, address `owner@localhost`, never verified). */
    readonly ensureBootstrapOwner: (workspaceId: string) => Effect.Effect<User>
  }
>()("@agentgov/domain/people/PeopleService") {
  static readonly layer = Layer.effect(
    PeopleService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* PeopleRepo
      const workspaces = yield* WorkspaceRepo
      const audit = yield* AuditLog
      const sessions = yield* Sessions
      const keys = yield* ApiKeyRepo
      const tx = transactional(sql)

      /** The workspace of a request: the actor's own (an operator key: any), else not found. */
      const workspaceFor = (actor: Actor, workspaceId: string) =>
        Effect.flatMap(workspaces.find(workspaceId), (w) =>
          w && (w.id === actor.workspaceId || actor.scopes.has("workspaces:admin"))
            ? Effect.succeed(w)
            : Effect.fail(new WorkspaceNotFound({ workspaceId })),
        )
      const inWorkspace = (actor: Actor, workspaceId: string): Actor => ({ ...actor, workspaceId })
      const requireScope = (actor: Actor, scope: "members:write") =>
        actor.scopes.has(scope)
          ? Effect.void
          : Effect.fail(new PermissionDenied({ message: `this credential lacks the scope ${scope}`, scope }))

      /**
       * A role is granted, or taken away, only by a credential that holds every scope of it: no escalation through
       * invitations or role changes (a `members:write` key inviting an `admin` would hand out `apikeys:write`), as
       * none through key creation.
       */
      const requireRole = (actor: Actor, role: Role) => {
        const missing = missingForRole(actor.scopes, role)
        if (missing === undefined) return Effect.void
        if (missing === OWNER_SCOPE && role === "owner") return Effect.fail(ownerOnly())
        return Effect.fail(
          new PermissionDenied({
            message: `the role "${role}" holds the scope ${missing}, which this credential lacks`,
            scope: missing,
          }),
        )
      }

      /**
       * The person a credential acts for: the member in person (a session) or through an app; for a key, or its SDK
       * token, the person who made the key; none for the operator's keys and the system.
       */
      const personBehind = (actor: Actor): Effect.Effect<string | undefined> =>
        actor.credential.type === "user" || actor.credential.type === "oauth"
          ? Effect.succeed(actor.userId)
          : actor.credential.type === "api_key" || actor.credential.type === "sdk_token"
            ? Effect.map(keys.find(actor.workspaceId, actor.credential.id), (k) => k?.createdByUser ?? undefined)
            : Effect.succeed(undefined)

      const me = Effect.fn("PeopleService.me")(function* (actor: Actor) {
        // An API key is not a person: there is no "me" behind it.
        if (actor.userId === undefined) return yield* new UserNotFound()
        // Both reads at once: the dashboard's session read waits on this.
        const [user, memberships] = yield* Effect.all([repo.findUser(actor.userId), repo.membershipsOf(actor.userId)], {
          concurrency: 2,
        })
        if (!user) return yield* new UserNotFound()
        // An app acting for the person (an OAuth token) is held to its grant's workspace: it does not learn which
        // other workspaces the person belongs to, or their roles there.
        if (actor.credential.type === "oauth")
          return { user, memberships: memberships.filter((m) => m.workspaceId === actor.workspaceId) }
        return { user, memberships }
      })

      const listMembers = Effect.fn("PeopleService.listMembers")(function* (
        actor: Actor,
        workspaceId: string,
        page: PageRequest,
      ) {
        yield* workspaceFor(actor, workspaceId)
        const { limit, before } = yield* pageWindow(page, idCursor("usr"))
        const rows = yield* repo.listMembers(workspaceId, { before, limit: limit + 1 })
        const withId = rows.map((m) => ({ ...m, id: m.userId }))
        const p = toPage(withId, limit, (last) => encodeCursor(last.userId))
        return { ...p, data: p.data.map(({ id: _, ...m }) => m) }
      })

      /**
       * Locks the member and the owners; refuses changing or removing a member unless the credential could grant
       * both their role and the new one (`requireRole`: the owner role needs OWNER_SCOPE), and taking the owner
       * role from the last owner.
       */
      const changeable = (actor: Actor, workspaceId: string, userId: string, next: Role | null) =>
        Effect.gen(function* () {
          const owners = yield* repo.lockOwners(workspaceId)
          const member = yield* repo.findMember(workspaceId, userId, true)
          if (!member) return yield* new MemberNotFound({ userId })
          const self = leavesInPerson(actor, userId)
          // Leaving is one's own right; changing others needs members:write.
          if (!(self && next === null)) yield* requireScope(actor, "members:write")
          if (next !== member.role && !(self && next === null)) {
            yield* requireRole(actor, member.role)
            if (next !== null) yield* requireRole(actor, next)
          }
          if (member.role === "owner" && next !== "owner" && owners <= 1) return yield* lastOwner()
          return member
        })

      const updateMember = Effect.fn("PeopleService.updateMember")(function* (
        actor: Actor,
        workspaceId: string,
        userId: string,
        role: Role,
      ) {
        yield* workspaceFor(actor, workspaceId)
        return yield* tx(
          Effect.gen(function* () {
            const member = yield* changeable(actor, workspaceId, userId, role)
            if (member.role === role) return member
            const at = yield* nowIso
            yield* repo.setRole(workspaceId, userId, role, at)
            // The invitations they sent (in person, through an app, or with a key they made) that the new role could
            // not send end with the old role: a demoted admin does not keep a way to hand out admin, to another
            // address of theirs say, as a removed one does not (removeMember).
            const ungrantable = ROLES.filter((r) => !roleMayInvite(role, r))
            const withdrawn =
              ungrantable.length === 0
                ? []
                : yield* repo.withdrawInvitationsOf(workspaceId, userId, at, { roles: ungrantable })
            yield* audit.append(inWorkspace(actor, workspaceId), [
              { type: "member.role_changed", data: { userId, email: member.email, from: member.role, to: role } },
              ...withdrawn.map((i) => ({
                type: "invitation.revoked" as const,
                data: { invitationId: i.id, email: i.email, role: i.role },
              })),
            ])
            return { ...member, role, updatedAt: at }
          }),
        )
      })

      const removeMember = Effect.fn("PeopleService.removeMember")(function* (
        actor: Actor,
        workspaceId: string,
        userId: string,
      ) {
        // Leaving: a person may always act on their own membership, in any workspace they belong to.
        if (!leavesInPerson(actor, userId)) yield* workspaceFor(actor, workspaceId)
        return yield* tx(
          Effect.gen(function* () {
            const member = yield* changeable(actor, workspaceId, userId, null)
            yield* repo.deleteMember(workspaceId, userId)
            // The API keys they made (in the dashboard, or with a key they made) end with the membership, as their
            // apps' grants do: each revocation is announced, so SDK tokens of those keys stop on every instance.
            const at = yield* nowIso
            const revoked = yield* keys.revokeOfMember(workspaceId, userId, at)
            // So are the invitations they sent and nobody accepted yet: a removed admin does not come back through an
            // invitation to another address of theirs.
            const sent = yield* repo.withdrawInvitationsOf(workspaceId, userId, at)
            // And those sent to them that are still pending (a second invitation, a reminder): the removal is what
            // the workspace decided, and such a link would bring them back with its role.
            const toThem = yield* repo.withdrawInvitationsTo(workspaceId, member.email, at)
            const withdrawn = [...sent, ...toThem]
            yield* audit.append(inWorkspace(actor, workspaceId), [
              {
                type: "member.removed",
                data: { userId, email: member.email, role: member.role, left: actor.userId === userId },
              },
              ...revoked.map((k) => revokedEvent(k, "member_removed")),
              ...withdrawn.map((i) => ({
                type: "invitation.revoked",
                data: { invitationId: i.id, email: i.email, role: i.role },
              })),
            ])
            return member
          }),
        )
      })

      const invite = Effect.fn("PeopleService.invite")(function* (
        actor: Actor,
        workspaceId: string,
        input: CreateInvitation,
      ) {
        const workspace = yield* workspaceFor(actor, workspaceId)
        yield* requireScope(actor, "members:write")
        yield* requireRole(actor, input.role)
        const settings = yield* PeopleSettings
        const { secret, hash } = mintSecret(INVITATION_PREFIX)
        const now = yield* Clock.currentTimeMillis
        const invitation: Invitation = {
          id: newId("inv", now),
          workspaceId,
          email: input.email,
          role: input.role,
          status: "pending",
          invitedBy: actor.userId ?? actor.credential.id,
          expiresAt: isoOf(now + settings.invitationTtlMs),
          createdAt: isoOf(now),
          acceptedBy: null,
          acceptedAt: null,
        }
        yield* tx(
          Effect.gen(function* () {
            // The person behind the credential (in person, through an app, or a key they made) is held a member until
            // the invitation commits, with a role that may still send it: a removal or demotion that committed since
            // their credential was read refuses it, and one that starts now waits and then withdraws it.
            const person = yield* personBehind(actor)
            if (person !== undefined) {
              const role = yield* repo.holdMember(workspaceId, person)
              if (role === undefined || !roleMayInvite(role, input.role))
                return yield* new PermissionDenied({
                  message:
                    role === undefined
                      ? "the person behind this credential is no longer a member of the workspace"
                      : `the person behind this credential is now ${role}, which cannot invite to ${input.role}`,
                  field: "credential",
                  issue: role === undefined ? "not a member" : "role changed",
                })
            }
            const existing = yield* repo.findUserByEmail(input.email)
            if (
              existing &&
              sameAddress(existing.email, input.email) &&
              (yield* repo.findMember(workspaceId, existing.id))
            )
              return yield* new StateConflict({
                code: "ALREADY_MEMBER",
                message: `${input.email} is already a member of this workspace`,
              })
            const retryAfterSeconds = yield* dailyCapReached(sql, {
              table: "invitations",
              kind: "invitations",
              workspaceId,
              limit: INVITATIONS_PER_DAY,
              now,
            }).pipe(Effect.orDie)
            if (retryAfterSeconds !== undefined)
              return yield* new InvitationLimitReached({ limit: INVITATIONS_PER_DAY, retryAfterSeconds })
            yield* repo.insertInvitation(invitation, hash)
            yield* audit.append(inWorkspace(actor, workspaceId), [
              {
                type: "member.invited",
                data: {
                  invitationId: invitation.id,
                  email: input.email,
                  role: input.role,
                  expiresAt: invitation.expiresAt,
                },
              },
            ])
          }),
        )
        // The token travels in the fragment: browsers send it to no server, log and Referer included.
        const link = `${settings.publicUrl.replace(/\/$/, "")}/#invitation=${secret}`
        if (settings.sendInvitation) {
          const sent = yield* Effect.promise(() =>
            settings.sendInvitation!({ to: input.email, workspaceName: workspace.name, role: input.role, link }).then(
              () => true,
              () => false,
            ),
          )
          if (sent) return { invitation, delivery: "email" as const }
        }
        return { invitation, delivery: "link" as const, link }
      })

      const listInvitations = Effect.fn("PeopleService.listInvitations")(function* (
        actor: Actor,
        workspaceId: string,
        page: PageRequest,
      ) {
        yield* workspaceFor(actor, workspaceId)
        const { limit, before } = yield* pageWindow(page, idCursor("inv"))
        const nowMs = yield* Clock.currentTimeMillis
        return toPage(yield* repo.listInvitations(workspaceId, { before, limit: limit + 1, nowMs }), limit)
      })

      const revokeInvitation = Effect.fn("PeopleService.revokeInvitation")(function* (
        actor: Actor,
        workspaceId: string,
        invitationId: string,
      ) {
        yield* workspaceFor(actor, workspaceId)
        return yield* tx(
          Effect.gen(function* () {
            const nowMs = yield* Clock.currentTimeMillis
            const invitation = yield* repo.findInvitation(workspaceId, invitationId, nowMs)
            if (!invitation) return yield* new InvitationNotFound({ invitationId })
            // Whether a person becomes an owner is an owner's to decide, in both directions (D16): an admin withdrew
            // the invitation an owner sent to a co-owner. Checked before anything changes.
            if (invitation.role === "owner" && !actor.scopes.has(OWNER_SCOPE))
              return yield* new PermissionDenied({
                message: `withdrawing an invitation to the owner role needs ${OWNER_SCOPE} (an owner)`,
                scope: OWNER_SCOPE,
              })
            const at = isoOf(nowMs)
            if (!(yield* repo.closeInvitation(invitationId, "revoked", null, at)))
              return yield* new StateConflict({
                code: "INVITATION_CLOSED",
                message: `invitation ${invitationId} was already ${invitation.status}`,
              })
            yield* audit.append(inWorkspace(actor, workspaceId), [
              { type: "invitation.revoked", data: { invitationId, email: invitation.email, role: invitation.role } },
            ])
            return { ...invitation, status: "revoked" as const }
          }),
        )
      })

      const acceptInvitation = Effect.fn("PeopleService.acceptInvitation")(function* (actor: Actor, token: string) {
        // Garbage is refused before any read; an unknown token is a missing invitation.
        if (!isSecretOf(INVITATION_PREFIX, token)) return yield* new InvitationTokenUnknown()
        return yield* tx(
          Effect.gen(function* () {
            const nowMs = yield* Clock.currentTimeMillis
            const invitation = yield* repo.findInvitationByToken(hashKey(token), nowMs)
            if (!invitation) return yield* new InvitationTokenUnknown()
            if (actor.userId === undefined || actor.credential.type !== "user") return yield* notAUser()
            const userId = actor.userId
            if (invitation.status !== "pending")
              return yield* new StateConflict({
                code: "INVITATION_CLOSED",
                message: `this invitation is ${invitation.status}; ask for a new one`,
              })
            const user = yield* repo.findUser(userId)
            // The link is for one address: a forwarded link does not let someone else in.
            if (!user?.emailVerified || !sameAddress(user.email, invitation.email))
              return yield* new PermissionDenied({
                message: "this invitation was sent to another e-mail address; sign in with that address",
                field: "email",
                issue: "does not match the invitation",
              })
            const at = isoOf(nowMs)
            if (!(yield* repo.closeInvitation(invitation.id, "accepted", userId, at)))
              return yield* new StateConflict({ code: "INVITATION_CLOSED", message: "this invitation was just closed" })
            if (!(yield* repo.insertMember(invitation.workspaceId, userId, invitation.role, at)))
              return yield* new StateConflict({ code: "ALREADY_MEMBER", message: "you are already a member" })
            yield* audit.append(inWorkspace(actor, invitation.workspaceId), [
              {
                type: "member.joined",
                data: { userId, email: user.email, role: invitation.role, invitationId: invitation.id },
              },
            ])
            return (yield* repo.findMember(invitation.workspaceId, userId))!
          }),
        )
      })

      const userOfIdentity = Effect.fn("PeopleService.userOfIdentity")(function* (identity: VerifiedIdentity) {
        return yield* tx(
          Effect.gen(function* () {
            // First sign-ins of one person at once (two tabs, a double click, two providers) take turns by address:
            // the later finds the account, or the identity, the earlier made, instead of failing on the unique index.
            if (identity.email && identity.emailVerified)
              yield* sql`SELECT pg_advisory_xact_lock(${IDENTITY_LOCK}, hashtext(${asciiLower(identity.email)}))`.pipe(
                Effect.orDie,
              )
            const linked = yield* repo.findUserByIdentity(identity.provider, identity.subject)
            if (linked) return linked
            if (!identity.email || !identity.emailVerified)
              return yield* new SignInRefused({
                code: "EMAIL_UNVERIFIED",
                message: "the identity provider did not vouch for an e-mail address; verify it there and sign in again",
              })
            // Such an address neither starts an account (which would hold, in a store with a Unicode collation, the
            // lower-cased address of someone else) nor links to one.
            if (caseAmbiguous(identity.email)) return yield* ambiguousAddress()
            const at = yield* nowIso
            const byEmail = yield* repo.findUserByEmail(identity.email)
            if (byEmail) {
              // Found by the store's case folding, which may be Unicode's: an account from before with a look-alike
              // address is no link.
              if (!sameAddress(byEmail.email, identity.email)) return yield* ambiguousAddress()
              // Linking by verified address only, on both sides: an account whose address was never proven
              // (the first-run owner) is not handed to whoever proves it at a provider.
              if (!byEmail.emailVerified)
                return yield* new SignInRefused({
                  code: "ACCOUNT_UNVERIFIED",
                  message: "an account with this e-mail address exists but its address was never verified",
                })
              yield* repo.insertIdentity(identity.provider, identity.subject, byEmail.id, at)
              return byEmail
            }
            const user: User = {
              id: newId("usr"),
              email: identity.email,
              emailVerified: true,
              name: identity.name ?? null,
              createdAt: at,
            }
            yield* repo.insertUser(user)
            yield* repo.insertIdentity(identity.provider, identity.subject, user.id, at)
            return user
          }),
        )
      })

      const mayUseEnterpriseProvider = Effect.fn("PeopleService.mayUseEnterpriseProvider")(function* (user: User) {
        const memberships = yield* repo.membershipsOf(user.id)
        if (memberships.some((m) => m.plan === "enterprise")) return true
        return yield* sql<{
          email: string
        }>`SELECT i.email FROM invitations i JOIN workspaces w ON w.id = i.workspace_id
            WHERE lower(i.email) = lower(${user.email}) AND i.status = 'pending' AND i.expires_at > now()
            AND w.plan = 'enterprise' AND w.deleted_at IS NULL`.pipe(
          Effect.map((r) => r.some((i) => sameAddress(i.email, user.email))),
          Effect.orDie,
        )
      })

      const actorOf = Effect.fn("PeopleService.actorOf")(function* (
        userId: string,
        workspaceId: string,
        credential: Actor["credential"],
        options: { readonly enterpriseOnly?: boolean; readonly within?: ReadonlySet<string> } = {},
      ) {
        const grant = yield* repo.grant(workspaceId, userId)
        if (!grant) return undefined
        if (options.enterpriseOnly && grant.plan !== "enterprise") return undefined
        const scopes = new Set(ROLE_SCOPES[grant.role])
        if (options.within) for (const s of scopes) if (!options.within.has(s)) scopes.delete(s)
        return {
          workspaceId,
          environment: grant.environment,
          credential,
          keyType: "workspace",
          scopes,
          userId,
        } satisfies Actor
      })

      const ownerSignInLink = Effect.fn("PeopleService.ownerSignInLink")(function* (
        actor: Actor,
        workspaceId: string,
        options: { readonly email?: string | undefined; readonly ttlMs: number },
      ) {
        yield* workspaceFor(actor, workspaceId)
        return yield* tx(
          Effect.gen(function* () {
            const owners = yield* repo.ownersOf(workspaceId)
            const wanted = options.email
            const matching = wanted === undefined ? owners : owners.filter((o) => sameAddress(o.email, wanted))
            if (matching.length !== 1)
              return yield* new StateConflict({
                code: "OWNER_NOT_CHOSEN",
                message:
                  owners.length === 0
                    ? `workspace ${workspaceId} has no owner: invite one with POST /workspaces/${workspaceId}/invitations`
                    : wanted !== undefined
                      ? `${options.email} is not an owner of workspace ${workspaceId}`
                      : `workspace ${workspaceId} has ${owners.length} owners: name one with --email (${owners.map((o) => o.email).join(", ")})`,
              })
            const owner = matching[0]!
            const now = yield* Clock.currentTimeMillis
            const expiresAt = isoOf(now + options.ttlMs)
            const token = yield* sessions.createSignInLink(owner.userId, options.ttlMs)
            yield* audit.append(inWorkspace(actor, workspaceId), [
              { type: "member.signin_link_created", data: { userId: owner.userId, email: owner.email, expiresAt } },
            ])
            return { userId: owner.userId, email: owner.email, token, expiresAt }
          }),
        )
      })

      const ensureBootstrapOwner = Effect.fn("PeopleService.ensureBootstrapOwner")(function* (workspaceId: string) {
        return yield* tx(
          Effect.gen(function* () {
            const at = yield* nowIso
            let user = yield* repo.findUserByEmail(BOOTSTRAP_OWNER_EMAIL)
            if (!user) {
              user = {
                id: newId("usr"),
                email: BOOTSTRAP_OWNER_EMAIL,
                emailVerified: false,
                name: "Owner",
                createdAt: at,
              }
              yield* repo.insertUser(user)
            }
            yield* repo.insertMember(workspaceId, user.id, "owner", at)
            return user
          }),
        )
      })

      return PeopleService.of({
        me,
        listMembers,
        updateMember,
        removeMember,
        invite,
        listInvitations,
        revokeInvitation,
        acceptInvitation,
        userOfIdentity,
        workspacesOf: (userId) => repo.membershipsOf(userId),
        mayUseEnterpriseProvider,
        actorOf,
        ensureBootstrapOwner,
        ownerSignInLink,
      })
    }),
  )
}
