import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { describe, expect, it } from "vitest"
import { fallbackText, renderBlocks, renderMessage } from "../src/connector.ts"

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

  it("puts the app's own line (a note, an outcome) in the notification text too, under the title", () => {
    const note = "_Follows up a message of this thread that was deleted in Slack._"
    const message = renderMessage(hostile(), note)
    const lines = message.text.split("\n")
    expect(lines).toHaveLength(4)
    expect(lines[0]).toContain("Refund 0001$ approved")
    expect(lines[1]).toBe(note)
    expect(lines.filter((l) => l.startsWith("Open the event:"))).toEqual([
      "Open the event: https://agentgov.example/events",
    ])
    expect(message.attachments[0]!.fallback).toBe(message.text)
    // an outcome already escaped for mrkdwn is not escaped twice; the event's text still is
    const outcome = renderMessage({ ...hostile(), title: "a <b> & c" }, "✅ *Approved: x &lt;y&gt;*").text
    expect(outcome.split("\n").slice(0, 2)).toEqual([
      expect.stringContaining("a &lt;b&gt; &amp; c"),
      "✅ *Approved: x &lt;y&gt;*",
    ])
  })

  it("names a blank field label as Discord does, never an empty bold", () => {
    const fields = renderBlocks(hostile()).find((b) => b.fields !== undefined)?.fields as Array<{ text: string }>
    expect(fields[0]!.text).toBe("*(no name)*\nblank key")
  })
})
