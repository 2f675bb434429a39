import { describe, expect, it } from "vitest"
import { FORMATTED_EVENT_TYPES, formatEvent, truncate } from "../src/format/index.ts"
import { SYSTEM_EVENT_NAMES } from "../src/index.ts"
import { sampleEvent } from "../src/testing.ts"

/** What a reader must never see: JSON, or an object stringified by accident. */
const looksRaw = (text: string) => /[{}]|\[object |undefined|NaN/.test(text)

const everyText = (m: ReturnType<typeof formatEvent>) => [
  m.title,
  m.summary,
  ...m.fields.flatMap((f) => [f.label, f.value]),
  m.link?.label ?? "",
]

describe("formatEvent", () => {
  it("has a formatter for every event type of the catalog", () => {
    expect([...FORMATTED_EVENT_TYPES].sort()).toEqual([...SYSTEM_EVENT_NAMES].sort())
  })

  it.each(SYSTEM_EVENT_NAMES)("renders %s as text, with a link into the dashboard", (type) => {
    const m = formatEvent(sampleEvent(type) as never, { dashboardUrl: "https://gov.example.com/" })
    expect(m.title.length).toBeGreaterThan(5)
    for (const text of everyText(m)) expect(looksRaw(text), `${type}: ${text}`).toBe(false)
    if (m.link) expect(m.link.url.startsWith("https://gov.example.com/")).toBe(true)
  })

  it("shows trust.score.changed and agent.registered as a person reads them", () => {
    const score = formatEvent(
      sampleEvent("trust.score.changed", {
        data: {
          agentId: "agt_1",
          agentName: "billing-bot",
          previousScore: 520,
          newScore: 480,
          delta: -40,
          reason: "two denied actions",
          newTier: "probation",
        },
      }) as never,
    )
    expect(score.title).toBe("Trust score of billing-bot fell: 520 → 480")
    expect(score.fields).toEqual([
      { label: "Score", value: "480 / 1000", short: true },
      { label: "Change", value: "-40", short: true },
      { label: "Tier", value: "Probation", short: true },
    ])
    expect(score.severity).toBe("warning")
    const registered = formatEvent(
      sampleEvent("agent.registered", { data: { agentId: "agt_2", agentName: "triage", trustScore: 300 } }) as never,
    )
    expect(registered.title).toBe("New agent registered: triage")
    expect(registered.summary).toBe("It starts with a trust score of 300 out of 1000.")
  })

  it("formats a client event generically, nested values summarised, never dumped", () => {
    const m = formatEvent({
      id: "evt_1",
      type: "deploy.finished",
      timestamp: "2026-11-25T04:00:00.000Z",
      workspaceId: "ws_1",
      data: { buildNumber: 42, ok: true, tags: ["a", "b"], details: { x: 1, y: { z: 2 } } },
      metadata: { deliveryId: "dlv_1", webhookId: "whk_1", attempt: 1 },
    })
    expect(m.title).toBe("Deploy finished")
    expect(m.fields.map((f) => `${f.label}=${f.value}`)).toEqual([
      "Build number=42",
      "Ok=yes",
      "Tags=a, b",
      "Details=2 fields",
    ])
  })

  it("sets the thread subject of approvals and enforcements", () => {
    expect(formatEvent(sampleEvent("approval.decided", { data: { approvalId: "apr_9" } }) as never).subject).toEqual({
      kind: "approval",
      id: "apr_9",
    })
    expect(formatEvent(sampleEvent("agent.suspended", { data: { enforcementId: "enf_9" } }) as never).subject).toEqual({
      kind: "enforcement",
      id: "enf_9",
    })
  })

  it("truncates without splitting a surrogate pair", () => {
    expect(truncate("abcdef", 4)).toBe("abc…")
    expect(truncate("ab😀cd", 4)).toBe("ab…")
    expect(truncate("abc", 3)).toBe("abc")
  })
})
