import { describe, expect, it } from "vitest"
import { type ConfigError, loadConfig } from "../src/config.ts"

const problemsOf = (raw: string) => {
  try {
    loadConfig({ AGENTGOV_OIDC_PROVIDERS: raw })
    return []
  } catch (e) {
    return (e as ConfigError).problems
  }
}

describe("AGENTGOV_OIDC_PROVIDERS", () => {
  it("reads the providers, enterprise-only ones marked, label defaulting to the id", () => {
    const config = loadConfig({
      AGENTGOV_OIDC_PROVIDERS: JSON.stringify([
        { id: "google", label: "Google", issuer: "https://accounts.google.com", clientId: "c", clientSecret: "s" },
        { id: "okta", issuer: "https://acme.okta.com", clientId: "c", clientSecret: "s", enterprise: true },
      ]),
    })
    expect(config.oidcProviders).toEqual([
      {
        id: "google",
        label: "Google",
        issuer: "https://accounts.google.com",
        clientId: "c",
        clientSecret: "s",
        enterprise: false,
      },
      {
        id: "okta",
        label: "okta",
        issuer: "https://acme.okta.com",
        clientId: "c",
        clientSecret: "s",
        enterprise: true,
      },
    ])
  })

  it("reports every mistake, naming the entry and the field", () => {
    expect(problemsOf("not json")).toEqual(["AGENTGOV_OIDC_PROVIDERS: expected a JSON array"])
    const problems = problemsOf(
      JSON.stringify([
        { id: "a", issuer: "http://idp.example.com", clientId: "c", clientSecret: "s" },
        { id: "b c", issuer: "https://x", clientId: "c", clientSecret: "s" },
        { id: "d", issuer: "https://x" },
        { id: "e", issuer: "https://x", clientId: "c", clientSecret: "s", enterprise: "yes" },
        { id: "f", issuer: "https://x", clientId: "c", clientSecret: "s" },
        { id: "f", issuer: "https://y", clientId: "c", clientSecret: "s" },
      ]),
    )
    expect(problems).toEqual([
      "AGENTGOV_OIDC_PROVIDERS[0].issuer: expected an https:// URL (http:// on loopback only)",
      "AGENTGOV_OIDC_PROVIDERS[1].id: letters, digits, - and _ only",
      "AGENTGOV_OIDC_PROVIDERS[2]: missing clientId, clientSecret",
      "AGENTGOV_OIDC_PROVIDERS[3].enterprise: expected true or false",
      "AGENTGOV_OIDC_PROVIDERS[5].id: f is listed twice",
    ])
  })
})
