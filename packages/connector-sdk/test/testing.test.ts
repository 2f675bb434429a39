import { EVENT_ALIASES as CATALOG_ALIASES, SYSTEM_EVENTS } from "@agentgov/domain"
import { Schema } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { EVENT_ALIASES, SYSTEM_EVENT_NAMES, Webhook, WebhookVerificationError } from "../src/index.ts"
import { sampleEvent, signDelivery } from "../src/testing.ts"
import { closeAll, hmacHex, SECRET, start } from "./helpers.ts"

afterEach(closeAll)

describe("the event catalog", () => {
  it("names the same system events and aliases as the service's catalog", () => {
    expect([...SYSTEM_EVENT_NAMES].sort()).toEqual(Object.keys(SYSTEM_EVENTS).sort())
    expect({ ...EVENT_ALIASES }).toEqual({ ...CATALOG_ALIASES })
  })

  it("gives every system event a sample whose data decodes, strictly, with the catalog's schema", () => {
    for (const name of SYSTEM_EVENT_NAMES) {
      const event = sampleEvent(name)
      expect(event.type).toBe(name)
      const schema = SYSTEM_EVENTS[name as keyof typeof SYSTEM_EVENTS].data
      expect(() => Schema.decodeUnknownSync(schema)(event.data, { onExcessProperty: "error" }), name).not.toThrow()
    }
  })
})

describe("sampleEvent", () => {
  it("builds a complete envelope with fresh ids, and takes overrides", () => {
    const a = sampleEvent("approval.requested")
    const b = sampleEvent("approval.requested", {
      workspaceId: "ws_acme",
      data: { action: "deploy.production" },
      metadata: { attempt: 3 },
    })
    expect(Object.keys(a)).toEqual(["id", "type", "timestamp", "workspaceId", "data", "metadata"])
    expect(a.id).toMatch(/^evt_[0-9a-z]{26}$/)
    expect(a.id).not.toBe(b.id)
    expect(a.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(a.metadata.deliveryId).toMatch(/^dlv_/)
    expect(b).toMatchObject({ workspaceId: "ws_acme", data: { action: "deploy.production", status: "pending" } })
    expect(b.metadata.attempt).toBe(3)
  })

  it("gives an alias its canonical type and a custom type empty data", () => {
    expect(sampleEvent("enforcement.issued").type).toBe("enforcement.created")
    expect(sampleEvent("deploy.finished", { data: { build: 1 } })).toMatchObject({
      type: "deploy.finished",
      data: { build: 1 },
    })
  })
})

describe("signDelivery", () => {
  it("signs exactly as the service: headers and signatures recomputed with node:crypto", () => {
    const envelope = sampleEvent("badge.earned")
    const signed = signDelivery({ secret: SECRET, envelope, timestamp: 1_790_000_000, webhookId: "dlv_x" })
    expect(signed.body).toBe(JSON.stringify(envelope))
    expect(signed.headers).toEqual({
      "Content-Type": "application/json",
      "X-SVC-Webhook-Id": "dlv_x",
      "X-SVC-Webhook-Timestamp": "1790000000",
      "X-SVC-Webhook-Signature": `v1=${hmacHex(SECRET, `dlv_x.1790000000.${signed.body}`)}`,
      "X-SVC-Signature": hmacHex(SECRET, signed.body),
    })
  })

  it("produces deliveries the verifier accepts, in every form", () => {
    const now = () => 1_790_000_000_000
    const at = new Date(now())
    for (const name of [...SYSTEM_EVENT_NAMES, "deploy.finished"]) {
      const { body, headers, envelope } = signDelivery({ secret: SECRET, event: name, timestamp: at })
      expect(new Webhook({ secret: SECRET, now }).verify(body, headers)).toEqual(envelope)
    }

    const legacy = signDelivery({ secret: SECRET, legacy: "only", timestamp: at })
    expect(Object.keys(legacy.headers).sort()).toEqual(["Content-Type", "X-SVC-Signature"])
    expect(() => new Webhook({ secret: SECRET, now }).verify(legacy.body, legacy.headers)).toThrow(
      WebhookVerificationError,
    )
    expect(
      new Webhook({ secret: SECRET, now, allowLegacy: true }).verifyDelivery(legacy.body, legacy.headers).scheme,
    ).toBe("legacy")

    const current = signDelivery({ secret: SECRET, legacy: false, timestamp: at })
    expect(current.headers["X-SVC-Signature"]).toBeUndefined()
    expect(new Webhook({ secret: SECRET, now }).verify(current.body, current.headers).id).toBe(current.envelope.id)
  })

  it("signs with each secret of a rotation, and defaults the delivery id to the envelope's", () => {
    const now = () => 1_790_000_000_000
    const signed = signDelivery({ secret: ["old", "new"], event: "agent.updated", timestamp: 1_790_000_000 })
    expect(signed.webhookId).toBe(signed.envelope.metadata.deliveryId)
    expect(signed.headers["X-SVC-Webhook-Signature"]?.split(" ")).toHaveLength(2)
    for (const secret of ["old", "new"]) {
      expect(new Webhook({ secret, now }).verify(signed.body, signed.headers).type).toBe("agent.updated")
    }
  })

  it("drives a connector end to end", async () => {
    const got: Array<string> = []
    const { app, endpoint } = await start({}, (app) =>
      app.on("approval.requested", (event) => {
        got.push(event.data.action)
      }),
    )
    const { body, headers } = signDelivery({
      secret: SECRET,
      envelope: sampleEvent("approval.requested", { data: { action: "deploy.production" } }),
    })
    const res = await fetch(endpoint, { method: "POST", headers, body })
    expect(res.status).toBe(202)
    await app.idle()
    expect(got).toEqual(["deploy.production"])
  })
})
