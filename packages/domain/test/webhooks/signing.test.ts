import { createHmac } from "node:crypto"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { EVENT_ALIASES, envelopeBody, SYSTEM_EVENTS, sampleEvent, signatureHeaders } from "../../src/index.ts"

const hmac = (key: string, content: string) =>
  createHmac("sha256", Buffer.from(key, "utf8")).update(content).digest("hex")

describe("signatureHeaders", () => {
  it("signs id.timestamp.body with the UTF-8 bytes of the secret, and the body alone for the legacy header", () => {
    const body = '{"a":"ü"}'
    const h = signatureHeaders({ current: "sëcret-with-ümlauts" }, "dlv_1", 1_700_000_000, body)
    expect(h).toEqual({
      "x-svc-webhook-id": "dlv_1",
      "x-svc-webhook-timestamp": "1700000000",
      "x-svc-webhook-signature": `v1=${hmac("sëcret-with-ümlauts", `dlv_1.1700000000.${body}`)}`,
      "x-svc-signature": hmac("sëcret-with-ümlauts", body),
    })
  })

  it("during an overlap carries one signature per secret, the new one first", () => {
    const h = signatureHeaders({ current: "new-secret", previous: "old-secret" }, "dlv_2", 5, "{}")
    expect(h["x-svc-webhook-signature"]).toBe(
      `v1=${hmac("new-secret", "dlv_2.5.{}")} v1=${hmac("old-secret", "dlv_2.5.{}")}`,
    )
    expect(h["x-svc-signature"]).toBe(hmac("new-secret", "{}"))
  })
})

describe("envelopeBody", () => {
  it("is the spec's envelope, with the stored data text spliced in verbatim", () => {
    const dataJson = '{"b":1,"a":"x\\u0001"}'
    const body = envelopeBody({
      eventId: "evt_1",
      type: "agent.registered",
      timestamp: "2026-11-20T23:59:59.123Z",
      workspaceId: "ws_1",
      dataJson,
      deliveryId: "dlv_1",
      webhookId: "whk_1",
      attempt: 3,
    })
    expect(JSON.parse(body)).toEqual({
      id: "evt_1",
      type: "agent.registered",
      timestamp: "2026-11-20T23:59:59.123Z",
      workspaceId: "ws_1",
      data: { b: 1, a: "x\u0001" },
      metadata: { deliveryId: "dlv_1", webhookId: "whk_1", attempt: 3 },
    })
    expect(body).toContain(`"data":${dataJson},`)
  })
})

describe("sampleEvent", () => {
  it.each(Object.keys(SYSTEM_EVENTS))("the sample of %s holds what its catalog schema says", (name) => {
    const sample = sampleEvent(name, "2026-11-20T23:59:59.123Z")!
    expect(sample.type).toBe(name)
    expect(() => Schema.decodeUnknownSync((SYSTEM_EVENTS as any)[name].data)(sample.data)).not.toThrow()
  })

  it("resolves aliases and knows nothing else", () => {
    for (const [alias, target] of Object.entries(EVENT_ALIASES))
      expect(sampleEvent(alias, "2026-01-01T00:00:00.000Z")?.type).toBe(target)
    expect(sampleEvent("custom.thing", "2026-01-01T00:00:00.000Z")).toBeUndefined()
    expect(sampleEvent("__proto__", "2026-01-01T00:00:00.000Z")).toBeUndefined()
  })

  it("gives ids of the right kind", () => {
    const sample = sampleEvent("approval.requested", "2026-01-01T00:00:00.000Z")!
    expect(sample.data.approvalId).toMatch(/^apr_[0-9a-z]{26}$/)
    expect(sample.data.agentId).toMatch(/^agt_/)
    expect(sample.data.expiresAt).toBe("2026-01-01T00:00:00.000Z")
  })

  it("keeps numbers near real data and dependent fields in agreement", () => {
    // No sample number sits on Schema.Int's ±(2^53 − 1), which a receiver's integer column could not hold.
    const numbersIn = (v: unknown): Array<number> =>
      typeof v === "number" ? [v] : v !== null && typeof v === "object" ? Object.values(v).flatMap(numbersIn) : []
    for (const name of Object.keys(SYSTEM_EVENTS)) {
      const numbers = numbersIn(sampleEvent(name, "2026-01-01T00:00:00.000Z")!.data)
      expect(
        numbers.filter((n) => Math.abs(n) > 1_000_000),
        name,
      ).toEqual([])
    }
    expect(sampleEvent("policy.updated", "2026-01-01T00:00:00.000Z")!.data).toMatchObject({ version: 1 })
    // D11: the delta is the difference, and the tier the new score's.
    const changed = sampleEvent("trust.score.changed", "2026-01-01T00:00:00.000Z")!.data as Record<string, number>
    expect(changed.delta).toBe(changed.newScore! - changed.previousScore!)
    expect(changed.newTier).toBe("bronze")
    expect(changed.newScore).toBeGreaterThanOrEqual(500)
    expect(changed.newScore).toBeLessThan(700)
  })
})
