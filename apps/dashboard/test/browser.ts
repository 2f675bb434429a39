import { existsSync, mkdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { expect } from "vitest"
import type { ServerConfig } from "../../server/src/config.ts"
import { DASHBOARD_DIST } from "../../server/src/dashboard.ts"
import { startTestServer, type TestServer } from "../../server/test/helpers.ts"
import { freePort, startIdp, type TestIdp } from "../../server/test/oidc-support.ts"
// @ts-expect-error: plain JavaScript, run by `npm start` without the TypeScript stripper
import { build, stale } from "../build.mjs"

/**
 * The browser tests' world: the built dashboard served by a real server (its own fresh database) on loopback,
 * a real OpenID Connect provider (oidc-provider, as the server's sign-in tests start it), and Debian's
 * Chromium driven by playwright-core. Skipped where /usr/bin/chromium is missing (`.ci/run` installs it).
 */
export const CHROMIUM = "/usr/bin/chromium"
export const hasChromium = existsSync(CHROMIUM)
export const SHOTS = join(import.meta.dirname, "screenshots")

export interface World {
  readonly t: TestServer
  readonly origin: string
  readonly idp: TestIdp
  readonly browser: Browser
  readonly close: () => Promise<void>
}

/** `overrides`: more of the server's configuration (a webhook allowlist, say). */
export const startWorld = async (overrides: Partial<ServerConfig> = {}): Promise<World> => {
  if (stale() && !build("pipe"))
    throw new Error("the dashboard does not build: run `npm run build -w @agentgov/dashboard`")
  mkdirSync(SHOTS, { recursive: true })
  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const idp = await startIdp({
    redirectUris: [`${origin}/auth/callback/idp`],
    accounts: {
      ada: { email: "ada@example.com", email_verified: true, name: "Ada Lovelace" },
      grace: { email: "grace@example.com", email_verified: true, name: "Grace Hopper" },
      alan: { email: "alan@example.com", email_verified: true, name: "Alan Turing" },
    },
  })
  const t = await startTestServer(
    {
      port,
      publicUrl: origin,
      oidcProviders: [
        {
          id: "idp",
          label: "Example SSO",
          issuer: idp.issuer,
          clientId: "agentgov",
          clientSecret: "agentgov-secret",
          enterprise: false,
        },
      ],
      ...overrides,
    },
    { dashboardDir: DASHBOARD_DIST },
  )
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  })
  return {
    t,
    origin,
    idp,
    browser,
    close: async () => {
      await browser.close().catch(() => {})
      await t.close()
      await idp.close()
    },
  }
}

export interface Session {
  readonly context: BrowserContext
  readonly page: Page
  /** Messages the page logged about the Content-Security-Policy (there must be none). */
  readonly cspViolations: Array<string>
  readonly pageErrors: Array<string>
}

export const openSession = async (
  world: World,
  options: { colorScheme?: "light" | "dark"; viewport?: { width: number; height: number } } = {},
): Promise<Session> => {
  const context = await world.browser.newContext({
    viewport: options.viewport ?? { width: 1360, height: 900 },
    colorScheme: options.colorScheme ?? "light",
    acceptDownloads: true,
  })
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: world.origin })
  const page = await context.newPage()
  const cspViolations: Array<string> = []
  const pageErrors: Array<string> = []
  page.on("console", (m) => {
    if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(m.text())
  })
  page.on("pageerror", (e) => pageErrors.push(String(e)))
  return { context, page, cspViolations, pageErrors }
}

/** Signs in through the dashboard's sign-in page and the provider, as `account`; lands on `path`. */
export const signIn = async (world: World, page: Page, account: string, path = "/") => {
  world.idp.loginAs(account)
  await page.goto(`${world.origin}${path}`)
  await page.getByRole("link", { name: /Continue with Example SSO/ }).click()
  await page.waitForURL((u) => u.origin === world.origin && !u.pathname.startsWith("/auth/"))
}

/** Invites `email` to the bootstrap workspace (as its key) and returns the invitation's link path. */
export const invite = async (world: World, email: string, role = "owner") => {
  const res = await world.t.call("POST", `/api/v1/workspaces/${world.t.workspaceId}/invitations`, {
    body: { email, role },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  const link = new URL(res.body.data.link as string)
  return link.pathname + link.search + link.hash
}

/**
 * Invites `account` (`<account>@example.com`) with `role`, signs them in through the provider and accepts the
 * invitation in `page`: they land on the Overview as a member of the bootstrap workspace.
 */
export const joinByInvitation = async (world: World, page: Page, account: string, role = "owner") => {
  const link = await invite(world, `${account}@example.com`, role)
  world.idp.loginAs(account)
  await page.goto(`${world.origin}${link}`)
  await page.getByRole("link", { name: /Continue with Example SSO/ }).click()
  await page.getByRole("button", { name: "Accept invitation" }).click()
  await page.getByRole("heading", { name: "Overview" }).waitFor()
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

/** axe-core in the page (CDP evaluation, so the page's CSP stays as served): no serious or critical violation. */
export const expectAccessible = async (page: Page, what: string) => {
  await page.evaluate(axeSource)
  const violations = (await page.evaluate(async () => {
    // Runs in the page (this suite's types have no DOM).
    const g = globalThis as any
    const result = await g.axe.run(g.document, { resultTypes: ["violations"] })
    return result.violations.map((v: any) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 3).map((n: any) => n.target.join(" ")),
    }))
  })) as Array<{ id: string; impact: string; help: string; nodes: Array<string> }>
  const grave = violations.filter((v) => v.impact === "serious" || v.impact === "critical")
  expect(grave, `${what}: ${JSON.stringify(grave, null, 2)}`).toEqual([])
}

export const shot = async (page: Page, name: string) =>
  page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
