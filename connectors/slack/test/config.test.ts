import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type ConfigError, loadConfig } from "@agentgov/connector-sdk/runtime"
import { runCommand } from "@agentgov/connector-testing"
import { afterAll, describe, expect, it } from "vitest"
import { slack } from "../src/connector.ts"

const base = { AGENTGOV_WEBHOOK_SECRET: "whsec_0123456789abcdef", SLACK_BOT_TOKEN: "xoxb-1", SLACK_CHANNEL: "C1" }
const problemsOf = (env: Record<string, string>) => {
  try {
    loadConfig(slack, { ...base, ...env })
    return []
  } catch (e) {
    return (e as ConfigError).problems
  }
}

describe("slack: SLACK_API_URL", () => {
  it("is refused on http to a host that is not a loopback one (the bot token would cross in the clear)", () => {
    expect(problemsOf({ SLACK_API_URL: "http://slack-proxy.example.com/api/" })).toEqual([
      "SLACK_API_URL must be an https URL (http only to localhost, 127.0.0.0/8 or [::1]) (got \"http://slack-proxy.example.com/api/\"): Slack's Web API base URL (a proxy's, or a test fake's)",
    ])
  })

  it("is taken on https, and on http to a loopback host (the tests' fake, a local proxy)", () => {
    for (const url of ["https://slack-proxy.example.com/api/", "http://127.0.0.1:4010/api/", "http://[::1]:4010/api/"])
      expect(problemsOf({ SLACK_API_URL: url }), url).toEqual([])
    expect(loadConfig(slack, base).settings.apiUrl).toBe("https://slack.com/api/")
  })
})

describe("slack: AGENTGOV_URL and CONNECTOR_PUBLIC_URL", () => {
  const bin = fileURLToPath(new URL("../bin/agentgov-connector-slack.js", import.meta.url))
  const made: Array<string> = []
  const dir = () => {
    const path = mkdtempSync(join(tmpdir(), "agentgov-slack-config-"))
    made.push(path)
    return path
  }
  afterAll(() => {
    for (const path of made) rmSync(path, { recursive: true, force: true })
  })

  it("stop the app at start, exit 2, on http to a host that is not a loopback one", async () => {
    // PORT 0 on loopback: were the check missing, the app would start listening rather than exit
    const env = { ...base, AGENTGOV_CONNECTOR_DATA_DIR: dir(), AGENTGOV_API_KEY: "svc_x", PORT: "0", HOST: "127.0.0.1" }
    const started = await runCommand(bin, [], { ...env, AGENTGOV_URL: "http://agentgov.internal:3000" })
    expect(started.code).toBe(2)
    expect(started.stderr).toContain(
      'AGENTGOV_URL must be an https URL (http only to localhost, 127.0.0.0/8 or [::1]) (got "http://agentgov.internal:3000")',
    )
    const installed = await runCommand(bin, ["install"], {
      ...env,
      AGENTGOV_URL: "https://agentgov.example.com",
      CONNECTOR_PUBLIC_URL: "http://slack-connector.example.com",
    })
    expect(installed.code).toBe(2)
    expect(installed.stderr).toContain(
      'CONNECTOR_PUBLIC_URL must be an https URL (http only to localhost, 127.0.0.0/8 or [::1]) (got "http://slack-connector.example.com")',
    )
    expect(installed.stderr).not.toContain("svc_x")
  })

  it("are taken on https, and on http to a loopback host", async () => {
    for (const url of ["https://agentgov.example.com", "http://127.0.0.1:3000", "http://localhost:3000"])
      expect(problemsOf({ AGENTGOV_URL: url, CONNECTOR_PUBLIC_URL: url }), url).toEqual([])
    const checked = await runCommand(bin, ["check"], {
      ...base,
      AGENTGOV_CONNECTOR_DATA_DIR: dir(),
      AGENTGOV_URL: "http://127.0.0.1:3000",
      CONNECTOR_PUBLIC_URL: "http://localhost:8080",
    })
    expect(checked.code, checked.stderr).toBe(0)
  })
})
