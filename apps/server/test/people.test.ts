import { SCOPES } from "@agentgov/domain"
import { SMTPServer } from "smtp-server"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { credentialFixtures, expectError, startTestServer, type TestServer } from "./helpers.ts"
import { Browser, freePort, providerOf, startIdp, type TestIdp } from "./oidc-support.ts"

// Members and invitations over REST (issue 32): invitations e-mailed through a real SMTP server
// (smtp-server) when SMTP_URL is set, accepted by the invited person signed in through a real provider.

let t: TestServer
let origin: string
let idp: TestIdp
let smtp: SMTPServer
const mails: Array<{ to: string; text: string }> = []

beforeAll(async () => {
  const smtpPort = await freePort()
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, session, callback) {
      let text = ""
      stream.on("data", (c: Buffer) => {
        text += c.toString("utf8")
      })
      stream.on("end", () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address).join(","), text })
        callback()
      })
    },
  })
  await new Promise<void>((r) => smtp.listen(smtpPort, "127.0.0.1", () => r()))
  const port = await freePort()
  origin = `http://127.0.0.1:${port}`
  idp = await startIdp({
    redirectUris: [`${origin}/auth/callback/idp`],
    accounts: { ada: { email: "ada@example.com", email_verified: true } },
  })
  t = await startTestServer({
    port,
    publicUrl: origin,
    smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
    oidcProviders: [providerOf(idp, "idp", "IdP")],
  })
}, 60_000)

afterAll(async () => {
  await t?.close()
  await idp?.close()
  await new Promise<void>((r) => smtp?.close(() => r()))
})

describe("invitations by e-mail", () => {
  it("e-mails the link (never answering it), and the invited person joins with it", async () => {
    const res = await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
      body: { email: "ada@example.com", role: "member" },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expect(res.body.data.delivery).toBe("email")
    expect(res.body.data.link).toBeUndefined()
    const mail = mails.find((m) => m.to === "ada@example.com")!
    // The body is quoted-printable: undo soft line breaks and =XX escapes.
    const body = mail.text
      .replace(/=\r?\n/g, "")
      .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
    const link = /(http:\/\/\S+#invitation=svc_inv_[0-9A-Za-z]{38})/.exec(body)![1]!
    expect(link.startsWith(`${origin}/#invitation=`)).toBe(true)

    const browser = new Browser()
    idp.loginAs("ada")
    await browser.follow(`${origin}/auth/signin/idp`, (next) => next.origin === origin && next.pathname === "/")
    const csrf = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const accept = await browser.fetch(`${origin}/api/v1/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrf },
      body: JSON.stringify({ token: link.split("#invitation=")[1] }),
    })
    expect(accept.status).toBe(200)
    const members = await t.call("GET", `/api/v1/workspaces/${t.workspaceId}/members`)
    expect(members.body.data.map((m: any) => [m.email, m.role])).toContainEqual(["ada@example.com", "member"])
    const invitations = await t.call("GET", `/api/v1/workspaces/${t.workspaceId}/invitations`)
    expect(invitations.body.data[0]).toMatchObject({ email: "ada@example.com", status: "accepted" })
  })
})

describe("members over REST", () => {
  it("keeps the last owner, refuses missing scopes and other workspaces, and validates input", async () => {
    const fixtures = await credentialFixtures(t)
    const path = `/api/v1/workspaces/${t.workspaceId}/members`
    expectError(await t.call("GET", path, { key: null }), 401, "UNAUTHORIZED")
    expectError(await t.call("GET", path, { key: await fixtures.keyWithout("members:read") }), 403, "FORBIDDEN")
    const other = await t.call("POST", "/api/v1/workspaces", { body: { name: "elsewhere" } })
    const otherKey = other.body.data.apiKey.apiKey
    expectError(await t.call("GET", path, { key: otherKey }), 404, "WORKSPACE_NOT_FOUND")
    expectError(
      await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
        body: { email: "not-an-address", role: "member" },
      }),
      422,
      "VALIDATION_ERROR",
      "email",
    )
    expectError(
      await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
        body: { email: "x@example.com", role: "superuser" },
      }),
      422,
      "VALIDATION_ERROR",
      "role",
    )
    // The only owner: the person who joined above, made owner by the operator's key (it holds workspaces:write).
    const ada = (await t.call("GET", path)).body.data.find((m: any) => m.email === "ada@example.com")
    const owner = (await t.call("PATCH", `${path}/${ada.userId}`, { body: { role: "owner" } })).body.data
    expect(owner.role).toBe("owner")
    expectError(await t.call("PATCH", `${path}/${owner.userId}`, { body: { role: "viewer" } }), 409, "LAST_OWNER")
    expectError(await t.call("DELETE", `${path}/${owner.userId}`), 409, "LAST_OWNER")
    expectError(await t.call("DELETE", `${path}/usr_nobody`), 404, "MEMBER_NOT_FOUND")
    expectError(await t.call("GET", "/api/v1/users/me"), 404, "USER_NOT_FOUND")
  })
})

describe("a revoked key's invitations", () => {
  it("are withdrawn with it: whoever held a leaked key keeps no way in", async () => {
    const made = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "leaked", type: "workspace", scopes: SCOPES.filter((s) => s !== "workspaces:admin") },
    })
    expect(made.status, JSON.stringify(made.body)).toBe(201)
    const leaked = made.body.data.apiKey as string
    const sent = await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
      key: leaked,
      body: { email: "mallory@example.com", role: "admin" },
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(201)
    // Another credential's invitation stays.
    const kept = await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
      body: { email: "grace@example.com", role: "member" },
    })
    expect(kept.status, JSON.stringify(kept.body)).toBe(201)

    expect((await t.call("DELETE", `/api/v1/api-keys/${made.body.data.id}`)).status).toBe(200)

    const list = (await t.call("GET", `/api/v1/workspaces/${t.workspaceId}/invitations?limit=100`)).body.data as any[]
    expect(list.find((i) => i.id === sent.body.data.invitation.id)).toMatchObject({ status: "revoked" })
    expect(list.find((i) => i.id === kept.body.data.invitation.id)).toMatchObject({ status: "pending" })
    const events = await t.call("GET", "/api/v1/events?type=invitation.revoked&limit=100")
    expect(events.body.data.map((e: any) => e.data.invitationId)).toContain(sent.body.data.invitation.id)
  })
})
