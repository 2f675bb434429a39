import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  expectAccessible,
  hasChromium,
  invite,
  openSession,
  type Session,
  shot,
  signIn,
  startWorld,
  type World,
} from "./browser.ts"

/**
 * The dashboard in Chromium, against a real server and a real OpenID Connect provider: sign-in end to end,
 * then the operator's journeys, each page checked with axe-core and photographed (test/screenshots/).
 */
let world: World
let s: Session

beforeAll(async () => {
  if (!hasChromium) return
  world = await startWorld()
  s = await openSession(world)
})
afterAll(async () => world?.close())

describe.skipIf(!hasChromium)("the dashboard in Chromium", () => {
  it("is served at / with a strict Content-Security-Policy, and the API's routes are unchanged", async () => {
    const res = await fetch(`${world.origin}/`)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^text\/html/)
    const csp = res.headers.get("content-security-policy")!
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self'")
    expect(csp).not.toContain("unsafe-inline")
    expect(csp).not.toContain("unsafe-eval")
    expect(csp).toContain("frame-ancestors 'none'")
    const html = await res.text()
    // No inline script: every script is a file from this origin.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!
    const js = await fetch(`${world.origin}${asset}`)
    expect(js.status).toBe(200)
    expect(js.headers.get("cache-control")).toContain("immutable")
    // A page the app routes, as a browser asks for it, is the app; the same path as an API client asks is a 404.
    const deep = await fetch(`${world.origin}/agents/agt_x`, { headers: { accept: "text/html" } })
    expect(deep.status).toBe(200)
    expect((await fetch(`${world.origin}/nope`)).status).toBe(404)
    expect((await fetch(`${world.origin}/assets/missing.js`)).status).toBe(404)
    for (const path of ["/healthz", "/api/v1/openapi.json", "/.well-known/jwks.json", "/auth/providers"])
      expect((await fetch(`${world.origin}${path}`)).headers.get("content-type"), path).toMatch(/json/)
    expect((await fetch(`${world.origin}/trpc/agents.list`)).status).toBe(401)
    expect((await fetch(`${world.origin}/api/v1/agents`)).status).toBe(401)
  })

  it("signs in through the OpenID Connect provider and joins the workspace by invitation", async () => {
    const { page } = s
    await page.goto(`${world.origin}/`)
    await page.getByRole("heading", { name: "Sign in" }).waitFor()
    await expectAccessible(page, "sign-in")
    await shot(page, "00-signin")
    const link = await invite(world, "ada@example.com", "owner")
    world.idp.loginAs("ada")
    await page.goto(`${world.origin}${link}`)
    await page.getByRole("link", { name: /Continue with Example SSO/ }).click()
    await page.getByRole("heading", { name: "Join a workspace" }).waitFor()
    await shot(page, "01-invitation")
    await page.getByRole("button", { name: "Accept invitation" }).click()
    await page.getByRole("heading", { name: "Overview" }).waitFor()
    await page.getByText("Ada Lovelace").waitFor()
    // The session is an HttpOnly cookie; nothing secret is in storage.
    const stored = await page.evaluate(() => {
      const g = globalThis as any
      return JSON.stringify({ ...g.localStorage, ...g.sessionStorage })
    })
    expect(stored).not.toMatch(/svc_|csrf|token/i)
    expect(await page.evaluate(() => (globalThis as any).document.cookie)).toBe("")
    await expectAccessible(page, "overview")
    await shot(page, "02-overview")
    expect(s.cspViolations).toEqual([])
    expect(s.pageErrors).toEqual([])
  })

  it("signs in again from a fresh browser straight to the page asked for", async () => {
    const other = await openSession(world)
    await signIn(world, other.page, "ada", "/agents")
    await other.page.getByRole("heading", { name: "Agents" }).waitFor()
    expect(new URL(other.page.url()).pathname).toBe("/agents")
    await other.context.close()
  })
})
