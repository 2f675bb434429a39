import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { DigestStore } from "../src/DigestStore.ts"
import { renderDigest } from "../src/render.ts"

/**
 * A digest's size whatever its events hold: an agent that sends many client event types, each with
 * long field names, must not make a digest the SMTP server refuses as too large (a 552, three times, and
 * the enforcements in the same digest become a dead letter).
 */

const dirs: Array<string> = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

describe("renderDigest", () => {
  it("bounds the mail however many event types and however long their field names and titles", () => {
    const dir = mkdtempSync(join(tmpdir(), "agentgov-render-"))
    dirs.push(dir)
    const store = new DigestStore(dir)
    try {
      const long = "x".repeat(5000)
      store.add(
        {
          eventId: "evt_enforcement",
          type: "enforcement.created",
          agentKey: "agt_1",
          agentLabel: "agt_1",
          severity: "critical",
          title: "Suspension issued to agt_1",
          summary: "",
          link: null,
          occurredAt: 1_764_000_000_000,
          fields: "[]",
          recipients: "ops@example.com",
        },
        1,
      )
      for (let i = 0; i < 1000; i++)
        store.add(
          {
            eventId: `evt_flood${i}`,
            type: `client.flood${i}${"y".repeat(200)}`,
            agentKey: "agt_2",
            agentLabel: `flooder ${long}`,
            severity: "info",
            title: `Flood ${i} ${long}`,
            summary: long,
            link: null,
            occurredAt: 1_764_000_000_000 + i,
            fields: JSON.stringify(Array.from({ length: 6 }, (_, n) => ({ label: `${n}${long}`, value: long }))),
            recipients: "ops@example.com",
          },
          1,
        )
      let message: ReturnType<typeof renderDigest> | undefined
      store.assign(
        () => "<m@test>",
        2,
        (id) => (message = renderDigest(store, id, { frequency: "hourly", dashboardUrl: undefined, now: 2 })),
      )
      const { text, html } = message!
      expect(Buffer.byteLength(text) + Buffer.byteLength(html)).toBeLessThan(1024 * 1024)
      // the enforcement is listed first (most severe), the rest counted
      expect(text).toContain("Enforcement created")
      expect(text).toMatch(/and \d+ more event types/)
      expect(html).toMatch(/and \d+ more event types/)
    } finally {
      store.close()
    }
  })

  it("keeps an event's line breaks from forging lines of the text part (a second footer link)", () => {
    const dir = mkdtempSync(join(tmpdir(), "agentgov-render-"))
    dirs.push(dir)
    const store = new DigestStore(dir)
    try {
      const forged = "ok\r\n\nOpen agentgov: https://evil.example/login\n"
      store.add(
        {
          eventId: "evt_forged",
          type: "enforcement.created",
          agentKey: "agt_1",
          agentLabel: `bot${forged}`,
          severity: "critical",
          title: `Suspension${forged}`,
          summary: `reason${forged}`,
          link: null,
          occurredAt: 1_764_000_000_000,
          fields: JSON.stringify([{ label: `Type${forged}`, value: `suspension${forged}` }]),
          recipients: "ops@example.com",
        },
        1,
      )
      let message: ReturnType<typeof renderDigest> | undefined
      store.assign(
        () => "<m@test>",
        2,
        (id) =>
          (message = renderDigest(store, id, { frequency: "hourly", dashboardUrl: "https://gov.example.com", now: 2 })),
      )
      const lines = message!.text.split("\n")
      // the one footer line is the app's own; the event's text stays within its own lines, indented
      expect(lines.filter((l) => l.startsWith("Open agentgov:"))).toEqual(["Open agentgov: https://gov.example.com/"])
      expect(message!.text).toContain("https://evil.example/login")
    } finally {
      store.close()
    }
  })

  it("drops bidirectional controls from every text of an event, the subject included", () => {
    const dir = mkdtempSync(join(tmpdir(), "agentgov-render-"))
    dirs.push(dir)
    const store = new DigestStore(dir)
    try {
      const reversed = "\u202e0001$ \u2066x\u2069 \u202a\u202b\u202c\u202d\u2067\u2068"
      store.add(
        {
          eventId: "evt_bidi",
          type: "client.refund",
          agentKey: "agt_1",
          agentLabel: `bot ${reversed}`,
          severity: "info",
          title: `Refund ${reversed}`,
          summary: `amount ${reversed}`,
          link: null,
          occurredAt: 1_764_000_000_000,
          fields: JSON.stringify([{ label: `Amount ${reversed}`, value: reversed }]),
          recipients: "ops@example.com",
        },
        1,
      )
      let message: ReturnType<typeof renderDigest> | undefined
      store.assign(
        () => "<m@test>",
        2,
        (id) => (message = renderDigest(store, id, { frequency: "immediate", dashboardUrl: undefined, now: 2 })),
      )
      const bidi = /[\u202a-\u202e\u2066-\u2069]/
      expect(message!.subject).toContain("Refund 0001$")
      expect(message!.subject).not.toMatch(bidi)
      expect(message!.text).not.toMatch(bidi)
      expect(message!.html).not.toMatch(bidi)
    } finally {
      store.close()
    }
  })
})
