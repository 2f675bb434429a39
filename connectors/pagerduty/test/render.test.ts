import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { describe, expect, it } from "vitest"
import { buildEvent } from "../src/connector.ts"
import { ROUTING_KEY } from "./pagerdutyFake.ts"

describe("pagerduty: bidirectional controls in event text", () => {
  it("drops embedding, override and isolate controls from the summary, source and custom details", () => {
    const event = sampleEvent("ops.refund", { data: { agentName: "bot \u202e0001$" } })
    const m = {
      ...formatEvent(event),
      title: "Refund \u202e0001$ approved",
      summary: "\u2067spoofed\u2069 \u202a\u202b\u202c\u202d",
      fields: [{ label: "Amount \u2066", value: "\u202e0001$ \u2068", short: true }],
    }
    const body = buildEvent(event, "trigger", m, ROUTING_KEY, undefined) as any
    expect(JSON.stringify(body)).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/)
    expect(body.payload.summary).toBe("Refund 0001$ approved")
    expect(body.payload.source).toBe("bot 0001$")
    expect(body.payload.custom_details).toMatchObject({ "Amount ": "0001$ " })
  })
})
