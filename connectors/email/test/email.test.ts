import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { fileURLToPath } from "node:url"
import { sampleEvent, signDelivery } from "@agentgov/connector-sdk/testing"
import {
  type InProcess,
  kill9,
  newSecret,
  runCommand,
  runInProcess,
  sleep,
  spawnConnector,
  useConnectorRig,
  waitFor,
} from "@agentgov/connector-testing"
import { parse } from "node-html-parser"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createEmailConnector, email } from "../src/connector.ts"
import { nextDue, parseDigestAt } from "../src/schedule.ts"
import { type Mail, type SmtpServer, startSmtpServer } from "./smtpServer.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-email.js", import.meta.url))
const TO = "ops@example.com, security@example.com"
const mailEnv = (smtp: { url: string }, frequency: string) => ({
  SMTP_URL: smtp.url,
  EMAIL_FROM: "agentgov <agentgov@example.com>",
  EMAIL_TO: TO,
  EMAIL_FREQUENCY: frequency,
  AGENTGOV_DASHBOARD_URL: "https://gov.example.com",
})
/** The `n` of each probe event a mail lists (`N: 3` in its text part). */
const probes = (m: Mail) => [...(m.parsed.text ?? "").matchAll(/^\s+N: (\d+)$/gm)].map((x) => Number(x[1]))

describe("email: digests over a real SMTP server, on a fixed clock", () => {
  let smtp: SmtpServer
  const dirs: Array<string> = []
  const started: Array<InProcess> = []
  beforeAll(async () => {
    smtp = await startSmtpServer()
  })
  afterAll(async () => {
    for (const c of started) await c.running.close()
    await smtp.close()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  const clock = { t: Date.parse("2026-11-25T07:30:00.000Z") }
  const secret = newSecret()
  const start = async (frequency: string, extra: Record<string, string> = {}) => {
    const dir = mkdtempSync(join(tmpdir(), "agentgov-email-"))
    dirs.push(dir)
    const definition = createEmailConnector({ now: () => clock.t, pollMs: 10 })
    const c = await runInProcess(definition, {
      ...mailEnv(smtp, frequency),
      ...extra,
      AGENTGOV_WEBHOOK_SECRET: secret,
      AGENTGOV_CONNECTOR_DATA_DIR: dir,
    })
    started.push(c)
    return c
  }
  const send = async (c: InProcess, type: string, data: Record<string, unknown>) => {
    const { body, headers } = signDelivery({ secret, envelope: sampleEvent(type, { data }) })
    const res = await fetch(`${c.url}/webhooks`, { method: "POST", headers, body })
    expect(res.status).toBe(200)
    await c.running.idle()
  }
  /** Lets the digest loop look at the clock several times. */
  const settle = () => sleep(150)

  it("hourly: nothing before the hour, one digest grouped by type and agent at it, nothing for an empty hour", async () => {
    clock.t = Date.parse("2026-11-25T07:30:00.000Z")
    const c = await start("hourly")
    const before = smtp.mailbox.length
    await send(c, "enforcement.created", { agentId: "agt_alpha", reason: "first" })
    await send(c, "enforcement.created", { agentId: "agt_alpha", reason: "second" })
    await send(c, "enforcement.created", { agentId: "agt_bravo", reason: "third" })
    await send(c, "badge.earned", { agentId: "agt_bravo", agentName: "bravo-bot" })
    clock.t = Date.parse("2026-11-25T07:59:59.999Z")
    await settle()
    expect(smtp.mailbox).toHaveLength(before)

    clock.t = Date.parse("2026-11-25T08:00:00.000Z")
    await waitFor(() => smtp.mailbox.length === before + 1, "the 08:00 digest")
    const mail = smtp.mailbox.at(-1)!
    expect(mail.parsed.subject).toBe("[agentgov] 4 events: 3 enforcement.created, 1 badge.earned")
    expect(mail.envelope.to).toEqual(["ops@example.com", "security@example.com"])
    expect(mail.parsed.headers.get("x-agentgov-events")).toBe("4")
    const text = mail.parsed.text!
    expect(text).toMatch(/^\s+3 {2}enforcement\.created \(Critical\)$/m)
    expect(text).toContain("-- agt_alpha: 2 events")
    expect(text).toContain("-- agt_bravo: 1 event")
    expect(text).toContain("-- bravo-bot (agt_bravo): 1 event")
    // the same groups in the HTML
    const html = parse(mail.parsed.html as string)
    expect(html.querySelectorAll("h2").map((h) => h.text.replace(/\s+/g, " ").trim())).toEqual([
      "Enforcement created · 3 events",
      "Badge earned · 1 event",
    ])
    expect(html.querySelectorAll('a[href="https://gov.example.com/"]').length).toBeGreaterThan(0)

    // 08:00 → 09:00 is empty: no mail
    clock.t = Date.parse("2026-11-25T09:00:00.000Z")
    await settle()
    expect(smtp.mailbox).toHaveLength(before + 1)

    // an event in the next hour goes in the next digest alone
    clock.t = Date.parse("2026-11-25T09:10:00.000Z")
    await send(c, "digest.probe", { n: 1 })
    clock.t = Date.parse("2026-11-25T10:00:00.000Z")
    await waitFor(() => smtp.mailbox.length === before + 2, "the 10:00 digest")
    expect(probes(smtp.mailbox.at(-1)!)).toEqual([1])
    expect(smtp.mailbox.at(-1)!.parsed.headers.get("x-agentgov-events")).toBe("1")

    // a week and an hour later, the sent digests and their events are gone from email.db
    const rows = () => {
      const db = new DatabaseSync(join(c.running.dataDir, "email.db"), { readOnly: true })
      try {
        return [
          db.prepare("SELECT COUNT(*) AS n FROM digests").get(),
          db.prepare("SELECT COUNT(*) AS n FROM events").get(),
          db.prepare("SELECT COUNT(*) AS n FROM digests WHERE status = 'sent'").get(),
        ].map((r) => Number((r as { n: number }).n))
      } finally {
        db.close()
      }
    }
    // The server has the message a moment before the connector records it sent, at the clock's time then: moved
    // on before that, the digest would be sent "a week later" and not be old enough to prune (a CI flake).
    await waitFor(() => rows()[2] === 2, "the 10:00 digest recorded as sent")
    expect(rows()).toEqual([2, 5, 2])
    clock.t = Date.parse("2026-12-02T11:00:00.000Z")
    await waitFor(() => rows()[0] === 0, "the pruning")
    expect(rows()).toEqual([0, 0, 0])
  })

  it("routes event types to their own recipients with EMAIL_ROUTES, one digest per set of recipients", async () => {
    clock.t = Date.parse("2026-11-25T10:30:00.000Z")
    const c = await start("hourly", {
      EMAIL_ROUTES: "enforcement.*=security@example.com; badge.*=ops@example.com,hr@example.com",
    })
    const before = smtp.mailbox.length
    await send(c, "enforcement.created", { agentId: "agt_routed" })
    await send(c, "badge.earned", { agentId: "agt_routed" })
    await send(c, "digest.probe", { n: 42 })
    clock.t = Date.parse("2026-11-25T11:00:00.000Z")
    await waitFor(() => smtp.mailbox.length === before + 3, "three digests")
    const sent = smtp.mailbox.slice(before).map((m) => ({
      to: m.envelope.to,
      subject: m.parsed.subject,
      events: m.parsed.headers.get("x-agentgov-events"),
    }))
    expect(sent).toEqual([
      { to: ["security@example.com"], subject: "[agentgov] Suspension issued to agt_routed", events: "1" },
      { to: ["hr@example.com", "ops@example.com"], subject: expect.stringContaining("badge"), events: "1" },
      { to: ["ops@example.com", "security@example.com"], subject: "[agentgov] Digest probe", events: "1" },
    ])
  })

  it("daily: at EMAIL_DIGEST_AT in its time zone", async () => {
    clock.t = Date.parse("2026-11-25T06:30:00.000Z") // 07:30 in Berlin
    const c = await start("daily", { EMAIL_DIGEST_AT: "08:00 Europe/Berlin" })
    const before = smtp.mailbox.length
    await send(c, "digest.probe", { n: 10 })
    await send(c, "digest.probe", { n: 11 })
    clock.t = Date.parse("2026-11-25T06:59:59.000Z")
    await settle()
    expect(smtp.mailbox).toHaveLength(before)
    clock.t = Date.parse("2026-11-25T07:00:00.000Z") // 08:00 in Berlin
    await waitFor(() => smtp.mailbox.length === before + 1, "the daily digest")
    expect(probes(smtp.mailbox.at(-1)!)).toEqual([10, 11])
    expect(smtp.mailbox.at(-1)!.parsed.text).toContain("agentgov daily digest, 2026-11-25 07:00 UTC")
    // the next day's time: nothing meanwhile
    clock.t = Date.parse("2026-11-26T06:59:00.000Z")
    await settle()
    expect(smtp.mailbox).toHaveLength(before + 1)
  })

  it("immediate: each event as it comes, multipart text and HTML", async () => {
    const c = await start("immediate")
    const before = smtp.mailbox.length
    await send(c, "enforcement.created", { agentId: "agt_now", reason: "right away" })
    await waitFor(() => smtp.mailbox.length === before + 1, "the mail")
    const mail = smtp.mailbox.at(-1)!
    expect(mail.parsed.subject).toMatch(/^\[agentgov\] Suspension issued to agt_now$/)
    expect(mail.raw).toMatch(/Content-Type: multipart\/alternative/i)
    expect(mail.parsed.text).toContain("right away")
    expect(mail.parsed.html).toContain("right away")
    expect(mail.parsed.from?.text).toBe('"agentgov" <agentgov@example.com>')
  })

  it("with ?requireTLS=true, sends nothing to a server that offers no STARTTLS, and schedules a retry", async () => {
    const c = await start("immediate", { SMTP_URL: `${smtp.url}?requireTLS=true` })
    const before = smtp.mailbox.length
    await send(c, "digest.probe", { n: 99 })
    await waitFor(() => c.logs().some((l) => l.msg === "sending the digest failed; will retry"), "the refused attempt")
    expect(smtp.mailbox).toHaveLength(before)
    const failed = c.logs().find((l) => l.msg === "sending the digest failed; will retry")!
    expect(failed.error).toMatch(/STARTTLS/i)
    expect(failed.delayMs).toBe(1000)
  })

  it("a digest refused for good (535) is a dead letter: listed, counted in /healthz, sent by `replay` once the login works", async () => {
    clock.t = Date.parse("2026-11-25T12:00:00.000Z")
    const smtpUrl = smtp.url.replace("smtp://", "smtp://agentgov%40example.com:app-password@")
    const c = await start("immediate", { SMTP_URL: smtpUrl })
    const env = {
      ...mailEnv(smtp, "immediate"),
      SMTP_URL: smtpUrl,
      AGENTGOV_WEBHOOK_SECRET: secret,
      AGENTGOV_CONNECTOR_DATA_DIR: c.running.dataDir,
    }
    const before = smtp.mailbox.length
    smtp.refuseLogin(true)
    try {
      await send(c, "digest.probe", { n: 535 })
      // each retry is due on the connector's clock: move it on until the digest is given up on
      await waitFor(() => {
        clock.t += 60_000
        return c.logs().some((l) => l.level === "error" && l.responseCode === 535)
      }, "the digest given up on")
    } finally {
      smtp.refuseLogin(false)
    }
    expect(smtp.mailbox).toHaveLength(before)
    const health = (await (await fetch(`${c.url}/healthz`)).json()) as { deadLetters: number }
    expect(health.deadLetters).toBe(1)

    const listed = await runCommand(bin, ["dead-letters"], env)
    expect(listed.code, listed.stderr).toBe(0)
    const letters = listed.stdout
      .trim()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l))
    expect(letters).toEqual([
      expect.objectContaining({
        id: expect.stringMatching(/^digest-\d+$/),
        type: "email.digest",
        events: 1,
        attempts: 3,
      }),
    ])
    expect(letters[0].error).toContain("535")

    // the password is fixed: the operator replays, and the running connector sends the digest unchanged
    const replayed = await runCommand(bin, ["replay", "--all"], env)
    expect(replayed.code, replayed.stderr).toBe(0)
    expect(JSON.parse(replayed.stdout)).toEqual({ ok: true, replayed: [letters[0].id], missing: [] })
    await waitFor(() => smtp.mailbox.length === before + 1, "the replayed digest")
    expect(probes(smtp.mailbox.at(-1)!)).toEqual([535])
    expect(c.running.health().deadLetters).toBe(0)
    expect((await runCommand(bin, ["dead-letters"], env)).stdout).toBe("")
  })

  it("schedules daily times across a daylight-saving change", () => {
    const at = parseDigestAt("08:00 Europe/Berlin")
    if (typeof at === "string") throw new Error(at)
    // the night summer time starts (29 March 2026): 08:00 in Berlin is 06:00 UTC, the day before 07:00
    expect(new Date(nextDue("daily", Date.parse("2026-03-28T07:30:00Z"), at)).toISOString()).toBe(
      "2026-03-29T06:00:00.000Z",
    )
    expect(new Date(nextDue("daily", Date.parse("2026-03-27T12:00:00Z"), at)).toISOString()).toBe(
      "2026-03-28T07:00:00.000Z",
    )
    expect(nextDue("hourly", Date.parse("2026-11-25T08:00:00Z"), at)).toBe(Date.parse("2026-11-25T09:00:00Z"))
    expect(parseDigestAt("25:00")).toContain("is not a time of day")
    expect(parseDigestAt("08:00 Mars/Olympus")).toContain("is not an IANA time zone")
  })
})

describe("email: an agent's name is escaped in the HTML, from a real server", () => {
  let smtp: SmtpServer
  const rig = useConnectorRig({
    definition: email,
    startFake: async () => {
      smtp = await startSmtpServer()
      return {
        url: smtp.url,
        accepted: () => smtp.mailbox.map((m) => m.parsed.text ?? ""),
        attempts: () => [],
        failNext: () => {},
        close: () => smtp.close(),
      }
    },
    env: (fake) => mailEnv(fake, "immediate"),
    events: ["agent.registered"],
  })

  it("shows `<img src=x onerror=alert(1)>` as text, with no element or handler from it", async () => {
    const name = "<img src=x onerror=alert(1)>"
    const res = await rig.agentgov.t.call("POST", "/api/v1/agents", { body: { name } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    await waitFor(() => smtp.mailbox.length === 1, "the mail")
    const html = smtp.mailbox[0]!.parsed.html as string
    const doc = parse(html)
    expect(doc.querySelectorAll("img")).toHaveLength(0)
    expect(
      doc.querySelectorAll("*").filter((el) => Object.keys(el.attributes).some((a) => a.startsWith("on"))),
    ).toEqual([])
    // the reader sees the name as written
    expect(doc.querySelector("body")!.text).toContain(name)
    expect(html).toContain("&lt;img src=x onerror=alert(1)&gt;")
    expect(smtp.mailbox[0]!.parsed.text).toContain(name)
  })
})

describe("email: a kill -9 or a SIGTERM in the middle of sending a digest", () => {
  let smtp: SmtpServer
  const dirs: Array<string> = []
  beforeAll(async () => {
    smtp = await startSmtpServer()
  })
  afterAll(async () => {
    await smtp.close()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  /** A fresh mailbox, data directory and secret. */
  const fresh = () => {
    smtp.mailbox.length = 0
    smtp.held.length = 0
    const dir = mkdtempSync(join(tmpdir(), "agentgov-email-crash-"))
    dirs.push(dir)
    const secret = newSecret()
    return {
      secret,
      env: { ...mailEnv(smtp, "immediate"), AGENTGOV_WEBHOOK_SECRET: secret, AGENTGOV_CONNECTOR_DATA_DIR: dir },
    }
  }

  it("sends that digest once after the restart, with the same Message-ID, and then the rest: no duplicate, no gap", async () => {
    const { secret, env } = fresh()
    const post = async (url: string, n: number) => {
      const { body, headers } = signDelivery({ secret, envelope: sampleEvent("digest.probe", { data: { n } }) })
      const res = await fetch(`${url}/webhooks`, { method: "POST", headers, body })
      expect(res.status).toBe(200)
    }
    smtp.hold(true)
    const first = await spawnConnector(bin, env)
    await post(first.url, 1)
    // the server has the whole message and has not answered: the connector is mid-send
    await waitFor(() => smtp.held.length === 1, "the held message")
    await post(first.url, 2)
    await post(first.url, 3)
    await kill9(first)
    expect(smtp.mailbox).toHaveLength(0)

    smtp.hold(false)
    const second = await spawnConnector(bin, env)
    await waitFor(() => probes2(smtp.mailbox).length === 3, `every event\n${second.output()}`)
    second.proc.kill("SIGTERM")
    expect(await second.exited).toBe(0)
    // the digest marked before the kill went again, unchanged, before anything new
    expect(smtp.mailbox[0]!.parsed.messageId).toBe(smtp.held[0]!.messageId)
    expect(probes(smtp.mailbox[0]!)).toEqual(probesOfRaw(smtp.held[0]!.raw))
    const ids = smtp.mailbox.map((m) => m.parsed.messageId)
    expect(new Set(ids).size).toBe(ids.length)
    expect(probes2(smtp.mailbox).sort()).toEqual([1, 2, 3])
  })

  it("exits within its wait and sends the digest once after the restart", async () => {
    const { secret, env } = fresh()
    smtp.hold(true)
    const first = await spawnConnector(bin, env)
    const { body, headers } = signDelivery({ secret, envelope: sampleEvent("digest.probe", { data: { n: 7 } }) })
    expect((await fetch(`${first.url}/webhooks`, { method: "POST", headers, body })).status).toBe(200)
    await waitFor(() => smtp.held.length === 1, "the held message")
    first.proc.kill("SIGTERM")
    expect(await first.exited).toBe(0)
    expect(smtp.mailbox).toHaveLength(0)

    smtp.hold(false)
    const second = await spawnConnector(bin, env)
    await waitFor(() => smtp.mailbox.length === 1, `the digest after the restart\n${second.output()}`)
    second.proc.kill("SIGTERM")
    expect(await second.exited).toBe(0)
    expect(smtp.mailbox.map((m) => m.parsed.messageId)).toEqual([smtp.held[0]!.messageId])
    expect(probes(smtp.mailbox[0]!)).toEqual([7])
  })
})

const probes2 = (mails: ReadonlyArray<Mail>) => mails.flatMap(probes)
const probesOfRaw = (raw: string) => [...raw.matchAll(/^\s+N: (\d+)\r?$/gm)].map((x) => Number(x[1]))
