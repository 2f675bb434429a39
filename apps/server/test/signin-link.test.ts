import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runCliToExit, stopChildren } from "./childServer.ts"
import { startTestServer, TEST_MASTER_KEY, type TestServer } from "./helpers.ts"
import { Browser } from "./oidc-support.ts"

// `npm run cli -- signin-link`: the operator's way back into the dashboard once the first-run link is lost or
// has expired. The CLI runs as a process against the running server's own store (DATABASE_URL).

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
}, 60_000)
afterAll(async () => {
  await stopChildren()
  await t?.close()
})

const cli = async (...args: Array<string>) => {
  // The server's master key: the CLI refuses a store whose sealed keys its own key does not open.
  const env = {
    DATABASE_URL: t.store.url,
    AGENTGOV_PUBLIC_URL: t.url,
    AGENTGOV_MASTER_KEY: TEST_MASTER_KEY.toString("hex"),
  }
  return runCliToExit(env, args, 100_000)
}

const linkOf = async (...args: Array<string>) => {
  const result = await cli("signin-link", ...args, "--json")
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout) as { link: string; userId: string; email: string; expiresAt: string }
}

/** Opens the link in a fresh browser: the status, and whom the session it opened (if any) belongs to. */
const open = async (link: string) => {
  const browser = new Browser()
  const res = await browser.useSignInLink(t.url, link)
  if (res.status !== 302) return { status: res.status, code: ((await res.json()) as any).error.code as string }
  const me = (await (await browser.fetch(`${t.url}/api/v1/users/me`)).json()) as any
  return { status: res.status, memberships: me.data.memberships as Array<{ workspaceId: string; role: string }> }
}

describe("npm run cli -- signin-link", { timeout: 120_000 }, () => {
  it("prints a fresh link for the owner that signs in once, replaces the lost first-run link, and is audited", async () => {
    const made = await linkOf()
    expect(made.link).toMatch(new RegExp(`^${t.url}/auth/first-run\\?token=svc_signin_[0-9A-Za-z]{38}$`))
    expect(Date.parse(made.expiresAt) - Date.now()).toBeGreaterThan(3_500_000)
    expect(Date.parse(made.expiresAt) - Date.now()).toBeLessThanOrEqual(3_600_000)
    // The first-run link printed at the first start (never used, "lost") stops working.
    expect(await open(t.server.bootstrapped!.signInLink!)).toEqual({ status: 400, code: "SIGNIN_LINK_USED" })
    const first = await open(made.link)
    expect(first.status).toBe(302)
    expect(first.memberships).toEqual([expect.objectContaining({ workspaceId: t.workspaceId, role: "owner" })])
    expect(await open(made.link)).toEqual({ status: 400, code: "SIGNIN_LINK_USED" })

    const events = await t.call("GET", "/api/v1/events?type=member.signin_link_created")
    expect(events.status, JSON.stringify(events.body)).toBe(200)
    const recorded = events.body.data.filter((e: any) => e.type === "member.signin_link_created")
    expect(recorded).toHaveLength(1)
    expect(recorded[0].data).toEqual({ userId: made.userId, email: made.email, expiresAt: made.expiresAt })
    expect(recorded[0].actor).toMatchObject({ type: "system" })
    // The token itself is on no record.
    const token = new URL(made.link).searchParams.get("token")!
    expect(JSON.stringify(events.body)).not.toContain(token)
  })

  it("a link past its time no longer signs in", async () => {
    const made = await linkOf("--workspace", t.workspaceId)
    await t.query((sql) => sql`UPDATE signin_links SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`)
    expect(await open(made.link)).toEqual({ status: 400, code: "SIGNIN_LINK_USED" })
  })

  it("refuses an unknown workspace, or an e-mail that is not an owner's, in one line, and makes no link", async () => {
    const before = await t.query<{ n: number }>((sql) => sql`SELECT count(*)::int AS n FROM signin_links`)
    const unknown = await cli("signin-link", "--workspace", "ws_nope")
    expect(unknown.code).toBe(2)
    expect(unknown.stderr.trim().split("\n")).toHaveLength(1)
    expect(unknown.stderr).toMatch(/ws_nope/)
    const notOwner = await cli("signin-link", "--email", "someone@example.com")
    expect(notOwner.code).toBe(2)
    expect(notOwner.stderr).toMatch(/not an owner/)
    const wrongOption = await cli("signin-link", "--name", "x")
    expect(wrongOption.code).toBe(2)
    expect(wrongOption.stderr).toMatch(/--name does not apply to signin-link/)
    const after = await t.query<{ n: number }>((sql) => sql`SELECT count(*)::int AS n FROM signin_links`)
    expect(after).toEqual(before)
  })
})
