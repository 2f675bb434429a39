import type { Locator } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  expectAccessible,
  hasChromium,
  joinByInvitation,
  openSession,
  type Session,
  shot,
  startWorld,
  type World,
} from "./browser.ts"

/**
 * Role-aware controls (D16): the service decides on every call; the dashboard only stops offering what the signed-in
 * role cannot do, says which role can, and words a refusal in the role's terms. Grace joins as a member, is made a
 * viewer behind her page's back, and then walks the pages.
 */
let world: World
let s: Session
let agentId: string

beforeAll(async () => {
  if (!hasChromium) return
  world = await startWorld()
  s = await openSession(world)
  const agent = await world.t.call("POST", "/api/v1/agents", { body: { name: "billing-agent" } })
  expect(agent.status, JSON.stringify(agent.body)).toBe(201)
  agentId = agent.body.data.id
  const approval = await world.t.call("POST", "/api/v1/approvals", {
    body: { agentId, action: "payments.refund", reason: "refund of 120 EUR", context: { amount: 120 } },
  })
  expect(approval.status, JSON.stringify(approval.body)).toBe(201)
})
afterAll(async () => {
  await world?.close()
})

/** Disabled, with the role it needs as its tooltip and as its accessible description. */
const expectLocked = async (control: Locator, needs: string) => {
  await control.waitFor()
  expect(await control.isDisabled()).toBe(true)
  expect(await control.getAttribute("title")).toBe(needs)
  const describedBy = (await control.getAttribute("aria-describedby"))!
  expect(describedBy).toBeTruthy()
  expect(await control.page().locator(`[id="${describedBy}"]`).textContent()).toBe(needs)
}

describe.skipIf(!hasChromium)("role-aware controls in Chromium", () => {
  it("a refusal reads in the role's words, and a page whose role was changed since then stops offering the control", async () => {
    const { page } = s
    await joinByInvitation(world, page, "grace", "member")

    await page.goto(`${world.origin}/agents/${agentId}`)
    const suspend = page.getByRole("button", { name: "Suspend", exact: true })
    await suspend.waitFor()
    expect(await suspend.isDisabled()).toBe(false)
    // An owner makes Grace a viewer while her page still shows her a member's controls.
    const members = await world.t.call("GET", `/api/v1/workspaces/${world.t.workspaceId}/members`)
    const grace = (members.body.data as Array<{ userId: string; email: string }>).find(
      (m) => m.email === "grace@example.com",
    )!
    const demoted = await world.t.call("PATCH", `/api/v1/workspaces/${world.t.workspaceId}/members/${grace.userId}`, {
      body: { role: "viewer" },
    })
    expect(demoted.status, JSON.stringify(demoted.body)).toBe(200)

    await suspend.click()
    const dialog = page.getByRole("dialog", { name: "Suspend this agent" })
    await dialog.getByLabel("Reason").fill("too many refunds")
    await dialog.getByRole("button", { name: "Suspend agent" }).click()
    await dialog
      .getByRole("alert")
      .filter({ hasText: "Your role (viewer) cannot do this: it needs enforcement:write (the member role or above)." })
      .waitFor()
    expect(await dialog.getByRole("alert").textContent()).not.toContain("lacks the scope")
    await shot(page, "roles-refused")
    await dialog.getByRole("button", { name: "Cancel" }).click()
    // The page read the session again: the control it offered is now off, saying why.
    await expectLocked(suspend, "Needs the member role or above")
    expect((await world.t.call("GET", `/api/v1/agents/${agentId}`)).body.data.status).toBe("active")
  })

  it("a viewer is offered no write control: each is disabled, naming the role it needs", async () => {
    const { page } = s
    await page.goto(`${world.origin}/approvals`)
    const row = page.getByRole("row", { name: /payments\.refund/ })
    await expectLocked(row.getByRole("button", { name: "Approve payments.refund" }), "Needs the admin role or above")
    await expectLocked(row.getByRole("button", { name: "Deny payments.refund" }), "Needs the admin role or above")
    await expectAccessible(page, "approvals (viewer)")
    await shot(page, "roles-viewer-approvals")

    await page.goto(`${world.origin}/agents/${agentId}?tab=versions`)
    await expectLocked(page.getByRole("button", { name: "Suspend", exact: true }), "Needs the member role or above")
    await expectLocked(page.getByRole("button", { name: "Record version" }), "Needs the member role or above")
    await page.goto(`${world.origin}/agents/${agentId}?tab=keys&create=1`)
    await expectLocked(
      page.getByRole("button", { name: "Create a key for this agent" }).first(),
      "Needs the admin role or above",
    )
    // A link that would open the form opens nothing.
    expect(await page.getByRole("dialog", { name: "Create an API key" }).count()).toBe(0)

    await page.goto(`${world.origin}/agents?create=1`)
    await expectLocked(
      page.getByRole("button", { name: "Register an agent" }).first(),
      "Needs the member role or above",
    )
    expect(await page.getByRole("dialog", { name: "Register an agent" }).count()).toBe(0)

    await page.goto(`${world.origin}/policies`)
    await expectLocked(page.getByRole("button", { name: "New policy" }), "Needs the member role or above")
    await page.goto(`${world.origin}/policies/new`)
    await expectLocked(page.getByRole("button", { name: "Create policy" }), "Needs the member role or above")

    await page.goto(`${world.origin}/keys`)
    await expectLocked(page.getByRole("button", { name: "Create a key" }).first(), "Needs the admin role or above")

    await page.goto(`${world.origin}/webhooks`)
    await expectLocked(page.getByRole("button", { name: "Add a webhook" }).first(), "Needs the member role or above")

    await page.goto(`${world.origin}/compliance`)
    await expectLocked(page.getByRole("button", { name: "Generate report" }), "Needs the admin role or above")

    await page.goto(`${world.origin}/content`)
    await expectLocked(page.getByRole("button", { name: "Register text" }).first(), "Needs the member role or above")

    await page.goto(`${world.origin}/members?tab=invitations`)
    await expectLocked(page.getByRole("button", { name: "Send invitation" }), "Needs the admin role or above")

    await page.goto(`${world.origin}/settings`)
    const form = page.getByRole("form", { name: "Workspace settings" })
    await expectLocked(form.getByRole("button", { name: "Save changes" }), "Needs the owner role")
    expect(await form.getByLabel("Name").isDisabled()).toBe(true)
    await expectLocked(
      page.getByRole("button", { name: "Delete workspace" }),
      "Needs the service operator (workspaces:admin)",
    )
    await expectAccessible(page, "settings (viewer)")
    await shot(page, "roles-viewer-settings")
    expect(s.cspViolations).toEqual([])
    expect(s.pageErrors).toEqual([])
  })

  it("an admin creating a key is not offered the scopes only an owner holds", async () => {
    const admin = await openSession(world)
    try {
      await joinByInvitation(world, admin.page, "alan", "admin")
      await admin.page.goto(`${world.origin}/keys`)
      await admin.page.getByRole("button", { name: "Create a key" }).first().click()
      const dialog = admin.page.getByRole("dialog", { name: "Create an API key" })
      await expectLocked(dialog.getByRole("checkbox", { name: "workspaces:write" }), "Needs the owner role")
      expect(await dialog.getByRole("checkbox", { name: "workspaces:write" }).isChecked()).toBe(false)
      expect(await dialog.getByRole("checkbox", { name: "apikeys:write" }).isDisabled()).toBe(false)
      await dialog.getByLabel("Name").fill("reporting")
      await dialog.getByRole("checkbox", { name: "events:read" }).check()
      await dialog.getByRole("button", { name: "Create key" }).click()
      await admin.page.getByTestId("secret").waitFor()
      await expectAccessible(admin.page, "an admin's key dialog")
    } finally {
      await admin.context.close()
    }
  })

  it("the sign-in screen says why the service sent a browser back (a first-run link opened again)", async () => {
    const other = await openSession(world)
    try {
      await other.page.goto(`${world.origin}/?signin_error=link_used`)
      await other.page.getByRole("alert").filter({ hasText: "already used or has expired" }).waitFor()
      // The reason is not carried back through the sign-in.
      const href = (await other.page.getByRole("link", { name: /Continue with Example SSO/ }).getAttribute("href"))!
      expect(new URL(href, world.origin).searchParams.get("return_to")).toBe("/")
      await expectAccessible(other.page, "sign-in with a reason")

      // A refused sign-in that was going to an app's authorize request: starting again goes back there, and the
      // address bar no longer repeats the refusal.
      const authorize = "/oauth/authorize?client_id=app&state=s1"
      await other.page.goto(`${world.origin}/?signin_error=provider_error&return_to=${encodeURIComponent(authorize)}`)
      await other.page.getByRole("alert").filter({ hasText: "ended the sign-in" }).waitFor()
      const again = (await other.page.getByRole("link", { name: /Continue with Example SSO/ }).getAttribute("href"))!
      expect(new URL(again, world.origin).searchParams.get("return_to")).toBe(authorize)
      expect(new URL(other.page.url()).search).toBe("")
    } finally {
      await other.context.close()
    }
  })

  it("a browser signed in already is told when a sign-in in it did not complete, and stays signed in", async () => {
    // Before, the dashboard showed its overview and said nothing: the person could not tell why the link they had
    // just opened did not sign them in as someone else.
    const { page } = s
    await page.goto(`${world.origin}/?signin_error=link_used`)
    const alert = page.getByRole("alert").filter({ hasText: "did not complete" })
    await alert.waitFor()
    expect(await alert.textContent()).toContain("grace@example.com")
    expect(await alert.textContent()).toContain("already used or has expired")
    expect(new URL(page.url()).search).toBe("")
    await expectAccessible(page, "a signed-in page with a sign-in's refusal")
    await alert.getByRole("button", { name: "Dismiss" }).click()
    await alert.waitFor({ state: "detached" })
    await page.getByRole("heading", { name: "Overview" }).waitFor()
  })
})
