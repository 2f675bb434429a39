import { describe, expect, it } from "vitest"
import { configFromEnv, parseRetryAfter, RetryableError, retryAfterMs } from "../src/index.ts"

describe("configFromEnv", () => {
  it("reads the documented variables and leaves unset ones out", () => {
    expect(configFromEnv({ AGENTGOV_WEBHOOK_SECRET: "s1" })).toEqual({ secret: "s1" })
    expect(
      configFromEnv({
        AGENTGOV_WEBHOOK_SECRET: "new, with comma",
        AGENTGOV_WEBHOOK_SECRET_PREVIOUS: "old",
        PORT: "8080",
        HOST: "0.0.0.0",
        AGENTGOV_WEBHOOK_PATH: "/hooks",
        AGENTGOV_WEBHOOK_ALLOW_LEGACY: "true",
        AGENTGOV_WEBHOOK_TOLERANCE_SECONDS: "120",
        AGENTGOV_CONNECTOR_CONCURRENCY: "8",
        AGENTGOV_CONNECTOR_MAX_ATTEMPTS: "3",
      }),
    ).toEqual({
      secret: ["new, with comma", "old"],
      port: 8080,
      host: "0.0.0.0",
      path: "/hooks",
      allowLegacy: true,
      toleranceSeconds: 120,
      concurrency: 8,
      retry: { maxAttempts: 3 },
    })
  })

  it("names the variable that is missing or malformed", () => {
    expect(() => configFromEnv({})).toThrow(/AGENTGOV_WEBHOOK_SECRET/)
    expect(() => configFromEnv({ AGENTGOV_WEBHOOK_SECRET: "s", PORT: "http" })).toThrow(/PORT/)
    expect(() => configFromEnv({ AGENTGOV_WEBHOOK_SECRET: "s", AGENTGOV_WEBHOOK_ALLOW_LEGACY: "maybe" })).toThrow(
      /AGENTGOV_WEBHOOK_ALLOW_LEGACY/,
    )
    expect(() => configFromEnv({ AGENTGOV_WEBHOOK_SECRET: "s", AGENTGOV_CONNECTOR_CONCURRENCY: "0" })).toThrow(
      /AGENTGOV_CONNECTOR_CONCURRENCY/,
    )
  })
})

describe("retryAfterMs", () => {
  const now = () => Date.parse("2026-11-20T12:00:00Z")

  it("finds the wait in the shapes vendor clients throw", () => {
    expect(retryAfterMs(new RetryableError("x", { retryAfterMs: 250 }))).toBe(250)
    expect(retryAfterMs(new RetryableError("x"))).toBeUndefined()
    expect(retryAfterMs({ retryAfterMs: 90 })).toBe(90)
    expect(retryAfterMs({ retryAfter: 3 })).toBe(3000) // seconds, as Slack's client
    expect(retryAfterMs({ response: { headers: { "Retry-After": "12" } } })).toBe(12_000)
    expect(retryAfterMs({ response: { headers: new Headers({ "retry-after": "1.5" }) } })).toBe(1500)
    expect(retryAfterMs({ headers: { "retry-after": ["4"] } })).toBe(4000)
    expect(retryAfterMs(new Error("wrapped", { cause: { response: { headers: { "retry-after": "2" } } } }))).toBe(2000)
    expect(retryAfterMs({ response: { headers: { "retry-after": "Fri, 20 Nov 2026 12:00:30 GMT" } } }, now)).toBe(
      30_000,
    )
    expect(retryAfterMs(new Error("plain"))).toBeUndefined()
    expect(retryAfterMs("a string")).toBeUndefined()
  })

  it("parses delay-seconds and HTTP-dates, never negative", () => {
    expect(parseRetryAfter("0")).toBe(0)
    expect(parseRetryAfter(" 120 ")).toBe(120_000)
    expect(parseRetryAfter("Fri, 20 Nov 2026 11:00:00 GMT", now)).toBe(0)
    expect(parseRetryAfter("soon")).toBeUndefined()
    // Date.parse reads "-5" and "-1.5" as years long past: they are neither delay-seconds nor an HTTP-date, and no
    // wait of 0
    for (const value of ["-5", "-1.5", "", "+3", "12 apples"]) expect(parseRetryAfter(value), value).toBeUndefined()
    expect(parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now)).toBe(0)
    expect(parseRetryAfter("Sun Nov  6 08:49:37 1994", now)).toBe(0)
  })
})
