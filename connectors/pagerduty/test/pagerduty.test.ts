import { fileURLToPath } from "node:url"
import type { AnyWebhookEvent } from "@agentgov/connector-sdk"
import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent, signDelivery } from "@agentgov/connector-sdk/testing"
import { runCommand, useConnectorRig, waitFor } from "@agentgov/connector-testing"
import { describe, expect, it } from "vitest"
import { buildEvent, classify, EVENTS_V2_LIMITS, pagerduty } from "../src/connector.ts"
import { problemsOf, ROUTING_KEY, startPagerDutyFake } from "./pagerdutyFake.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-pagerduty.js", import.meta.url))
const env = (fake: { url: string }) => ({ PAGERDUTY_ROUTING_KEY: ROUTING_KEY, PAGERDUTY_EVENTS_URL: fake.url })

describe("pagerduty: one incident per enforcement, from a real server to a fake of Events API v2", () => {
  const rig = useConnectorRig({
    definition: pagerduty,
    startFake: startPagerDutyFake,
    env,
    events: ["enforcement.*", "trust.tier.*"],
  })
  const call = (method: string, path: string, body?: unknown) =>
    rig.agentgov.t.call(method, `/api/v1${path}`, body === undefined ? {} : { body })
  let agents = 0
  const enforce = async (type: string, reason: string) => {
    const agent = await call("POST", "/agents", { name: `pd-${type}-${++agents}` })
    const created = await call("POST", "/enforcement", { agentId: agent.body.data.id, type, reason })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    return created.body.data.id as string
  }

  it("triggers, adds a repeat to the same incident, and resolves it", async () => {
    const id = await enforce("suspension", "exfiltration attempt")
    const key = `agentgov:enforcement:${id}`
    await waitFor(() => rig.fake.alerts.has(key), "the trigger")
    const trigger = rig.fake.alerts.get(key)!.events[0]
    expect(trigger).toMatchObject({
      event_action: "trigger",
      dedup_key: key,
      client: "agentgov",
      client_url: "https://gov.example.com",
      payload: { severity: "critical", class: "enforcement.created", component: "agentgov" },
    })
    expect(trigger.payload.summary).toContain("issued to")
    expect(trigger.payload.custom_details).toMatchObject({
      Event: "enforcement.created",
      Summary: "exfiltration attempt",
    })
    expect(trigger.links).toEqual([{ href: `https://gov.example.com/enforcement/${id}`, text: expect.any(String) }])

    // an update and an appeal: the same dedup key, so the open alert grows and nobody is paged again
    expect((await call("PATCH", `/enforcement/${id}`, { reason: "exfiltration attempt (confirmed)" })).status).toBe(200)
    expect((await call("POST", `/enforcement/${id}/appeal`, { reason: "a false positive" })).status).toBe(200)
    await waitFor(() => rig.fake.alerts.get(key)!.events.length === 3, "the repeats")
    expect(rig.fake.alerts.get(key)!.status).toBe("triggered")
    expect(rig.fake.alerts.get(key)!.events.map((e) => e.payload.class)).toEqual([
      "enforcement.created",
      "enforcement.updated",
      "enforcement.appealed",
    ])
    expect([...rig.fake.alerts.keys()].filter((k) => k === key)).toHaveLength(1)

    expect((await call("PATCH", `/enforcement/${id}`, { resolution: "overturned", note: "cleared" })).status).toBe(200)
    await waitFor(() => rig.fake.alerts.get(key)!.status === "resolved", "the resolve")
    expect(rig.fake.alerts.get(key)!.events.at(-1)).toEqual({
      routing_key: ROUTING_KEY,
      event_action: "resolve",
      dedup_key: key,
      client: "agentgov",
      client_url: "https://gov.example.com",
    })
  })

  it("maps severities: a warning pages as error, a suspension as critical", async () => {
    const id = await enforce("warning", "too many denials")
    await waitFor(() => rig.fake.alerts.has(`agentgov:enforcement:${id}`), "the warning")
    expect(rig.fake.alerts.get(`agentgov:enforcement:${id}`)!.events[0].payload.severity).toBe("error")
  })

  it("triggers on a tier drop per agent and resolves when the tier is back", async () => {
    // the server's samples name a fresh agent each; a drop and a recovery of one agent are signed here
    const deliver = async (type: "trust.tier.downgraded" | "trust.tier.upgraded", data: Record<string, unknown>) => {
      const { body, headers } = signDelivery({ secret: rig.secret, envelope: sampleEvent(type, { data }) })
      const res = await fetch(`${rig.connector.url}/webhooks`, { method: "POST", headers, body })
      expect(res.status).toBe(200)
      await rig.connector.running.idle()
    }
    const agent = { agentId: "agt_tierdrop0000000000000000", agentName: "tier-bot", score: 400 }
    const key = `agentgov:trust-tier:${agent.agentId}`
    await deliver("trust.tier.downgraded", { ...agent, previousTier: "silver", newTier: "bronze" })
    await deliver("trust.tier.downgraded", { ...agent, previousTier: "bronze", newTier: "probation" })
    await waitFor(() => rig.fake.alerts.get(key)?.events.length === 2, "the tier incident and its repeat")
    expect(rig.fake.alerts.get(key)!.events[0].payload).toMatchObject({
      class: "trust.tier.downgraded",
      severity: "error",
    })
    // a partial recovery (back to bronze, short of silver) leaves the incident open and sends nothing
    const before = rig.fake.attempts().length
    await deliver("trust.tier.upgraded", { ...agent, previousTier: "probation", newTier: "bronze" })
    expect(rig.fake.attempts()).toHaveLength(before)
    await deliver("trust.tier.upgraded", { ...agent, previousTier: "bronze", newTier: "silver" })
    await waitFor(() => rig.fake.alerts.get(key)?.status === "resolved", "the tier incident resolved")
    // another upgrade, with no incident open, sends nothing
    const after = rig.fake.attempts().length
    await deliver("trust.tier.upgraded", { ...agent, previousTier: "silver", newTier: "gold" })
    expect(rig.fake.attempts()).toHaveLength(after)
  })

  it("retries 429 after its Retry-After and 5xx with backoff, and dead-letters a 400", async () => {
    const before = rig.fake.attempts().length
    rig.fake.failNext("rate_limit", 1)
    const limited = await enforce("warning", "rate limited once")
    await waitFor(() => rig.fake.alerts.has(`agentgov:enforcement:${limited}`), "the retried trigger")
    const [first, second] = rig.fake.attempts().slice(before)
    expect(first!.status).toBe(429)
    expect(second!.status).toBe(202)
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1000)

    const mark = rig.fake.attempts().length
    rig.fake.failWith(503, 2)
    const outage = await enforce("warning", "during an outage")
    await waitFor(() => rig.fake.alerts.has(`agentgov:enforcement:${outage}`), "the trigger after the outage")
    expect(
      rig.fake
        .attempts()
        .slice(mark)
        .map((a) => a.status),
    ).toEqual([503, 503, 202])

    rig.fake.failNext("refuse")
    const refused = await enforce("warning", "refused")
    await waitFor(() => rig.connector.running.health().deadLetters === 1, "the dead letter")
    expect(rig.fake.alerts.has(`agentgov:enforcement:${refused}`)).toBe(false)
    const dead = rig.connector.logs().find((l) => l.msg === "dead-lettered: the vendor refused it")
    expect(dead?.reason).toContain("HTTP 400")

    // once fixed, `replay --all` from the command line queues it again for the running connector
    const replayed = await runCommand(bin, ["replay", "--all"], { AGENTGOV_CONNECTOR_DATA_DIR: rig.dataDir })
    expect(replayed.code, replayed.stderr).toBe(0)
    await waitFor(() => rig.fake.alerts.has(`agentgov:enforcement:${refused}`), "the replayed trigger")
    expect(rig.connector.running.health().deadLetters).toBe(0)
  })

  it("a trigger replayed after its enforcement was resolved opens no incident that nothing would resolve", async () => {
    const deliver = async (envelope: AnyWebhookEvent) => {
      const { body, headers } = signDelivery({ secret: rig.secret, envelope })
      const res = await fetch(`${rig.connector.url}/webhooks`, { method: "POST", headers, body })
      expect(res.status).toBe(200)
      await rig.connector.running.idle()
    }
    const enforcementId = "enf_replayedafterresolution0"
    const key = `agentgov:enforcement:${enforcementId}`
    const created = sampleEvent("enforcement.created", { data: { enforcementId } }) as AnyWebhookEvent
    const dead = rig.connector.running.health().deadLetters
    // the trigger is refused (a bad routing key, since fixed) and dead-lettered; the resolution goes on
    rig.fake.failNext("refuse")
    await deliver(created)
    await waitFor(() => rig.connector.running.health().deadLetters === dead + 1, "the dead letter")
    await deliver(sampleEvent("enforcement.resolved", { data: { enforcementId } }) as AnyWebhookEvent)
    await waitFor(() => rig.fake.events.some((e) => e.dedup_key === key && e.event_action === "resolve"), "the resolve")

    const replayed = await runCommand(bin, ["replay", created.id], { AGENTGOV_CONNECTOR_DATA_DIR: rig.dataDir })
    expect(replayed.code, replayed.stderr).toBe(0)
    await waitFor(
      () => rig.connector.logs().some((l) => l.msg === "delivered" && l.eventId === created.id),
      "the replayed trigger handled",
    )
    expect(rig.fake.events.filter((e) => e.dedup_key === key && e.event_action === "trigger")).toEqual([])
    expect(rig.fake.alerts.get(key)?.status).not.toBe("triggered")
  })

  it("never logs the routing key", () => {
    expect(JSON.stringify(rig.connector.logs())).not.toContain(ROUTING_KEY)
  })
})

describe("pagerduty: what the API accepts", () => {
  it("cuts the summary to 1,024 characters and the details to the 512 KB event limit", () => {
    const huge: Record<string, unknown> = { notes: "n".repeat(100_000) }
    for (let i = 0; i < 400; i++) huge[`field${i}`] = "v".repeat(3000)
    const event = sampleEvent("ops.overflow", { data: huge })
    const long = { ...sampleEvent("enforcement.created"), type: "x".repeat(50) + ".y".repeat(900) }
    for (const e of [event, long] as Array<AnyWebhookEvent>) {
      const m = formatEvent(e, { dashboardUrl: "https://gov.example.com" })
      const body = buildEvent(e, "trigger", m, ROUTING_KEY, "https://gov.example.com")
      const raw = JSON.stringify(body)
      expect(problemsOf(raw), raw.slice(0, 200)).toEqual([])
      expect((body.payload as { summary: string }).summary.length).toBeLessThanOrEqual(EVENTS_V2_LIMITS.summary)
    }
    // a formatted event far over the limit: details stop before 512 KB and say so
    const m = formatEvent(event)
    const fat = {
      ...m,
      fields: Array.from({ length: 300 }, (_, i) => ({ label: `F${i}`, value: "v".repeat(3000), short: false })),
    }
    const body = buildEvent(event, "trigger", fat, ROUTING_KEY, undefined) as any
    expect(body.payload.custom_details.Truncated).toBe("more details in agentgov")
    expect(problemsOf(JSON.stringify(body))).toEqual([])
    expect(Buffer.byteLength(JSON.stringify(body))).toBeLessThanOrEqual(EVENTS_V2_LIMITS.eventBytes)
  })

  it("reads Retry-After as seconds or an HTTP-date, and an unreadable one as none (the runtime's backoff)", () => {
    const at = new Date(Date.now() + 3_600_000).toUTCString()
    expect(classify(429, "", at)).toMatchObject({ outcome: "retry", pauseAll: true, afterMs: expect.any(Number) })
    expect((classify(429, "", at) as { afterMs: number }).afterMs).toBeGreaterThan(60_000)
    expect(classify(503, "", "2")).toMatchObject({ outcome: "retry", afterMs: 2000 })
    expect(classify(503, "", "")).not.toHaveProperty("afterMs")
  })

  it("refuses to start without a well-formed routing key", async () => {
    const { loadConfig, ConfigError } = await import("@agentgov/connector-sdk/runtime")
    expect(() =>
      loadConfig(pagerduty, { AGENTGOV_WEBHOOK_SECRET: "whsec_x", PAGERDUTY_ROUTING_KEY: "short" }, "start"),
    ).toThrow(ConfigError)
  })
})
