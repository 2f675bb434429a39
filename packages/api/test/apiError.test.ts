import { GuardBusy } from "@agentgov/domain"
import { describe, expect, it } from "vitest"
import { toApiError } from "../src/ApiError.ts"

describe("domain errors as answered", () => {
  it("a full slow lane is a 429 RATE_LIMITED with Retry-After, saying nothing was evaluated", () => {
    const e = toApiError(new GuardBusy({ waiting: 64, retryAfterSeconds: 1 }))
    expect(e.status).toBe(429)
    expect(e.headers).toEqual({ "retry-after": "1" })
    expect(e.toJSON()).toEqual({
      code: "RATE_LIMITED",
      message:
        "this workspace already has 64 costly guard calls waiting to be evaluated; retry after 1 s (nothing was evaluated or recorded)",
    })
  })
})
