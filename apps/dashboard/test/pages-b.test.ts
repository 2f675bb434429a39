import { readFileSync } from "node:fs"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  expectAccessible,
  hasChromium,
  joinByInvitation,
  openSession,
  type Session,
  shot,
  signIn,
  startWorld,
  type World,
} from "./browser.ts"

/**
 * The configuration pages in Chromium (webhooks, compliance, content, members and OAuth apps, connectors,
 * settings), against a real server and OpenID Connect provider: one journey per page, each page checked with
 * axe-core and photographed (test/screenshots/b-*.png).
 */
let world: World
let s: Session
let receiver: Server
let receiverUrl: string
const received: Array<{ headers: IncomingHttpHeaders; body: string }> = []

beforeAll(async () => {
  if (!hasChromium) return
  // A webhook endpoint on loopback, which the server may reach because its allowlist names it.
  receiver = createServer((req, res) => {
    let body = ""
    req.on("data", (c) => {
      body += c
    })
    req.on("end", () => {
      received.push({ headers: req.headers, body })
      res.writeHead(200).end("ok")
    })
  })
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r))
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`
  world = await startWorld({ webhookAllowlist: ["127.0.0.1"] })
  s = await openSession(world)
})
afterAll(async () => {
  await world?.close()
  await new Promise((r) => receiver?.close(r))
})

/** No serious or critical axe violation, the page photographed, and no CSP violation or page error so far. */
const check = async (name: string) => {
  await expectAccessible(s.page, name)
  await shot(s.page, `b-${name}`)
  expect(s.cspViolations).toEqual([])
  expect(s.pageErrors).toEqual([])
}

describe.skipIf(!hasChromium)("the configuration pages in Chromium", () => {
  it("signs in and joins the workspace as its owner", async () => {
    const { page } = s
    await joinByInvitation(world, page, "ada", "owner")
  })

  it("loads the overview with one session read and one overview call, both started by early.js and taken by the app", async () => {
    const { page } = s
    // The workspace in view is remembered, so a fresh load of `/` asks for its overview beside the session read.
    expect(await page.evaluate(() => (globalThis as any).localStorage.getItem("agentgov.workspace"))).toMatch(/^ws_/)
    const asked: Array<string> = []
    const onRequest = (r: { url: () => string }) => {
      const path = new URL(r.url()).pathname
      if (path === "/auth/session" || path.startsWith("/trpc/")) asked.push(path)
    }
    page.on("request", onRequest)
    await page.goto(`${world.origin}/`)
    await page.getByTestId("stat-agents").filter({ hasText: /^\d/ }).waitFor()
    page.off("request", onRequest)
    expect(asked.sort()).toEqual(["/auth/session", "/trpc/overview.get"])
    // Neither early answer is left unused (the app took both, instead of asking again).
    const early = await page.evaluate(() => {
      const e = (globalThis as any).__agentgovEarly
      return e === undefined ? "no early.js" : { session: e.session === undefined, overview: e.overview === undefined }
    })
    expect(early).toEqual({ session: true, overview: true })
  })

  it("webhooks: add one (its secret shown once), send a test, rotate the secret, disable and enable it", async () => {
    const { page } = s
    await page.getByRole("link", { name: "Webhooks" }).click()
    await page.getByRole("heading", { name: "No webhooks yet" }).waitFor()
    await check("webhooks-empty")

    await page.getByRole("button", { name: "Add a webhook" }).first().click()
    const dialog = page.getByRole("dialog", { name: "Add a webhook" })
    // Checked in the page first: an empty URL is refused at its field.
    await dialog.getByRole("button", { name: "Add webhook" }).click()
    await dialog.getByText("an absolute http(s) URL").waitFor()
    // Then by the service: a private address (not on the allowlist) is a 422 on `url`, shown at the field.
    await dialog.getByLabel("Endpoint URL").fill("http://10.1.2.3/hook")
    await dialog.getByRole("button", { name: "Add webhook" }).click()
    const urlField = dialog.getByLabel("Endpoint URL")
    await expect.poll(() => urlField.getAttribute("aria-invalid"), { timeout: 10_000 }).toBe("true")
    const urlError = await dialog.locator(".field-invalid .field-error").first().textContent()
    expect(urlError).toMatch(/private|not public|refused|address/i)

    await urlField.fill(receiverUrl)
    await dialog.getByLabel("Description").fill("pages-b receiver")
    await dialog.getByRole("button", { name: "Add webhook" }).click()
    const done = page.getByRole("dialog", { name: "Webhook added" })
    const secret = (await done.getByTestId("secret").textContent())!
    expect(secret).toMatch(/^whsec_/)
    await check("webhooks-secret")
    await done.getByRole("button", { name: "Done" }).click()
    await page.getByRole("dialog").waitFor({ state: "hidden" })

    // The list shows it; its details are open.
    await page.getByRole("button", { name: `Open webhook ${receiverUrl}` }).waitFor()
    await page.getByRole("button", { name: "Send test" }).click()
    await expect.poll(() => page.getByTestId("test-result").textContent(), { timeout: 15_000 }).toMatch(/Delivered/)
    const sample = received.find((r) => r.body.includes('"policy.evaluated"'))
    expect(sample?.headers["x-svc-webhook-signature"]).toMatch(/^v1=[0-9a-f]{64}$/)
    // The secret is never shown again: the page holds its last four characters only.
    expect(await page.locator("main").textContent()).not.toContain(secret)
    expect(await page.locator("main").textContent()).toContain(`…${secret.slice(-4)}`)

    await page.getByRole("button", { name: "Rotate secret" }).click()
    const rotated = (await page.getByTestId("secret").textContent())!
    expect(rotated).toMatch(/^whsec_/)
    expect(rotated).not.toBe(secret)

    await page.getByRole("button", { name: "Disable", exact: true }).click()
    await page.getByRole("button", { name: "Enable", exact: true }).waitFor()
    await page.getByRole("cell", { name: "disabled by a person" }).waitFor()
    await page.getByLabel("State").selectOption("disabled")
    await page.getByRole("button", { name: `Open webhook ${receiverUrl}` }).waitFor()
    await page.getByRole("button", { name: "Enable", exact: true }).click()
    await page.getByRole("button", { name: "Disable", exact: true }).waitFor()
    await page.getByLabel("State").selectOption("")
    await check("webhooks-detail")
  })

  it("compliance: generate a report, read its controls, download the PDF; certify an agent", async () => {
    const { page } = s
    const agent = await world.t.call("POST", "/api/v1/agents", { body: { name: "report-agent" } })
    expect(agent.status, JSON.stringify(agent.body)).toBe(201)
    await page.getByRole("link", { name: "Compliance" }).click()
    await page.getByRole("heading", { name: "No reports" }).waitFor()
    await check("compliance-empty")

    // A period that ends before it starts is refused at its field.
    const form = page.getByRole("form", { name: "Generate a report" })
    await form.getByLabel("From").fill("2026-11-20")
    await form.getByLabel("To (inclusive)").fill("2026-11-10")
    await form.getByRole("button", { name: "Generate report" }).click()
    await form.getByText("after the start").waitFor()
    await form.getByLabel("To (inclusive)").fill(new Date().toISOString().slice(0, 10))
    await form.getByLabel("Framework").selectOption("soc2")
    await form.getByRole("button", { name: "Generate report" }).click()
    const card = page.locator("section.card", { has: page.getByRole("heading", { name: "SOC 2 report" }) })
    await card.getByRole("button", { name: "Download PDF" }).and(page.locator(":enabled")).waitFor({ timeout: 30_000 })
    await card.getByRole("cell", { name: /CC6\.1/ }).waitFor()
    const [pdf] = await Promise.all([
      page.waitForEvent("download"),
      card.getByRole("button", { name: "Download PDF" }).click(),
    ])
    expect(pdf.suggestedFilename()).toMatch(/^rpt_.*\.pdf$/)
    const bytes = readFileSync((await pdf.path())!)
    expect(bytes.subarray(0, 5).toString()).toBe("%PDF-")
    await check("compliance-report")

    // A report on the agent alone, then its certification: refused with the unmet controls named (a new agent has
    // no record of oversight yet).
    await form.getByLabel("Scope").selectOption({ label: "report-agent" })
    await form.getByLabel("Framework").selectOption("eu-ai-act")
    await form.getByRole("button", { name: "Generate report" }).click()
    const agentReport = page.locator("section.card", { has: page.getByRole("heading", { name: "EU AI Act report" }) })
    await agentReport
      .getByRole("button", { name: "Download PDF" })
      .and(page.locator(":enabled"))
      .waitFor({ timeout: 30_000 })
    await page.getByLabel("Agent").selectOption({ label: "report-agent" })
    await expect
      .poll(() => page.getByRole("table", { name: "Compliance reports" }).getByRole("row").count(), { timeout: 10_000 })
      .toBe(2)

    await page.getByRole("tab", { name: "Certifications" }).click()
    await page.getByRole("heading", { name: "No certification in force" }).waitFor()
    const certify = page.getByRole("form", { name: "Certify an agent" })
    await expect
      .poll(() => certify.getByLabel("Ready report of this agent").inputValue(), { timeout: 10_000 })
      .toMatch(/^rpt_/)
    await certify.getByRole("button", { name: "Issue certification" }).click()
    const unmet = page.getByTestId("unmet-controls")
    await unmet.waitFor()
    expect(await unmet.textContent()).toContain("Certification refused: required controls not met")
    expect(await unmet.getByRole("listitem").count()).toBeGreaterThan(0)
    await check("compliance-certifications")
  })

  it("content: register a text (checked at its field), scan a copy, see the match in the item's history", async () => {
    const { page } = s
    const text =
      "The support agent answered twelve hundred customer questions this week, escalated thirty seven of them to " +
      "a person, refunded twelve orders under the policy limit and asked for approval twice before a larger credit."
    await page.getByRole("link", { name: "Content", exact: true }).click()
    await page.getByRole("heading", { name: "Nothing registered" }).waitFor()
    await check("content-empty")
    await page.getByRole("button", { name: "Register text" }).first().click()
    const dialog = page.getByRole("dialog", { name: "Register text" })
    await dialog.getByLabel("Title").fill("Weekly support report")
    await dialog.getByLabel("Text", { exact: true }).fill("too short to fingerprint")
    await dialog.getByRole("button", { name: "Register" }).click()
    await dialog.getByText(/at least 12 words/).waitFor()
    await dialog.getByLabel("Text", { exact: true }).fill(text)
    await dialog.getByRole("button", { name: "Register" }).click()
    await page.getByRole("heading", { name: "Weekly support report" }).waitFor()
    await page.getByRole("heading", { name: "No matches recorded" }).waitFor()

    const scan = page.getByRole("form", { name: "Scan a text" })
    await scan.getByLabel("Candidate text").fill(`Seen on a forum: ${text.slice(0, 160)} and more.`)
    await scan.getByLabel("Found at (optional)").fill("https://forum.example.com/t/1")
    await scan.getByRole("button", { name: "Scan" }).click()
    const result = page.getByTestId("scan-result")
    await result.getByText(/1 match/).waitFor()
    expect(await result.textContent()).toMatch(/copied passages/)
    // The match is recorded in the item's history.
    const card = page.locator("section.card", { has: page.getByRole("heading", { name: "Weekly support report" }) })
    await card.getByRole("cell", { name: "https://forum.example.com/t/1" }).waitFor()
    // A takedown notice answering that match: recorded `pending`, as this server has no SMTP.
    await card.getByText("Submit a takedown notice").click()
    const notice = card.getByRole("form", { name: "Submit a takedown notice" })
    await notice.getByLabel("Infringing URL").fill("https://forum.example.com/t/1")
    await notice.getByLabel("Recipient e-mail").fill("abuse")
    await notice.getByRole("button", { name: "Submit notice" }).click()
    await notice.getByText("an e-mail address").waitFor()
    await notice.getByLabel("Recipient e-mail").fill("abuse@forum.example.com")
    await notice.getByLabel("Match it answers").selectOption({ index: 1 })
    await notice.getByRole("button", { name: "Submit notice" }).click()
    const notices = card.getByRole("table", { name: "Takedown notices" })
    await notices.getByRole("cell", { name: "abuse@forum.example.com" }).waitFor()
    await notices.getByRole("cell", { name: "pending" }).waitFor()
    await page.getByLabel("Kind").selectOption("image")
    await page.getByRole("heading", { name: "Nothing registered" }).waitFor()
    await page.getByLabel("Kind").selectOption("text")
    await page.getByRole("button", { name: "Weekly support report" }).waitFor()
    await check("content-detail")
  })

  it("members: invite a person (the link shown), the last owner kept; an OAuth app's secret shown once", async () => {
    const { page } = s
    await page.getByRole("link", { name: "Members & apps" }).click()
    await page.getByRole("cell", { name: /Ada Lovelace/ }).waitFor()
    await check("members")
    // The last owner cannot be demoted: the service's 409 is shown by the row.
    await page.getByLabel("Role of ada@example.com").selectOption("admin")
    await page.getByRole("button", { name: "Save role" }).click()
    await page.getByRole("alert").filter({ hasText: /owner/i }).waitFor()

    await page.getByRole("tab", { name: "Invitations" }).click()
    const form = page.getByRole("form", { name: "Invite a person" })
    await form.getByLabel("E-mail").fill("grace")
    await form.getByRole("button", { name: "Send invitation" }).click()
    await form.getByText("an e-mail address").waitFor()
    await form.getByLabel("E-mail").fill("grace@example.com")
    await form.getByLabel("Role").selectOption("viewer")
    await form.getByRole("button", { name: "Send invitation" }).click()
    const link = (await page.getByTestId("secret").textContent())!
    expect(link).toContain(`${world.origin}/#invitation=`)
    await page.getByRole("cell", { name: "grace@example.com", exact: true }).waitFor()
    await page.getByRole("cell", { name: "pending" }).waitFor()
    await check("members-invitations")

    await page.getByRole("tab", { name: "OAuth apps" }).click()
    await page.getByRole("heading", { name: "No apps registered" }).waitFor()
    await page.getByRole("button", { name: "Register an app" }).click()
    const dialog = page.getByRole("dialog", { name: "Register an app" })
    await dialog.getByLabel("Name").fill("Reporting app")
    // Plain http away from loopback is refused by the service, at the field.
    await dialog.getByLabel("Redirect URIs").fill("http://app.example.com/callback")
    await dialog.getByRole("button", { name: "Register" }).click()
    const uris = dialog.getByLabel("Redirect URIs")
    await expect.poll(() => uris.getAttribute("aria-invalid"), { timeout: 10_000 }).toBe("true")
    await uris.fill("https://app.example.com/callback")
    await dialog.getByRole("button", { name: "Register" }).click()
    const done = page.getByRole("dialog", { name: "App registered" })
    const secret = (await done.getByTestId("secret").textContent())!
    expect(secret.length).toBeGreaterThan(20)
    await check("members-oauth-secret")
    await done.getByRole("button", { name: "Done" }).click()
    await page.getByRole("cell", { name: /Reporting app/ }).waitFor()
    expect(await page.locator("body").textContent()).not.toContain(secret)
    await check("members-oauth")
  })

  it("connectors: the install command carries this service's URL; installed connectors listed and filtered", async () => {
    const { page } = s
    const created = await world.t.call("POST", "/api/v1/webhooks", {
      body: {
        url: `${receiverUrl}/slack`,
        events: ["*"],
        description: "agentgov-connector-slack: posts agentgov events to a Slack channel",
      },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    await page.getByRole("link", { name: "Connectors" }).click()
    await page.getByRole("heading", { name: "Set up Slack" }).waitFor()
    const code = page.locator(".code-block code").first()
    expect(await code.textContent()).toContain(`export AGENTGOV_URL=${world.origin}`)
    // This page came over http: the command says what the connector needs for it, not a start that exits 2.
    expect(world.origin).toMatch(/^http:/)
    expect(await code.textContent()).toContain("AGENTGOV_CONNECTOR_ALLOW_HTTP=true")
    expect(await code.textContent()).toContain(`use http://127.0.0.1:${new URL(world.origin).port}`)
    expect(await code.textContent()).toContain("npx agentgov-connector-slack install")
    await page.getByRole("tab", { name: "PagerDuty" }).click()
    await page.getByRole("heading", { name: "Set up PagerDuty" }).waitFor()
    expect(await code.textContent()).toContain("npx agentgov-connector-pagerduty install")
    expect(await code.textContent()).toContain("PAGERDUTY_ROUTING_KEY=")
    const installed = page.getByRole("table", { name: "Installed connectors" })
    await installed.getByRole("cell", { name: "slack", exact: true }).waitFor()
    // The pages-b receiver webhook of the webhooks journey is not a connector's.
    expect(await installed.getByRole("row").count()).toBe(2)
    await check("connectors")
    await page.getByLabel("Connector", { exact: true }).selectOption("discord")
    await page.getByRole("heading", { name: "No connector on this page" }).waitFor()
    // The webhooks page filters to connectors' webhooks too.
    await page.goto(`${world.origin}/webhooks?source=connector`)
    await page.getByRole("button", { name: `Open webhook ${receiverUrl}/slack` }).waitFor()
    expect(await page.getByRole("button", { name: `Open webhook ${receiverUrl}`, exact: true }).count()).toBe(0)
  })

  it("settings: rename the workspace and change the guard's default; deletion is the operator's, not offered", async () => {
    const { page } = s
    await page.getByRole("link", { name: "Settings" }).click()
    const form = page.getByRole("form", { name: "Workspace settings" })
    await form.getByLabel("Name").waitFor()
    await check("settings")
    await form.getByLabel("Name").fill("")
    await form.getByRole("button", { name: "Save changes" }).click()
    await form.getByText("a name", { exact: true }).waitFor()
    await form.getByLabel("Name").fill("Acme production")
    await form.getByLabel("When no policy matches").selectOption("deny")
    await form.getByRole("button", { name: "Save changes" }).click()
    await form.getByText("Saved").waitFor()
    const ws = await world.t.call("GET", `/api/v1/workspaces/${world.t.workspaceId}`)
    expect(ws.body.data).toMatchObject({ name: "Acme production", guardDefault: "deny" })
    // The workspace switcher follows the new name.
    await page
      .getByRole("combobox", { name: "Workspace" })
      .getByText(/Acme production/)
      .waitFor({ state: "attached" })

    // Deleting needs the service operator's workspaces:admin, which no person's role holds (not even an owner's):
    // the form is not offered, and says who can.
    const del = page.getByRole("form", { name: "Delete this workspace" })
    const button = del.getByRole("button", { name: "Delete workspace" })
    expect(await button.isDisabled()).toBe(true)
    expect(await button.getAttribute("title")).toBe("Needs the service operator (workspaces:admin)")
    expect(await del.getByRole("textbox").isDisabled()).toBe(true)
    expect((await world.t.call("GET", `/api/v1/workspaces/${world.t.workspaceId}`)).status).toBe(200)
    await check("settings-delete")
  })

  it("at a phone's width in the dark theme, the pages stay readable and accessible", async () => {
    const phone = await openSession(world, { colorScheme: "dark", viewport: { width: 390, height: 844 } })
    try {
      await signIn(world, phone.page, "ada", "/webhooks")
      await phone.page.getByRole("button", { name: `Open webhook ${receiverUrl}`, exact: true }).waitFor()
      for (const [path, heading] of [
        ["/webhooks", "Webhooks"],
        ["/compliance", "Compliance"],
        ["/content", "Content"],
        ["/members?tab=apps", "Members & apps"],
        ["/connectors", "Connectors"],
        ["/settings", "Settings"],
      ] as const) {
        await phone.page.goto(`${world.origin}${path}`)
        await phone.page.getByRole("heading", { name: heading, exact: true }).waitFor()
        await phone.page.locator(".loading").first().waitFor({ state: "detached" })
        await expectAccessible(phone.page, `${path} (phone, dark)`)
        // Nothing wider than the screen but the tables, which scroll in their own wrap.
        await shot(phone.page, `b-phone-dark-${heading.replace(/\W+/g, "-").toLowerCase()}`)
        const overflow = await phone.page.evaluate(() => {
          const d = (globalThis as any).document
          const wide = [...d.querySelectorAll("main *")]
            .filter((e: any) => e.getBoundingClientRect().right > 391 && !e.closest(".table-wrap, pre"))
            .map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`)
          return { width: d.documentElement.scrollWidth, wide: wide.slice(0, 5) }
        })
        expect(overflow.width, `${path}: ${overflow.wide.join(", ")}`).toBeLessThanOrEqual(390)
      }
      expect(phone.pageErrors).toEqual([])
    } finally {
      await phone.context.close()
    }
  })
})
