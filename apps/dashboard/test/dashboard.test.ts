import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFailed } from "vitest"
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
let agentId: string
let agentKey: string

beforeAll(async () => {
  if (!hasChromium) return
  world = await startWorld()
  s = await openSession(world)
})
afterAll(async () => world?.close())
// A failing journey leaves a picture of where it stopped.
beforeEach((ctx) => {
  onTestFailed(async () => {
    if (s) await shot(s.page, `failed-${ctx.task.name.slice(0, 40).replaceAll(/\W+/g, "-")}`).catch(() => {})
  })
})

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
    await page.getByRole("heading", { name: "Sign in", exact: true }).waitFor()
    await expectAccessible(page, "sign-in")
    await shot(page, "00-signin")
    const link = await invite(world, "ada@example.com", "owner")
    world.idp.loginAs("ada")
    await page.goto(`${world.origin}${link}`)
    await page.getByRole("link", { name: /Continue with Example SSO/ }).click()
    await page.getByRole("heading", { name: "Join a workspace", exact: true }).waitFor()
    await shot(page, "01-invitation")
    await page.getByRole("button", { name: "Accept invitation" }).click()
    await page.getByRole("heading", { name: "Overview", exact: true }).waitFor()
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

  it("registers an agent and creates a key for it, shown once", async () => {
    const { page } = s
    await page.goto(`${world.origin}/agents`)
    await page.getByRole("heading", { name: "Agents", exact: true }).waitFor()
    await page.getByRole("button", { name: "Register an agent" }).first().click()
    await page.getByRole("dialog").getByLabel("Name", { exact: true }).fill("billing-bot")
    await page.getByRole("dialog").getByLabel("Labels").fill("payments, prod")
    await shot(page, "10-register-agent")
    await page.getByRole("button", { name: "Register", exact: true }).click()
    await page.getByRole("heading", { name: /billing-bot/ }).waitFor()
    agentId = new URL(page.url()).pathname.split("/")[2]!
    expect(agentId).toMatch(/^agt_/)
    await page.getByRole("button", { name: "Create a key for this agent" }).first().click()
    const dialog = page.getByRole("dialog", { name: "Create an API key" })
    await dialog.getByLabel("Name").fill("billing-bot production")
    await dialog.getByRole("button", { name: "Create key" }).click()
    const secret = page.getByTestId("secret")
    await secret.waitFor()
    agentKey = (await secret.textContent())!
    expect(agentKey).toMatch(/^svc_ag_sk_/)
    await page.getByRole("button", { name: "Copy", exact: true }).first().click()
    expect(await page.evaluate(() => (globalThis as any).navigator.clipboard.readText())).toBe(agentKey)
    await expectAccessible(page, "key created")
    await shot(page, "11-key-created")
    await page.getByRole("button", { name: "Done" }).click()
    await page.getByRole("table").getByText("billing-bot production").waitFor()
    await shot(page, "12-agent-keys")
  })

  it("filters the agents by a typed name with one request once typing pauses, not one per keystroke", async () => {
    const { page } = s
    await page.goto(`${world.origin}/agents`)
    await page.getByRole("table").getByText("billing-bot").first().waitFor()
    const filtered: string[] = []
    const seen = (r: { url(): string }) => {
      const url = decodeURIComponent(r.url())
      if (url.includes("agents.list") && url.includes("namePrefix")) filtered.push(url)
    }
    page.on("request", seen)
    try {
      const typed = "billing-bot"
      await page.getByLabel("Name starts with").pressSequentially(typed)
      await page.waitForURL((u) => u.searchParams.get("name") === typed)
      await page.getByRole("table").getByText("billing-bot").first().waitFor()
      expect(filtered.length).toBeGreaterThan(0)
      // Eleven keystrokes: a request for each would name every prefix on the way; typing in one go names the whole.
      expect(filtered.length).toBeLessThan(typed.length / 2)
      expect(filtered.at(-1)).toContain(`"namePrefix":"${typed}"`)
      // Clearing the field and pressing Enter drops the filter at once.
      await page.getByLabel("Name starts with").fill("")
      await page.getByLabel("Name starts with").press("Enter")
      await page.waitForURL((u) => !u.searchParams.has("name"))
      expect(await page.getByLabel("Name starts with").inputValue()).toBe("")
    } finally {
      page.off("request", seen)
    }
  })

  it("writes a policy (a mistake shown at its field), tries it, and sees a guard call denied live in the audit tail", async () => {
    const { page } = s
    await page.goto(`${world.origin}/policies/new`)
    await page.getByLabel("Name", { exact: true }).fill("no prod deletes")
    const rules = page.getByLabel("Rules (JSON)")
    const good = JSON.stringify(
      {
        rules: [
          {
            id: "no-prod-deletes",
            effect: "deny",
            actions: ["db.delete"],
            when: { field: "context.env", op: "eq", value: "prod" },
            reason: "not in prod",
          },
        ],
      },
      null,
      2,
    )
    await rules.fill(good.replace('"deny"', '"nope"'))
    await page.getByRole("button", { name: "Create policy" }).click()
    await page.getByText(/rules\[0\]\.effect/).waitFor()
    expect(await rules.getAttribute("aria-invalid")).toBe("true")
    await shot(page, "20-policy-field-error")
    await rules.fill(good)
    await page.getByRole("button", { name: "Create policy" }).click()
    await page.getByRole("button", { name: "Save new version" }).waitFor()
    await page.getByLabel("Agent", { exact: true }).fill(agentId)
    await page.getByLabel("Action", { exact: true }).fill("db.delete")
    const trail = async () => (await world.t.call("GET", "/api/v1/events?limit=1")).body.data[0].sequence as number
    const before = await trail()
    await page.getByRole("button", { name: "Evaluate" }).click()
    await page.getByTestId("try-result").getByText("deny").waitFor()
    // Trying a policy is not acting as the agent: nothing recorded (no policy.evaluated, no policy.denied).
    expect(await trail()).toBe(before)
    // Two more versions; the history then compares two old ones (v1 with v2), not the editor with the newest.
    await rules.fill(good.replace("not in prod", "never in prod"))
    await page.getByRole("button", { name: "Save new version" }).click()
    await page.getByText(/^Version 2,/).waitFor()
    await rules.fill(
      JSON.stringify(
        { description: "no deletes", ...JSON.parse(good.replace("not in prod", "never in prod")) },
        null,
        2,
      ),
    )
    await page.getByRole("button", { name: "Save new version" }).click()
    await page.getByText(/^Version 3,/).waitFor()
    await page.getByRole("list", { name: "Versions" }).getByText("v3").waitFor()
    await page.getByLabel("Compare", { exact: true }).selectOption("1")
    await page.getByLabel("with", { exact: true }).selectOption("2")
    const diff = page.getByTestId("version-diff")
    await diff.and(page.getByLabel("Changes from version 1 to version 2")).waitFor()
    const lines = (await diff.locator("div").allTextContents()).filter((l) => !l.startsWith(" "))
    // Only the reason changed from v1 to v2 (v3's description is not in this comparison).
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatch(/^- .*"reason": "not in prod"/)
    expect(lines[1]).toMatch(/^\+ .*"reason": "never in prod"/)
    await shot(page, "21-policy-version-diff")
    await expectAccessible(page, "policy editor")
    await shot(page, "21-policy-try-it")

    await page.goto(`${world.origin}/audit`)
    // The tail's status reads "live" once the stream is subscribed (not the "Live tail" title, there from the start):
    // a guard call made before would be history, not the tail.
    await page
      .locator(".pill")
      .filter({ hasText: /^\s*live\s*$/ })
      .waitFor()
    // The agent calls the guard with its own key: the denial reaches the open tail.
    const guard = await world.t.call("POST", "/api/v1/guard", {
      key: agentKey,
      body: { action: "db.delete", context: { env: "prod" } },
    })
    expect(guard.body.data.decision, JSON.stringify(guard.body)).toBe("deny")
    await page.getByTestId("live-tail").getByText("policy.denied").first().waitFor()
    await expectAccessible(page, "audit trail")
    await shot(page, "22-audit-live-denied")
    await page
      .getByRole("button", { name: /Open event/ })
      .first()
      .click()
    await page.getByText(/Inclusion proof/).waitFor()
    await shot(page, "23-event-proof")
    await page.getByRole("button", { name: "Close" }).click()
    await page.getByRole("button", { name: "Verify the chain" }).click()
    await page.getByText(/Valid ·/).waitFor()
  })

  it("saves the policy it shows, at the version it shows: another policy's id, or a stale copy, is refused", async () => {
    const { page } = s
    const made = async (name: string, action: string) => {
      const res = await world.t.call("POST", "/api/v1/policies", {
        body: { name, rules: [{ id: "r", effect: "deny", actions: [action] }] },
      })
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      return res.body.data as { id: string; version: number }
    }
    const shown = await made(`shown-${Date.now()}`, "shown.only")
    const other = await made(`other-${Date.now()}`, "other.only")
    await page.goto(`${world.origin}/policies/${shown.id}`)
    const rules = page.getByLabel("Rules (JSON)")
    await rules.waitFor()
    // What `GET /policies/<other>` answers, pasted in whole.
    await rules.fill(JSON.stringify({ id: other.id, rules: [{ id: "r", effect: "allow", actions: ["*"] }] }, null, 2))
    await page.getByRole("button", { name: "Save new version" }).click()
    await page.getByText(/"id" is not part of the document/).waitFor()
    for (const p of [shown, other]) {
      const stored = (await world.t.call("GET", `/api/v1/policies/${p.id}`)).body.data
      expect(stored.version, p.id).toBe(1)
      expect(stored.rules[0].effect).toBe("deny")
    }
    // Someone saves the shown policy meanwhile: this page's stale copy is refused, not saved over their change.
    const theirs = await world.t.call("PATCH", `/api/v1/policies/${shown.id}`, { body: { description: "theirs" } })
    expect(theirs.body.data.version).toBe(2)
    await rules.fill(JSON.stringify({ rules: [{ id: "r", effect: "allow", actions: ["*"] }] }, null, 2))
    await page.getByRole("button", { name: "Save new version" }).click()
    await page
      .getByText(/saved meanwhile/)
      .first()
      .waitFor()
    const after = (await world.t.call("GET", `/api/v1/policies/${shown.id}`)).body.data
    expect([after.version, after.description, after.rules[0].effect]).toEqual([2, "theirs", "deny"])
  })

  it("approves a pending approval, which leaves the live queue", async () => {
    const { page } = s
    await page.goto(`${world.origin}/approvals`)
    await page.getByText("The queue is empty").waitFor()
    await page.locator(".pill", { hasText: "Live" }).waitFor()
    const created = await world.t.call("POST", "/api/v1/approvals", {
      body: { agentId, action: "payments.refund", reason: "refund of 120 EUR", context: { amount: 120 } },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    // No reload: the queue follows the event stream.
    const row = page.getByRole("row", { name: /payments\.refund/ })
    await row.waitFor()
    await expectAccessible(page, "approvals")
    await shot(page, "30-approvals-queue")
    await row.getByRole("button", { name: /Approve/ }).click()
    await page.getByLabel("Reason").fill("customer verified")
    await shot(page, "31-approve-dialog")
    await page.getByRole("dialog").getByRole("button", { name: "Approve", exact: true }).click()
    await row.waitFor({ state: "detached" })
    await page.getByText("The queue is empty").waitFor()
    const decided = await world.t.call("GET", `/api/v1/approvals/${created.body.data.id}`)
    expect(decided.body.data).toMatchObject({ status: "approved", decisionReason: "customer verified" })
  })

  it("suspends and reinstates an agent", async () => {
    const { page } = s
    await page.goto(`${world.origin}/agents/${agentId}`)
    await page.getByRole("button", { name: "Suspend" }).click()
    await page.getByRole("dialog").getByLabel("Reason").fill("investigating refunds")
    await page.getByRole("button", { name: "Suspend agent" }).click()
    await page.getByRole("button", { name: "Reinstate" }).waitFor()
    await page
      .getByRole("heading", { name: /billing-bot/ })
      .getByText("suspended")
      .waitFor()
    expect((await world.t.call("GET", `/api/v1/agents/${agentId}`)).body.data.status).toBe("suspended")
    await page.getByRole("tab", { name: "Enforcements" }).click()
    await page.getByRole("cell", { name: "investigating refunds" }).waitFor()
    await shot(page, "40-agent-suspended")
    await page.getByRole("button", { name: "Reinstate" }).click()
    await page.getByRole("button", { name: "Suspend" }).waitFor()
    expect((await world.t.call("GET", `/api/v1/agents/${agentId}`)).body.data.status).toBe("active")
    await page.getByRole("tab", { name: "Trust" }).click()
    await page
      .getByText("Score components")
      .or(page.getByText(/Score \d+/))
      .first()
      .waitFor()
    await expectAccessible(page, "agent detail")
    await shot(page, "41-agent-reinstated")
  })

  // Generating a report and downloading its PDF: pages-b.test.ts, with the compliance page's other journeys.

  it("every page passes axe-core, in light and dark, and at a phone's width", async () => {
    const pages = [
      "/",
      "/agents",
      "/approvals",
      "/audit",
      "/policies",
      "/keys",
      "/enforcement",
      "/webhooks",
      "/compliance",
      "/content",
      "/members",
      "/connectors",
      "/settings",
    ]
    for (const path of pages) {
      await s.page.goto(`${world.origin}${path}`)
      await s.page.locator("main h1").first().waitFor()
      await s.page
        .locator(".loading")
        .first()
        .waitFor({ state: "detached" })
        .catch(() => {})
      await expectAccessible(s.page, path)
      await shot(s.page, `60-light${path === "/" ? "-overview" : path.replaceAll("/", "-")}`)
    }
    const dark = await openSession(world, { colorScheme: "dark" })
    await dark.context.addCookies(await s.context.cookies())
    const phone = await openSession(world, { viewport: { width: 390, height: 844 } })
    await phone.context.addCookies(await s.context.cookies())
    for (const path of ["/", "/agents", `/agents/${agentId}`, "/audit", "/approvals", "/keys"]) {
      for (const [name, session] of [
        ["dark", dark],
        ["phone", phone],
      ] as const) {
        await session.page.goto(`${world.origin}${path}`)
        await session.page.locator("main h1").first().waitFor()
        await expectAccessible(session.page, `${name} ${path}`)
        const label = path === "/" ? "overview" : path.startsWith("/agents/") ? "agent-detail" : path.slice(1)
        await shot(session.page, `70-${name}-${label}`)
      }
    }
    // On a phone the navigation is a drawer behind the menu button.
    await phone.page.getByRole("button", { name: "Open navigation" }).click()
    await phone.page.getByRole("link", { name: "Policies" }).click()
    await phone.page.getByRole("heading", { name: "Policies", exact: true }).waitFor()
    for (const x of [s, dark, phone]) {
      expect(x.cspViolations).toEqual([])
      expect(x.pageErrors).toEqual([])
    }
    await dark.context.close()
    await phone.context.close()
  }, 300_000)

  it("signs in again from a fresh browser straight to the page asked for", async () => {
    const other = await openSession(world)
    await signIn(world, other.page, "ada", "/agents")
    await other.page.getByRole("heading", { name: "Agents", exact: true }).waitFor()
    expect(new URL(other.page.url()).pathname).toBe("/agents")
    await other.context.close()
  })
})
