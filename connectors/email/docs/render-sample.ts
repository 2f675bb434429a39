// Renders a sample daily digest: its text part to docs/digest.txt and, in Chromium, its HTML to docs/digest.png:
// `node --conditions=@agentgov/source docs/render-sample.ts` (from connectors/email).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent } from "@agentgov/connector-sdk/testing"
import { DigestStore } from "../src/DigestStore.ts"
import { renderDigest } from "../src/render.ts"

const dashboardUrl = "https://agentgov.example.com"
const dir = mkdtempSync(join(tmpdir(), "agentgov-email-sample-"))
const store = new DigestStore(dir)
const t0 = Date.parse("2026-11-24T08:00:00Z")
const events = [
  sampleEvent("agent.suspended", { data: { agentName: "billing-bot", reason: "repeated policy violations" } }),
  ...["exfiltration attempt", "unapproved deploy", "too many denials"].map((reason, i) =>
    sampleEvent("enforcement.created", {
      data: {
        type: i === 0 ? "suspension" : "warning",
        reason,
        ...(i === 2 ? { agentId: "agt_01jd8x3m9q7k2v5w0b4c6e8f2h" } : {}),
      },
    }),
  ),
  ...Array.from({ length: 5 }, () => sampleEvent("policy.violated")),
  sampleEvent("approval.requested"),
  sampleEvent("trust.tier.downgraded"),
  sampleEvent("badge.earned", { data: { agentName: "<img src=x onerror=alert(1)>" } }),
]
events.forEach((e, i) => {
  const m = formatEvent(e, { dashboardUrl })
  const d = e.data as Record<string, string>
  store.add(
    {
      eventId: e.id,
      type: m.eventType,
      agentKey: d.agentId ?? "",
      agentLabel: d.agentName && d.agentId ? `${d.agentName} (${d.agentId})` : (d.agentName ?? d.agentId ?? ""),
      severity: m.severity,
      title: m.title,
      summary: m.summary,
      link: m.link?.url ?? null,
      occurredAt: t0 + i * 3_600_000,
      fields: JSON.stringify(m.fields.map((f) => ({ label: f.label, value: f.value }))),
      recipients: "ops@example.com",
    },
    t0 + i * 3_600_000,
  )
})
const now = Date.parse("2026-11-25T08:00:00Z")
const [digest] = store.assign(
  () => "<sample@agentgov.connector>",
  now,
  (id) => renderDigest(store, id, { frequency: "daily", dashboardUrl, now }),
)
if (!digest) throw new Error("no digest")
store.close()
rmSync(dir, { recursive: true, force: true })
const here = new URL(".", import.meta.url).pathname
writeFileSync(join(here, "digest.txt"), `Subject: ${digest.subject}\n\n${digest.text}\n`)
const { chromium } = await import("playwright-core")
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium" })
try {
  const page = await browser.newPage({ viewport: { width: 760, height: 900 }, deviceScaleFactor: 1 })
  await page.setContent(digest.html)
  await page.screenshot({ path: join(here, "digest.png"), fullPage: true })
} finally {
  await browser.close()
}
console.log(digest.subject)
