import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { github } from "@agentgov/connector-github"
import { pagerduty } from "@agentgov/connector-pagerduty"
import {
  type Agentgov,
  type InProcess,
  newSecret,
  runInProcess,
  sleep,
  startAgentgov,
  waitFor,
} from "@agentgov/connector-testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type GitHubFake, REPOSITORY, startGitHubFake, TOKEN } from "../../github/test/githubFake.ts"
import { type PagerDutyFake, ROUTING_KEY, startPagerDutyFake } from "../../pagerduty/test/pagerdutyFake.ts"
import { email } from "../src/connector.ts"
import { type SmtpServer, startSmtpServer } from "./smtpServer.ts"

/**
 * End to end: one enforcement's life (created → appealed → resolved) on a real agentgov server,
 * delivered by its webhooks to the PagerDuty, GitHub and e-mail connectors, each forwarding to its
 * vendor: every step reaches every vendor, in order, exactly once.
 */
describe("one enforcement's lifecycle reaches PagerDuty, GitHub and e-mail in order, each exactly once", () => {
  let agentgov: Agentgov
  let pd: PagerDutyFake
  let gh: GitHubFake
  let smtp: SmtpServer
  const connectors: Array<InProcess> = []
  const dirs: Array<string> = []
  beforeAll(async () => {
    agentgov = await startAgentgov()
    pd = await startPagerDutyFake()
    gh = await startGitHubFake()
    smtp = await startSmtpServer()
    const common = { AGENTGOV_DASHBOARD_URL: "https://gov.example.com" }
    const apps = [
      [pagerduty, { PAGERDUTY_ROUTING_KEY: ROUTING_KEY, PAGERDUTY_EVENTS_URL: pd.url }],
      [github, { GITHUB_TOKEN: TOKEN, GITHUB_REPOSITORY: REPOSITORY, GITHUB_API_URL: gh.url }],
      [
        email,
        {
          SMTP_URL: smtp.url,
          EMAIL_FROM: "agentgov@example.com",
          EMAIL_TO: "ops@example.com",
          EMAIL_FREQUENCY: "immediate",
        },
      ],
    ] as const
    for (const [definition, env] of apps) {
      const dir = mkdtempSync(join(tmpdir(), `agentgov-lifecycle-${definition.name}-`))
      dirs.push(dir)
      const secret = newSecret()
      const c = await runInProcess(definition, {
        ...common,
        ...env,
        AGENTGOV_WEBHOOK_SECRET: secret,
        AGENTGOV_CONNECTOR_DATA_DIR: dir,
      })
      connectors.push(c)
      await agentgov.subscribe(`${c.url}/webhooks`, ["enforcement.*"], secret)
    }
  })
  afterAll(async () => {
    for (const c of connectors) await c.running.close()
    await Promise.all([pd?.close(), gh?.close(), smtp?.close()])
    await agentgov?.close()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  it("created → appealed → resolved", async () => {
    const call = (method: string, path: string, body: unknown) => agentgov.t.call(method, `/api/v1${path}`, { body })
    const agent = await call("POST", "/agents", { name: "lifecycle-bot" })
    const created = await call("POST", "/enforcement", {
      agentId: agent.body.data.id,
      type: "suspension",
      reason: "leaked a credential",
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const id: string = created.body.data.id
    const key = `agentgov:enforcement:${id}`
    const mailTypes = () =>
      smtp.mailbox.flatMap((m) =>
        [...(m.parsed.text ?? "").matchAll(/^\s+\d+ {2}(enforcement\.\w+) /gm)].map((x) => x[1]),
      )
    const reached = async (step: string, n: number) => {
      await waitFor(
        () =>
          pd.alerts.get(key)?.events.length === n &&
          gh.issues.length === 1 &&
          gh.issues[0]!.comments.length === n - 1 &&
          mailTypes().length === n,
        `${step} at every vendor`,
      )
    }

    await reached("the creation", 1)
    expect((await call("POST", `/enforcement/${id}/appeal`, { reason: "it was a test key" })).status).toBe(200)
    await reached("the appeal", 2)
    expect((await call("PATCH", `/enforcement/${id}`, { resolution: "overturned", note: "test key" })).status).toBe(200)
    await reached("the resolution", 3)
    await waitFor(() => gh.issues[0]!.state === "closed", "the issue closed")

    // nothing more arrives afterwards: each step reached each vendor once
    for (const c of connectors) await c.running.idle()
    await sleep(300)
    expect(pd.events.map((e) => [e.event_action, e.payload?.class])).toEqual([
      ["trigger", "enforcement.created"],
      ["trigger", "enforcement.appealed"],
      ["resolve", undefined],
    ])
    expect(pd.alerts.get(key)!.status).toBe("resolved")
    expect(gh.issues).toHaveLength(1)
    expect(gh.issues[0]!.body).toContain("`enforcement.created`")
    expect(gh.issues[0]!.comments.map((c) => /`(enforcement\.\w+)`/.exec(c)?.[1])).toEqual([
      "enforcement.appealed",
      "enforcement.resolved",
    ])
    expect(gh.issues[0]!.state_reason).toBe("not_planned")
    expect(mailTypes()).toEqual(["enforcement.created", "enforcement.appealed", "enforcement.resolved"])
    expect(smtp.mailbox).toHaveLength(3)
    for (const c of connectors) expect(c.running.health()).toMatchObject({ deadLetters: 0, queued: 0 })
  })
})
