import { describe, expect, it } from "vitest"
import { ConfigError, loadConfig } from "../src/config.ts"

/**
 * Configuration values at their edges (the operations review's third pass): values that the old checks let through
 * and that then failed later, with a stack trace or in a way nobody sees at start.
 */
const problemsOf = (env: Record<string, string>): ReadonlyArray<string> => {
  try {
    loadConfig(env)
    return []
  } catch (e) {
    if (e instanceof ConfigError) return e.problems
    throw e
  }
}

describe("configuration at its edges", () => {
  it("refuses a public URL with a query, a fragment or credentials: every link and the tokens' issuer are built on it", () => {
    for (const url of ["https://gov.example/?a=1", "https://gov.example/#top", "https://user:pw@gov.example"])
      expect(problemsOf({ AGENTGOV_PUBLIC_URL: url }).join("\n"), url).toMatch(/^AGENTGOV_PUBLIC_URL: /)
    // …and leaves no password in what it says.
    expect(problemsOf({ AGENTGOV_PUBLIC_URL: "https://user:pw@gov.example" }).join("\n")).not.toContain("pw")
    expect(loadConfig({ AGENTGOV_PUBLIC_URL: "https://gov.example/" }).publicUrl).toBe("https://gov.example")
    expect(loadConfig({ AGENTGOV_PUBLIC_URL: "https://gov.example/agentgov" }).publicUrl).toBe(
      "https://gov.example/agentgov",
    )
  })

  it("refuses a HOST or AGENTGOV_METRICS_HOST that is neither an address nor a host name, in one line rather than a stack trace at listen", () => {
    expect(problemsOf({ HOST: "not a host" })).toEqual(['HOST="not a host": expected an IP address or a host name'])
    expect(problemsOf({ AGENTGOV_METRICS_PORT: "9464", AGENTGOV_METRICS_HOST: "http://0.0.0.0" })).toEqual([
      'AGENTGOV_METRICS_HOST="http://0.0.0.0": expected an IP address or a host name',
    ])
    for (const host of ["0.0.0.0", "::", "fe80::1", "127.0.0.1", "localhost", "agentgov-api.internal"])
      expect(problemsOf({ HOST: host }), host).toEqual([])
  })

  it("refuses a metrics token a client cannot send (outside printable ASCII), and a metrics port that is the API's", () => {
    expect(problemsOf({ AGENTGOV_METRICS_TOKEN: "é".repeat(30) }).join("\n")).toMatch(/^AGENTGOV_METRICS_TOKEN: /)
    expect(problemsOf({ AGENTGOV_METRICS_TOKEN: "a-Z_0.9~+/=".repeat(3) })).toEqual([])
    expect(problemsOf({ PORT: "3000", AGENTGOV_METRICS_PORT: "3000" }).join("\n")).toMatch(
      /^AGENTGOV_METRICS_PORT="3000": the API's PORT/,
    )
    expect(problemsOf({ PORT: "0", AGENTGOV_METRICS_PORT: "0" })).toEqual([])
    expect(
      problemsOf({ HOST: "0.0.0.0", PORT: "3000", AGENTGOV_METRICS_PORT: "3000", AGENTGOV_METRICS_HOST: "127.0.0.1" }),
    ).toHaveLength(1)
    // Two addresses may each have the port.
    expect(
      problemsOf({ HOST: "10.0.0.5", PORT: "3000", AGENTGOV_METRICS_PORT: "3000", AGENTGOV_METRICS_HOST: "127.0.0.1" }),
    ).toEqual([])
  })
})
