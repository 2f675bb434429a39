import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { describe, expect, it } from "vitest"
import { issueBody, issueTitle } from "../src/connector.ts"

describe("github: bidirectional controls in event text", () => {
  it("drops embedding, override and isolate controls from an issue's title and body", () => {
    const m = {
      ...formatEvent(sampleEvent("ops.hostile", { data: {} })),
      title: "Refund \u202e0001$ approved",
      summary: "\u2067spoofed\u2069 \u202a\u202b\u202c\u202d",
      fields: [{ label: "Amount \u2066", value: "\u202e0001$ \u2068", short: true }],
    }
    const bidi = /[\u202a-\u202e\u2066-\u2069]/
    expect(issueTitle(m)).not.toMatch(bidi)
    expect(issueTitle(m)).toContain("Refund 0001$ approved")
    expect(issueBody("event:x", m)).not.toMatch(bidi)
  })
})
