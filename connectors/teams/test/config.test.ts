import { type ConfigError, loadConfig } from "@agentgov/connector-sdk/runtime"
import { describe, expect, it } from "vitest"
import { teams } from "../src/connector.ts"

const base = { AGENTGOV_WEBHOOK_SECRET: "whsec_0123456789abcdef" }
const problemsOf = (env: Record<string, string>) => {
  try {
    loadConfig(teams, { ...base, ...env })
    return []
  } catch (e) {
    return (e as ConfigError).problems
  }
}

describe("teams: TEAMS_WEBHOOK_URL", () => {
  it("is refused on http to a host that is not a loopback one, without echoing it (it holds the signature)", () => {
    const url = "http://prod.westeurope.logic.azure.com/workflows/x/triggers/manual/paths/invoke?sig=s3cret"
    const problems = problemsOf({ TEAMS_WEBHOOK_URL: url })
    expect(problems).toEqual([
      "TEAMS_WEBHOOK_URL must be an https URL (http only to localhost, 127.0.0.0/8 or [::1]): the Workflows webhook URL ('Post to a channel when a webhook request is received')",
    ])
    expect(problems.join("\n")).not.toContain("s3cret")
  })

  it("is taken on https, and on http to a loopback host (the tests' fake)", () => {
    for (const url of [
      "https://prod.westeurope.logic.azure.com/workflows/x?sig=s3cret",
      "http://127.0.0.1:4010/hook",
      "http://localhost:4010/hook",
    ])
      expect(problemsOf({ TEAMS_WEBHOOK_URL: url }), url).toEqual([])
  })
})
