import { createHmac } from "node:crypto"
import { readFileSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import { SYSTEM_EVENT_NAMES } from "@agentgov/connector-sdk"
import type { ConnectorDefinition } from "@agentgov/connector-sdk/runtime"
import { freePort } from "@agentgov/testing"
import { tempDir } from "@agentgov/testing/tempDir"
import { describe, expect, it } from "vitest"
import { type FakeRequest, kill9, runCommand, spawnConnector, startHttpFake, waitFor } from "./processes.ts"
import { newSecret, useConnectorRig } from "./rig.ts"

/**
 * The scenarios every connector must pass, driven by real deliveries from a real agentgov server to
 * the connector, which forwards them to a fake of its vendor's API (written in the connector's
 * tests, enforcing the vendor's documented limits and errors).
 */

/** A vendor's API on loopback, as the connector under test sees it. */
export interface VendorFake {
  readonly url: string
  /**
   * Messages the vendor accepted, oldest first: what a reader of each would see, as text. One message may carry
   * several events (Discord's up to 10 embeds): count events by their text, not by messages.
   */
  readonly accepted: () => ReadonlyArray<string>
  /** Every request the vendor answered, with its status and arrival time. */
  readonly attempts: () => ReadonlyArray<{ readonly status: number; readonly at: number }>
  /**
   * The next request gets a documented failure: `rate_limit` (429 with `Retry-After` in seconds)
   * or `refuse` (a request the vendor will never accept: 400, `invalid_auth`, …).
   */
  readonly failNext: (kind: "rate_limit" | "refuse", retryAfterSeconds?: number) => void
  readonly close: () => Promise<void>
}

export interface ConnectorUnderTest {
  readonly definition: ConnectorDefinition<any, any>
  /** The path of `bin/agentgov-connector-<name>.js`. */
  readonly bin: string
  readonly startFake: () => Promise<VendorFake>
  /** The connector's own settings, pointing at the fake. */
  readonly env: (fake: VendorFake) => Record<string, string>
}

/** JSON, or an object or value stringified by accident, in what a reader sees. */
export const looksRaw = (text: string) => /\{"|":\s|\[object |\bundefined\b|\bNaN\b/.test(text)

const hmac = (secret: string, content: string) => createHmac("sha256", secret).update(content).digest("hex")

export const describeConnectorContract = (c: ConnectorUnderTest) => {
  const name = c.definition.name
  describe(`${name}: the connector contract, against a real agentgov server`, () => {
    const rig = useConnectorRig({ definition: c.definition, startFake: c.startFake, env: c.env, events: ["deploy.*"] })
    const appDir = () => tempDir(`agentgov-${name}-`)

    it("renders every catalog event, and a client event, with no raw JSON at the reader", {
      timeout: 60_000,
    }, async () => {
      for (const type of SYSTEM_EVENT_NAMES) {
        const result = await rig.agentgov.testDelivery(rig.hookId, type)
        expect(result, type).toEqual({ delivered: true, statusCode: 200 })
      }
      await rig.agentgov.ingest("deploy.finished", { service: "billing", buildNumber: 42, tags: ["prod", "eu"] })
      // Waits for every event to show, not for a number of messages: a connector may put several events in one
      // vendor message (Discord does, up to 10 embeds, whenever more than one is due; e.g. the two held back ~1 s by
      // the Discord client's 50-requests-a-second global limit when the 51 test deliveries came faster than that).
      const posted = (texts: ReadonlyArray<string>) =>
        SYSTEM_EVENT_NAMES.every((type) => texts.some((t) => t.includes(type))) &&
        texts.some((t) => t.includes("Deploy finished"))
      await waitFor(() => posted(rig.fake.accepted()), "every event to be posted")
      const texts = rig.fake.accepted()
      for (const type of SYSTEM_EVENT_NAMES) {
        const text = texts.find((t) => t.includes(type))
        expect(text, `a message naming ${type}`).toBeDefined()
        expect(looksRaw(text!), `${type}: ${text}`).toBe(false)
      }
      const client = texts.find((t) => t.includes("Deploy finished"))
      expect(client).toContain("billing")
      expect(looksRaw(client!)).toBe(false)
      expect(texts.some((t) => t.includes("https://gov.example.com/"))).toBe(true)
    })

    it("retries a 429 after its Retry-After", async () => {
      const before = rig.fake.accepted().length
      const attemptsBefore = rig.fake.attempts().length
      rig.fake.failNext("rate_limit", 1)
      expect(await rig.agentgov.testDelivery(rig.hookId, "badge.earned")).toMatchObject({ delivered: true })
      await waitFor(() => rig.fake.accepted().length === before + 1, "the retried message")
      const [limited, retried] = rig.fake.attempts().slice(attemptsBefore)
      expect(limited!.status).toBe(429)
      expect(retried!.status).toBeLessThan(300)
      // the retry waited for the vendor's Retry-After (a lower bound the connector must honour)
      expect(retried!.at - limited!.at).toBeGreaterThanOrEqual(1000)
      // scheduled from the Retry-After, not from the backoff. A vendor client may count down the time it
      // already spent (discord.js does), so only the wait above is a lower bound; this is not more than asked.
      const scheduled = rig.connector.logs().find((l) => l.msg === "attempt failed; will retry")
      expect(scheduled).toMatchObject({ retryAfter: true })
      expect(scheduled!.delayMs).toBeLessThan(2000)
    })

    it("dead-letters a refused message, lists it, and sends it with `replay`", async () => {
      const before = rig.fake.accepted().length
      rig.fake.failNext("refuse")
      await rig.agentgov.testDelivery(rig.hookId, "policy.denied")
      await waitFor(() => rig.connector.running.health().deadLetters === 1, "the dead letter")
      expect(rig.fake.accepted()).toHaveLength(before)
      const env = { AGENTGOV_CONNECTOR_DATA_DIR: rig.dataDir }
      const listed = await runCommand(c.bin, ["dead-letters"], env)
      expect(listed.code, listed.stderr).toBe(0)
      const letter = JSON.parse(listed.stdout.trim().split("\n")[0]!)
      expect(letter).toMatchObject({ type: "policy.denied", reason: "non_retryable", attempts: 1 })
      const replayed = await runCommand(c.bin, ["replay", "--all"], env)
      expect(replayed.code, replayed.stderr).toBe(0)
      expect(JSON.parse(replayed.stdout)).toMatchObject({ ok: true, replayed: [letter.eventId] })
      // the running connector picks the replayed job up from the shared store
      await waitFor(() => rig.fake.accepted().length === before + 1, "the replayed message")
      expect(rig.fake.accepted().at(-1)).toContain("policy.denied")
      expect(rig.connector.running.health().deadLetters).toBe(0)
    })

    it("delivers after a kill -9 between the 2xx and the vendor call", async () => {
      const before = rig.fake.accepted().length
      const dir = appDir()
      const childSecret = newSecret()
      const env = { ...rig.vendorEnv(), AGENTGOV_WEBHOOK_SECRET: childSecret, AGENTGOV_CONNECTOR_DATA_DIR: dir }
      // paused: it stores and answers, and does not call the vendor, so the kill lands in between
      const first = await spawnConnector(c.bin, { ...env, AGENTGOV_CONNECTOR_PAUSE: "true" })
      const hook = await rig.agentgov.subscribe(`${first.url}/webhooks`, ["never.*"], childSecret)
      expect(await rig.agentgov.testDelivery(hook.id, "agent.suspended")).toEqual({ delivered: true, statusCode: 200 })
      await kill9(first)
      expect(rig.fake.accepted()).toHaveLength(before)

      const second = await spawnConnector(c.bin, env)
      await waitFor(
        () => rig.fake.accepted().length === before + 1,
        `the stored event after restart\n${second.output()}`,
      )
      expect(rig.fake.accepted().at(-1)).toContain("agent.suspended")
      // SIGTERM drains and exits cleanly
      second.proc.kill("SIGTERM")
      expect(await second.exited).toBe(0)
      expect(rig.fake.accepted()).toHaveLength(before + 1)
    })

    let captured: FakeRequest | undefined
    it("posts a redelivered event once", async () => {
      const before = rig.fake.accepted().length
      const seen = new Set<string>()
      // between the server and the connector: the first attempt reaches the connector, but the
      // server is told it failed, so it sends the same event again (a new attempt, signed anew)
      const proxy = await startHttpFake(async (r) => {
        const res = await fetch(`${rig.connector.url}/webhooks`, {
          method: "POST",
          headers: Object.fromEntries(
            Object.entries(r.headers).filter(([k]) => k.startsWith("x-svc") || k === "content-type"),
          ) as Record<string, string>,
          body: r.raw,
        })
        const delivery = String(r.headers["x-svc-webhook-id"])
        const first = !seen.has(delivery)
        seen.add(delivery)
        captured ??= r
        return { status: first ? 500 : res.status, body: await res.text() }
      })
      try {
        await rig.agentgov.subscribe(`${proxy.url}/webhooks`, ["redelivery.*"], rig.secret)
        const eventId = await rig.agentgov.ingest("redelivery.probe", { attempt: "twice" })
        await waitFor(() => proxy.requests.length >= 2, "the server's retry")
        const bodies = proxy.requests.map((r) => JSON.parse(r.raw))
        expect(bodies.map((b) => b.id)).toEqual([eventId, eventId])
        expect(bodies.map((b) => b.metadata.attempt)).toEqual([1, 2])
        // The fake records the retry before the connector has it: its log line says the connector took it.
        await waitFor(
          () => rig.connector.logs().some((l) => l.msg === "duplicate ignored" && l.eventId === eventId),
          "the connector's record of the duplicate",
        )
        await rig.connector.running.idle()
        expect(rig.fake.accepted()).toHaveLength(before + 1)
      } finally {
        await proxy.close()
      }
    })

    it("answers 401 to a forged or stale signature, and posts nothing", async () => {
      expect(captured).toBeDefined()
      const before = rig.fake.accepted().length
      const received = rig.connector.running.health().received
      const body = captured!.raw.replace(/"id":"evt_[^"]+"/, '"id":"evt_forged000000000000000000"')
      const id = String(captured!.headers["x-svc-webhook-id"])
      const now = Math.floor(Date.now() / 1000)
      const post = (ts: number, key: string) =>
        fetch(`${rig.connector.url}/webhooks`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-svc-webhook-id": id,
            "x-svc-webhook-timestamp": String(ts),
            "x-svc-webhook-signature": `v1=${hmac(key, `${id}.${ts}.${body}`)}`,
          },
          body,
        })
      const forged = await post(now, newSecret())
      expect(forged.status).toBe(401)
      const stale = await post(now - 3600, rig.secret)
      expect(stale.status).toBe(401)
      expect(((await stale.json()) as any).error.code).toBe("UNAUTHORIZED")
      // the captured delivery, its headers kept and its body changed
      const tampered = await fetch(`${rig.connector.url}/webhooks`, {
        method: "POST",
        headers: Object.fromEntries(
          Object.entries(captured!.headers).filter(([k]) => k.startsWith("x-svc") || k === "content-type"),
        ) as Record<string, string>,
        body,
      })
      expect(tampered.status).toBe(401)
      await rig.connector.running.idle()
      expect(rig.fake.accepted()).toHaveLength(before)
      expect(rig.connector.running.health().received).toBe(received)
    })

    it("installs and uninstalls against the server, each twice in a row, and runs on the stored secret", async () => {
      const dir = appDir()
      const port = await freePort()
      const env = {
        ...rig.vendorEnv(),
        AGENTGOV_URL: rig.agentgov.url,
        AGENTGOV_API_KEY: rig.agentgov.key,
        CONNECTOR_PUBLIC_URL: `http://127.0.0.1:${port}`,
        AGENTGOV_CONNECTOR_DATA_DIR: dir,
        PORT: String(port),
      }
      const install = async () => {
        const r = await runCommand(c.bin, ["install"], env)
        expect(r.code, r.stderr).toBe(0)
        return JSON.parse(r.stdout)
      }
      // With the default filter the server delivers at once (its own webhook.created, for a start),
      // and its sped-up schedule would disable the webhook before a connector is up: a stand-in
      // answers 200 at the public URL until the connector starts there.
      const standIn = await startHttpFake(() => ({ status: 200 }), port)
      const first = await install()
      expect(first).toMatchObject({ ok: true, action: "created", url: `http://127.0.0.1:${port}/webhooks` })
      const second = await install()
      expect(second).toMatchObject({ ok: true, action: "unchanged", webhookId: first.webhookId })
      await standIn.close()
      const registered = await rig.agentgov.t.call("GET", `/api/v1/webhooks/${first.webhookId}`)
      expect(registered.body.data).toMatchObject({ url: `http://127.0.0.1:${port}/webhooks`, enabled: true })
      expect(registered.body.data.events).toEqual([...c.definition.defaultEvents])
      expect(statSync(join(dir, "webhook.json")).mode & 0o777).toBe(0o600)

      // the stored secret verifies the server's deliveries
      const running = await spawnConnector(c.bin, { ...env, AGENTGOV_CONNECTOR_PAUSE: "true" })
      expect(await rig.agentgov.testDelivery(first.webhookId, "approval.requested")).toEqual({
        delivered: true,
        statusCode: 200,
      })
      running.proc.kill("SIGTERM")
      await running.exited

      // a data directory that lost its file finds the webhook by URL and sets a new secret on it
      const before = JSON.parse(readFileSync(join(dir, "webhook.json"), "utf8")).secret
      rmSync(join(dir, "webhook.json"))
      expect(await install()).toMatchObject({ ok: true, action: "adopted", webhookId: first.webhookId })
      expect(JSON.parse(readFileSync(join(dir, "webhook.json"), "utf8")).secret).not.toBe(before)

      const uninstall = async () => {
        const r = await runCommand(c.bin, ["uninstall"], env)
        expect(r.code, r.stderr).toBe(0)
        return JSON.parse(r.stdout)
      }
      expect(await uninstall()).toMatchObject({ ok: true, action: "deleted", webhookId: first.webhookId })
      expect(await uninstall()).toMatchObject({ ok: true, action: "not_installed" })
      expect((await rig.agentgov.t.call("GET", `/api/v1/webhooks/${first.webhookId}`)).status).toBe(404)
      // eight child processes of the CLI, each loading TypeScript sources: 20-30 s on a loaded machine
    }, 90_000)

    it("never logs the webhook secret or a vendor credential", () => {
      const logged = JSON.stringify(rig.connector.logs())
      expect(logged.length).toBeGreaterThan(1000)
      expect(logged).not.toContain(rig.secret)
      const settings = Object.values(c.definition.settings as Record<string, { env: string; secret?: boolean }>)
      for (const spec of settings.filter((s) => s.secret)) {
        const value = rig.vendorEnv()[spec.env]
        expect(value, spec.env).toBeDefined()
        expect(logged).not.toContain(value)
      }
    })

    it("refuses to start with bad settings, listing every problem, exit 2", async () => {
      const r = await runCommand(c.bin, [], { PORT: "not-a-port", AGENTGOV_CONNECTOR_DATA_DIR: appDir() })
      expect(r.code).toBe(2)
      expect(r.stderr).toContain("PORT must be an integer")
      expect(r.stderr).toContain("AGENTGOV_WEBHOOK_SECRET is required")
      for (const spec of Object.values(c.definition.settings as Record<string, { env: string; required?: boolean }>))
        if (spec.required) expect(r.stderr).toContain(`${spec.env} is required`)
    })
  })
}
