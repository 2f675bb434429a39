import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { describe, expect, it } from "vitest"
import { renderEmbed } from "../src/connector.ts"

describe("discord: bidirectional controls in event text", () => {
  it("drops embedding, override and isolate controls from title, description and fields", () => {
    const embed = renderEmbed({
      ...formatEvent(sampleEvent("ops.hostile", { data: {} })),
      title: "Refund \u202e0001$ approved",
      summary: "\u2067spoofed\u2069 \u202a\u202b\u202c\u202d",
      fields: [{ label: "Amount \u2066", value: "\u202e0001$ \u2068", short: true }],
    })
    expect(JSON.stringify(embed)).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/)
    expect(embed.title).toContain("Refund 0001$ approved")
    expect((embed.fields as Array<{ value: string }>)[0]!.value).toBe("0001$ ")
  })
})
