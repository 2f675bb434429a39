import { fileURLToPath } from "node:url"
import { github } from "@agentgov/connector-github"
import { pagerduty } from "@agentgov/connector-pagerduty"
import { type Agentgov, runCommand, startAgentgov, startHttpFake } from "@agentgov/connector-testing"
import { tempDir } from "@agentgov/testing/tempDir"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { email } from "../src/connector.ts"

/**
 * The command line of the three apps of this wave, from their real `bin`: configuration checks
 * that list every problem (and echo no secret), and `install`/`uninstall` against a real server
 * with each app's default event filter.
 */

const binOf = (name: string) =>
  fileURLToPath(new URL(`../../${name}/bin/agentgov-connector-${name}.js`, import.meta.url))

const apps = [
  {
    definition: pagerduty,
    good: { PAGERDUTY_ROUTING_KEY: "R0123456789abcdef0123456789ABCDE" },
    bad: { PAGERDUTY_ROUTING_KEY: "s3cret-but-short", PAGERDUTY_EVENTS_URL: "not a url" },
    problems: ["PAGERDUTY_ROUTING_KEY must be a 32-character Events API v2 integration key", "PAGERDUTY_EVENTS_URL"],
    secret: "s3cret-but-short",
  },
  {
    definition: github,
    good: { GITHUB_TOKEN: "ghp_token", GITHUB_REPOSITORY: "acme/agents" },
    bad: { GITHUB_TOKEN: "ghp_s3cretvalue", GITHUB_REPOSITORY: "acme", GITHUB_API_URL: "ftp://x" },
    problems: ["GITHUB_REPOSITORY must be owner/name", "GITHUB_API_URL"],
    secret: "ghp_s3cretvalue",
  },
  {
    definition: email,
    good: { SMTP_URL: "smtp://127.0.0.1:2525", EMAIL_FROM: "a@example.com", EMAIL_TO: "b@example.com" },
    bad: {
      SMTP_URL: "http://user:s3cretpass@mail.example.com",
      EMAIL_FROM: "nobody",
      EMAIL_TO: "ops@example.com, not-an-address",
      EMAIL_FREQUENCY: "weekly",
      EMAIL_DIGEST_AT: "25:00",
      EMAIL_ROUTES: "enforcement.*=",
    },
    problems: [
      "SMTP_URL must start with smtp:// or smtps://",
      "EMAIL_FROM must be an e-mail address",
      "EMAIL_TO not e-mail addresses: not-an-address",
      "EMAIL_FREQUENCY must be one of immediate, hourly, daily",
      'EMAIL_DIGEST_AT "25:00" is not a time of day',
      'EMAIL_ROUTES "enforcement.*=" is not pattern=address[,address]',
    ],
    secret: "s3cretpass",
  },
] as const

describe("the command line of the pagerduty, github and email apps", () => {
  let agentgov: Agentgov
  const appDir = () => tempDir("agentgov-commands-")
  beforeAll(async () => {
    agentgov = await startAgentgov()
  })
  afterAll(async () => {
    await agentgov?.close()
  })

  for (const app of apps) {
    const name = app.definition.name
    const bin = binOf(name)

    it(`${name}: refuses bad settings with every problem listed, exit 2, no secret echoed`, async () => {
      const missing = await runCommand(bin, ["check"], { AGENTGOV_CONNECTOR_DATA_DIR: appDir() })
      expect(missing.code).toBe(2)
      for (const spec of Object.values(app.definition.settings as Record<string, { env: string; required?: boolean }>))
        if (spec.required) expect(missing.stderr).toContain(`${spec.env} is required`)

      const bad = await runCommand(bin, ["check"], {
        ...app.bad,
        AGENTGOV_WEBHOOK_SECRET: "whsec_0123456789abcdef",
        AGENTGOV_CONNECTOR_DATA_DIR: appDir(),
      })
      expect(bad.code, bad.stderr).toBe(2)
      for (const p of app.problems) expect(bad.stderr).toContain(p)
      expect(bad.stderr).not.toContain(app.secret)

      const good = await runCommand(bin, ["check"], {
        ...app.good,
        AGENTGOV_WEBHOOK_SECRET: "whsec_0123456789abcdef",
        AGENTGOV_CONNECTOR_DATA_DIR: appDir(),
      })
      expect(good.code, good.stderr).toBe(0)
      expect(JSON.parse(good.stdout).events).toEqual([...app.definition.defaultEvents])
    })

    it(`${name}: installs its default events, again unchanged, and uninstalls`, async () => {
      // something answers at the public URL, so that the server's first deliveries do not fail
      const standIn = await startHttpFake(() => ({ status: 200 }))
      const env = {
        ...app.good,
        AGENTGOV_URL: agentgov.url,
        AGENTGOV_API_KEY: agentgov.key,
        CONNECTOR_PUBLIC_URL: standIn.url,
        AGENTGOV_CONNECTOR_DATA_DIR: appDir(),
      }
      try {
        const first = await runCommand(bin, ["install"], env)
        expect(first.code, first.stderr).toBe(0)
        const installed = JSON.parse(first.stdout)
        expect(installed).toMatchObject({ ok: true, action: "created" })
        const again = await runCommand(bin, ["install"], env)
        expect(JSON.parse(again.stdout)).toMatchObject({
          ok: true,
          action: "unchanged",
          webhookId: installed.webhookId,
        })
        const hook = await agentgov.t.call("GET", `/api/v1/webhooks/${installed.webhookId}`)
        expect(hook.body.data.events).toEqual([...app.definition.defaultEvents])
        const removed = await runCommand(bin, ["uninstall"], env)
        expect(JSON.parse(removed.stdout)).toMatchObject({ ok: true, action: "deleted" })
      } finally {
        await standIn.close()
      }
    })
  }
})
