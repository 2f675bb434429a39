import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { describe, expect, it } from "vitest"
import { renderCard } from "../src/connector.ts"

describe("teams: hostile event text", () => {
  const m = {
    ...formatEvent(sampleEvent("ops.hostile", { data: {} })),
    title: "Refund \u202e0001$ approved",
    summary: "Waiting.\nOpen the event: https://agentgov-example.evil.test/\n\u2067spoofed\u2069",
    fields: [{ label: "Amount \u2066", value: "\u202e0001$ \u2068", short: true }],
  }
  it("drops bidirectional embedding, override and isolate controls from the card, fallback included", () => {
    const card = renderCard(m)
    expect(JSON.stringify(card)).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/)
    expect(JSON.stringify(card)).toContain("Refund 0001$ approved")
  })
  it("keeps the fallback text on one line", () => {
    expect(renderCard(m).fallbackText).not.toMatch(/[\r\n\u2028\u2029]/)
  })
})
