import { fileURLToPath } from "node:url"
import { SYSTEM_EVENT_NAMES } from "@agentgov/connector-sdk"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { describeConnectorContract, useConnectorRig, waitFor } from "@agentgov/connector-testing"
import { describe, expect, it } from "vitest"
import { MAX_PAYLOAD_BYTES, teams } from "../src/connector.ts"
import { officialCardProblems, startTeamsFake, validateCard, visibleText } from "./teamsFake.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-teams.js", import.meta.url))
const env = (fake: { url: string }) => ({ TEAMS_WEBHOOK_URL: fake.url })

describeConnectorContract({ definition: teams, bin, startFake: startTeamsFake, env })

describe("teams: Adaptive Card 1.5 cards from real deliveries", () => {
  const rig = useConnectorRig({ definition: teams, startFake: startTeamsFake, env, events: ["big.*"] })

  it("the vendored schema is not vacuous: it refuses what Adaptive Cards 1.5 does not define", () => {
    const good = { type: "AdaptiveCard", version: "1.5", body: [{ type: "TextBlock", text: "hi" }] }
    expect(validateCard(good)).toBe(true)
    expect(validateCard({ ...good, version: "1.6" })).toBe(false)
    expect(validateCard({ ...good, body: [{ type: "TextBlock" }] })).toBe(false)
    expect(validateCard({ ...good, body: [{ type: "TextBlock", text: "x", color: "Red" }] })).toBe(false)
    expect(validateCard({ ...good, actions: [{ type: "Action.OpenUrl", title: "no url" }] })).toBe(false)
    expect(validateCard({ ...good, surprise: true })).toBe(false)
  })

  it("Microsoft's Adaptive Cards library, parsing as 1.5, reports what is wrong", () => {
    const good = { type: "AdaptiveCard", version: "1.5", body: [{ type: "TextBlock", text: "hi" }] }
    expect(officialCardProblems(good)).toEqual([])
    expect(officialCardProblems({ ...good, body: [{ type: "TextBlok", text: "x" }] })).toEqual([
      expect.stringContaining('Unknown element type "TextBlok"'),
    ])
    expect(officialCardProblems({ ...good, body: [{ type: "TextBlock", text: "x", size: "Huge" }] })).toEqual([
      expect.stringContaining('Invalid value "Huge" for property "size"'),
    ])
    expect(officialCardProblems({ ...good, actions: [{ type: "Action.OpenUrl", title: "no url" }] })).toEqual([
      expect.stringContaining('Property "url" must be set'),
    ])
  })

  it("validates every catalog event's card against the Adaptive Card 1.5 schema, each with an Action.OpenUrl into the service", async () => {
    const before = rig.fake.cards.length
    for (const type of SYSTEM_EVENT_NAMES) {
      expect(await rig.agentgov.testDelivery(rig.hookId, type), type).toMatchObject({ delivered: true })
    }
    await waitFor(() => rig.fake.cards.length === before + SYSTEM_EVENT_NAMES.length, "every card")
    for (const card of rig.fake.cards.slice(before)) {
      expect(validateCard(card), JSON.stringify(validateCard.errors)).toBe(true)
      expect(officialCardProblems(card)).toEqual([])
      expect(card.version).toBe("1.5")
      for (const action of card.actions ?? []) {
        expect(action.type).toBe("Action.OpenUrl")
        expect(action.url.startsWith("https://gov.example.com/")).toBe(true)
      }
    }
    // events about an agent, an approval or an enforcement link to it
    const approval = rig.fake.cards.slice(before).find((c) => visibleText(c).includes("approval.requested"))
    expect(approval.actions[0].url).toMatch(/^https:\/\/gov\.example\.com\/approvals\/apr_/)
  })

  it("keeps a card from an oversized event under Teams' size limit", async () => {
    const before = rig.fake.cards.length
    const data: Record<string, unknown> = {}
    // close to the service's 32 KiB limit on an event's data
    for (let i = 0; i < 10; i++) data[`part${i}`] = `${String(i).repeat(3000)}`
    await rig.agentgov.ingest("big.report", data)
    await waitFor(() => rig.fake.cards.length === before + 1, "the big card")
    expect(rig.fake.sizes.at(-1)!).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES)
    expect(validateCard(rig.fake.cards.at(-1))).toBe(true)
    expect(visibleText(rig.fake.cards.at(-1))).toContain("…")
    expect(rig.connector.running.health().deadLetters).toBe(0)
  })

  it("cannot be made to show a link whose label hides its target", async () => {
    const before = rig.fake.cards.length
    await rig.agentgov.ingest("big.phish", { note: "[reset your password](https://evil.example/) **now**" })
    await waitFor(() => rig.fake.cards.length === before + 1, "the card")
    const text = visibleText(rig.fake.cards.at(-1))
    expect(text).not.toContain("](https://evil.example/)")
    expect(text).not.toContain("**now**")
  })

  it("keeps a card under the size limit when the event's keys (the facts' titles) are what is long", async () => {
    const before = rig.fake.cards.length
    const dead = rig.connector.running.health().deadLetters
    const data: Record<string, unknown> = {}
    // a client event's keys become the facts' titles: ten of 2,900 characters, within the 32 KiB of data
    for (let i = 0; i < 10; i++) data[`${String(i).repeat(2900)}`] = "x"
    await rig.agentgov.ingest("big.keys", data)
    await waitFor(
      () => rig.fake.cards.length === before + 1 || rig.connector.running.health().deadLetters > dead,
      "the card, or its dead letter",
    )
    expect(rig.connector.running.health().deadLetters).toBe(dead)
    expect(rig.fake.sizes.at(-1)!).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES)
    expect(validateCard(rig.fake.cards.at(-1))).toBe(true)
  })
})

describe("teams: a 429", () => {
  const deliver = (headers: Record<string, string>) =>
    teams.deliver(sampleEvent("agent.registered"), {
      client: async () => new Response(null, { status: 429, headers }),
      settings: { webhookUrl: "https://example.invalid/flow" },
      severity: "info",
      dashboardUrl: undefined,
      signal: new AbortController().signal,
    } as any)

  it("without Retry-After backs off rather than retrying at once", async () => {
    const result = await deliver({})
    expect(result).toMatchObject({ outcome: "retry", pauseAll: true })
    expect((result as { afterMs?: number }).afterMs).toBeUndefined()
  })

  it("honours a Retry-After in seconds or as an HTTP-date", async () => {
    expect(await deliver({ "retry-after": "7" })).toMatchObject({ outcome: "retry", afterMs: 7000 })
    const at = new Date(Date.now() + 60_000).toUTCString()
    const result = (await deliver({ "retry-after": at })) as { afterMs?: number }
    expect(result.afterMs).toBeGreaterThan(30_000)
  })
})
