import { PostgresClient } from "@agentgov/db"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startServer } from "../src/server.ts"
import { sessionCookieName, setCookie } from "../src/signin/cookies.ts"
import { expectError, startTestServer, type TestServer, testConfig } from "./helpers.ts"
import { Browser, freePort, providerOf, startIdp, startMixUpIssuer, type TestIdp } from "./oidc-support.ts"

// Dashboard sign-in through real OpenID Connect providers (oidc-provider, three independent issuers and a
// mix-up issuer), end to end over HTTP with a cookie jar (issue 32, D16).

const COOKIE = "agentgov_session"
let t: TestServer
let origin: string
let social1: TestIdp
let social2: TestIdp
let enterprise: TestIdp
let mixUp: { issuer: string; close: () => Promise<void> }

const accounts = {
  alice: { email: "alice@example.com", email_verified: true, name: "Alice" },
  bob: { email: "bob@example.com", email_verified: true },
  eve: { email: "eve@example.com", email_verified: false },
  dan: { email: "dan@example.com", email_verified: true },
}

const idps = () => ({ social1, social2, enterprise })

/** Signs in at `provider` as `account`, following every redirect back to the dashboard (`/`). */
const signIn = async (browser: Browser, provider: "social1" | "social2" | "enterprise" | "mixup", account: string) => {
  ;(provider === "mixup" ? social1 : idps()[provider]).loginAs(account)
  return browser.follow(`${origin}/auth/signin/${provider}`, (next) => next.origin === origin && next.pathname === "/")
}

const sessionOf = async (browser: Browser) => {
  const res = await browser.fetch(`${origin}/auth/session`)
  return { status: res.status, body: (await res.json()) as any }
}

/** A REST call with the browser's cookie and (unless `csrf: null`) the session's CSRF token. */
const api = async (
  browser: Browser,
  method: string,
  path: string,
  options: { body?: unknown; csrf?: string | null; headers?: Record<string, string> } = {},
) => {
  const headers: Record<string, string> = { ...options.headers }
  if (options.body !== undefined) headers["content-type"] = "application/json"
  if (options.csrf !== null && method !== "GET") {
    headers["x-csrf-token"] = options.csrf ?? (await sessionOf(browser)).body.data.csrfToken
  }
  const res = await browser.fetch(`${origin}${path}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as any }
}

/** Invites `email` to the bootstrap workspace with `role` (as the operator's key), and the browser accepts. */
const join = async (browser: Browser, email: string, role: string, workspaceId = t.workspaceId) => {
  const invited = await t.call("POST", `/api/v1/workspaces/${workspaceId}/invitations`, { body: { email, role } })
  expect(invited.status, JSON.stringify(invited.body)).toBe(201)
  const token = /#invitation=(.+)$/.exec(invited.body.data.link)![1]!
  const accepted = await api(browser, "POST", "/api/v1/invitations/accept", { body: { token } })
  expect(accepted.status, JSON.stringify(accepted.body)).toBe(200)
  return accepted.body.data
}

beforeAll(async () => {
  const port = await freePort()
  origin = `http://127.0.0.1:${port}`
  const callbacks = (...ids: Array<string>) => ids.map((id) => `${origin}/auth/callback/${id}`)
  ;[social1, social2, enterprise] = await Promise.all([
    startIdp({ redirectUris: callbacks("social1", "mixup"), accounts }),
    startIdp({ redirectUris: callbacks("social2"), accounts }),
    startIdp({ redirectUris: callbacks("enterprise"), accounts }),
  ])
  mixUp = await startMixUpIssuer(social1.issuer)
  const provider = (id: string, issuer: string, isEnterprise = false) => ({
    id,
    label: id,
    issuer,
    clientId: "agentgov",
    clientSecret: "agentgov-secret",
    enterprise: isEnterprise,
  })
  t = await startTestServer({
    port,
    publicUrl: origin,
    oidcProviders: [
      provider("social1", social1.issuer),
      provider("social2", social2.issuer),
      provider("enterprise", enterprise.issuer, true),
      provider("mixup", mixUp.issuer),
    ],
  })
}, 60_000)

afterAll(async () => {
  await t?.close()
  await Promise.all([social1?.close(), social2?.close(), enterprise?.close(), mixUp?.close()])
})

describe("sign-in through OpenID Connect providers", () => {
  it("lists the providers, enterprise-only ones marked", async () => {
    const res = await fetch(`${origin}/auth/providers`)
    const body = (await res.json()) as any
    expect(body.data.map((p: any) => [p.id, p.enterprise])).toEqual([
      ["social1", false],
      ["social2", false],
      ["enterprise", true],
      ["mixup", false],
    ])
  })

  it("signs in end to end with PKCE, and the session cookie is HttpOnly, SameSite=Lax, on / (no Secure on loopback)", async () => {
    const browser = new Browser()
    const { hops } = await signIn(browser, "social1", "alice")
    const start = new URL(hops[0]!.location!)
    expect(start.origin).toBe(social1.issuer)
    expect(start.searchParams.get("code_challenge_method")).toBe("S256")
    expect(start.searchParams.get("state")).toBeTruthy()
    expect(start.searchParams.get("nonce")).toBeTruthy()
    const callback = hops.find((h) => h.url.startsWith(`${origin}/auth/callback/`))!
    expect(callback.status).toBe(302)
    expect(callback.location).toBe("/")
    const cookie = callback.setCookies.find((c) => c.startsWith(`${COOKIE}=`))!
    expect(cookie).toMatch(/; HttpOnly/)
    expect(cookie).toMatch(/; SameSite=Lax/)
    expect(cookie).toMatch(/; Path=\//)
    expect(cookie).toMatch(/; Max-Age=\d+/)
    expect(cookie).not.toMatch(/Secure/)
    // The session cookie is opaque and carries the D4 checksum form; no token reaches the dashboard's URL.
    expect(browser.cookie("127.0.0.1", COOKIE)).toMatch(/^svc_sess_[0-9A-Za-z]{38}$/)
    expect(callback.location).not.toMatch(/code|token/)

    const session = await sessionOf(browser)
    expect(session.status).toBe(200)
    expect(session.body.data.user).toMatchObject({ email: "alice@example.com", emailVerified: true, name: "Alice" })
    expect(session.body.data.csrfToken).toEqual(expect.any(String))
    const me = await api(browser, "GET", "/api/v1/users/me")
    expect(me.status).toBe(200)
    expect(me.body.data.user.email).toBe("alice@example.com")
  })

  it("outside loopback the cookie is Secure and __Host- prefixed", () => {
    expect(sessionCookieName("https://agentgov.example.com")).toBe("__Host-agentgov_session")
    expect(sessionCookieName("http://127.0.0.1:3000")).toBe("agentgov_session")
    expect(setCookie("__Host-agentgov_session", "v", { secure: true })).toBe(
      "__Host-agentgov_session=v; Path=/; HttpOnly; SameSite=Lax; Secure",
    )
  })

  it("links a second provider's identity by verified e-mail to the same user", async () => {
    const a = new Browser()
    await signIn(a, "social1", "bob")
    const b = new Browser()
    await signIn(b, "social2", "bob")
    const [first, second] = await Promise.all([sessionOf(a), sessionOf(b)])
    expect(second.body.data.user.id).toBe(first.body.data.user.id)
  })

  it("refuses an identity whose e-mail the provider has not verified", async () => {
    const browser = new Browser()
    const { last } = await signIn(browser, "social1", "eve")
    expect(last.status).toBe(403)
    expect(((await last.json()) as any).error.code).toBe("EMAIL_UNVERIFIED")
    expect(browser.cookie("127.0.0.1", COOKIE)).toBeUndefined()
  })

  it("refuses a wrong state, and a callback in a browser that did not start the sign-in", async () => {
    const browser = new Browser()
    social1.loginAs("alice")
    const { hops } = await browser.follow(`${origin}/auth/signin/social1`, (next) =>
      next.pathname.startsWith("/auth/callback/"),
    )
    const callback = new URL(hops.at(-1)!.url)
    const wrong = new URL(callback)
    wrong.searchParams.set("state", "not-the-state")
    const res = await browser.fetch(wrong.href)
    expectError({ status: res.status, headers: res.headers, body: await res.json() }, 400, "SIGNIN_STATE_MISMATCH")
    // Another browser (an attacker planting their own code: login CSRF) has no flow cookie.
    const other = await new Browser().fetch(callback.href)
    expect(other.status).toBe(400)
    expect(((await other.json()) as any).error.code).toBe("SIGNIN_STATE_MISMATCH")
    expect(browser.cookie("127.0.0.1", COOKIE)).toBeUndefined()
  })

  it("a code works once: the callback replayed is refused", async () => {
    const browser = new Browser()
    social1.loginAs("alice")
    const { hops } = await browser.follow(`${origin}/auth/signin/social1`, (next) =>
      next.pathname.startsWith("/auth/callback/"),
    )
    const callback = hops.at(-1)!.url
    const flow = browser.cookie("127.0.0.1", "agentgov_signin")!
    const first = await browser.fetch(callback)
    expect(first.status).toBe(302)
    // The same callback again, with the state cookie put back (an attacker who captured the redirect).
    browser.setCookie("127.0.0.1", "agentgov_signin", flow)
    const replay = await browser.fetch(callback)
    expect(replay.status).toBe(400)
    expect(((await replay.json()) as any).error.code).toBe("SIGNIN_STATE_MISMATCH")
  })

  it("refuses an ID token from another issuer than the provider's", async () => {
    const browser = new Browser()
    const { last } = await signIn(browser, "mixup", "alice")
    expect(last.status).toBe(400)
    expect(((await last.json()) as any).error.code).toBe("SIGNIN_FAILED")
    expect(browser.cookie("127.0.0.1", COOKIE)).toBeUndefined()
  })

  it("refuses an enterprise-only provider for a person whose workspaces are not on the enterprise plan", async () => {
    const browser = new Browser()
    await signIn(browser, "social1", "alice")
    await join(browser, "alice@example.com", "member")
    const refused = new Browser()
    const { last } = await signIn(refused, "enterprise", "alice")
    expect(last.status).toBe(403)
    expect(((await last.json()) as any).error.code).toBe("PROVIDER_NOT_ALLOWED")
    expect(refused.cookie("127.0.0.1", COOKIE)).toBeUndefined()

    // Member of an enterprise workspace too: the enterprise sign-in works, and acts only there.
    const ent = await t.call("POST", "/api/v1/workspaces", { body: { name: "enterprise-ws", plan: "enterprise" } })
    await join(browser, "alice@example.com", "viewer", ent.body.data.workspace.id)
    const allowed = new Browser()
    await signIn(allowed, "enterprise", "alice")
    const session = await sessionOf(allowed)
    expect(session.body.data.memberships.map((m: any) => m.plan)).toEqual(["enterprise"])
    const inFree = await api(allowed, "GET", `/api/v1/workspaces/${t.workspaceId}/members`, {
      headers: { "x-agentgov-workspace": t.workspaceId },
    })
    expectError(inFree, 403, "NOT_A_MEMBER")
    const inEnterprise = await api(allowed, "GET", `/api/v1/workspaces/${ent.body.data.workspace.id}/members`, {
      headers: { "x-agentgov-workspace": ent.body.data.workspace.id },
    })
    expect(inEnterprise.status).toBe(200)
  })
})

describe("a sign-in that cannot go on, in a browser", () => {
  const html = { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" }

  /** Begins a sign-in at social1 as `account` and stops at the callback, not opening it. */
  const toCallback = async (browser: Browser, account: string) => {
    social1.loginAs(account)
    const { hops } = await browser.follow(`${origin}/auth/signin/social1`, (next) =>
      next.pathname.startsWith("/auth/callback/"),
    )
    return new URL(hops.at(-1)!.url)
  }

  it("goes to the sign-in screen saying why, for every refusal; an API client still gets the envelope", async () => {
    // Begun in another browser (login CSRF), or the state cookie gone or stale: state_mismatch.
    const callback = await toCallback(new Browser(), "alice")
    const stranger = await new Browser().fetch(callback.href, { headers: html })
    expect(stranger.status).toBe(302)
    expect(stranger.headers.get("location")).toBe("/?signin_error=state_mismatch")
    expect(stranger.headers.getSetCookie().some((c) => c.startsWith(`${COOKIE}=`))).toBe(false)
    const script = await new Browser().fetch(callback.href, { headers: { accept: "application/json" } })
    expectError(
      { status: script.status, headers: script.headers, body: await script.json() },
      400,
      "SIGNIN_STATE_MISMATCH",
    )

    // The provider ended the sign-in (the person declined there): provider_error, its error code in the envelope.
    const declining = new Browser()
    const mine = await toCallback(declining, "alice")
    const declined = new URL(`${origin}/auth/callback/social1`)
    declined.search = new URLSearchParams({
      error: "access_denied",
      error_description: "<b>the person said no</b>",
      state: mine.searchParams.get("state")!,
      iss: social1.issuer,
    }).toString()
    const flow = declining.cookie("127.0.0.1", "agentgov_signin")!
    const refused = await declining.fetch(declined.href, { headers: html })
    expect(refused.status).toBe(302)
    expect(refused.headers.get("location")).toBe("/?signin_error=provider_error")
    expect(declining.cookie("127.0.0.1", "agentgov_signin")).toBeUndefined()
    expect(declining.cookie("127.0.0.1", COOKIE)).toBeUndefined()
    const again = new Browser()
    const theirs = await toCallback(again, "alice")
    declined.searchParams.set("state", theirs.searchParams.get("state")!)
    const envelope = await again.fetch(declined.href)
    const body = (await envelope.json()) as any
    expect(envelope.status).toBe(400)
    expect(body.error.code).toBe("SIGNIN_PROVIDER_ERROR")
    expect(body.error.message).toContain("access_denied")
    expect(body.error.message).not.toContain("said no")
    expect(flow).toBeTruthy()

    // The provider's identity is refused here: its code, in lower case.
    const unverified = new Browser()
    const eve = await toCallback(unverified, "eve")
    const eveRes = await unverified.fetch(eve.href, { headers: html })
    expect(eveRes.headers.get("location")).toBe("/?signin_error=email_unverified")
    expect(unverified.cookie("127.0.0.1", COOKIE)).toBeUndefined()

    // No such provider.
    const unknown = await new Browser().fetch(`${origin}/auth/signin/nope`, { headers: html })
    expect(unknown.status).toBe(302)
    expect(unknown.headers.get("location")).toBe("/?signin_error=provider_not_found")
    const unknownJson = await fetch(`${origin}/auth/signin/nope`)
    expect(((await unknownJson.json()) as any).error.code).toBe("PROVIDER_NOT_FOUND")
  })

  it("a finished callback opened again in the browser it signed in goes on to the dashboard", async () => {
    const browser = new Browser()
    const callback = await toCallback(browser, "alice")
    expect((await browser.fetch(callback.href, { headers: html })).status).toBe(302)
    const session = browser.cookie("127.0.0.1", COOKIE)
    expect(session).toBeDefined()
    const reloaded = await browser.fetch(callback.href, { headers: html })
    expect(reloaded.status).toBe(302)
    expect(reloaded.headers.get("location")).toBe("/")
    expect(browser.cookie("127.0.0.1", COOKIE)).toBe(session)
    expect((await sessionOf(browser)).status).toBe(200)
  })

  it("a provider that cannot be reached is a 503 SIGNIN_PROVIDER_UNAVAILABLE (the sign-in screen for a browser), not a 500", async () => {
    const down = await freePort()
    const other = await startTestServer({
      oidcProviders: [
        {
          id: "down",
          label: "Down SSO",
          issuer: `http://127.0.0.1:${down}`,
          clientId: "agentgov",
          clientSecret: "x",
          enterprise: false,
        },
      ],
    })
    try {
      const res = await fetch(`${other.url}/auth/signin/down`)
      const body = (await res.json()) as any
      expect(res.status, JSON.stringify(body)).toBe(503)
      expect(body.error.code).toBe("SIGNIN_PROVIDER_UNAVAILABLE")
      expect(body.error.message).toContain("Down SSO")
      const browser = await fetch(`${other.url}/auth/signin/down`, { headers: html, redirect: "manual" })
      expect(browser.status).toBe(302)
      expect(browser.headers.get("location")).toBe("/?signin_error=provider_unavailable")
      expect(browser.headers.getSetCookie()).toEqual([])
    } finally {
      await other.close()
    }
  })
})

describe("return_to after sign-in", () => {
  /** Signs in with `return_to` and answers the callback's status and where it sends the browser. */
  const returnOf = async (returnTo: string) => {
    social1.loginAs("alice")
    const browser = new Browser()
    const start = `${origin}/auth/signin/social1?return_to=${encodeURIComponent(returnTo)}`
    const { hops } = await browser.follow(
      start,
      (next) => next.origin === origin && !next.pathname.startsWith("/auth/"),
    )
    const callback = hops.find((h) => h.url.startsWith(`${origin}/auth/callback/`))!
    return { status: callback.status, location: callback.location, signedIn: (await sessionOf(browser)).status }
  }

  it("goes back to a path on this server, and to / for anything a browser could read as another origin", async () => {
    expect(await returnOf("/agents?tab=all")).toEqual({ status: 302, location: "/agents?tab=all", signedIn: 200 })
    for (const other of [
      "//evil.example",
      "/\\evil.example",
      "https://evil.example/",
      "/\t/evil.example",
      "javascript:alert(1)",
    ]) {
      expect(await returnOf(other), other).toEqual({ status: 302, location: "/", signedIn: 200 })
    }
  })

  it("a refused sign-in keeps where it was going: the sign-in screen gets the return_to back (an app's authorize request)", async () => {
    // Before, a sign-in begun from /oauth/authorize that the provider refused landed on the dashboard's sign-in, and
    // starting again from there signed the person in to the dashboard: the app's request was lost.
    const html = { accept: "text/html" }
    const authorize = "/oauth/authorize?client_id=app&state=s1"
    social1.loginAs("eve")
    const browser = new Browser()
    const { hops } = await browser.follow(
      `${origin}/auth/signin/social1?return_to=${encodeURIComponent(authorize)}`,
      (next) => next.pathname.startsWith("/auth/callback/"),
    )
    const refused = await browser.fetch(hops.at(-1)!.url, { headers: html })
    expect(refused.status).toBe(302)
    const location = new URL(refused.headers.get("location")!, origin)
    expect(location.pathname).toBe("/")
    expect(location.searchParams.get("signin_error")).toBe("email_unverified")
    expect(location.searchParams.get("return_to")).toBe(authorize)
    // One that was going to the dashboard's home says only why.
    social1.loginAs("eve")
    const home = new Browser()
    const toHome = await home.follow(`${origin}/auth/signin/social1`, (next) =>
      next.pathname.startsWith("/auth/callback/"),
    )
    const plain = await home.fetch(toHome.hops.at(-1)!.url, { headers: html })
    expect(plain.headers.get("location")).toBe("/?signin_error=email_unverified")
  })

  it("a return_to a header cannot carry (non-ASCII) does not break the sign-in: it returns to /", async () => {
    expect(await returnOf("/\u3002evil.example")).toEqual({ status: 302, location: "/", signedIn: 200 })
    expect(await returnOf("/agents/caf\u00e9")).toEqual({ status: 302, location: "/", signedIn: 200 })
  })
})

describe("sessions", () => {
  it("rotates the session at sign-in: a planted session cookie is revoked (no fixation)", async () => {
    const attacker = new Browser()
    await signIn(attacker, "social2", "bob")
    const planted = attacker.cookie("127.0.0.1", COOKIE)!
    const victim = new Browser()
    victim.setCookie("127.0.0.1", COOKIE, planted)
    await signIn(victim, "social1", "alice")
    const fresh = victim.cookie("127.0.0.1", COOKIE)!
    expect(fresh).not.toBe(planted)
    expect((await sessionOf(victim)).body.data.user.email).toBe("alice@example.com")
    expect((await sessionOf(attacker)).status).toBe(401)
  })

  it("over HTTPS the sign-in's state cookie is __Host- too: one tossed from a sibling subdomain finishes no sign-in (login CSRF)", async () => {
    const https = "https://agentgov.example.com"
    const idp = await startIdp({ redirectUris: [`${https}/auth/callback/sso`], accounts })
    const srv = await startTestServer({
      publicUrl: https,
      oidcProviders: [providerOf(idp, "sso", "SSO")],
    })
    try {
      /** Begins a sign-in as `account` and answers the callback the provider sends back, on the test server. */
      const toCallback = async (browser: Browser, account: string) => {
        idp.loginAs(account)
        const begun = await browser.fetch(`${srv.url}/auth/signin/sso`)
        const { hops } = await browser.follow(begun.headers.get("location")!, (next) => next.origin === https)
        const callback = new URL(hops.at(-1)!.url)
        return { begun, callback: `${srv.url}${callback.pathname}${callback.search}` }
      }
      // The attacker begins a sign-in as themselves and keeps its state (the value of their own state cookie).
      const attacker = new Browser()
      const theirs = await toCallback(attacker, "bob")
      const [tossedName] = theirs.begun.setCookies[0]!.split("=")
      const tossedValue = attacker.cookie("127.0.0.1", tossedName!)!
      expect(theirs.begun.setCookies[0]).toMatch(
        /^__Host-agentgov_signin=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Secure/,
      )
      // A sibling subdomain sets, for the whole parent domain, the state cookie under the only name it can: unprefixed.
      const victim = new Browser()
      victim.setCookie("127.0.0.1", "agentgov_signin", tossedValue)
      const planted = await victim.fetch(theirs.callback)
      expect(planted.status).toBe(400)
      expect(((await planted.json()) as any).error.code).toBe("SIGNIN_STATE_MISMATCH")
      expect(victim.cookie("127.0.0.1", "__Host-agentgov_session")).toBeUndefined()
      // The person's own sign-in finishes, with the prefixed state cookie.
      const own = new Browser()
      const mine = await toCallback(own, "alice")
      const done = await own.fetch(mine.callback)
      expect(done.status).toBe(302)
      expect(own.cookie("127.0.0.1", "__Host-agentgov_session")).toMatch(/^svc_sess_/)
      expect(done.setCookies).toContain("__Host-agentgov_signin=; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=0")
    } finally {
      await srv.close()
      await idp.close()
    }
  })

  it("refuses a cookie-authenticated change without the CSRF token or from another origin, and changes nothing", async () => {
    const browser = new Browser()
    await signIn(browser, "social1", "alice")
    // Alice is a member of the bootstrap workspace (joined above); make her an admin so she may invite.
    const me = await api(browser, "GET", "/api/v1/users/me")
    await t.call("PATCH", `/api/v1/workspaces/${t.workspaceId}/members/${me.body.data.user.id}`, {
      body: { role: "admin" },
    })
    const path = `/api/v1/workspaces/${t.workspaceId}/invitations`
    const before = (await t.call("GET", path)).body.data.length
    const body = { email: "csrf@example.com", role: "viewer" }
    const headers = { "x-agentgov-workspace": t.workspaceId }
    expectError(await api(browser, "POST", path, { body, csrf: null, headers }), 403, "CSRF_FAILED")
    expectError(await api(browser, "POST", path, { body, csrf: "forged", headers }), 403, "CSRF_FAILED")
    expectError(
      await api(browser, "POST", path, { body, headers: { ...headers, origin: "https://evil.example" } }),
      403,
      "CSRF_FAILED",
    )
    // tRPC mutations are held to the same rule.
    const trpc = await browser.fetch(`${origin}/trpc/invitations.create`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ id: t.workspaceId, ...body }),
    })
    expect(trpc.status).toBe(403)
    expect((await t.call("GET", path)).body.data.length).toBe(before)
    const ok = await api(browser, "POST", path, { body, headers })
    expect(ok.status, JSON.stringify(ok.body)).toBe(201)
    expect((await t.call("GET", path)).body.data.length).toBe(before + 1)
    // A read needs no token.
    expect((await api(browser, "GET", path, { headers })).status).toBe(200)
  })

  it("signs out here, and everywhere", async () => {
    const a = new Browser()
    const b = new Browser()
    const c = new Browser()
    await signIn(a, "social1", "bob")
    await signIn(b, "social2", "bob")
    await signIn(c, "social2", "bob")
    const out = await api(a, "POST", "/auth/signout")
    expect(out.status).toBe(200)
    expect((await sessionOf(a)).status).toBe(401)
    expect((await sessionOf(b)).status).toBe(200)
    expectError(await api(b, "POST", "/auth/signout-all", { csrf: null }), 403, "CSRF_FAILED")
    const all = await api(b, "POST", "/auth/signout-all")
    // b and c at least: bob's sessions of earlier tests end too.
    expect(all.body.data.endedSessions).toBeGreaterThanOrEqual(2)
    expect((await sessionOf(b)).status).toBe(401)
    expect((await sessionOf(c)).status).toBe(401)
    const refused = await api(c, "GET", "/api/v1/users/me")
    expectError(refused, 401, "UNAUTHORIZED")
  })

  it("removing a member cuts their session at once, on another instance too", async () => {
    const browser = new Browser()
    await signIn(browser, "social2", "bob")
    await join(browser, "bob@example.com", "member")
    const other = await startServer(testConfig({ bootstrap: false, publicUrl: origin }), {
      store: PostgresClient.layer({ url: t.store.url }),
      logger: makeLogger("error", () => {}),
    })
    try {
      const cookie = `${COOKIE}=${browser.cookie("127.0.0.1", COOKIE)}`
      const headers = { cookie, "x-agentgov-workspace": t.workspaceId }
      const listOn = (url: string) => fetch(`${url}/api/v1/workspaces/${t.workspaceId}/members`, { headers })
      expect((await listOn(other.url)).status).toBe(200)
      const me = await api(browser, "GET", "/api/v1/users/me")
      const removed = await t.call("DELETE", `/api/v1/workspaces/${t.workspaceId}/members/${me.body.data.user.id}`)
      expect(removed.status).toBe(200)
      const after = await listOn(other.url)
      expect(after.status).toBe(403)
      expect(((await after.json()) as any).error.code).toBe("NOT_A_MEMBER")
    } finally {
      await other.close()
    }
  })
})

/**
 * Opens `GET /events/stream` with the browser's session cookie at `base` and reads it until it ends: `text`
 * resolves to everything it sent, or to "still open" when it has not ended within `withinMs`.
 */
const openStream = async (browser: Browser, base: string, withinMs = 15_000) => {
  const cookie = `${COOKIE}=${browser.cookie("127.0.0.1", COOKIE)}`
  const controller = new AbortController()
  const res = await fetch(`${base}/api/v1/events/stream`, {
    headers: { cookie, "x-agentgov-workspace": t.workspaceId },
    signal: controller.signal,
  })
  expect(res.status).toBe(200)
  let seen = ""
  const read = (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of res.body as any as AsyncIterable<Uint8Array>) seen += decoder.decode(chunk)
    return seen
  })().catch(() => seen)
  // Wait until the stream is live, so that what ends it happens while it is open.
  while (!seen.includes(": connected")) await new Promise((r) => setTimeout(r, 20))
  const text = (async () => {
    let timer: ReturnType<typeof setTimeout> | undefined
    const result = await Promise.race([
      read,
      new Promise<string>((r) => {
        timer = setTimeout(() => r("still open"), withinMs)
      }),
    ])
    clearTimeout(timer)
    controller.abort()
    return result
  })()
  return { text }
}

describe("event streams opened with the session cookie", () => {
  let other: Awaited<ReturnType<typeof startServer>>
  beforeAll(async () => {
    other = await startServer(testConfig({ bootstrap: false, publicUrl: origin }), {
      store: PostgresClient.layer({ url: t.store.url }),
      logger: makeLogger("error", () => {}),
    })
  })
  afterAll(async () => {
    await other?.close()
  })

  it("end at sign-out, on this instance and on another", async () => {
    const browser = new Browser()
    await signIn(browser, "social1", "dan")
    await join(browser, "dan@example.com", "viewer")
    const here = await openStream(browser, origin)
    const there = await openStream(browser, other.url)
    expect((await api(browser, "POST", "/auth/signout")).status).toBe(200)
    for (const text of [await here.text, await there.text]) {
      expect(text).toContain("event: error")
      expect(text).toContain('"code":"UNAUTHORIZED"')
      expect(text).toContain("signed out")
    }
  })

  it("end at sign-out everywhere, from another browser", async () => {
    const browser = new Browser()
    await signIn(browser, "social1", "dan")
    const stream = await openStream(browser, other.url)
    const second = new Browser()
    await signIn(second, "social2", "dan")
    expect((await api(second, "POST", "/auth/signout-all")).status).toBe(200)
    expect(await stream.text).toContain("signed out")
  })

  it("end when the person is removed from the workspace", async () => {
    const browser = new Browser()
    await signIn(browser, "social1", "dan")
    const stream = await openStream(browser, other.url)
    const me = await api(browser, "GET", "/api/v1/users/me")
    const removed = await t.call("DELETE", `/api/v1/workspaces/${t.workspaceId}/members/${me.body.data.user.id}`)
    expect(removed.status).toBe(200)
    const text = await stream.text
    expect(text).toContain('"code":"UNAUTHORIZED"')
    expect(text).toContain("no longer a member")
  })

  it("end when the session idles out", async () => {
    const short = await startTestServer({ sessionIdleSeconds: 2 })
    try {
      const link = new URL(short.server.bootstrapped!.signInLink!)
      const browser = new Browser()
      expect((await browser.useSignInLink(short.url, link.href)).status).toBe(302)
      const cookie = `${COOKIE}=${browser.cookie("127.0.0.1", COOKIE)}`
      const res = await fetch(`${short.url}/api/v1/events/stream`, { headers: { cookie } })
      expect(res.status).toBe(200)
      let seen = ""
      const decoder = new TextDecoder()
      const started = Date.now()
      const reader = (res.body as any as ReadableStream<Uint8Array>).getReader()
      const timer = setTimeout(() => reader.cancel(), 15_000)
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        seen += decoder.decode(value)
      }
      clearTimeout(timer)
      expect(seen).toContain("the credential has expired")
      expect(Date.now() - started).toBeLessThan(15_000)
    } finally {
      await short.close()
    }
  })
})

describe("the first-run link (no provider configured)", () => {
  it("signs the bootstrap owner in once, and only once: opening the link shows a page, its button signs in", async () => {
    const first = await startTestServer()
    try {
      const link = first.server.bootstrapped!.signInLink!
      expect(link).toMatch(/\/auth\/first-run\?token=svc_signin_[0-9A-Za-z]{38}$/)
      const path = new URL(link).pathname + new URL(link).search
      // A link preview or a mail scanner fetches the link: a page, no session, nothing spent.
      for (let i = 0; i < 2; i++) {
        const preview = await fetch(`${first.url}${path}`, { redirect: "manual" })
        expect(preview.status).toBe(200)
        expect(preview.headers.get("content-type")).toContain("text/html")
        expect(preview.headers.get("referrer-policy")).toBe("no-referrer")
        expect(preview.headers.get("content-security-policy")).toContain("default-src 'none'")
        expect(preview.headers.getSetCookie()).toEqual([])
        const html = await preview.text()
        expect(html).toContain("owner@localhost")
        expect(html).toContain('<form method="post" action="/auth/first-run">')
      }
      const browser = new Browser()
      const used = await browser.useSignInLink(first.url, link)
      expect(used.status).toBe(302)
      expect(used.headers.get("location")).toBe("/")
      expect(used.headers.get("referrer-policy")).toBe("no-referrer")
      const me = await browser.fetch(`${first.url}/api/v1/users/me`)
      const body = (await me.json()) as any
      expect(body.data.memberships).toEqual([
        { workspaceId: first.workspaceId, workspaceName: "default", plan: "free", role: "owner" },
      ])
      const again = await new Browser().fetch(`${first.url}${path}`)
      expect(again.status).toBe(400)
      expect(((await again.json()) as any).error.code).toBe("SIGNIN_LINK_USED")
      expect(again.headers.getSetCookie()).toEqual([])
    } finally {
      await first.close()
    }
  })

  it("the link's button works only from its own page: a form posted from another site spends nothing (login CSRF)", async () => {
    const first = await startTestServer()
    try {
      const link = first.server.bootstrapped!.signInLink!
      const token = new URL(link).searchParams.get("token")!
      const form = { "content-type": "application/x-www-form-urlencoded" }
      for (const headers of [
        { ...form, origin: "https://evil.example" },
        { ...form, "sec-fetch-site": "cross-site" },
      ]) {
        const victim = new Browser()
        const res = await victim.fetch(`${first.url}/auth/first-run`, {
          method: "POST",
          headers,
          body: new URLSearchParams({ token }).toString(),
        })
        expect(res.status).toBe(403)
        expect(((await res.json()) as any).error.details).toEqual({
          field: "origin",
          issue: "posted from another site",
        })
        expect(res.headers.getSetCookie()).toEqual([])
      }
      // Not spent: its owner still signs in with it, once.
      expect((await new Browser().useSignInLink(first.url, link)).status).toBe(302)
      expect((await new Browser().useSignInLink(first.url, link)).status).toBe(400)
    } finally {
      await first.close()
    }
  })

  it("opened again: a signed-in browser goes to /, another browser to the sign-in screen with why, an API client gets the envelope", async () => {
    const first = await startTestServer()
    try {
      const link = new URL(first.server.bootstrapped!.signInLink!)
      const path = link.pathname + link.search
      const html = { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" }
      const browser = new Browser()
      expect((await browser.useSignInLink(first.url, link.href)).status).toBe(302)
      const session = browser.cookie(new URL(first.url).hostname, COOKIE)
      expect(session).toBeDefined()
      // A reload or a double click in the browser the link signed in: on to the dashboard, the session kept.
      const reloaded = await browser.fetch(`${first.url}${path}`, { headers: html })
      expect(reloaded.status).toBe(302)
      expect(reloaded.headers.get("location")).toBe("/")
      expect(reloaded.headers.getSetCookie()).toEqual([])
      expect(browser.cookie(new URL(first.url).hostname, COOKIE)).toBe(session)
      expect((await browser.fetch(`${first.url}/auth/session`)).status).toBe(200)
      // Another browser: the dashboard's sign-in screen, which says why.
      const other = await new Browser().fetch(`${first.url}${path}`, { headers: html })
      expect(other.status).toBe(302)
      expect(other.headers.get("location")).toBe("/?signin_error=link_used")
      expect(other.headers.getSetCookie()).toEqual([])
      // A client that is no browser still reads the envelope.
      const client = await new Browser().fetch(`${first.url}${path}`, { headers: { accept: "application/json" } })
      expect(client.status).toBe(400)
      expect(((await client.json()) as any).error.code).toBe("SIGNIN_LINK_USED")
    } finally {
      await first.close()
    }
  })

  it("is not made when a provider is configured", () => {
    expect(t.server.bootstrapped!.signInLink).toBeUndefined()
  })
})
