import { readFileSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { PostgresClient } from "@agentgov/db"
import { ApiKeyService, ROLE_SCOPES, SYSTEM_EVENTS, type SystemEventName } from "@agentgov/domain"
import { pgConnect } from "@agentgov/testing"
import { Schema } from "effect"
import * as client from "openid-client"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startServer } from "../src/server.ts"
import { startTestServer, type TestServer, testConfig } from "./helpers.ts"
import { Browser, freePort, providerOf, startIdp, type TestIdp } from "./oidc-support.ts"

// The OAuth 2.0 authorization server for third-party apps (issue 32, D16), driven by openid-client as the
// app, with a person signed in through a real OpenID Connect provider.

const APP_CALLBACK = "http://127.0.0.1:9/callback"
const AT = /^svc_oauth_at_[0-9A-Za-z]{38}$/
const RT = /^svc_oauth_rt_[0-9A-Za-z]{38}$/

let t: TestServer
let origin: string
let idp: TestIdp

const accounts = {
  alice: { email: "alice@example.com", email_verified: true },
  vic: { email: "vic@example.com", email_verified: true },
  mo: { email: "mo@example.com", email_verified: true },
  dora: { email: "dora@example.com", email_verified: true },
  gina: { email: "gina@example.com", email_verified: true },
  hal: { email: "hal@example.com", email_verified: true },
  ken: { email: "ken@example.com", email_verified: true },
  lea: { email: "lea@example.com", email_verified: true },
  mia: { email: "mia@example.com", email_verified: true },
  miaAlt: { email: "mia.alt@example.com", email_verified: true },
  nia: { email: "nia@example.com", email_verified: true },
  otto: { email: "otto@example.com", email_verified: true },
  pia: { email: "pia@example.com", email_verified: true },
  piaAlt: { email: "pia.alt@example.com", email_verified: true },
  quin: { email: "Quin@example.com", email_verified: true },
  rex: { email: "rex@example.com", email_verified: true },
  sam: { email: "sam@example.com", email_verified: true },
  tia: { email: "tia@example.com", email_verified: true },
  uma: { email: "uma@example.com", email_verified: true },
}

const signedIn = async (account: keyof typeof accounts, role: string) => {
  const browser = new Browser()
  idp.loginAs(account)
  await browser.follow(`${origin}/auth/signin/idp`, (next) => next.origin === origin && next.pathname === "/")
  const invited = await t.call("POST", `/api/v1/workspaces/${t.workspaceId}/invitations`, {
    body: { email: accounts[account].email, role },
  })
  if (invited.status === 201) {
    const token = /#invitation=(.+)$/.exec(invited.body.data.link)![1]!
    const csrf = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const accepted = await browser.fetch(`${origin}/api/v1/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrf },
      body: JSON.stringify({ token }),
    })
    expect(accepted.status).toBe(200)
  }
  return browser
}

const register = async (body: Record<string, unknown> = {}) => {
  const res = await t.call("POST", "/api/v1/oauth/clients", {
    body: { name: "Acme Dashboard", redirectUris: [APP_CALLBACK], ...body },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data as { client: { id: string; type: string }; clientSecret?: string }
}

/** The app's view of the server, discovered from its metadata as any OAuth client would. */
const appConfig = (registered: { client: { id: string }; clientSecret?: string }) =>
  client.discovery(
    new URL(`${origin}/oauth`),
    registered.client.id,
    undefined,
    registered.clientSecret ? client.ClientSecretBasic(registered.clientSecret) : client.None(),
    { algorithm: "oauth2", execute: [client.allowInsecureRequests] },
  )

/** The person's browser through authorize and consent; answers the app's callback URL (or the refusal). */
const consent = async (browser: Browser, authorizeUrl: URL, decision: "allow" | "deny" = "allow") => {
  const page = await browser.fetch(authorizeUrl.href)
  const html = await page.text()
  if (page.status !== 200 || !html.includes("<form"))
    return { status: page.status, html, location: page.headers.get("location") }
  const fields = Object.fromEntries(
    [...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [
      m[1]!,
      m[2]!
        .replace(/&amp;/g, "&")
        .replace(/&quot;/g, '"')
        .replace(/&lt;/g, "<")
        .replace(/&gt;/g, ">")
        .replace(/&#39;/g, "'"),
    ]),
  )
  // What Chromium sends for the page's form: the page is served with `Referrer-Policy: no-referrer`, under which
  // its POST carries `Origin: null`, and `Sec-Fetch-Site: same-origin` (seen in Chromium 156; until the outside
  // review of 2026-11-29 the consent refused this, its Allow a 403 in every real browser).
  const res = await browser.fetch(`${origin}/oauth/authorize`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: "null", "sec-fetch-site": "same-origin" },
    body: new URLSearchParams({ ...fields, decision }).toString(),
  })
  return { status: res.status, html, location: res.headers.get("location"), fields }
}

const pkce = async () => {
  const verifier = client.randomPKCECodeVerifier()
  return { verifier, challenge: await client.calculatePKCECodeChallenge(verifier) }
}

/** authorize → consent → code → tokens, with PKCE; `scope` as the app asks. */
const authorizeApp = async (browser: Browser, config: client.Configuration, scope: string) => {
  const { verifier, challenge } = await pkce()
  const state = client.randomState()
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: APP_CALLBACK,
    scope,
    code_challenge: challenge,
    code_challenge_method: "S256",
    state,
  })
  const back = await consent(browser, url)
  expect(back.status, back.html).toBe(302)
  const callback = new URL(back.location!)
  expect([...callback.searchParams.keys()].sort()).toEqual(["code", "iss", "state"])
  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier,
    expectedState: state,
  })
  return { tokens, callback, verifier }
}

const bearer = (token: string, path: string, init: RequestInit = {}) =>
  fetch(`${origin}${path}`, { ...init, headers: { ...init.headers, authorization: `Bearer ${token}` } })

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

describe("OAuth 2.0 for third-party apps, driven by openid-client", () => {
  it("publishes its metadata (RFC 8414) at the root and under the issuer's path", async () => {
    for (const path of ["/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/oauth"]) {
      const m = (await (await fetch(`${origin}${path}`)).json()) as any
      expect(m).toMatchObject({
        issuer: `${origin}/oauth`,
        authorization_endpoint: `${origin}/oauth/authorize`,
        token_endpoint: `${origin}/oauth/token`,
        revocation_endpoint: `${origin}/oauth/revoke`,
        response_types_supported: ["code"],
        code_challenge_methods_supported: ["S256"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        authorization_response_iss_parameter_supported: true,
      })
    }
  })

  it("authorize → consent → code → tokens → API call → refresh → a reused refresh token revokes the grant", async () => {
    const browser = await signedIn("alice", "admin")
    const registered = await register()
    expect(registered.clientSecret).toMatch(/^svc_oauth_cs_/)
    const config = await appConfig(registered)
    const { tokens } = await authorizeApp(browser, config, "agents:read agents:write")
    expect(tokens.access_token).toMatch(AT)
    expect(tokens.refresh_token).toMatch(RT)
    expect(tokens.token_type).toBe("bearer")
    expect(tokens.expires_in).toBe(3600)
    expect(tokens.scope).toBe("agents:read agents:write")

    const created = await bearer(tokens.access_token, "/api/v1/agents", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "made-by-app" }),
    })
    expect(created.status).toBe(201)
    // Rate limited like a key: the limit headers are there.
    expect(created.headers.get("x-ratelimit-limit")).toBeTruthy()
    // The event records the app's grant as the actor.
    const events = await t.call("GET", "/api/v1/events?type=agent.registered")
    const actor = events.body.data.find((e: any) => e.data.agentName === "made-by-app").actor
    expect(actor.type).toBe("oauth")
    expect(actor.id).toMatch(/^grt_/)
    // tRPC takes it too.
    expect((await bearer(tokens.access_token, "/trpc/agents.list")).status).toBe(200)
    // Not granted: refused with the scope named.
    const denied = await bearer(tokens.access_token, "/api/v1/policies")
    expect(denied.status).toBe(403)

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!)
    expect(refreshed.access_token).toMatch(AT)
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token)
    expect((await bearer(refreshed.access_token, "/api/v1/agents")).status).toBe(200)

    // The rotated-out refresh token used again: refused, and the whole grant ends.
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({
      error: "invalid_grant",
    })
    expect((await bearer(refreshed.access_token, "/api/v1/agents")).status).toBe(401)
    expect((await bearer(tokens.access_token, "/api/v1/agents")).status).toBe(401)
    await expect(client.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({
      error: "invalid_grant",
    })
  })

  it("never grants more than the person's role holds", async () => {
    const browser = await signedIn("vic", "viewer")
    const config = await appConfig(await register())
    const { tokens } = await authorizeApp(browser, config, "agents:read agents:write apikeys:write")
    expect(tokens.scope).toBe("agents:read")
    expect((await bearer(tokens.access_token, "/api/v1/agents")).status).toBe(200)
    const write = await bearer(tokens.access_token, "/api/v1/agents", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "viewer-cannot" }),
    })
    expect(write.status).toBe(403)
    expect((await bearer(tokens.access_token, "/api/v1/api-keys")).status).toBe(403)
  })

  it("a demotion narrows a token already in use to the new role's scopes", async () => {
    const browser = await signedIn("dora", "admin")
    const config = await appConfig(await register())
    const { tokens } = await authorizeApp(browser, config, "agents:read agents:write")
    expect(tokens.scope).toBe("agents:read agents:write")
    const create = (name: string) =>
      bearer(tokens.access_token, "/api/v1/agents", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name }),
      })
    // Used, so authenticated once and kept (OAuthService's cache).
    expect((await create(`dora-${Date.now()}`)).status).toBe(201)
    expect((await create(`dora-${Date.now()}-2`)).status).toBe(201)
    const me = (await (await bearer(tokens.access_token, "/api/v1/users/me")).json()) as any
    const demoted = await t.call("PATCH", `/api/v1/workspaces/${t.workspaceId}/members/${me.data.user.id}`, {
      body: { role: "viewer" },
    })
    expect(demoted.status, JSON.stringify(demoted.body)).toBe(200)
    // The role change is announced at commit (PeopleRepo.setRole): the cached token is read again, within 5 s.
    const at = Date.now()
    let write = await create(`dora-${at}-3`)
    while (write.status === 201 && Date.now() - at < 5_000) {
      await new Promise((r) => setTimeout(r, 50))
      write = await create(`dora-${Date.now()}-4`)
    }
    expect(write.status).toBe(403)
    expect((await bearer(tokens.access_token, "/api/v1/agents")).status).toBe(200)
  })

  it("a refresh that asks for less gets a token that acts with less; one asking for more changes nothing", async () => {
    const browser = await signedIn("alice", "admin")
    const config = await appConfig(await register())
    const { tokens } = await authorizeApp(browser, config, "agents:read agents:write")
    const createAgent = (token: string) =>
      bearer(token, "/api/v1/agents", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: `narrowed-${Date.now()}-${Math.random()}` }),
      }).then((r) => r.status)
    // Asking for a scope never granted: refused, and the refresh token is not spent (nor its grant revoked).
    await expect(
      client.refreshTokenGrant(config, tokens.refresh_token!, { scope: "policies:write" }),
    ).rejects.toMatchObject({ error: "invalid_scope" })
    expect(await createAgent(tokens.access_token)).toBe(201)
    const narrowed = await client.refreshTokenGrant(config, tokens.refresh_token!, { scope: "agents:read" })
    expect(narrowed.scope).toBe("agents:read")
    expect((await bearer(narrowed.access_token, "/api/v1/agents")).status).toBe(200)
    expect(await createAgent(narrowed.access_token)).toBe(403)
    // The new refresh token keeps the old one's scope (RFC 6749 6): the app may ask for the whole grant again.
    const whole = await client.refreshTokenGrant(config, narrowed.refresh_token!)
    expect(whole.scope).toBe("agents:read agents:write")
    expect(await createAgent(whole.access_token)).toBe(201)
  })

  it("a refresh deletes its grant's tokens expired over a day ago: an app refreshing hourly does not grow the store for ever", async () => {
    const browser = await signedIn("alice", "admin")
    const config = await appConfig(await register())
    const { tokens } = await authorizeApp(browser, config, "agents:read")
    const first = await client.refreshTokenGrant(config, tokens.refresh_token!)
    const grantOf = await t.query<{ grant_id: string }>(
      (sql) => sql`SELECT grant_id FROM oauth_tokens WHERE kind = 'access' ORDER BY created_at DESC LIMIT 1`,
    )
    const grantId = grantOf[0]!.grant_id
    const count = async () =>
      (
        await t.query<{ n: number }>(
          (sql) => sql`SELECT count(*)::int AS n FROM oauth_tokens WHERE grant_id = ${grantId}`,
        )
      )[0]!.n
    expect(await count()).toBe(4)
    // The first pair expired two days ago; the second pair an hour ago (kept: a late use is told it expired).
    await t.query(
      (sql) => sql`UPDATE oauth_tokens SET expires_at = now() - interval '2 days' WHERE grant_id = ${grantId}
          AND created_at = (SELECT min(created_at) FROM oauth_tokens WHERE grant_id = ${grantId})`,
    )
    const second = await client.refreshTokenGrant(config, first.refresh_token!)
    expect(await count()).toBe(4)
    expect((await bearer(second.access_token, "/api/v1/agents")).status).toBe(200)
    // The used refresh token still in its lifetime is kept: its replay is still caught, and revokes the grant.
    await expect(client.refreshTokenGrant(config, first.refresh_token!)).rejects.toMatchObject({
      error: "invalid_grant",
    })
    expect((await bearer(second.access_token, "/api/v1/agents")).status).toBe(401)
  })

  it("a code works once, bound to its client and redirect URI; its replay revokes what it granted", async () => {
    const browser = await signedIn("alice", "admin")
    const registered = await register()
    const config = await appConfig(registered)
    const { tokens, callback, verifier } = await authorizeApp(browser, config, "agents:read")
    const code = callback.searchParams.get("code")!
    const exchange = (body: Record<string, string>, auth = registered) =>
      fetch(`${origin}/oauth/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${Buffer.from(`${auth.client.id}:${auth.clientSecret}`).toString("base64")}`,
        },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code,
          redirect_uri: APP_CALLBACK,
          code_verifier: verifier,
          ...body,
        }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
    const replay = await exchange({})
    expect(replay).toMatchObject({ status: 400, body: { error: "invalid_grant" } })
    expect((await bearer(tokens.access_token, "/api/v1/agents")).status).toBe(401)

    // Another client, or another redirect URI, cannot redeem a fresh code.
    const fresh = await (async () => {
      const { challenge, verifier: v } = await pkce()
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: APP_CALLBACK,
        scope: "agents:read",
        code_challenge: challenge,
        code_challenge_method: "S256",
        state: "s1",
      })
      const back = await consent(browser, url)
      return { code: new URL(back.location!).searchParams.get("code")!, verifier: v }
    })()
    const other = await register({ name: "Other app" })
    expect(await exchange({ code: fresh.code, code_verifier: fresh.verifier }, other as any)).toMatchObject({
      status: 400,
      body: { error: "invalid_grant" },
    })
    // The secret with its last character changed (to another one: a secret ending in "x" stays wrong).
    const secret = registered.clientSecret!
    const wrongSecret = {
      client: registered.client,
      clientSecret: `${secret.slice(0, -1)}${secret.endsWith("x") ? "y" : "x"}`,
    }
    expect(await exchange({ code: fresh.code, code_verifier: fresh.verifier }, wrongSecret)).toMatchObject({
      status: 401,
      body: { error: "invalid_client" },
    })
  })

  it("requires PKCE S256 of public clients and refuses every downgrade", async () => {
    const browser = await signedIn("alice", "admin")
    const pub = await register({ name: "SPA", type: "public" })
    expect(pub.clientSecret).toBeUndefined()
    const config = await appConfig(pub)
    const noPkce = await consent(
      browser,
      client.buildAuthorizationUrl(config, { redirect_uri: APP_CALLBACK, scope: "agents:read", state: "x" }),
    )
    expect(noPkce.status).toBe(302)
    expect(new URL(noPkce.location!).searchParams.get("error")).toBe("invalid_request")
    const { challenge } = await pkce()
    const plain = await consent(
      browser,
      client.buildAuthorizationUrl(config, {
        redirect_uri: APP_CALLBACK,
        scope: "agents:read",
        state: "x",
        code_challenge: challenge,
        code_challenge_method: "plain",
      }),
    )
    expect(new URL(plain.location!).searchParams.get("error")).toBe("invalid_request")

    // A public client's whole flow works with PKCE; without the verifier the code is refused.
    const { tokens } = await authorizeApp(browser, config, "agents:read")
    expect(tokens.access_token).toMatch(AT)
    const { verifier: _v, challenge: c2 } = await pkce()
    const back = await consent(
      browser,
      client.buildAuthorizationUrl(config, {
        redirect_uri: APP_CALLBACK,
        scope: "agents:read",
        state: "y",
        code_challenge: c2,
        code_challenge_method: "S256",
      }),
    )
    const noVerifier = await fetch(`${origin}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        client_id: pub.client.id,
        code: new URL(back.location!).searchParams.get("code")!,
        redirect_uri: APP_CALLBACK,
      }),
    })
    expect(noVerifier.status).toBe(400)
    expect(((await noVerifier.json()) as any).error).toBe("invalid_grant")

    // A confidential client's code issued without a challenge, redeemed with a verifier: refused (downgrade).
    const conf = await register({ name: "Server app" })
    const confConfig = await appConfig(conf)
    const plainFlow = await consent(
      browser,
      client.buildAuthorizationUrl(confConfig, { redirect_uri: APP_CALLBACK, scope: "agents:read", state: "z" }),
    )
    const downgrade = await fetch(`${origin}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        grant_type: "authorization_code",
        client_id: conf.client.id,
        client_secret: conf.clientSecret,
        code: new URL(plainFlow.location!).searchParams.get("code")!,
        redirect_uri: APP_CALLBACK,
        code_verifier: client.randomPKCECodeVerifier(),
      }),
    })
    expect(downgrade.status).toBe(400)
    expect(((await downgrade.json()) as any).error).toBe("invalid_grant")
  })

  it("matches redirect URIs exactly and never redirects to an unregistered one", async () => {
    const browser = await signedIn("alice", "admin")
    const config = await appConfig(await register())
    for (const redirect of [
      `${APP_CALLBACK}/`,
      `${APP_CALLBACK}?x=1`,
      "http://127.0.0.1:9/CALLBACK",
      "https://evil.example/cb",
    ]) {
      const { challenge } = await pkce()
      const res = await consent(
        browser,
        client.buildAuthorizationUrl(config, {
          redirect_uri: redirect,
          scope: "agents:read",
          state: "s",
          code_challenge: challenge,
          code_challenge_method: "S256",
        }),
      )
      expect(res.status).toBe(400)
      expect(res.location).toBeNull()
    }
  })

  it("lets a native app pick its loopback port at each request (RFC 8252 7.3), and binds the code to that port", async () => {
    const browser = await signedIn("alice", "admin")
    const registered = await register({
      type: "public",
      redirectUris: ["http://127.0.0.1/cb", "http://localhost:7/cb"],
    })
    const config = await appConfig(registered)
    const ask = async (redirect: string) => {
      const { verifier, challenge } = await pkce()
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: redirect,
        scope: "agents:read",
        state: "s",
        code_challenge: challenge,
        code_challenge_method: "S256",
      })
      return { verifier, back: await consent(browser, url) }
    }
    const { verifier, back } = await ask("http://127.0.0.1:53123/cb")
    expect(back.status, back.html).toBe(302)
    const callback = new URL(back.location!)
    expect(callback.origin).toBe("http://127.0.0.1:53123")
    const exchange = (redirect: string) =>
      fetch(`${origin}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          client_id: registered.client.id,
          code: callback.searchParams.get("code")!,
          redirect_uri: redirect,
          code_verifier: verifier,
        }).toString(),
      })
    // The token request names the URI the code was sent to, port included.
    expect((await exchange("http://127.0.0.1:53124/cb")).status).toBe(400)
    const { verifier: v2, back: again } = await ask("http://127.0.0.1:53125/cb")
    const tokens = await fetch(`${origin}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        client_id: registered.client.id,
        code: new URL(again.location!).searchParams.get("code")!,
        redirect_uri: "http://127.0.0.1:53125/cb",
        code_verifier: v2,
      }).toString(),
    })
    expect(tokens.status).toBe(200)
    expect(((await tokens.json()) as any).access_token).toMatch(AT)
    // Only the port may differ, and only on a loopback IP literal; `localhost` is matched exactly.
    for (const redirect of [
      "http://127.0.0.1:53123/cb/",
      "http://127.0.0.1:53123/CB",
      "http://127.0.0.2:53123/cb",
      "https://127.0.0.1:53123/cb",
      "http://localhost:8/cb",
    ]) {
      const { back: refused } = await ask(redirect)
      expect(refused.status, redirect).toBe(400)
      expect(refused.location).toBeNull()
    }
  })

  it("never sends a person to an app of a workspace they are not in: a page, whatever the request (RFC 9700 4.11.2)", async () => {
    const browser = await signedIn("alice", "admin")
    // Any admin of any workspace on the server registers apps: this one's redirect URI is a phishing site.
    const other = await t.call("POST", "/api/v1/workspaces", { body: { name: "someone else's" } })
    expect(other.status, JSON.stringify(other.body)).toBe(201)
    const registered = await fetch(`${origin}/api/v1/oauth/clients`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${other.body.data.apiKey.apiKey}` },
      body: JSON.stringify({ name: "Totally Legit", redirectUris: ["https://evil.example/phish"] }),
    })
    expect(registered.status).toBe(201)
    const clientId = ((await registered.json()) as any).data.client.id as string
    const { challenge } = await pkce()
    const base = {
      client_id: clientId,
      redirect_uri: "https://evil.example/phish",
      response_type: "code",
      state: "s",
      code_challenge: challenge,
      code_challenge_method: "S256",
    }
    for (const params of [
      base,
      { ...base, state: "" },
      { ...base, response_type: "token" },
      { ...base, scope: "no:such" },
      { ...base, code_challenge_method: "plain" },
    ]) {
      const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== ""))
      const page = await browser.fetch(`${origin}/oauth/authorize?${query}`)
      expect(page.status, query.toString()).toBe(403)
      expect(page.headers.get("location")).toBeNull()
      expect(await page.text()).toContain("not a member")
    }
    // Nor through the consent form posted by hand (the deny button's path).
    const csrf = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const denied = await browser.fetch(`${origin}/oauth/authorize`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" },
      body: new URLSearchParams({ ...base, csrf_token: csrf, decision: "deny" }).toString(),
    })
    expect(denied.status).toBe(403)
    expect(denied.headers.get("location")).toBeNull()
  })

  it("refuses an authorization request with a parameter twice, and names a native app's scheme on the consent", async () => {
    const browser = await signedIn("alice", "admin")
    const registered = await register({ type: "public", redirectUris: [APP_CALLBACK, "com.example.app:/cb"] })
    const { challenge } = await pkce()
    const base = {
      client_id: registered.client.id,
      redirect_uri: "com.example.app:/cb",
      response_type: "code",
      scope: "agents:read",
      state: "s",
      code_challenge: challenge,
      code_challenge_method: "S256",
    }
    const shown = await browser.fetch(`${origin}/oauth/authorize?${new URLSearchParams(base)}`)
    const html = await shown.text()
    expect(shown.status).toBe(200)
    expect(html).toContain("sent back to <code>com.example.app:</code>")
    expect(html).not.toContain("<code>null</code>")
    // A scope named twice is asked, shown and granted once.
    const twice = await browser.fetch(
      `${origin}/oauth/authorize?${new URLSearchParams({ ...base, scope: "agents:read agents:read" })}`,
    )
    expect(await twice.text()).toContain('<input type="hidden" name="scope" value="agents:read">')
    // RFC 6749 3.1: each parameter at most once; the first of two redirect URIs is no more the app's than the last.
    for (const [name, value] of [
      ["redirect_uri", APP_CALLBACK],
      ["state", "t"],
      ["scope", "agents:write"],
    ] as const) {
      const query = new URLSearchParams(base)
      query.append(name, value)
      const page = await browser.fetch(`${origin}/oauth/authorize?${query}`)
      expect(page.status, name).toBe(400)
      expect(page.headers.get("location")).toBeNull()
      expect(await page.text()).toContain(`${name} is sent more than once`)
    }
  })

  it("answers malformed client credentials and parameters in OAuth's own errors, never a 500", async () => {
    const registered = await register()
    const send = async (path: string, body: string, headers: Record<string, string>) => {
      const res = await fetch(`${origin}${path}`, { method: "POST", body, headers })
      return { status: res.status, body: (await res.json().catch(() => ({}))) as any }
    }
    const form = { "content-type": "application/x-www-form-urlencoded" }
    const json = { "content-type": "application/json" }
    const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`
    // Percent-encoding that does not decode (RFC 6749 2.3.1 form-encodes Basic credentials).
    for (const authorization of [basic("%", "x"), basic(registered.client.id, "%E0%A4%A")]) {
      for (const path of ["/oauth/token", "/oauth/revoke"]) {
        const res = await send(path, "grant_type=refresh_token&refresh_token=x&token=x", { ...form, authorization })
        expect(res, path).toMatchObject({ status: 400, body: { error: "invalid_request" } })
      }
    }
    // A NUL or an unpaired surrogate in any parameter, form or JSON.
    for (const [body, headers] of [
      [JSON.stringify({ grant_type: "authorization_code", client_id: "oac_\u0000", code: "x" }), json],
      [JSON.stringify({ client_id: "oac_\u0000", token: "x" }), json],
      ['{"grant_type":"refresh_token","client_id":"oac_\\ud800","refresh_token":"x"}', json],
      ["grant_type=authorization_code&client_id=oac_%00&code=x", form],
    ] as const) {
      for (const path of ["/oauth/token", "/oauth/revoke"]) {
        const res = await send(path, body, headers)
        expect(res, `${path} ${body}`).toMatchObject({ status: 400, body: { error: "invalid_request" } })
      }
    }
    // The authorization endpoint, for a signed-in person: shown, never redirected, never a 500.
    const browser = await signedIn("alice", "admin")
    const page = await browser.fetch(
      `${origin}/oauth/authorize?response_type=code&client_id=oac_%00&redirect_uri=${encodeURIComponent(APP_CALLBACK)}&state=s`,
    )
    expect(page.status).toBe(400)
    expect(page.headers.get("location")).toBeNull()
  })

  it("refuses two Authorization headers on the token and revocation endpoints, whichever comes first", async () => {
    // node:http keeps the first of several; a proxy in front may act on the last. As on the API (authorizationOf):
    // several are refused, never read as the first.
    const registered = await register()
    const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`
    const good = basic(registered.client.id, registered.clientSecret!)
    const post = (path: string, authorization: Array<string>) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = httpRequest(
          `${origin}${path}`,
          {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded", authorization } as Record<
              string,
              string | Array<string>
            >,
          },
          (res) => {
            let text = ""
            res.on("data", (chunk) => (text += chunk))
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : {} }))
          },
        )
        req.on("error", reject)
        req.end("grant_type=refresh_token&refresh_token=svc_oauth_rt_x&token=svc_oauth_at_x")
      })
    // The control: one header authenticates the client (revoking an unknown token is a 200, RFC 7009 2.2).
    expect((await post("/oauth/revoke", [good])).status).toBe(200)
    for (const headers of [
      [good, basic(registered.client.id, "wrong")],
      [basic(registered.client.id, "wrong"), good],
      [good, good],
    ]) {
      for (const path of ["/oauth/token", "/oauth/revoke"]) {
        const res = await post(path, headers)
        expect(res, path).toMatchObject({ status: 400, body: { error: "invalid_request" } })
        expect(res.body.error_description).toMatch(/one Authorization header/)
      }
    }
  })

  it("an app acts only in its grant's workspace and within its scopes: it cannot make the person leave", async () => {
    const browser = await signedIn("mo", "member")
    const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
    const userId = session.data.user.id as string
    const csrf = session.data.csrfToken as string
    // Mo belongs to a second workspace too.
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name: "mo's other" } })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const second = created.body.data.workspace.id as string
    const invited = await t.call("POST", `/api/v1/workspaces/${second}/invitations`, {
      body: { email: accounts.mo.email, role: "member" },
    })
    const accepted = await browser.fetch(`${origin}/api/v1/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrf },
      body: JSON.stringify({ token: /#invitation=(.+)$/.exec(invited.body.data.link)![1]! }),
    })
    expect(accepted.status).toBe(200)
    const memberships = async () =>
      (((await (await browser.fetch(`${origin}/api/v1/users/me`)).json()) as any).data.memberships as Array<any>)
        .map((m) => m.workspaceId)
        .sort()
    const before = await memberships()
    expect(before).toEqual([t.workspaceId, second].sort())

    // An app granted members:read in the bootstrap workspace.
    const { tokens } = await authorizeApp(browser, await appConfig(await register()), "members:read")
    const leave = (workspaceId: string) =>
      bearer(tokens.access_token, `/api/v1/workspaces/${workspaceId}/members/${userId}`, { method: "DELETE" }).then(
        async (r) => ({ status: r.status, code: ((await r.json()) as any).error?.code }),
      )
    expect(await leave(second)).toEqual({ status: 404, code: "WORKSPACE_NOT_FOUND" })
    expect(await leave(t.workspaceId)).toEqual({ status: 403, code: "FORBIDDEN" })
    expect(await memberships()).toEqual(before)
    // The person, signed in to the dashboard, may still leave.
    const left = await browser.fetch(`${origin}/api/v1/workspaces/${second}/members/${userId}`, {
      method: "DELETE",
      headers: { "x-csrf-token": csrf },
    })
    expect(left.status).toBe(200)
    expect(await memberships()).toEqual([t.workspaceId])
  })

  it("an app's token revokes no grant without apikeys:write, not even its own person's; the person in the dashboard does", async () => {
    const browser = await signedIn("gina", "admin")
    const reader = await authorizeApp(browser, await appConfig(await register({ name: "Key reader" })), "apikeys:read")
    const other = await authorizeApp(browser, await appConfig(await register({ name: "Other app" })), "agents:read")
    const listed = (await (await bearer(reader.tokens.access_token, "/api/v1/oauth/grants")).json()) as any
    const grantOf = (name: string) => listed.data.find((g: any) => g.clientName === name).id as string
    for (const id of [grantOf("Other app"), grantOf("Key reader")]) {
      const res = await bearer(reader.tokens.access_token, `/api/v1/oauth/grants/${id}`, { method: "DELETE" })
      const body = (await res.json()) as any
      expect(res.status, JSON.stringify(body)).toBe(403)
      expect(body.error).toMatchObject({
        code: "FORBIDDEN",
        details: { field: "scope", issue: "requires apikeys:write" },
      })
    }
    // Nothing changed: both apps still act.
    expect((await bearer(other.tokens.access_token, "/api/v1/agents")).status).toBe(200)
    expect((await bearer(reader.tokens.access_token, "/api/v1/api-keys")).status).toBe(200)
    // Gina herself, signed in to the dashboard, revokes her own grant.
    const csrf = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const revoked = await browser.fetch(`${origin}/api/v1/oauth/grants/${grantOf("Other app")}`, {
      method: "DELETE",
      headers: { "x-csrf-token": csrf },
    })
    expect(revoked.status).toBe(200)
    expect((await bearer(other.tokens.access_token, "/api/v1/agents")).status).toBe(401)
  })

  it("an app sees its person in its grant's workspace only, and mints no API key that would outlive its grant", async () => {
    const browser = await signedIn("hal", "admin")
    const csrf = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name: "hal's other" } })
    const second = created.body.data.workspace.id as string
    const invited = await t.call("POST", `/api/v1/workspaces/${second}/invitations`, {
      body: { email: accounts.hal.email, role: "viewer" },
    })
    const accepted = await browser.fetch(`${origin}/api/v1/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrf },
      body: JSON.stringify({ token: /#invitation=(.+)$/.exec(invited.body.data.link)![1]! }),
    })
    expect(accepted.status).toBe(200)
    const { tokens } = await authorizeApp(
      browser,
      await appConfig(await register()),
      "agents:read apikeys:read apikeys:write",
    )
    expect(tokens.scope).toBe("agents:read apikeys:read apikeys:write")
    const me = (await (await bearer(tokens.access_token, "/api/v1/users/me")).json()) as any
    expect(me.data.user.email).toBe(accounts.hal.email)
    expect(me.data.memberships.map((m: any) => m.workspaceId)).toEqual([t.workspaceId])

    const keysBefore = (await t.call("GET", "/api/v1/api-keys?limit=100")).body.data.length
    const post = (path: string, body: unknown) =>
      bearer(tokens.access_token, path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
    const minted = await post("/api/v1/api-keys", { name: "app's own key", type: "workspace", scopes: ["agents:read"] })
    expect(minted.status, JSON.stringify(minted.body)).toBe(403)
    expect(minted.body.error).toMatchObject({ code: "FORBIDDEN", details: { field: "credential" } })
    const victim = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "rotate me", type: "workspace", scopes: ["agents:read"] },
    })
    const rotated = await post(`/api/v1/api-keys/${victim.body.data.id}/rotate`, {})
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(403)
    // Nothing was minted or changed.
    const keysAfter = (await t.call("GET", "/api/v1/api-keys?limit=100")).body.data
    expect(keysAfter.length).toBe(keysBefore + 1)
    expect(keysAfter.find((k: any) => k.id === victim.body.data.id).rotatedTo).toBeNull()
  })

  it("refuses a consent without the session's CSRF token, and a denied consent returns access_denied", async () => {
    const browser = await signedIn("alice", "admin")
    const config = await appConfig(await register())
    const { challenge } = await pkce()
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: APP_CALLBACK,
      scope: "agents:read",
      state: "s",
      code_challenge: challenge,
      code_challenge_method: "S256",
    })
    const page = await browser.fetch(url.href)
    expect(page.headers.get("x-frame-options")).toBe("DENY")
    const html = await page.text()
    expect(html).toContain("Acme Dashboard")
    expect(html).toContain("agents:read")
    const fields = Object.fromEntries(
      [...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!]),
    )
    const forged = await browser.fetch(`${origin}/oauth/authorize`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ ...fields, csrf_token: "forged", decision: "allow" }).toString(),
    })
    expect(forged.status).toBe(403)
    // The session's own token, posted by another site's page: refused by where it came from.
    for (const from of [
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
      { origin: "https://evil.example" },
    ]) {
      const elsewhere = await browser.fetch(`${origin}/oauth/authorize`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", ...from },
        body: new URLSearchParams({ ...fields, decision: "allow" }).toString(),
      })
      expect(elsewhere.status, JSON.stringify(from)).toBe(403)
    }
    const denied = await consent(browser, url, "deny")
    expect(new URL(denied.location!).searchParams.get("error")).toBe("access_denied")
  })

  it("revokes: an access token (RFC 7009), the app's grants with the app, and a refresh token bound to its client", async () => {
    const browser = await signedIn("alice", "admin")
    const registered = await register()
    const config = await appConfig(registered)
    const first = await authorizeApp(browser, config, "agents:read")
    await client.tokenRevocation(config, first.tokens.access_token)
    expect((await bearer(first.tokens.access_token, "/api/v1/agents")).status).toBe(401)

    const other = await appConfig(await register({ name: "Thief" }))
    await expect(client.refreshTokenGrant(other, first.tokens.refresh_token!)).rejects.toMatchObject({
      error: "invalid_grant",
    })
    // Still good for its own client.
    const second = await client.refreshTokenGrant(config, first.tokens.refresh_token!)
    expect((await bearer(second.access_token, "/api/v1/agents")).status).toBe(200)

    expect((await t.call("DELETE", `/api/v1/oauth/clients/${registered.client.id}`)).status).toBe(200)
    expect((await bearer(second.access_token, "/api/v1/agents")).status).toBe(401)
  })

  it("records every change to apps and grants in the audit trail (D8), with its actor, and never a secret", async () => {
    const browser = await signedIn("otto", "admin")
    const userId = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.user.id as string
    const newest = async () => {
      const res = await t.call("GET", "/api/v1/events?limit=100")
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body.data as Array<any>
    }
    // Everything this test records, in order: the events after the newest one now (the file's tests run in turn).
    const marker = (await newest())[0]?.sequence ?? 0
    const trail = async () => (await newest()).filter((e) => e.sequence > marker).reverse()
    const strict = (e: any) =>
      Schema.decodeUnknownSync(SYSTEM_EVENTS[e.type as SystemEventName].data)(e.data, { onExcessProperty: "error" })

    const registered = await register({ name: "Audited app", scopes: ["agents:read", "events:read"] })
    const config = await appConfig(registered)
    const clientId = registered.client.id
    const basic = `Basic ${Buffer.from(`${clientId}:${registered.clientSecret}`).toString("base64")}`
    const redeem = (code: string, verifier: string, authorization = basic) =>
      fetch(`${origin}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", authorization },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code,
          redirect_uri: APP_CALLBACK,
          code_verifier: verifier,
        }),
      }).then((r) => r.status)

    // Consent, then a refresh token rotated and presented again: a replay, taken as a theft; again, nothing more.
    const first = await authorizeApp(browser, config, "agents:read")
    await client.refreshTokenGrant(config, first.tokens.refresh_token!)
    for (let i = 0; i < 2; i++)
      await expect(client.refreshTokenGrant(config, first.tokens.refresh_token!)).rejects.toMatchObject({
        error: "invalid_grant",
      })
    // A code presented by another app: refused, nothing revoked, nothing recorded. Then redeemed twice (and thrice).
    const second = await authorizeApp(browser, config, "agents:read")
    const code = second.callback.searchParams.get("code")!
    const other = await register({ name: "Not the audited app" })
    const otherBasic = `Basic ${Buffer.from(`${other.client.id}:${other.clientSecret}`).toString("base64")}`
    expect(await redeem(code, second.verifier, otherBasic)).toBe(400)
    expect((await bearer(second.tokens.access_token, "/api/v1/agents")).status).toBe(200)
    expect(await redeem(code, second.verifier)).toBe(400)
    expect(await redeem(code, second.verifier)).toBe(400)
    // The app revokes its refresh token (RFC 7009); the person revokes a grant in the dashboard.
    const third = await authorizeApp(browser, config, "agents:read events:read")
    await client.tokenRevocation(config, third.tokens.refresh_token!)
    await authorizeApp(browser, config, "agents:read")
    const fifth = await authorizeApp(browser, config, "agents:read")
    const grants = (await t.call("GET", "/api/v1/oauth/grants?limit=100")).body.data.filter(
      (g: any) => g.clientId === clientId,
    )
    expect(grants).toHaveLength(2)
    const csrf = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const byPerson = await browser.fetch(`${origin}/api/v1/oauth/grants/${grants[1].id}`, {
      method: "DELETE",
      headers: { "x-csrf-token": csrf },
    })
    expect(byPerson.status).toBe(200)
    // Deleting the app ends the grant left, counted in its event; a concurrent delete finds it gone.
    const deletes = await Promise.all([1, 2].map(() => t.call("DELETE", `/api/v1/oauth/clients/${clientId}`)))
    expect(deletes.map((d) => d.status).sort()).toEqual([200, 404])
    expect((await bearer(fifth.tokens.access_token, "/api/v1/agents")).status).toBe(401)

    const events = (await trail()).filter((e) => e.type.startsWith("oauth."))
    for (const e of events) strict(e)
    const key = { type: "api_key", id: expect.stringMatching(/^key_/) }
    const person = { type: "user", id: userId }
    const app = (grantId: string) => ({ type: "oauth", id: grantId })
    const grantOf = (i: number) => events[i]?.data.grantId as string
    expect(events.map((e) => [e.type, e.data.clientId, e.data.reason ?? null, e.actor])).toEqual([
      ["oauth.client.created", clientId, null, key],
      ["oauth.grant.created", clientId, null, person],
      ["oauth.grant.revoked", clientId, "refresh_token_reused", app(grantOf(1))],
      ["oauth.grant.created", clientId, null, person],
      ["oauth.client.created", other.client.id, null, key],
      ["oauth.grant.revoked", clientId, "code_reused", app(grantOf(3))],
      ["oauth.grant.created", clientId, null, person],
      ["oauth.grant.revoked", clientId, "revoked_by_client", app(grantOf(6))],
      ["oauth.grant.created", clientId, null, person],
      ["oauth.grant.created", clientId, null, person],
      ["oauth.grant.revoked", clientId, "revoked", person],
      ["oauth.client.deleted", clientId, null, key],
    ])
    expect(events[0].data).toEqual({
      clientId,
      name: "Audited app",
      type: "confidential",
      redirectUris: [APP_CALLBACK],
      scopes: ["agents:read", "events:read"],
    })
    expect(events[6].data).toMatchObject({ userId, clientName: "Audited app", scopes: ["agents:read", "events:read"] })
    expect(events.at(-1).data).toEqual({ clientId, name: "Audited app", revokedGrants: 1 })
    // Each revocation names the grant its consent created.
    const revocations: ReadonlyArray<readonly [number, number]> = [
      [1, 2],
      [3, 5],
      [6, 7],
    ]
    for (const [created, revoked] of revocations)
      expect(events[revoked]!.data.grantId).toBe(events[created]!.data.grantId)
    expect(events[8].data.grantId).toBe(grants[1].id)
    expect(events[10].data.grantId).toBe(grants[1].id)
    const json = JSON.stringify(await trail())
    for (const secret of [registered.clientSecret!, first.tokens.refresh_token!, third.tokens.access_token, code])
      expect(json).not.toContain(secret)
    expect((await t.call("POST", "/api/v1/events/verify", { body: {} })).body.data).toMatchObject({ valid: true })
  })

  it("removing the member cuts their apps' tokens, on another instance within 5 s", async () => {
    const browser = await signedIn("vic", "viewer")
    const config = await appConfig(await register())
    const { tokens } = await authorizeApp(browser, config, "agents:read")
    const other = await startServer(testConfig({ bootstrap: false, publicUrl: origin }), {
      store: PostgresClient.layer({ url: t.store.url }),
      logger: makeLogger("error", () => {}),
    })
    try {
      const onOther = () =>
        fetch(`${other.url}/api/v1/agents`, { headers: { authorization: `Bearer ${tokens.access_token}` } })
      expect((await onOther()).status).toBe(200)
      const me = (await (await bearer(tokens.access_token, "/api/v1/users/me")).json()) as any
      expect(me.data.user.email).toBe("vic@example.com")
      expect((await t.call("DELETE", `/api/v1/workspaces/${t.workspaceId}/members/${me.data.user.id}`)).status).toBe(
        200,
      )
      // The other instance authenticated the token before and keeps it (OAuthService's cache) until the removal's
      // announcement reaches it: within 5 s (issue 32), in practice milliseconds.
      const removedAt = Date.now()
      let status = (await onOther()).status
      while (status === 200 && Date.now() - removedAt < 5_000) {
        await new Promise((r) => setTimeout(r, 50))
        status = (await onOther()).status
      }
      expect(status).toBe(401)
      expect(Date.now() - removedAt).toBeLessThan(5_000)
      // Invited again, the old grant stays ended.
      await signedIn("vic", "viewer")
      expect((await onOther()).status).toBe(401)
    } finally {
      await other.close()
    }
  })

  it("a consent racing the person's removal leaves no grant behind it (the membership is held until the grant commits)", async () => {
    const browser = await signedIn("sam", "member")
    const userId = ((await (await browser.fetch(`${origin}/auth/session`)).json()) as any).data.user.id as string
    const config = await appConfig(await register())
    const { challenge } = await pkce()
    const page = await browser.fetch(
      client
        .buildAuthorizationUrl(config, {
          redirect_uri: APP_CALLBACK,
          scope: "agents:read",
          state: "s",
          code_challenge: challenge,
          code_challenge_method: "S256",
        })
        .toString(),
    )
    const fields = Object.fromEntries(
      [...(await page.text()).matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [
        m[1]!,
        m[2]!,
      ]),
    )
    // The removal's transaction, as PeopleService runs it: the membership deleted, the grants revoked; the person
    // presses Allow before it commits.
    const db = pgConnect(t.store.url)
    try {
      const { pressed } = await db.begin(async (tx) => {
        await tx`DELETE FROM memberships WHERE workspace_id = ${t.workspaceId} AND user_id = ${userId}`
        await tx`UPDATE oauth_grants SET revoked_at = now(), revoked_reason = 'member_removed'
            WHERE workspace_id = ${t.workspaceId} AND user_id = ${userId} AND revoked_at IS NULL`
        const pressed = browser.fetch(`${origin}/oauth/authorize`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" },
          body: new URLSearchParams({ ...fields, decision: "allow" }).toString(),
        })
        await new Promise((r) => setTimeout(r, 500))
        return { pressed }
      })
      const answer = await pressed
      expect(answer.status).toBe(302)
      expect(new URL(answer.headers.get("location")!).searchParams.get("error")).toBe("access_denied")
    } finally {
      await db.end()
    }
    const active = await t.query<{ n: number }>(
      (sql) => sql`SELECT count(*)::int AS n FROM oauth_grants WHERE user_id = ${userId} AND revoked_at IS NULL`,
    )
    expect(active[0]!.n).toBe(0)
  })

  it("removing a member revokes the API keys they made, and the keys those made, on every instance", async () => {
    const browser = await signedIn("ken", "admin")
    const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
    const userId = session.data.user.id as string
    const inDashboard = (path: string, body: unknown) =>
      browser
        .fetch(`${origin}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-csrf-token": session.data.csrfToken },
          body: JSON.stringify(body),
        })
        .then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
    const made = await inDashboard("/api/v1/api-keys", {
      name: "ken's key",
      type: "workspace",
      scopes: ["agents:read", "events:read", "apikeys:write"],
    })
    expect(made.status, JSON.stringify(made.body)).toBe(201)
    const kens = made.body.data.apiKey as string
    const derived = await t.createKey({ name: "made with ken's key", type: "workspace", scopes: ["agents:read"] }, kens)
    // The operator's key, rotated by ken in the dashboard: he holds the new one.
    const operators = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "operator's", type: "workspace", scopes: ["agents:read"] },
    })
    const untouched = operators.body.data.apiKey as string
    const rotatedOperators = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "operator's, rotated by ken", type: "workspace", scopes: ["agents:read"] },
    })
    const rotated = await inDashboard(`/api/v1/api-keys/${rotatedOperators.body.data.id}/rotate`, {})
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(201)
    const token = (await t.call("POST", "/api/v1/tokens", { key: kens })).body.data.token as string

    const other = await startServer(
      testConfig({ bootstrap: false, publicUrl: origin, redisUrl: process.env.REDIS_URL }),
      {
        store: PostgresClient.layer({ url: t.store.url }),
        logger: makeLogger("error", () => {}),
      },
    )
    try {
      const on = (base: string, credential: string) =>
        fetch(`${base}/api/v1/agents`, { headers: { authorization: `Bearer ${credential}` } }).then((r) => r.status)
      const his = [kens, derived, rotated.body.data.apiKey as string, token]
      for (const credential of [...his, untouched]) expect(await on(other.url, credential)).toBe(200)
      const controller = new AbortController()
      const stream = await fetch(`${other.url}/api/v1/events/stream`, {
        headers: { authorization: `Bearer ${kens}` },
        signal: controller.signal,
      })
      expect(stream.status).toBe(200)
      const streamEnded = (async () => {
        for await (const _ of stream.body as any as AsyncIterable<Uint8Array>);
        return "ended"
      })().catch(() => "ended")
      const chainBefore = await t.chainLength()

      const removed = await t.call("DELETE", `/api/v1/workspaces/${t.workspaceId}/members/${userId}`)
      expect(removed.status, JSON.stringify(removed.body)).toBe(200)
      // The keys at once, here and there; the SDK token, cached by the other instance, within 5 s.
      for (const credential of his.slice(0, 3)) {
        expect(await on(origin, credential)).toBe(401)
        expect(await on(other.url, credential)).toBe(401)
      }
      const removedAt = Date.now()
      let status = await on(other.url, token)
      while (status === 200 && Date.now() - removedAt < 5_000) {
        await new Promise((r) => setTimeout(r, 50))
        status = await on(other.url, token)
      }
      expect(status).toBe(401)
      // The event stream his key opened on the other instance ends by itself (the test's time-out is the bound).
      expect(await streamEnded).toBe("ended")
      controller.abort()
      // The operator's key ken never held, and the one he rotated (in its overlap), still work.
      expect(await on(other.url, untouched)).toBe(200)
      expect(await on(origin, t.key)).toBe(200)

      // One apikey.revoked each, after member.removed, in the removal's own append.
      const events = await t.call("GET", "/api/v1/events?limit=10")
      const tail = (events.body.data as Array<any>).filter((e) => e.sequence > chainBefore).reverse()
      expect(tail.map((e) => e.type)).toEqual(["member.removed", "apikey.revoked", "apikey.revoked", "apikey.revoked"])
      expect(tail.slice(1).every((e) => e.data.reason === "member_removed")).toBe(true)
      const keys = await t.call("GET", `/api/v1/api-keys/${made.body.data.id}`)
      expect(keys.body.data).toMatchObject({ status: "revoked", revokedReason: "member_removed" })
      // Invited again, his old keys stay revoked.
      await signedIn("ken", "admin")
      expect(await on(origin, kens)).toBe(401)
    } finally {
      await other.close()
    }
  })

  it("a demotion narrows the API keys a member made, the keys those made and their SDK tokens, at once", async () => {
    const browser = await signedIn("nia", "admin")
    const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
    const userId = session.data.user.id as string
    const made = await browser.fetch(`${origin}/api/v1/api-keys`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": session.data.csrfToken },
      body: JSON.stringify({
        name: "nia's key",
        type: "workspace",
        scopes: ["agents:read", "agents:write", "apikeys:write"],
      }),
    })
    expect(made.status).toBe(201)
    const nias = ((await made.json()) as any).data.apiKey as string
    const derived = await t.createKey(
      { name: "made with nia's key", type: "workspace", scopes: ["agents:read", "agents:write"] },
      nias,
    )
    const token = (await t.call("POST", "/api/v1/tokens", { key: nias })).body.data.token as string
    const operators = (
      await t.call("POST", "/api/v1/api-keys", {
        body: { name: "operator's", type: "workspace", scopes: ["agents:write"] },
      })
    ).body.data.apiKey as string
    let n = 0
    const create = (credential: string) =>
      t.call("POST", "/api/v1/agents", { key: credential, body: { name: `nia-${Date.now()}-${n++}` } })
    // Each used once as an admin's: the SDK token is then cached (SdkTokens).
    for (const credential of [nias, derived, token, operators]) expect((await create(credential)).status).toBe(201)

    const demote = (role: string) =>
      t.call("PATCH", `/api/v1/workspaces/${t.workspaceId}/members/${userId}`, { body: { role } })
    expect((await demote("viewer")).status).toBe(200)
    // The keys she made act as a viewer at once; the cached token is read again on the role's announcement.
    for (const credential of [nias, derived]) {
      const refused = await create(credential)
      expect(refused.status, JSON.stringify(refused.body)).toBe(403)
      expect((await t.call("GET", "/api/v1/agents", { key: credential })).status).toBe(200)
    }
    const at = Date.now()
    let status = (await create(token)).status
    while (status === 201 && Date.now() - at < 5_000) {
      await new Promise((r) => setTimeout(r, 50))
      status = (await create(token)).status
    }
    expect(status).toBe(403)
    // The operator's key is nobody's: no role bounds it.
    expect((await create(operators)).status).toBe(201)
    // Promoted again, her keys act with what they were given, never more (agents:write, not webhooks:write).
    expect((await demote("admin")).status).toBe(200)
    expect((await create(nias)).status).toBe(201)
    expect(
      (
        await t.call("POST", "/api/v1/webhooks", {
          key: nias,
          body: { url: "https://example.com/hook", events: ["*"] },
        })
      ).status,
    ).toBe(403)
  })

  it("removing a member withdraws the invitations they sent, in person or with their key", async () => {
    const browser = await signedIn("mia", "admin")
    const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
    const inDashboard = (path: string, body: unknown) =>
      browser
        .fetch(`${origin}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-csrf-token": session.data.csrfToken },
          body: JSON.stringify(body),
        })
        .then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
    const invitations = `/api/v1/workspaces/${t.workspaceId}/invitations`
    const inPerson = await inDashboard(invitations, { email: accounts.miaAlt.email, role: "admin" })
    expect(inPerson.status, JSON.stringify(inPerson.body)).toBe(201)
    // A key that can invite members: the members scope and every scope of the role it grants.
    const key = await inDashboard("/api/v1/api-keys", {
      name: "mia's",
      type: "workspace",
      scopes: [...ROLE_SCOPES.member, "members:write"],
    })
    const withKey = await t.call("POST", invitations, {
      body: { email: "mia.third@example.com", role: "member" },
      key: key.body.data.apiKey,
    })
    expect(withKey.status, JSON.stringify(withKey.body)).toBe(201)
    const operators = await t.call("POST", invitations, { body: { email: "someone@example.com", role: "viewer" } })
    const chainBefore = await t.chainLength()

    expect((await t.call("DELETE", `/api/v1/workspaces/${t.workspaceId}/members/${session.data.user.id}`)).status).toBe(
      200,
    )
    const listed = (await t.call("GET", `${invitations}?limit=100`)).body.data as Array<any>
    const statusOf = (id: string) => listed.find((i) => i.id === id).status
    expect(statusOf(inPerson.body.data.invitation.id)).toBe("revoked")
    expect(statusOf(withKey.body.data.invitation.id)).toBe("revoked")
    expect(statusOf(operators.body.data.invitation.id)).toBe("pending")
    const events = (await t.call("GET", "/api/v1/events?limit=10")).body.data as Array<any>
    const withdrawn = events.filter((e) => e.sequence > chainBefore && e.type === "invitation.revoked")
    expect(withdrawn.map((e) => e.data.email).sort()).toEqual([accounts.miaAlt.email, "mia.third@example.com"])
    // Her other address cannot come in through the link.
    const alt = new Browser()
    idp.loginAs("miaAlt")
    await alt.follow(`${origin}/auth/signin/idp`, (next) => next.origin === origin && next.pathname === "/")
    const altCsrf = ((await (await alt.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const accepted = await alt.fetch(`${origin}/api/v1/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": altCsrf },
      body: JSON.stringify({ token: /#invitation=(.+)$/.exec(inPerson.body.data.link)![1]! }),
    })
    expect(accepted.status).toBe(409)
    expect(((await accepted.json()) as any).error.code).toBe("INVITATION_CLOSED")
  })

  it("removing a member also withdraws the invitations still pending to them: no second link brings them back", async () => {
    const invitations = `/api/v1/workspaces/${t.workspaceId}/invitations`
    // A first invitation whose link went astray (in another case), then a second one, which Quin accepts.
    const first = await t.call("POST", invitations, { body: { email: "quin@EXAMPLE.com", role: "admin" } })
    expect(first.status, JSON.stringify(first.body)).toBe(201)
    const someoneElse = await t.call("POST", invitations, { body: { email: "quin.other@example.com", role: "viewer" } })
    const browser = await signedIn("quin", "admin")
    const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
    const chainBefore = await t.chainLength()
    const removed = await t.call("DELETE", `/api/v1/workspaces/${t.workspaceId}/members/${session.data.user.id}`)
    expect(removed.status).toBe(200)
    const listed = (await t.call("GET", `${invitations}?limit=100`)).body.data as Array<any>
    const statusOf = (id: string) => listed.find((i) => i.id === id).status
    expect(statusOf(first.body.data.invitation.id)).toBe("revoked")
    expect(statusOf(someoneElse.body.data.invitation.id)).toBe("pending")
    const events = (await t.call("GET", "/api/v1/events?limit=10")).body.data as Array<any>
    const withdrawn = events.filter((e) => e.sequence > chainBefore && e.type === "invitation.revoked")
    expect(withdrawn.map((e) => e.data.invitationId)).toEqual([first.body.data.invitation.id])
    const accepted = await browser.fetch(`${origin}/api/v1/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": session.data.csrfToken },
      body: JSON.stringify({ token: /#invitation=(.+)$/.exec(first.body.data.link)![1]! }),
    })
    expect(accepted.status).toBe(409)
    expect(((await accepted.json()) as any).error.code).toBe("INVITATION_CLOSED")
  })

  it("an invitation racing its sender's removal or demotion is refused: it cannot outlive what ended their role", async () => {
    for (const [account, change] of [
      ["tia", "DELETE FROM memberships"],
      ["uma", "UPDATE memberships SET role = 'viewer'"],
    ] as const) {
      const browser = await signedIn(account, "admin")
      const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
      const userId = session.data.user.id as string
      // The removal's (or the demotion's) transaction has changed the membership; the admin's invitation, its
      // session read a moment before, arrives before it commits.
      const db = pgConnect(t.store.url)
      try {
        const { sent } = await db.begin(async (tx) => {
          await tx.unsafe(`${change} WHERE workspace_id = $1 AND user_id = $2`, [t.workspaceId, userId])
          const sent = browser.fetch(`${origin}/api/v1/workspaces/${t.workspaceId}/invitations`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-csrf-token": session.data.csrfToken },
            body: JSON.stringify({ email: `${account}.alt@example.com`, role: "admin" }),
          })
          await new Promise((r) => setTimeout(r, 500))
          return { sent }
        })
        const answer = await sent
        const body = (await answer.json()) as any
        expect(answer.status, `${account}: ${JSON.stringify(body)}`).toBe(403)
        expect(body.error.details.field).toBe("credential")
      } finally {
        await db.end()
      }
      const pending = await t.query<{ n: number }>(
        (sql) => sql`SELECT count(*)::int AS n FROM invitations WHERE invited_by = ${userId} AND status = 'pending'`,
      )
      expect(pending[0]!.n).toBe(0)
    }
  })

  it("a demotion withdraws the pending invitations the member sent that the new role could not send", async () => {
    // Another owner, so that Pia's demotion leaves one.
    await signedIn("rex", "owner")
    const browser = await signedIn("pia", "owner")
    const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
    const invitations = `/api/v1/workspaces/${t.workspaceId}/invitations`
    const invite = (email: string, role: string) =>
      browser
        .fetch(`${origin}${invitations}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-csrf-token": session.data.csrfToken },
          body: JSON.stringify({ email, role }),
        })
        .then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
    const asOwner = await invite(accounts.piaAlt.email, "owner")
    const asAdmin = await invite("pia.admin@example.com", "admin")
    expect([asOwner.status, asAdmin.status]).toEqual([201, 201])
    const member = `/api/v1/workspaces/${t.workspaceId}/members/${session.data.user.id}`
    const statusOf = async (id: string) =>
      ((await t.call("GET", `${invitations}?limit=100`)).body.data as Array<any>).find((i) => i.id === id).status

    const chainBefore = await t.chainLength()
    const demoted = await t.call("PATCH", member, { body: { role: "admin" } })
    expect(demoted.status, JSON.stringify(demoted.body)).toBe(200)
    expect(await statusOf(asOwner.body.data.invitation.id)).toBe("revoked")
    expect(await statusOf(asAdmin.body.data.invitation.id)).toBe("pending")
    const events = (await t.call("GET", "/api/v1/events?limit=10")).body.data as Array<any>
    const after = events.filter((e) => e.sequence > chainBefore).sort((a, b) => a.sequence - b.sequence)
    expect(after.map((e) => e.type)).toEqual(["member.role_changed", "invitation.revoked"])
    expect(after[1].data).toMatchObject({ invitationId: asOwner.body.data.invitation.id, role: "owner" })
    // Her other address does not become an owner through the link she sent before.
    const alt = new Browser()
    idp.loginAs("piaAlt")
    await alt.follow(`${origin}/auth/signin/idp`, (next) => next.origin === origin && next.pathname === "/")
    const altCsrf = ((await (await alt.fetch(`${origin}/auth/session`)).json()) as any).data.csrfToken
    const accepted = await alt.fetch(`${origin}/api/v1/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": altCsrf },
      body: JSON.stringify({ token: /#invitation=(.+)$/.exec(asOwner.body.data.link)![1]! }),
    })
    expect(accepted.status).toBe(409)

    // A viewer invites nobody: the admin invitation goes too.
    expect((await t.call("PATCH", member, { body: { role: "viewer" } })).status).toBe(200)
    expect(await statusOf(asAdmin.body.data.invitation.id)).toBe("revoked")
  })

  it("keys of people removed before removal revoked keys are found and revoked by the sweep", async () => {
    const browser = await signedIn("lea", "admin")
    const session = (await (await browser.fetch(`${origin}/auth/session`)).json()) as any
    const made = await browser.fetch(`${origin}/api/v1/api-keys`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": session.data.csrfToken },
      body: JSON.stringify({ name: "lea's key", type: "workspace", scopes: ["agents:read"] }),
    })
    const key = ((await made.json()) as any).data as { id: string; apiKey: string }
    // As an older version stored it: no creator on the key, the membership gone without its keys.
    await t.query(
      (
        sql,
      ) => sql`UPDATE api_keys SET created_by_user = NULL WHERE workspace_id = ${t.workspaceId} AND created_by_user IS NOT NULL
        AND status = 'active'`,
    )
    await t.query((sql) => sql`DELETE FROM memberships WHERE user_id = ${session.data.user.id}`)
    // Migration 0017's backfill finds the creator on the audit trail (its statements may run again).
    const migration = readFileSync(
      new URL("../../../packages/db/migrations/0017_key_creators.sql", import.meta.url),
      "utf8",
    )
    await t.query((sql) => sql.unsafe(migration).unprepared)
    // Before the sweep the key already acts with nothing (its maker holds no role), then the sweep revokes it.
    expect((await t.call("GET", "/api/v1/agents", { key: key.apiKey })).status).toBe(403)
    const swept = await t.server.runtime.runPromise(ApiKeyService.use((s) => s.revokeOrphaned))
    expect(swept).toBe(1)
    expect((await t.call("GET", "/api/v1/agents", { key: key.apiKey })).status).toBe(401)
    const events = await t.call("GET", "/api/v1/events?type=apikey.revoked&limit=1")
    expect(events.body.data[0].data).toMatchObject({ keyId: key.id, reason: "member_removed" })
  })

  it("an event stream opened with an access token ends when its grant is revoked on another instance", async () => {
    const browser = await signedIn("alice", "admin")
    const config = await appConfig(await register())
    const { tokens } = await authorizeApp(browser, config, "events:read")
    const other = await startServer(testConfig({ bootstrap: false, publicUrl: origin }), {
      store: PostgresClient.layer({ url: t.store.url }),
      logger: makeLogger("error", () => {}),
    })
    try {
      const controller = new AbortController()
      const stream = await fetch(`${other.url}/api/v1/events/stream`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
        signal: controller.signal,
      })
      expect(stream.status).toBe(200)
      const ended = (async () => {
        for await (const _ of stream.body as any as AsyncIterable<Uint8Array>);
        return "ended"
      })().catch(() => "ended")
      const grants = await t.call("GET", "/api/v1/oauth/grants")
      const grant = grants.body.data.find((g: any) => g.scopes.join() === "events:read")
      expect((await t.call("DELETE", `/api/v1/oauth/grants/${grant.id}`)).status).toBe(200)
      // Ends by itself (the test's own time-out is the bound); aborting would make this pass vacuously.
      expect(await ended).toBe("ended")
      controller.abort()
    } finally {
      await other.close()
    }
  })
})
