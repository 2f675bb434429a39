import { describe, expect, it } from "vitest"
import { verifyWebhook, Webhook, WebhookVerificationError } from "../src/index.ts"
import { envelope, hmacHex, SECRET, signedHeaders } from "./helpers.ts"

const NOW_S = 1_790_000_000
const now = () => NOW_S * 1000

const codeOf = (fn: () => unknown): string => {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookVerificationError)
    return (error as WebhookVerificationError).code
  }
  throw new Error("expected a WebhookVerificationError, but verification passed")
}

const delivery = (options: { secret?: string; id?: string; timestamp?: number | string } = {}) => {
  const body = JSON.stringify(envelope())
  return { body, headers: signedHeaders(body, { timestamp: NOW_S, ...options }) }
}

describe("Webhook.verify: the current signature", () => {
  it("accepts a delivery signed with node:crypto and returns the parsed envelope", () => {
    const env = envelope("trust.score.changed", { agentId: "agt_1", newScore: 512 })
    const body = JSON.stringify(env)
    const headers = signedHeaders(body, { id: "dlv_abc", timestamp: NOW_S })
    const webhook = new Webhook({ secret: SECRET, now })
    const result = webhook.verifyDelivery(body, headers)
    expect(result.event).toEqual(env)
    expect(result.deliveryId).toBe("dlv_abc")
    expect(result.timestamp).toBe(NOW_S)
    expect(result.scheme).toBe("v1")
  })

  it("reads headers from a fetch Headers, a Node record, or any casing, and takes the body as bytes", () => {
    const { body, headers } = delivery()
    const mixedCase = Object.fromEntries(
      Object.entries(headers).map(([k, v]) => [k.replace(/(^|-)([a-z])/g, (m) => m.toUpperCase()), v]),
    )
    for (const form of [headers, new Headers(headers), mixedCase]) {
      const event = new Webhook({ secret: SECRET, now, replayProtection: false }).verify(Buffer.from(body), form)
      expect(event.type).toBe("approval.requested")
    }
  })

  it("keys the HMAC with the UTF-8 bytes of the secret", () => {
    const secret = "sécrèt-🔑"
    const env = envelope("agent.registered", { agentName: "bøt" })
    const body = JSON.stringify(env)
    const headers = signedHeaders(body, { secret, timestamp: NOW_S })
    expect(new Webhook({ secret, now }).verify(body, headers).id).toBe(env.id)
  })

  it("refuses a flipped hex character, a wrong secret, a changed body, id or timestamp", () => {
    const { body, headers } = delivery({ id: "dlv_x" })
    const verify = (b: string, h: Record<string, string>) => () => new Webhook({ secret: SECRET, now }).verify(b, h)

    const sig = headers["x-svc-webhook-signature"]!
    const last = sig.at(-1)!
    const flipped = `${sig.slice(0, -1)}${last === "0" ? "1" : "0"}`
    expect(codeOf(verify(body, { ...headers, "x-svc-webhook-signature": flipped }))).toBe("BAD_SIGNATURE")

    expect(codeOf(() => new Webhook({ secret: "another-secret", now }).verify(body, headers))).toBe("BAD_SIGNATURE")
    expect(codeOf(verify(body.replace("approval", "Approval"), headers))).toBe("BAD_SIGNATURE")
    expect(codeOf(verify(`${body} `, headers))).toBe("BAD_SIGNATURE")
    expect(codeOf(verify(body, { ...headers, "x-svc-webhook-id": "dlv_y" }))).toBe("BAD_SIGNATURE")
    expect(codeOf(verify(body, { ...headers, "x-svc-webhook-timestamp": String(NOW_S - 1) }))).toBe("BAD_SIGNATURE")
    // the spec says lowercase hex; an upper-cased digest is not what was signed
    expect(
      codeOf(verify(body, { ...headers, "x-svc-webhook-signature": sig.toUpperCase().replace("V1=", "v1=") })),
    ).toBe("BAD_SIGNATURE")
    expect(codeOf(verify(body, { ...headers, "x-svc-webhook-signature": sig.slice(3) }))).toBe("BAD_SIGNATURE")
    // and the untouched delivery is fine
    expect(verify(body, headers)().type).toBe("approval.requested")
  })

  it("names a missing header", () => {
    const { body, headers } = delivery()
    for (const name of ["x-svc-webhook-signature", "x-svc-webhook-id", "x-svc-webhook-timestamp"]) {
      const without = { ...headers }
      delete without[name]
      const error = (() => {
        try {
          new Webhook({ secret: SECRET, now }).verify(body, without)
        } catch (e) {
          return e as WebhookVerificationError
        }
      })()
      expect(error?.code).toBe("MISSING_HEADER")
      expect(error?.message.toLowerCase()).toContain(name)
    }
  })

  it("refuses timestamps more than 5 minutes old or ahead, and accepts the edges", () => {
    const at = (timestamp: number) => {
      const { body, headers } = delivery({ timestamp })
      return () => new Webhook({ secret: SECRET, now }).verify(body, headers)
    }
    expect(codeOf(at(NOW_S - 301))).toBe("TIMESTAMP_TOO_OLD")
    expect(codeOf(at(NOW_S + 301))).toBe("TIMESTAMP_IN_FUTURE")
    expect(codeOf(at(NOW_S - 3600))).toBe("TIMESTAMP_TOO_OLD")
    expect(at(NOW_S - 300)().id).toMatch(/^evt_/)
    expect(at(NOW_S + 300)().id).toMatch(/^evt_/)
  })

  it("takes the tolerance from the options", () => {
    const { body, headers } = delivery({ timestamp: NOW_S - 60 })
    expect(codeOf(() => new Webhook({ secret: SECRET, now, toleranceSeconds: 30 }).verify(body, headers))).toBe(
      "TIMESTAMP_TOO_OLD",
    )
    expect(new Webhook({ secret: SECRET, now, toleranceSeconds: 90 }).verify(body, headers).type).toBe(
      "approval.requested",
    )
  })

  it("refuses a signed timestamp that is not Unix seconds", () => {
    const { body, headers } = delivery({ timestamp: "2026-11-20T12:00:00Z" })
    expect(codeOf(() => new Webhook({ secret: SECRET, now }).verify(body, headers))).toBe("INVALID_HEADER")
  })

  it("checks the signature before the timestamp: an unsigned stale request is BAD_SIGNATURE", () => {
    const { body, headers } = delivery({ timestamp: NOW_S - 3600, secret: "not-the-secret" })
    expect(codeOf(() => new Webhook({ secret: SECRET, now }).verify(body, headers))).toBe("BAD_SIGNATURE")
  })
})

describe("Webhook.verify: replays", () => {
  it("refuses the same signed request twice, but accepts a re-signed attempt of the same delivery", () => {
    const webhook = new Webhook({ secret: SECRET, now })
    const body = JSON.stringify(envelope())
    const first = signedHeaders(body, { id: "dlv_r", timestamp: NOW_S })
    webhook.verify(body, first)
    expect(codeOf(() => webhook.verify(body, first))).toBe("REPLAYED")
    // the service signs each attempt afresh: a new timestamp is a new request
    const retry = signedHeaders(body, { id: "dlv_r", timestamp: NOW_S + 1 })
    expect(webhook.verify(body, retry).type).toBe("approval.requested")
  })

  it("does not let an unverified request use up a key", () => {
    const webhook = new Webhook({ secret: SECRET, now })
    const body = JSON.stringify(envelope())
    const good = signedHeaders(body, { id: "dlv_q", timestamp: NOW_S })
    const forged = { ...good, "x-svc-webhook-signature": `v1=${"0".repeat(64)}` }
    expect(codeOf(() => webhook.verify(body, forged))).toBe("BAD_SIGNATURE")
    expect(webhook.verify(body, good).type).toBe("approval.requested")
  })

  it("can be turned off, and a one-shot verifyWebhook remembers nothing", () => {
    const { body, headers } = delivery()
    const webhook = new Webhook({ secret: SECRET, now, replayProtection: false })
    webhook.verify(body, headers)
    expect(webhook.verify(body, headers).type).toBe("approval.requested")
    verifyWebhook({ body, headers, secret: SECRET, now })
    expect(verifyWebhook({ body, headers, secret: SECRET, now }).type).toBe("approval.requested")
  })
})

describe("Webhook.verify: the legacy signature", () => {
  const legacyOnly = () => {
    const body = JSON.stringify(envelope())
    return { body, headers: { "content-type": "application/json", "x-svc-signature": hmacHex(SECRET, body) } }
  }

  it("is refused unless allowLegacy is on", () => {
    const { body, headers } = legacyOnly()
    expect(codeOf(() => new Webhook({ secret: SECRET, now }).verify(body, headers))).toBe("MISSING_HEADER")
    const result = new Webhook({ secret: SECRET, now, allowLegacy: true }).verifyDelivery(body, headers)
    expect(result.scheme).toBe("legacy")
    expect(result.timestamp).toBeUndefined()
    expect(result.deliveryId).toBe(JSON.parse(body).metadata.deliveryId)
  })

  it("is checked like the current one: a wrong secret or body fails, a replay is refused", () => {
    const { body, headers } = legacyOnly()
    expect(codeOf(() => new Webhook({ secret: "nope", now, allowLegacy: true }).verify(body, headers))).toBe(
      "BAD_SIGNATURE",
    )
    expect(codeOf(() => new Webhook({ secret: SECRET, now, allowLegacy: true }).verify(`${body}\n`, headers))).toBe(
      "BAD_SIGNATURE",
    )
    const webhook = new Webhook({ secret: SECRET, now, allowLegacy: true })
    webhook.verify(body, headers)
    expect(codeOf(() => webhook.verify(body, headers))).toBe("REPLAYED")
  })

  it("is never a fallback for a current signature that fails", () => {
    const body = JSON.stringify(envelope())
    const headers = {
      ...signedHeaders(body, { timestamp: NOW_S - 3600 }),
      "x-svc-signature": hmacHex(SECRET, body),
    }
    expect(codeOf(() => new Webhook({ secret: SECRET, now, allowLegacy: true }).verify(body, headers))).toBe(
      "TIMESTAMP_TOO_OLD",
    )
  })
})

describe("Webhook.verify: secret rotation", () => {
  const OLD = "whsec_old"
  const NEW = "whsec_new"

  it("accepts a delivery carrying several v1 signatures when any one matches", () => {
    const body = JSON.stringify(envelope())
    const id = "dlv_rot"
    const content = `${id}.${NOW_S}.${body}`
    const headers = {
      "x-svc-webhook-id": id,
      "x-svc-webhook-timestamp": String(NOW_S),
      "x-svc-webhook-signature": `v1=${hmacHex(OLD, content)} v1=${hmacHex(NEW, content)}`,
    }
    for (const secret of [OLD, NEW, [OLD, NEW], ["unrelated", NEW]]) {
      expect(new Webhook({ secret, now }).verify(body, headers).type).toBe("approval.requested")
    }
    expect(codeOf(() => new Webhook({ secret: "unrelated", now }).verify(body, headers))).toBe("BAD_SIGNATURE")
  })

  it("accepts a receiver holding both secrets while the sender signs with either", () => {
    for (const sender of [OLD, NEW]) {
      const { body, headers } = delivery({ secret: sender })
      expect(new Webhook({ secret: [NEW, OLD], now }).verify(body, headers).type).toBe("approval.requested")
    }
  })

  it("ignores signature versions it does not know", () => {
    const body = JSON.stringify(envelope())
    const headers = signedHeaders(body, { timestamp: NOW_S })
    headers["x-svc-webhook-signature"] = `v2=somethingnew ${headers["x-svc-webhook-signature"]}`
    expect(new Webhook({ secret: SECRET, now }).verify(body, headers).type).toBe("approval.requested")
  })
})

describe("Webhook.verify: the envelope", () => {
  const signed = (body: string) => signedHeaders(body, { timestamp: NOW_S })

  it("refuses a verified body that is not a JSON envelope", () => {
    const env = envelope() as Record<string, unknown>
    const bodies = [
      "not json",
      "[1,2]",
      JSON.stringify({ ...env, id: undefined }),
      JSON.stringify({ ...env, data: "text" }),
      JSON.stringify({ ...env, metadata: { deliveryId: "dlv_1" } }),
    ]
    for (const body of bodies) {
      expect(codeOf(() => new Webhook({ secret: SECRET, now }).verify(body, signed(body)))).toBe("INVALID_PAYLOAD")
    }
  })

  it("gives an alias its canonical name", () => {
    const body = JSON.stringify(envelope("enforcement.issued", { enforcementId: "enf_1" }))
    expect(new Webhook({ secret: SECRET, now }).verify(body, signed(body)).type).toBe("enforcement.created")
  })

  it("refuses parsed JSON in place of the raw body, and a configuration without a secret", () => {
    const body = JSON.stringify(envelope())
    expect(() => new Webhook({ secret: SECRET, now }).verify(JSON.parse(body), signed(body))).toThrow(TypeError)
    expect(() => new Webhook({ secret: "" })).toThrow(TypeError)
    expect(() => new Webhook({ secret: [] })).toThrow(TypeError)
  })
})
