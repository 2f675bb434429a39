import { type ConfigError, loadConfig } from "@agentgov/connector-sdk/runtime"
import { describe, expect, it } from "vitest"
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
