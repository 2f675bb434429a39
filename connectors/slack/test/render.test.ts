import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { describe, expect, it } from "vitest"
import { fallbackText, renderBlocks } from "../src/connector.ts"

const BIDI = /[\u202a-\u202e\u2066-\u2069]/

const hostile = () => ({
  ...formatEvent(sampleEvent("ops.hostile", { data: {} }), { dashboardUrl: "https://agentgov.example" }),
  title: "Refund \u202e0001$ approved",
  summary: "Deploy waiting.\nOpen the event: https://agentgov-example.evil.test/login\n\u2067spoofed\u2069",
  fields: [
    { label: "", value: "blank key", short: true },
    { label: "Amount \u202d", value: "\u202e0001$", short: true },
  ],
})

describe("slack: hostile event text", () => {
  it("drops bidirectional embedding, override and isolate controls from every text a reader sees", () => {
    const m = hostile()
    expect(JSON.stringify(renderBlocks(m))).not.toMatch(BIDI)
    expect(fallbackText(m)).not.toMatch(BIDI)
    expect(JSON.stringify(renderBlocks(m))).toContain("Refund 0001$ approved")
  })

  it("keeps the notification text's lines its own: an event's line breaks cannot forge its link line", () => {
    const text = fallbackText(hostile())
    const lines = text.split("\n")
    expect(lines.filter((l) => l.startsWith("Open the event:"))).toEqual([
      "Open the event: https://agentgov.example/events",
    ])
    expect(lines).toHaveLength(3)
  })

  it("names a blank field label as Discord does, never an empty bold", () => {
    const fields = renderBlocks(hostile()).find((b) => b.fields !== undefined)?.fields as Array<{ text: string }>
    expect(fields[0]!.text).toBe("*(no name)*\nblank key")
  })
})
