import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { formatEvent } from "@agentgov/connector-sdk/format"
import { type ConfigError, loadConfig } from "@agentgov/connector-sdk/runtime"
import { sampleEvent, signDelivery } from "@agentgov/connector-sdk/testing"
import { describeConnectorContract, runInProcess, useConnectorRig, waitFor } from "@agentgov/connector-testing"
import { describe, expect, it } from "vitest"
import { discord, renderEmbed } from "../src/connector.ts"
import { startDiscordFake, visibleText, WEBHOOK_ID, WEBHOOK_TOKEN } from "./discordFake.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-discord.js", import.meta.url))
const env = (fake: { url: string }) => ({
  DISCORD_WEBHOOK_URL: `https://discord.com/api/webhooks/${WEBHOOK_ID}/${WEBHOOK_TOKEN}`,
  DISCORD_API_URL: fake.url,
})

describeConnectorContract({ definition: discord, bin, startFake: startDiscordFake, env })

describe("discord: mention safety, truncation, and a deleted webhook, from real events", () => {
  const rig = useConnectorRig({
    definition: discord,
    startFake: startDiscordFake,
    env,
    events: ["enforcement.*", "ops.*"],
  })

  it("sends allowed_mentions {parse: []} and breaks @everyone, @here and <@id> in event text", async () => {
    const agent = await rig.agentgov.t.call("POST", "/api/v1/agents", { body: { name: "pager" } })
    const created = await rig.agentgov.t.call("POST", "/api/v1/enforcement", {
      body: { agentId: agent.body.data.id, type: "warning", reason: "@everyone look: <@123456789012345678> and @here" },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    await waitFor(() => rig.fake.messages.some((m) => visibleText(m).includes("enforcement.created")), "the warning")
    for (const r of rig.fake.requests) expect(JSON.parse(r.raw).allowed_mentions).toEqual({ parse: [] })
    const text = rig.fake.messages.map(visibleText).join("\n")
    expect(text).toContain("@\u200beveryone look")
    expect(text).not.toMatch(/@(everyone|here)\b/)
    expect(text).not.toContain("<@123456789012345678>")
  })

  it("breaks masked links ([label](url)) in titles, descriptions, field names and values", async () => {
    const link = "[Approve the pending deployment](https://agentgov-example.evil.test/approve?id=apr_1)"
    const before = rig.fake.messages.length
    const agent = await rig.agentgov.t.call("POST", "/api/v1/agents", { body: { name: "link-bot" } })
    const created = await rig.agentgov.t.call("POST", "/api/v1/enforcement", {
      body: { agentId: agent.body.data.id, type: "warning", reason: `see ${link}` },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    await rig.agentgov.ingest("ops.masked", {
      note: `Deployment waiting. ${link}`,
      [`[Key](https://k.evil.test)`]: link,
    })
    await waitFor(
      () => rig.fake.messages.slice(before).flatMap((m) => m.embeds).length >= 2,
      "the enforcement and the client event",
    )
    const embeds = rig.fake.messages.slice(before).flatMap((m) => m.embeds)
    const texts = embeds.flatMap((e: any) => [
      e.title,
      e.description ?? "",
      ...(e.fields ?? []).flatMap((f: any) => [f.name, f.value]),
    ])
    // the link's text is there, as text, with its target in plain sight
    expect(texts.join("\n")).toContain("[Approve the pending deployment]\u200b(https://agentgov-example.evil.test/")
    expect(texts.some((t: string) => t.includes("Deployment waiting."))).toBe(true)
    expect(embeds.some((e: any) => e.fields?.some((f: any) => f.name.includes("]\u200b(https://k.evil.test")))).toBe(
      true,
    )
    for (const t of texts) expect(t).not.toContain("](")
    // a title (an agent's name in one, say) is broken the same way
    const titled = renderEmbed({ ...formatEvent(sampleEvent("ops.masked", { data: {} })), title: link })
    expect(titled.title).toContain("[Approve the pending deployment]\u200b(https://")
  })

  it("cuts every field to Discord's limits so that an oversized event is still posted", async () => {
    const before = rig.fake.messages.length
    const data: Record<string, unknown> = { notes: "n".repeat(5000) }
    for (let i = 0; i < 30; i++) data[`field${i}`] = `${"v".repeat(900)}${i}`
    // four 63-character segments: a title past Discord's 256
    await rig.agentgov.ingest(["ops", ..."abcd"].map((c) => (c === "ops" ? c : c.repeat(63))).join("."), data)
    await waitFor(() => rig.fake.messages.length === before + 1, "the long event")
    const [embed] = rig.fake.messages.at(-1).embeds
    expect(embed.title.length).toBeLessThanOrEqual(256)
    expect(embed.title.endsWith("…")).toBe(true)
    for (const f of embed.fields) expect(f.value.length).toBeLessThanOrEqual(1024)
    const total = [
      embed.title,
      embed.description ?? "",
      embed.footer.text,
      ...embed.fields.flatMap((f: any) => [f.name, f.value]),
    ]
    expect(total.join("").length).toBeLessThanOrEqual(6000)
    // the fields that fit are there, cut with an ellipsis where they had to be
    expect(embed.fields.length).toBeGreaterThan(1)
    expect(embed.fields.some((f: any) => f.value.endsWith("…"))).toBe(true)
    expect(embed.fields.length).toBeLessThanOrEqual(25)
    expect(rig.fake.messages.at(-1).embeds).toHaveLength(1)
    expect(rig.connector.running.health().deadLetters).toBe(0)
  })

  it("posts a client event whose keys make blank field names (Discord refuses an empty name)", async () => {
    const before = rig.fake.messages.length
    const dead = rig.connector.running.health().deadLetters
    await rig.agentgov.ingest("ops.blank", { "": "blank-key-value", __: "underscores-value" })
    await waitFor(
      () => rig.fake.messages.length > before || rig.connector.running.health().deadLetters > dead,
      "the message, or its dead letter",
    )
    expect(rig.connector.running.health().deadLetters).toBe(dead)
    const [embed] = rig.fake.messages.at(-1).embeds
    expect(visibleText(rig.fake.messages.at(-1))).toContain("blank-key-value")
    for (const f of embed.fields) expect(f.name.trim()).not.toBe("")
  })

  it("puts up to 10 queued events in one message, in order", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentgov-discord-batch-"))
    const batchSecret = "whsec_discord_batch_0123456789abcdef"
    const settings = { ...env(rig.fake), AGENTGOV_WEBHOOK_SECRET: batchSecret, AGENTGOV_CONNECTOR_DATA_DIR: dir }
    try {
      // paused while 25 events arrive, so that they are all queued when delivery starts; one at a time, each queued
      // before the next is sent: the service delivers concurrently, and one ingest's 25 deliveries may arrive in
      // any order (the queue's order is what this test is about)
      const paused = await runInProcess(discord, { ...settings, AGENTGOV_CONNECTOR_PAUSE: "true" })
      await rig.agentgov.subscribe(`${paused.url}/webhooks`, ["burst.*"], batchSecret)
      for (let n = 0; n < 25; n++) {
        const events = [{ type: "burst.event", data: { n } }]
        const res = await rig.agentgov.t.call("POST", "/api/v1/events/ingest", { body: { events } })
        expect(res.status, JSON.stringify(res.body)).toBe(201)
        await waitFor(() => paused.running.health().queued === n + 1, `${n + 1} queued events`)
      }
      await paused.running.close()
      const before = rig.fake.messages.length
      const resumed = await runInProcess(discord, settings)
      await waitFor(() => resumed.running.health().queued === 0, "the burst to be delivered")
      await resumed.running.close()
      const sent = rig.fake.messages.slice(before)
      expect(sent.map((m) => m.embeds.length)).toEqual([10, 10, 5])
      for (const m of sent) expect(m.allowed_mentions).toEqual({ parse: [] })
      const order = sent.flatMap((m) =>
        m.embeds.map((e: any) => Number(/N\n(\d+)/.exec(visibleText({ embeds: [e] }))?.[1])),
      )
      expect(order).toEqual(Array.from({ length: 25 }, (_, n) => n))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("posts each of 60 events sent in quick succession once, however many share a message", async () => {
    const before = rig.fake.messages.length
    // Straight to the connector, signed as the service signs, faster than the server's test deliveries: past 50 a
    // second @discordjs/rest's global limit holds requests back (retried after its retryAfter, several events to a
    // message), the case in which the contract's render test once counted messages instead of events.
    const deliveries = Array.from({ length: 60 }, (_, n) =>
      signDelivery({ secret: rig.secret, event: { ...sampleEvent("ops.burst"), data: { marker: `bq${n}x` } } }),
    )
    // one at a time, as the service sends them: each due alone, so each its own request while under the limit
    const answers: Array<number> = []
    for (const d of deliveries) {
      const res = await fetch(`${rig.connector.url}/webhooks`, { method: "POST", headers: d.headers, body: d.body })
      await res.text()
      answers.push(res.status)
    }
    expect(answers).toEqual(deliveries.map(() => 200))
    const shown = () => rig.fake.messages.slice(before).map(visibleText).join("\n")
    await waitFor(() => deliveries.every((_, n) => shown().includes(`bq${n}x`)), "all 60 events")
    await rig.connector.running.idle()
    for (let n = 0; n < 60; n++) expect(shown().split(`bq${n}x`).length - 1, `bq${n}x`).toBe(1)
    expect(rig.connector.running.health()).toMatchObject({ queued: 0, deadLetters: 0 })
  })

  it("posts in the thread DISCORD_WEBHOOK_URL names (?thread_id=), and refuses any other query parameter", async () => {
    const thread = "223344556677889900"
    const base = env(rig.fake).DISCORD_WEBHOOK_URL
    const dir = mkdtempSync(join(tmpdir(), "agentgov-discord-thread-"))
    const threadSecret = "whsec_discord_thread_0123456789abcdef"
    try {
      const c = await runInProcess(discord, {
        ...env(rig.fake),
        DISCORD_WEBHOOK_URL: `${base}?thread_id=${thread}`,
        AGENTGOV_WEBHOOK_SECRET: threadSecret,
        AGENTGOV_CONNECTOR_DATA_DIR: dir,
      })
      const before = rig.fake.requests.length
      const { body, headers } = signDelivery({
        secret: threadSecret,
        event: { ...sampleEvent("ops.thread"), data: { marker: "in-the-thread" } },
      })
      expect((await fetch(`${c.url}/webhooks`, { method: "POST", headers, body })).status).toBe(200)
      await waitFor(() => rig.fake.messages.some((m) => visibleText(m).includes("in-the-thread")), "the post")
      await c.running.close()
      const posted = rig.fake.requests.slice(before).filter((r) => r.raw.includes("in-the-thread"))
      expect(posted.length).toBeGreaterThan(0)
      for (const r of posted) {
        const query = new URL(r.url, "http://fake").searchParams
        expect(query.get("thread_id")).toBe(thread)
        expect(query.get("wait")).toBe("true")
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    const problems = (url: string) => {
      try {
        loadConfig(
          discord,
          { ...env(rig.fake), DISCORD_WEBHOOK_URL: url, AGENTGOV_WEBHOOK_SECRET: rig.secret },
          "check",
        )
        return []
      } catch (error) {
        return [...(error as ConfigError).problems]
      }
    }
    expect(problems(`${base}?thread_id=${thread}`)).toEqual([])
    expect(problems(`${base}?wait=false&thread_id=${thread}`)).toEqual([
      "DISCORD_WEBHOOK_URL takes no query parameter but thread_id (Discord's, to post in a thread)",
    ])
    for (const bad of ["general", "-1", "018446744073709551615", "18446744073709551616"])
      expect(problems(`${base}?thread_id=${bad}`), bad).toEqual([
        "DISCORD_WEBHOOK_URL thread_id must be a thread's id (a Discord snowflake)",
      ])
    expect(problems(`${base}?thread_id=18446744073709551615`)).toEqual([])
    expect(problems(`${base}?thread_id=${thread}&thread_id=${thread}`)).toEqual([
      "DISCORD_WEBHOOK_URL names thread_id more than once",
    ])
  })

  it("dead-letters the events of a deleted webhook (404) and reports it", async () => {
    rig.fake.deleteWebhook()
    const agent = await rig.agentgov.t.call("POST", "/api/v1/agents", { body: { name: "gone" } })
    await rig.agentgov.t.call("POST", "/api/v1/enforcement", {
      body: { agentId: agent.body.data.id, type: "warning", reason: "after the channel was deleted" },
    })
    await waitFor(() => rig.connector.running.health().deadLetters === 1, "the dead letter")
    const report = rig.connector.logs().find((l) => l.level === "error" && String(l.msg).includes("no longer exists"))
    expect(report).toBeDefined()
    const dead = rig.connector.logs().find((l) => l.msg === "dead-lettered: the vendor refused it")
    expect(dead?.reason).toContain("webhook not found (404, code 10015)")
    // one attempt, not a retry storm against a webhook that is gone
    expect(rig.fake.attempts().filter((a) => a.status === 404)).toHaveLength(1)
  })
})
