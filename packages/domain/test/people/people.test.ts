import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Actor,
  DEFAULT_SESSION_SETTINGS,
  newId,
  PeopleRepo,
  PeopleService,
  ROLE_SCOPES,
  SCOPES,
  Sessions,
  WorkspaceService,
} from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

let t: DomainTestRuntime
const people = <A, E>(f: (s: PeopleService["Service"]) => Effect.Effect<A, E>) => PeopleService.use(f)

const newWorkspace = (name: string, plan: "free" | "enterprise" = "free") =>
  t.run(WorkspaceService.use((s) => s.create(null, { name, plan }))).then((r) => r.workspace)

const signIn = (email: string, opts: { provider?: string; subject?: string; verified?: boolean } = {}) =>
  t.run(
    people((s) =>
      s.userOfIdentity({
        provider: opts.provider ?? "idp-a",
        subject: opts.subject ?? `sub-${email}`,
        email,
        emailVerified: opts.verified ?? true,
        name: undefined,
      }),
    ),
  )

const actorOf = async (userId: string, workspaceId: string): Promise<Actor> => {
  const actor = await t.run(people((s) => s.actorOf(userId, workspaceId, { type: "user", id: userId })))
  if (!actor) throw new Error(`${userId} is not a member of ${workspaceId}`)
  return actor
}

const tokenOf = (link: string | undefined) => {
  const m = /#invitation=(svc_inv_[0-9A-Za-z]+)$/.exec(link ?? "")
  if (!m) throw new Error(`no token in ${link}`)
  return m[1]!
}

/** Invites `email` with `role` as `inviter` and has the (signed-in) invitee accept: their actor. */
const join = async (
  inviter: Actor,
  workspaceId: string,
  email: string,
  role: "owner" | "admin" | "member" | "viewer",
) => {
  const created = await t.run(people((s) => s.invite(inviter, workspaceId, { email, role })))
  const user = await signIn(email)
  const invitee = { ...inviter, credential: { type: "user" as const, id: user.id }, userId: user.id }
  await t.run(people((s) => s.acceptInvitation(invitee, tokenOf(created.link))))
  return actorOf(user.id, workspaceId)
}

const eventTypes = (workspaceId: string) =>
  t.run(
    SqlClient.SqlClient.use(
      (sql) => sql<{ type: string }>`SELECT type FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
    ).pipe(Effect.orDie),
  )

beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

describe("memberships and invitations", () => {
  it("invites by link, the invitee joins with the role, and each change is an audited event", async () => {
    const ws = await newWorkspace("team")
    const ownerUser = await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))
    const owner = await actorOf(ownerUser.id, ws.id)
    expect(owner.scopes).toEqual(ROLE_SCOPES.owner)

    const created = await t.run(people((s) => s.invite(owner, ws.id, { email: "alice@example.com", role: "member" })))
    expect(created.delivery).toBe("link")
    expect(created.invitation.status).toBe("pending")
    const alice = await signIn("alice@example.com")
    const aliceActor = { ...owner, credential: { type: "user" as const, id: alice.id }, userId: alice.id }
    const member = await t.run(people((s) => s.acceptInvitation(aliceActor, tokenOf(created.link))))
    expect(member).toMatchObject({ userId: alice.id, role: "member", email: "alice@example.com" })

    // The link works once.
    const again = await t.failure(people((s) => s.acceptInvitation(aliceActor, tokenOf(created.link))))
    expect(again).toMatchObject({ _tag: "StateConflict", code: "INVITATION_CLOSED" })

    const changed = await t.run(people((s) => s.updateMember(owner, ws.id, alice.id, "viewer")))
    expect(changed.role).toBe("viewer")
    expect((await actorOf(alice.id, ws.id)).scopes).toEqual(ROLE_SCOPES.viewer)

    const me = await t.run(people((s) => s.me(aliceActor)))
    expect(me.memberships).toEqual([{ workspaceId: ws.id, workspaceName: "team", plan: "free", role: "viewer" }])

    await t.run(people((s) => s.removeMember(owner, ws.id, alice.id)))
    expect(await t.run(people((s) => s.actorOf(alice.id, ws.id, { type: "user", id: alice.id })))).toBeUndefined()

    const types = (await eventTypes(ws.id)).map((e) => e.type)
    expect(types).toEqual(
      expect.arrayContaining(["member.invited", "member.joined", "member.role_changed", "member.removed"]),
    )
  })

  it("a forwarded link does not let another address in", async () => {
    const ws = await newWorkspace("forward")
    const owner = await actorOf((await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))).id, ws.id)
    const created = await t.run(people((s) => s.invite(owner, ws.id, { email: "carol@example.com", role: "admin" })))
    const mallory = await signIn("mallory@example.com")
    const failure = await t.failure(
      people((s) =>
        s.acceptInvitation(
          { ...owner, credential: { type: "user", id: mallory.id }, userId: mallory.id },
          tokenOf(created.link),
        ),
      ),
    )
    expect(failure).toMatchObject({ _tag: "PermissionDenied", field: "email" })
    expect(await t.run(people((s) => s.actorOf(mallory.id, ws.id, { type: "user", id: mallory.id })))).toBeUndefined()
  })

  it("an invitation is for its address up to ASCII case only: not a look-alike that Unicode lower-casing makes it", async () => {
    const ws = await newWorkspace("kelvin")
    const owner = await actorOf((await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))).id, ws.id)
    const created = await t.run(people((s) => s.invite(owner, ws.id, { email: "kate@example.com", role: "admin" })))
    // An account whose verified address is "\u212Aate@example.com" (K, KELVIN SIGN: its toLowerCase() is "kate"),
    // as one made before such addresses were refused at sign-in.
    const lookalike = {
      id: newId("usr"),
      email: "\u212Aate@example.com",
      emailVerified: true,
      name: null,
      createdAt: new Date().toISOString(),
    }
    await t.run(PeopleRepo.use((r) => r.insertUser(lookalike)))
    const failure = await t.failure(
      people((s) =>
        s.acceptInvitation(
          { ...owner, credential: { type: "user", id: lookalike.id }, userId: lookalike.id },
          tokenOf(created.link),
        ),
      ),
    )
    expect(failure).toMatchObject({ _tag: "PermissionDenied", field: "email" })
    expect(
      await t.run(people((s) => s.actorOf(lookalike.id, ws.id, { type: "user", id: lookalike.id }))),
    ).toBeUndefined()
    // ASCII case still does not matter; and the look-alike account does not take Kate's sign-in either.
    const kate = await t.run(
      Effect.result(
        people((s) =>
          s.userOfIdentity({
            provider: "idp-k",
            subject: "kate",
            email: "KATE@example.com",
            emailVerified: true,
            name: undefined,
          }),
        ),
      ),
    )
    if (kate._tag === "Failure") {
      // A store with a Unicode collation finds the look-alike account by lower(): no link, and no second account.
      expect(kate.failure).toMatchObject({ code: "EMAIL_AMBIGUOUS" })
      return
    }
    expect(kate.success.id).not.toBe(lookalike.id)
    const joined = await t.run(
      people((s) =>
        s.acceptInvitation(
          { ...owner, credential: { type: "user", id: kate.success.id }, userId: kate.success.id },
          tokenOf(created.link),
        ),
      ),
    )
    expect(joined.role).toBe("admin")
  })

  it("an expired or revoked invitation cannot be accepted; a garbage token is refused before any read", async () => {
    const ws = await newWorkspace("expiry")
    const owner = await actorOf((await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))).id, ws.id)
    const old = await t.run(
      at(
        Date.now() - 8 * 24 * 3600_000,
        people((s) => s.invite(owner, ws.id, { email: "dan@example.com", role: "member" })),
      ),
    )
    const dan = await signIn("dan@example.com")
    const danActor = { ...owner, credential: { type: "user" as const, id: dan.id }, userId: dan.id }
    expect(await t.failure(people((s) => s.acceptInvitation(danActor, tokenOf(old.link))))).toMatchObject({
      code: "INVITATION_CLOSED",
    })
    const revoked = await t.run(people((s) => s.invite(owner, ws.id, { email: "dan@example.com", role: "member" })))
    await t.run(people((s) => s.revokeInvitation(owner, ws.id, revoked.invitation.id)))
    expect(await t.failure(people((s) => s.acceptInvitation(danActor, tokenOf(revoked.link))))).toMatchObject({
      code: "INVITATION_CLOSED",
    })
    expect(await t.failure(people((s) => s.acceptInvitation(danActor, "svc_inv_garbage")))).toMatchObject({
      _tag: "InvitationTokenUnknown",
    })
    const list = await t.run(people((s) => s.listInvitations(owner, ws.id, {})))
    expect(list.data.map((i) => i.status).sort()).toEqual(["expired", "revoked"])
    expect((await eventTypes(ws.id)).map((e) => e.type)).toContain("invitation.revoked")
  })

  it("the last owner can neither leave nor be demoted; only an owner grants or takes the owner role", async () => {
    const ws = await newWorkspace("owners")
    const ownerUser = await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))
    const owner = await actorOf(ownerUser.id, ws.id)
    expect(await t.failure(people((s) => s.updateMember(owner, ws.id, ownerUser.id, "admin")))).toMatchObject({
      code: "LAST_OWNER",
    })
    expect(await t.failure(people((s) => s.removeMember(owner, ws.id, ownerUser.id)))).toMatchObject({
      code: "LAST_OWNER",
    })

    const admin = await join(owner, ws.id, "erin@example.com", "admin")
    // An admin manages members but not owners, and cannot make themselves one.
    expect(await t.failure(people((s) => s.updateMember(admin, ws.id, admin.userId!, "owner")))).toMatchObject({
      _tag: "PermissionDenied",
      scope: "workspaces:write",
    })
    expect(await t.failure(people((s) => s.removeMember(admin, ws.id, ownerUser.id)))).toMatchObject({
      _tag: "PermissionDenied",
    })
    expect(
      await t.failure(people((s) => s.invite(admin, ws.id, { email: "x@example.com", role: "owner" }))),
    ).toMatchObject({ _tag: "PermissionDenied" })
    const viewer = await join(admin, ws.id, "frank@example.com", "viewer")
    expect(
      await t.failure(people((s) => s.invite(viewer, ws.id, { email: "y@example.com", role: "viewer" }))),
    ).toMatchObject({ _tag: "PermissionDenied", scope: "members:write" })
    // A viewer may leave.
    await t.run(people((s) => s.removeMember(viewer, ws.id, viewer.userId!)))

    await t.run(people((s) => s.updateMember(owner, ws.id, admin.userId!, "owner")))
    await t.run(people((s) => s.removeMember(owner, ws.id, ownerUser.id)))
    const members = await t.run(people((s) => s.listMembers(admin, ws.id, {})))
    expect(members.data.map((m) => [m.email, m.role])).toEqual([["erin@example.com", "owner"]])
  })

  it("a credential grants, changes or removes only roles whose every scope it holds (no escalation by invitation)", async () => {
    const ws = await newWorkspace("escalation")
    const ownerUser = await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))
    const owner = await actorOf(ownerUser.id, ws.id)
    const admin = await join(owner, ws.id, "gina@example.com", "admin")
    const member = await join(owner, ws.id, "hal@example.com", "member")
    // A workspace key (or an app's grant) holding only the members scopes.
    const membersKey: Actor = {
      ...owner,
      credential: { type: "api_key", id: "key_members_only" },
      userId: undefined,
      scopes: new Set(["members:read", "members:write"]),
    } as Actor
    for (const role of ["admin", "member"] as const) {
      const refused = await t.failure(
        people((s) => s.invite(membersKey, ws.id, { email: `esc-${role}@example.com`, role })),
      )
      expect(refused, role).toMatchObject({ _tag: "PermissionDenied" })
      expect(String((refused as { message: string }).message)).toContain(`the role "${role}" holds the scope`)
    }
    // The viewer role is all reads: a key that reads the workspace could grant it.
    const reader: Actor = { ...membersKey, scopes: new Set([...ROLE_SCOPES.viewer, "members:write"]) } as Actor
    await t.run(people((s) => s.invite(reader, ws.id, { email: "esc-viewer@example.com", role: "viewer" })))
    expect(await t.failure(people((s) => s.updateMember(membersKey, ws.id, member.userId!, "admin")))).toMatchObject({
      _tag: "PermissionDenied",
    })
    // Nor can it demote or remove an admin, whose role it could not grant.
    expect(await t.failure(people((s) => s.updateMember(reader, ws.id, admin.userId!, "viewer")))).toMatchObject({
      _tag: "PermissionDenied",
    })
    expect(await t.failure(people((s) => s.removeMember(reader, ws.id, admin.userId!)))).toMatchObject({
      _tag: "PermissionDenied",
    })
    const invited = await t.run(people((s) => s.listInvitations(owner, ws.id, {})))
    expect(invited.data.filter((i) => i.status === "pending").map((i) => i.email)).toEqual(["esc-viewer@example.com"])
    const members = await t.run(people((s) => s.listMembers(owner, ws.id, {})))
    expect(Object.fromEntries(members.data.map((m) => [m.email, m.role]))).toMatchObject({
      "gina@example.com": "admin",
      "hal@example.com": "member",
    })
    expect(members.data).toHaveLength(3)
    // An admin holds every scope of the admin role: inviting one is its right.
    await t.run(people((s) => s.invite(admin, ws.id, { email: "esc-admin2@example.com", role: "admin" })))
  })

  it("two owners leaving, or demoting each other, at once: one succeeds and the workspace keeps an owner", async () => {
    const ws = await newWorkspace("racing owners")
    const first = await actorOf((await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))).id, ws.id)
    const second = await join(first, ws.id, "gus@example.com", "owner")
    const settle = (results: Array<PromiseSettledResult<unknown>>) =>
      results.map((r) => (r.status === "fulfilled" ? "ok" : ((r.reason as any)?.code ?? String(r.reason)))).sort()
    const owners = async () =>
      (await t.run(people((s) => s.listMembers(first, ws.id, {})))).data.filter((m) => m.role === "owner").length
    const demoted = await Promise.allSettled([
      t.run(people((s) => s.updateMember(first, ws.id, second.userId!, "admin"))),
      t.run(people((s) => s.updateMember(second, ws.id, first.userId!, "admin"))),
    ])
    expect(await owners()).toBe(1)
    expect(settle(demoted).filter((r) => r === "ok")).toHaveLength(1)

    const third = await actorOf(
      (await t.run(people((s) => s.listMembers(first, ws.id, {})))).data.find((m) => m.role === "owner")!.userId,
      ws.id,
    )
    const fourth = await join(third, ws.id, "hugo@example.com", "owner")
    const left = await Promise.allSettled([
      t.run(people((s) => s.removeMember(third, ws.id, third.userId!))),
      t.run(people((s) => s.removeMember(fourth, ws.id, fourth.userId!))),
    ])
    expect(await owners()).toBe(1)
    expect(settle(left).filter((r) => r === "ok")).toHaveLength(1)
  })

  it("another workspace's members are not found", async () => {
    const a = await newWorkspace("a")
    const b = await newWorkspace("b")
    const ownerA = await actorOf((await t.run(people((s) => s.ensureBootstrapOwner(a.id)))).id, a.id)
    expect(await t.failure(people((s) => s.listMembers(ownerA, b.id, {})))).toMatchObject({ _tag: "WorkspaceNotFound" })
    expect(
      await t.failure(people((s) => s.invite(ownerA, b.id, { email: "z@example.com", role: "viewer" }))),
    ).toMatchObject({ _tag: "WorkspaceNotFound" })
  })
})

describe("roles and sign-in identities", () => {
  it("each role is a fixed scope set; none holds workspaces:admin; an actor never exceeds its role", async () => {
    expect(ROLE_SCOPES.owner.has("workspaces:admin")).toBe(false)
    for (const role of ["admin", "member", "viewer"] as const)
      for (const scope of ROLE_SCOPES[role]) expect(ROLE_SCOPES.owner.has(scope)).toBe(true)
    for (const scope of ROLE_SCOPES.viewer) expect(scope.endsWith(":read")).toBe(true)
    expect(ROLE_SCOPES.admin.has("workspaces:write")).toBe(false)
    expect(ROLE_SCOPES.member.has("members:write")).toBe(false)
    expect(ROLE_SCOPES.member.has("apikeys:write")).toBe(false)

    const ws = await newWorkspace("narrow")
    const ownerUser = await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))
    const owner = await actorOf(ownerUser.id, ws.id)
    const viewer = await join(owner, ws.id, "gina@example.com", "viewer")
    // Asked for more than the role (as an OAuth grant may be): only the role's part.
    const narrowed = await t.run(
      people((s) => s.actorOf(viewer.userId!, ws.id, { type: "oauth", id: "x" }, { within: new Set([...SCOPES]) })),
    )
    expect(narrowed!.scopes).toEqual(ROLE_SCOPES.viewer)
    const within = await t.run(
      people((s) =>
        s.actorOf(
          viewer.userId!,
          ws.id,
          { type: "oauth", id: "x" },
          { within: new Set(["agents:read", "agents:write"]) },
        ),
      ),
    )
    expect([...within!.scopes]).toEqual(["agents:read"])
  })

  it("links by verified e-mail only", async () => {
    const first = await signIn("hank@example.com", { provider: "idp-a", subject: "1" })
    const second = await signIn("HANK@example.com", { provider: "idp-b", subject: "2" })
    expect(second.id).toBe(first.id)
    // The same provider identity signs in as the same user, whatever address it shows later.
    expect((await signIn("other@example.com", { provider: "idp-b", subject: "2" })).id).toBe(first.id)
    const unverified = await t.failure(
      people((s) =>
        s.userOfIdentity({
          provider: "idp-c",
          subject: "3",
          email: "hank@example.com",
          emailVerified: false,
          name: undefined,
        }),
      ),
    )
    expect(unverified).toMatchObject({ _tag: "SignInRefused", code: "EMAIL_UNVERIFIED" })
    // The first-run owner's address was never proven: a provider vouching for it does not take the account.
    const ws = await newWorkspace("bootstrap")
    await t.run(people((s) => s.ensureBootstrapOwner(ws.id)))
    expect(
      await t.failure(
        people((s) =>
          s.userOfIdentity({
            provider: "idp-a",
            subject: "9",
            email: "owner@localhost",
            emailVerified: true,
            name: undefined,
          }),
        ),
      ),
    ).toMatchObject({ code: "ACCOUNT_UNVERIFIED" })
  })

  it("an address with a capital letter beyond ASCII neither links to an account nor starts one (K, KELVIN SIGN)", async () => {
    const kelly = await signIn("kelly@example.com", { provider: "idp-a", subject: "kelly" })
    const lookalike = (email: string, subject: string) =>
      t.failure(
        people((s) => s.userOfIdentity({ provider: "idp-b", subject, email, emailVerified: true, name: undefined })),
      )
    // "\u212Aelly".toLowerCase() is "kelly", and so is lower() in a store with a Unicode collation (C.UTF-8).
    expect(await lookalike("\u212Aelly@example.com", "kelvin")).toMatchObject({
      _tag: "SignInRefused",
      code: "EMAIL_AMBIGUOUS",
    })
    // Nor does one squat an address nobody signed in with yet: Kim still can.
    expect(await lookalike("\u212Aim@example.com", "kelvin-2")).toMatchObject({ code: "EMAIL_AMBIGUOUS" })
    const kim = await signIn("kim@example.com", { provider: "idp-b", subject: "kim" })
    expect(kim.email).toBe("kim@example.com")
    // Kelly's own identity at the other provider still links to her account; lower-case letters beyond ASCII are fine.
    expect((await signIn("Kelly@example.com", { provider: "idp-b", subject: "kelly-b" })).id).toBe(kelly.id)
    expect((await signIn("jörg@example.de", { provider: "idp-b", subject: "joerg" })).email).toBe("jörg@example.de")
  })

  it("first sign-ins of one person at once (two tabs, two providers) all sign in, as one user", async () => {
    for (let round = 0; round < 3; round++) {
      const email = `tabs-${round}@example.com`
      const users = await Promise.all([
        signIn(email, { provider: "idp-a", subject: `tabs-${round}` }),
        signIn(email, { provider: "idp-a", subject: `tabs-${round}` }),
        signIn(email, { provider: "idp-a", subject: `tabs-${round}` }),
        signIn(email.toUpperCase(), { provider: "idp-b", subject: `tabs-${round}` }),
        signIn(email, { provider: "idp-c", subject: `tabs-${round}` }),
      ])
      expect(new Set(users.map((u) => u.id)).size).toBe(1)
    }
  })

  it("an enterprise-only sign-in acts only in enterprise workspaces", async () => {
    const free = await newWorkspace("free-ws")
    const ent = await newWorkspace("ent-ws", "enterprise")
    const ownerFree = await actorOf((await t.run(people((s) => s.ensureBootstrapOwner(free.id)))).id, free.id)
    const ivy = await signIn("ivy@example.com")
    expect(await t.run(people((s) => s.mayUseEnterpriseProvider(ivy)))).toBe(false)
    await join(ownerFree, free.id, "ivy@example.com", "member")
    expect(await t.run(people((s) => s.mayUseEnterpriseProvider(ivy)))).toBe(false)
    expect(
      await t.run(people((s) => s.actorOf(ivy.id, free.id, { type: "user", id: ivy.id }, { enterpriseOnly: true }))),
    ).toBeUndefined()
    const ownerEnt = await actorOf((await t.run(people((s) => s.ensureBootstrapOwner(ent.id)))).id, ent.id)
    await t.run(people((s) => s.invite(ownerEnt, ent.id, { email: "ivy@example.com", role: "viewer" })))
    expect(await t.run(people((s) => s.mayUseEnterpriseProvider(ivy)))).toBe(true)
  })
})

describe("sessions (D16): idle and absolute time-outs", () => {
  const T0 = Date.parse("2026-11-27T08:00:00.000Z")
  const { idleMs, absoluteMs } = DEFAULT_SESSION_SETTINGS
  const resolveAt = (ms: number, secret: string) =>
    t.run(
      at(
        ms,
        Sessions.use((s) => s.resolve(secret)),
      ),
    )

  it("a session left alone ends after the idle time-out; one in use moves its idle deadline", async () => {
    const user = await signIn("idle@example.com")
    const idle = await t.run(
      at(
        T0,
        Sessions.use((s) => s.start(user.id, "idp-a", false)),
      ),
    )
    expect(await resolveAt(T0 + idleMs - 1_000, idle.secret)).toMatchObject({ userId: user.id })
    // That use moved the deadline: a moment past the first one it is still live…
    expect(await resolveAt(T0 + idleMs + 1_000, idle.secret)).toMatchObject({ userId: user.id })
    // …and idle again for the whole time-out, it ends.
    expect(await resolveAt(T0 + 2 * idleMs + 1_000, idle.secret)).toBeUndefined()
    const unused = await t.run(
      at(
        T0,
        Sessions.use((s) => s.start(user.id, "idp-a", false)),
      ),
    )
    expect(await resolveAt(T0 + idleMs, unused.secret)).toBeUndefined()
  })

  it("a session in constant use still ends at the absolute time-out", async () => {
    const user = await signIn("absolute@example.com")
    const started = await t.run(
      at(
        T0,
        Sessions.use((s) => s.start(user.id, "idp-a", false)),
      ),
    )
    expect(started.session.expiresAt).toBe(new Date(T0 + absoluteMs).toISOString())
    // Used every half idle time-out, up to just before the end.
    for (let ms = T0 + idleMs / 2; ms < T0 + absoluteMs; ms += idleMs / 2)
      expect(await resolveAt(Math.min(ms, T0 + absoluteMs - 1_000), started.secret)).toMatchObject({ userId: user.id })
    expect(await resolveAt(T0 + absoluteMs, started.secret)).toBeUndefined()
    expect(await resolveAt(T0 + absoluteMs + idleMs / 4, started.secret)).toBeUndefined()
  })
})
