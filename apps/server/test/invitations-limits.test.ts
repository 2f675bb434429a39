import { INVITATIONS_PER_DAY } from "@agentgov/domain"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer } from "./helpers.ts"
import { Browser, freePort, providerOf, startIdp, type TestIdp } from "./oidc-support.ts"

// Invitations over REST, fifth pass (review "people"): only an owner withdraws an invitation to the owner role, as
// only an owner sends one (D16); and a workspace sends at most INVITATIONS_PER_DAY invitations in any 24 hours, each
// an e-mail the service sends as itself to an address the caller names.

let t: TestServer
let origin: string
let idp: TestIdp

const accounts = {
  olga: { email: "olga@example.com", email_verified: true },
  ada: { email: "ada@example.com", email_verified: true },
}

beforeAll(async () => {
  const port = await freePort()
  origin = `http://127.0.0.1:${port}`
  idp = await startIdp({ redirectUris: [`${origin}/auth/callback/idp`], accounts })
  t = await startTestServer({
    port,
    publicUrl: origin,
    oidcProviders: [providerOf(idp)],
  })
}, 60_000)

afterAll(async () => {
  await t?.close()
  await idp?.close()
})

/** A person signed in to the dashboard and made a member of the bootstrap workspace with `role`. */
const signedIn = async (account: keyof typeof accounts, role: string) => {
  const browser = new Browser()
  idp.loginAs(account)
  await browser.follow(`${origin}/auth/signin/idp`, (next) => next.origin === origin && next.pathname === "/")
  const invited = await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
    body: { email: accounts[account].email, role },
  })
  expect(invited.status, JSON.stringify(invited.body)).toBe(201)
  const token = /#invitation=(.+)$/.exec(invited.body.data.link)![1]!
  const csrf = await csrfOf(browser)
  const accepted = await browser.fetch(`${origin}/api/v1/invitations/accept`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-csrf-token": csrf },
    body: JSON.stringify({ token }),
  })
  expect(accepted.status).toBe(200)
  return browser
}
const csrfOf = async (browser: Browser) =>
  ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken as string

/** DELETE an invitation in person (a dashboard session): status and parsed body. */
const withdrawAs = async (browser: Browser, invitationId: string) => {
  const res = await browser.fetch(`${origin}/api/v1/workspaces/${t.workspaceId}/invitations/${invitationId}`, {
    method: "DELETE",
    headers: { "x-csrf-token": await csrfOf(browser) },
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as any }
}

const invitation = async (id: string) => {
  const list = await t.call("GET", `/api/v1/workspaces/${t.workspaceId}/invitations?limit=100`)
  return list.body.data.find((i: any) => i.id === id)
}
const revokedEvents = async (invitationId: string) =>
  (
    await t.query<{ n: number }>(
      (sql) => sql`SELECT count(*)::int AS n FROM events WHERE type = 'invitation.revoked'
          AND data->>'invitationId' = ${invitationId}`,
    )
  )[0]!.n

describe("withdrawing an invitation to the owner role", () => {
  it("is refused to an admin (403, nothing changes), and done by an owner", async () => {
    const owner = await signedIn("olga", "owner")
    const admin = await signedIn("ada", "admin")
    const sent = await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
      body: { email: "co-owner@example.com", role: "owner" },
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(201)
    const id = sent.body.data.invitation.id as string

    const refused = await withdrawAs(admin, id)
    expectError(refused, 403, "FORBIDDEN")
    expect(refused.body.error.message).toContain("owner")
    expect(await invitation(id)).toMatchObject({ status: "pending", role: "owner" })
    expect(await revokedEvents(id)).toBe(0)

    // an admin still withdraws an invitation to a role an admin may grant
    const toMember = await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
      body: { email: "member@example.com", role: "member" },
    })
    const memberId = toMember.body.data.invitation.id as string
    expect((await withdrawAs(admin, memberId)).status).toBe(200)
    expect(await invitation(memberId)).toMatchObject({ status: "revoked" })

    const withdrawn = await withdrawAs(owner, id)
    expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(200)
    expect(withdrawn.body.data).toMatchObject({ id, status: "revoked", role: "owner" })
    expect(await invitation(id)).toMatchObject({ status: "revoked" })
    expect(await revokedEvents(id)).toBe(1)
  })
})

describe("invitations a workspace sends in a day", () => {
  /** A new workspace with `n` invitations sent `agoMs` ago, stored as rows (the API would take n requests). */
  const workspaceWith = async (rows: ReadonlyArray<{ n: number; agoMs: number }>) => {
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name: "inviting" } })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const workspaceId = created.body.data.workspace.id as string
    const now = Date.now()
    for (const { n, agoMs } of rows)
      await t.query(
        (sql) => sql`INSERT INTO invitations (id, workspace_id, email, role, token_hash, status, invited_by,
            expires_at, created_at)
          SELECT 'inv_cap_' || ${workspaceId} || '_' || ${agoMs} || '_' || i, ${workspaceId},
            'x' || i || '@example.com', 'member', 'h_' || ${workspaceId} || '_' || ${agoMs} || '_' || i, 'revoked',
            'usr_x', ${new Date(now).toISOString()}::timestamptz, ${new Date(now - agoMs).toISOString()}::timestamptz
          FROM generate_series(1, ${n}) i`,
      )
    return { workspaceId, key: created.body.data.apiKey.apiKey as string }
  }
  const stored = async (workspaceId: string) =>
    (
      await t.query<{ n: number }>(
        (sql) => sql`SELECT count(*)::int AS n FROM invitations WHERE workspace_id = ${workspaceId}`,
      )
    )[0]!.n

  it("takes at most INVITATIONS_PER_DAY in any 24 hours (withdrawn ones count), then 429 with when to retry", async () => {
    // one invitation of a day ago, outside the window; the rest within it (an hour ago)
    const { workspaceId, key } = await workspaceWith([
      { n: 1, agoMs: 25 * 3_600_000 },
      { n: INVITATIONS_PER_DAY - 1, agoMs: 3_600_000 },
    ])
    const invite = (email: string) =>
      t.call("POST", `/api/v1/workspaces/${workspaceId}/invitations`, { key, body: { email, role: "member" } })
    expect((await invite("last@example.com")).status).toBe(201)
    const refused = await invite("one-more@example.com")
    expectError(refused, 429, "RATE_LIMITED")
    expect(refused.body.error.message).toContain(`${INVITATIONS_PER_DAY} invitations`)
    // the oldest invitation of the window leaves it in 23 hours
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(22 * 3600)
    expect(retryAfter).toBeLessThanOrEqual(23 * 3600)
    expect(await stored(workspaceId)).toBe(INVITATIONS_PER_DAY + 1)
    const events = await t.query<{ n: number }>(
      (sql) => sql`SELECT count(*)::int AS n FROM events WHERE workspace_id = ${workspaceId}
          AND type = 'member.invited' AND data->>'email' = 'one-more@example.com'`,
    )
    expect(events[0]!.n).toBe(0)
    // another workspace is not held by this one's invitations
    expect(
      (
        await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
          body: { email: "elsewhere@example.com", role: "member" },
        })
      ).status,
    ).toBe(201)
  })

  it("lets concurrent requests past the limit no further than it", async () => {
    const { workspaceId, key } = await workspaceWith([{ n: INVITATIONS_PER_DAY - 3, agoMs: 60_000 }])
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.call("POST", `/api/v1/workspaces/${workspaceId}/invitations`, {
          key,
          body: { email: `p${i}@example.com`, role: "member" },
        }),
      ),
    )
    expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201, 429, 429, 429, 429, 429])
    expect(await stored(workspaceId)).toBe(INVITATIONS_PER_DAY)
  })
})
