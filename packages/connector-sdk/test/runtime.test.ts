import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import type { AnyWebhookEvent } from "../src/index.ts"
import {
  ConfigError,
  type DeliveryResult,
  dead,
  defineConnector,
  loadConfig,
  ok,
  type RunningConnector,
  retry,
  startConnector,
} from "../src/runtime/index.ts"
import { Store } from "../src/runtime/Store.ts"
import { envelope, SECRET, signedHeaders } from "./helpers.ts"

/**
 * The durable runtime with a scripted `deliver`: what is stored before the answer, de-duplication
 * across restarts, retries with Retry-After, dead letters and replay, routing, readiness, drain,
 * and configuration errors. The vendor-facing behaviour is tested in each connector's package,
 * against real deliveries from a real server.
 */

interface Call {
  readonly event: AnyWebhookEvent
  readonly attempt: number
  readonly severity: string
}

const dirs: Array<string> = []
const running: Array<RunningConnector> = []
afterEach(async () => {
  for (const r of running.splice(0)) await r.close()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "agentgov-runtime-"))
  dirs.push(d)
  return d
}

const scripted = (answers: Array<DeliveryResult | Error> = []) => {
  const calls: Array<Call> = []
  const definition = defineConnector({
    name: "scripted",
    description: "a connector for tests",
    defaultEvents: ["approval.*", "policy.violated"],
    settings: { target: { env: "SCRIPTED_TARGET", description: "where it would post", kind: "url", required: true } },
    orderingKey: (event) => (event.data as { approvalId?: string }).approvalId,
    deliver: (event, ctx) => {
      calls.push({ event, attempt: ctx.attempt, severity: ctx.severity })
      const next = answers.shift() ?? ok()
      if (next instanceof Error) throw next
      return next
    },
  })
  return { calls, definition }
}

const start = async (definition: ReturnType<typeof scripted>["definition"], env: Record<string, string> = {}) => {
  const lines: Array<string> = []
  const r = await startConnector(definition, {
    env: {
      PORT: "0",
      HOST: "127.0.0.1",
      AGENTGOV_WEBHOOK_SECRET: SECRET,
      SCRIPTED_TARGET: "https://vendor.example/hook",
      ...env,
    },
    log: (l) => lines.push(l),
  })
  running.push(r)
  return { r, logs: () => lines.map((l) => JSON.parse(l)) }
}

const post = (url: string, body: string, headers = signedHeaders(body)) =>
  fetch(`${url}/webhooks`, { method: "POST", headers, body })

const waitFor = async (check: () => boolean, what: string) => {
  for (let i = 0; i < 400; i++) {
    if (check()) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`timed out waiting for ${what}`)
}

describe("the durable runtime", () => {
  it("answers 200 once the event is stored, delivers it, and de-duplicates by event id across restarts", async () => {
    const dataDir = tempDir()
    const { calls, definition } = scripted()
    const { r } = await start(definition, { AGENTGOV_CONNECTOR_DATA_DIR: dataDir, AGENTGOV_CONNECTOR_PAUSE: "true" })
    const event = envelope("approval.requested", { approvalId: "apr_1", agentId: "agt_1", action: "deploy" })
    const body = JSON.stringify(event)
    const res = await post(r.url, body)
    expect(res.status).toBe(200)
    expect(((await res.json()) as any).data).toEqual({ eventId: event.id, queued: true })
    // paused: stored, not delivered
    const peek = new Store(dataDir)
    expect(peek.counts().queued).toBe(1)
    peek.close()
    expect(calls).toHaveLength(0)
    await r.close()

    const again = await start(definition, { AGENTGOV_CONNECTOR_DATA_DIR: dataDir })
    await waitFor(() => calls.length === 1, "the delivery after restart")
    // a redelivery of the same event (new delivery id and signature) is acknowledged, not queued
    const dup = await post(again.r.url, body)
    expect(dup.status).toBe(200)
    expect(((await dup.json()) as any).data).toEqual({ eventId: event.id, duplicate: true })
    await again.r.idle()
    expect(calls).toHaveLength(1)
    expect(again.r.health()).toMatchObject({ queued: 0, duplicates: 1, delivered: 1 })
  })

  it("stores concurrent deliveries together (group commit), each answered once stored, and a copy in the same batch once", async () => {
    const dataDir = tempDir()
    const { calls, definition } = scripted()
    const { r, logs } = await start(definition, {
      AGENTGOV_CONNECTOR_DATA_DIR: dataDir,
      AGENTGOV_CONNECTOR_PAUSE: "true",
    })
    const events = Array.from({ length: 20 }, (_, i) =>
      envelope("approval.requested", { approvalId: `apr_gc${i}`, agentId: "agt_1", action: "deploy" }),
    )
    // every event twice, all at once: the copies land in the same turn of the loop as their first
    const answers = await Promise.all(
      [...events, ...events].map(async (e) => {
        const res = await post(r.url, JSON.stringify(e))
        return { status: res.status, data: ((await res.json()) as any).data }
      }),
    )
    expect(
      answers.filter((a) => a.status !== 200),
      JSON.stringify(logs().filter((l) => l.level === "error")),
    ).toEqual([])
    for (const e of events) {
      const mine = answers.filter((a) => a.data.eventId === e.id)
      expect(mine.map((a) => (a.data.queued ? "queued" : a.data.duplicate ? "duplicate" : "?")).sort()).toEqual([
        "duplicate",
        "queued",
      ])
    }
    const peek = new Store(dataDir)
    expect(peek.counts().queued).toBe(20)
    peek.close()
    expect(r.health()).toMatchObject({ received: 20, duplicates: 20 })
    expect(calls).toHaveLength(0)
  })

  it("acceptAll: one transaction, an id seen before or earlier in the batch not queued again", () => {
    const store = new Store(tempDir())
    try {
      const job = (eventId: string) => ({
        eventId,
        deliveryId: `dlv_${eventId}`,
        type: "t",
        body: "{}",
        orderKey: undefined,
        now: 1,
      })
      expect(store.accept(job("evt_a"))).toBe(true)
      expect(store.acceptAll([job("evt_a"), job("evt_b"), job("evt_b"), job("evt_c")])).toEqual([
        false,
        true,
        false,
        true,
      ])
      expect(store.counts().queued).toBe(3)
    } finally {
      store.close()
    }
  })

  it("refuses a forged or stale signature with 401 and stores nothing", async () => {
    const { calls, definition } = scripted()
    const { r } = await start(definition, { AGENTGOV_CONNECTOR_DATA_DIR: tempDir() })
    const body = JSON.stringify(envelope())
    const forged = await post(r.url, body, signedHeaders(body, { secret: "whsec_someone_else_entirely" }))
    expect(forged.status).toBe(401)
    const stale = await post(r.url, body, signedHeaders(body, { timestamp: Math.floor(Date.now() / 1000) - 3600 }))
    expect(stale.status).toBe(401)
    expect(((await stale.json()) as any).error.code).toBe("UNAUTHORIZED")
    expect(r.health()).toMatchObject({ queued: 0, received: 0 })
    expect(calls).toHaveLength(0)
  })

  it("retries after the Retry-After a delivery reports, then dead-letters a refusal, and replays it", async () => {
    const dataDir = tempDir()
    const { calls, definition } = scripted([
      retry("rate limited", { afterMs: 300, pauseAll: true }),
      ok(),
      dead("HTTP 400"),
    ])
    const { r, logs } = await start(definition, { AGENTGOV_CONNECTOR_DATA_DIR: dataDir })
    await post(r.url, JSON.stringify(envelope("approval.requested", { approvalId: "apr_2" })))
    await waitFor(() => calls.length === 2, "the retry")
    expect(calls.map((c) => c.attempt)).toEqual([1, 2])
    const scheduled = logs().find((l) => l.msg === "attempt failed; will retry")
    expect(scheduled).toMatchObject({ delayMs: 300, retryAfter: true, reason: "rate limited" })

    const refused = envelope("policy.violated", {
      agentId: "agt_1",
      action: "x",
      decision: "deny",
      violations: [{ code: "DENY", message: "no" }],
    })
    await post(r.url, JSON.stringify(refused))
    await waitFor(() => r.health().deadLetters === 1, "the dead letter")
    expect(calls).toHaveLength(3)
    await r.close()

    const store = new Store(dataDir)
    expect(store.deadLetters()).toMatchObject([{ eventId: refused.id, reason: "non_retryable", error: "HTTP 400" }])
    expect(store.replay([refused.id], Date.now()).map((d) => d.eventId)).toEqual([refused.id])
    store.close()
    const again = await start(definition, { AGENTGOV_CONNECTOR_DATA_DIR: dataDir })
    await waitFor(() => calls.length === 4, "the replayed delivery")
    expect(calls[3]).toMatchObject({ attempt: 1, severity: "error" })
    await again.r.idle()
    expect(again.r.health()).toMatchObject({ deadLetters: 0, queued: 0 })
  })

  it("dead-letters after the last attempt, and a thrown error is retried", async () => {
    const { calls, definition } = scripted([new Error("socket hang up"), retry("HTTP 503", { afterMs: 0 })])
    const { r } = await start(definition, {
      AGENTGOV_CONNECTOR_DATA_DIR: tempDir(),
      AGENTGOV_CONNECTOR_MAX_ATTEMPTS: "2",
    })
    await post(r.url, JSON.stringify(envelope("approval.decided", { approvalId: "apr_3" })))
    await waitFor(() => r.health().deadLetters === 1, "the dead letter")
    expect(calls.map((c) => c.attempt)).toEqual([1, 2])
  })

  it("dead-letters an event whose deliver answers no DeliveryResult, rather than calling it again and again", async () => {
    // A deliver that forgot its `return ok()` (undefined), or answered something of its own: the vendor got the
    // message each time it was called, so calling again at once, forever, repeats it to the vendor without end.
    const calls: Array<string> = []
    const answers: Array<unknown> = [undefined, { ok: true }]
    const definition = defineConnector({
      name: "forgetful",
      description: "answers no DeliveryResult",
      defaultEvents: ["*"],
      settings: {},
      deliver: (event) => {
        calls.push(event.id)
        return answers.shift() as DeliveryResult
      },
    })
    const lines: Array<string> = []
    const r = await startConnector(definition, {
      env: { PORT: "0", HOST: "127.0.0.1", AGENTGOV_WEBHOOK_SECRET: SECRET, AGENTGOV_CONNECTOR_DATA_DIR: tempDir() },
      log: (l) => lines.push(l),
    })
    running.push(r)
    const logs = () => lines.map((l) => JSON.parse(l))
    await post(r.url, JSON.stringify(envelope("approval.requested", { approvalId: "apr_nr1" })))
    await post(r.url, JSON.stringify(envelope("approval.requested", { approvalId: "apr_nr2" })))
    await waitFor(() => r.health().deadLetters === 2, "both dead letters")
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(calls).toHaveLength(2)
    expect(r.health()).toMatchObject({ queued: 0, deadLetters: 2, delivered: 0 })
    const letters = logs().filter((l) => l.msg === "dead-lettered: the vendor refused it")
    expect(letters.map((l) => l.reason)).toEqual([
      expect.stringContaining("deliver answered no DeliveryResult"),
      expect.stringContaining("deliver answered no DeliveryResult"),
    ])
  })

  it("delivers events sharing an ordering key one at a time, in order, even across a retry", async () => {
    const { calls, definition } = scripted([retry("HTTP 500", { afterMs: 200 })])
    const { r } = await start(definition, {
      AGENTGOV_CONNECTOR_DATA_DIR: tempDir(),
      AGENTGOV_CONNECTOR_CONCURRENCY: "4",
    })
    await post(r.url, JSON.stringify(envelope("approval.requested", { approvalId: "apr_9" })))
    await post(r.url, JSON.stringify(envelope("approval.decided", { approvalId: "apr_9" })))
    await waitFor(() => calls.length === 3, "three attempts")
    expect(calls.map((c) => `${c.event.type}#${c.attempt}`)).toEqual([
      "approval.requested#1",
      "approval.requested#2",
      "approval.decided#1",
    ])
  })

  it("routes: events outside the filter or below the minimum severity are acknowledged and dropped; the map sets severity", async () => {
    const { calls, definition } = scripted()
    const { r } = await start(definition, {
      AGENTGOV_CONNECTOR_DATA_DIR: tempDir(),
      AGENTGOV_CONNECTOR_EVENTS: "approval.*,badge.*",
      AGENTGOV_CONNECTOR_SEVERITY: "badge.earned=critical",
      AGENTGOV_CONNECTOR_MIN_SEVERITY: "warning",
    })
    const outside = await post(
      r.url,
      JSON.stringify(envelope("agent.registered", { agentId: "a", agentName: "a", trustScore: 1 })),
    )
    expect(((await outside.json()) as any).data.ignored).toBe(true)
    const quiet = await post(
      r.url,
      JSON.stringify(envelope("approval.decided", { approvalId: "apr_4", decision: "approved" })),
    )
    expect(((await quiet.json()) as any).data.ignored).toBe(true)
    await post(r.url, JSON.stringify(envelope("badge.earned", { agentId: "a", agentName: "a", tier: "gold" })))
    await waitFor(() => calls.length === 1, "the badge")
    expect(calls[0]).toMatchObject({ severity: "critical" })
    expect(r.health().ignored).toBe(2)
  })

  it("hands due events to batch.deliver, and splits a refused batch so that only the bad event is dead-lettered", async () => {
    const dataDir = tempDir()
    const batches: Array<Array<string>> = []
    const singles: Array<string> = []
    const definition = defineConnector({
      name: "batched",
      description: "batches",
      defaultEvents: ["*"],
      settings: {},
      deliver: (event) => {
        singles.push(event.id)
        return (event.data as { bad?: boolean }).bad ? dead("HTTP 400") : ok()
      },
      batch: {
        max: 3,
        deliver: (events) => {
          batches.push(events.map((e) => e.id))
          return events.some((e) => (e.data as { bad?: boolean }).bad) ? dead("HTTP 400") : ok()
        },
      },
    })
    const env = { PORT: "0", HOST: "127.0.0.1", AGENTGOV_WEBHOOK_SECRET: SECRET, AGENTGOV_CONNECTOR_DATA_DIR: dataDir }
    const paused = await startConnector(definition, {
      env: { ...env, AGENTGOV_CONNECTOR_PAUSE: "true" },
      log: () => {},
    })
    const events = [1, 2, 3, 4, 5].map((n) => envelope("badge.earned", { n, bad: n === 2 }))
    for (const e of events) expect((await post(paused.url, JSON.stringify(e))).status).toBe(200)
    await paused.close()
    const r = await startConnector(definition, { env, log: () => {} })
    running.push(r)
    await waitFor(() => r.health().queued === 0, "every job settled")
    // 5 events: a batch of 3 (with the bad one) and a batch of 2; the refused batch's events went alone
    expect(batches).toEqual([events.slice(0, 3).map((e) => e.id), events.slice(3).map((e) => e.id)])
    expect(singles.sort()).toEqual(
      events
        .slice(0, 3)
        .map((e) => e.id)
        .sort(),
    )
    expect(r.health()).toMatchObject({ deadLetters: 1, delivered: 4 })
  })

  it("serves /healthz and /readyz, and drains on close: not ready, and new deliveries get 503", async () => {
    let release: () => void = () => {}
    const calls: Array<string> = []
    const definition = defineConnector({
      name: "slow",
      description: "slow",
      defaultEvents: ["*"],
      settings: {},
      deliver: async (event) => {
        calls.push(event.id)
        await new Promise<void>((r) => {
          release = r
        })
        return ok()
      },
    })
    const r = await startConnector(definition, {
      env: { PORT: "0", HOST: "127.0.0.1", AGENTGOV_WEBHOOK_SECRET: SECRET, AGENTGOV_CONNECTOR_DATA_DIR: tempDir() },
      log: () => {},
    })
    expect((await fetch(`${r.url}/readyz`)).status).toBe(200)
    await post(r.url, JSON.stringify(envelope()))
    await waitFor(() => calls.length === 1, "the slow delivery to start")
    const closing = r.close()
    expect(r.health()).toMatchObject({ status: "draining", ready: false, inFlight: 1 })
    release()
    expect(await closing).toEqual({ drained: true })
  })
})

describe("configuration", () => {
  const { definition } = scripted()

  it("lists every problem at once", () => {
    let error: unknown
    try {
      loadConfig(definition, {
        PORT: "eighty",
        SCRIPTED_TARGET: "ftp://x",
        AGENTGOV_CONNECTOR_SEVERITY: "badge.*=loud",
      })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    const problems = (error as ConfigError).problems.join("\n")
    expect(problems).toContain("PORT must be an integer")
    expect(problems).toContain("SCRIPTED_TARGET must be an http(s) URL")
    expect(problems).toContain("AGENTGOV_WEBHOOK_SECRET is required")
    expect(problems).toContain('"loud" for "badge.*" is not a severity')
  })

  it("refuses http to anything but a loopback host for an https setting, naming the setting", () => {
    const vendor = defineConnector({
      name: "vendor",
      description: "a connector for tests",
      defaultEvents: ["*"],
      settings: {
        api: {
          env: "VENDOR_API_URL",
          description: "the vendor's API",
          kind: "https",
          default: "https://api.vendor.example",
        },
        hook: { env: "VENDOR_HOOK_URL", description: "the vendor's webhook", kind: "https", secret: true },
      },
      deliver: () => ok(),
    })
    const problemsOf = (env: Record<string, string>) => {
      try {
        loadConfig(vendor, { AGENTGOV_WEBHOOK_SECRET: SECRET, ...env })
        return []
      } catch (e) {
        return (e as ConfigError).problems
      }
    }
    const https = "must be an https URL (http only to localhost, 127.0.0.0/8 or [::1])"
    expect(problemsOf({ VENDOR_API_URL: "http://api.vendor.example/" })).toEqual([
      `VENDOR_API_URL ${https} (got "http://api.vendor.example/"): the vendor's API`,
    ])
    // a secret setting's value is never echoed
    expect(problemsOf({ VENDOR_HOOK_URL: "http://hooks.vendor.example/s3cret-sig" })).toEqual([
      `VENDOR_HOOK_URL ${https}: the vendor's webhook`,
    ])
    // a name that only starts like a loopback one, and a private address, are no loopback hosts
    for (const bad of ["http://127.0.0.1.vendor.example/", "http://localhost.vendor.example/", "http://10.0.0.1/"])
      expect(problemsOf({ VENDOR_API_URL: bad }), bad).toHaveLength(1)
    expect(problemsOf({ VENDOR_API_URL: "ftp://api.vendor.example/" })).toEqual([
      `VENDOR_API_URL must be an http(s) URL (got "ftp://api.vendor.example/"): the vendor's API`,
    ])
    // https anywhere, and http to the tests' fakes and a local proxy
    for (const good of [
      "https://api.vendor.example",
      "http://127.0.0.1:4010/api/",
      "http://127.8.9.10/",
      "http://[::1]:4010/",
      "http://localhost:4010/",
      "http://LOCALHOST/",
    ])
      expect(problemsOf({ VENDOR_API_URL: good, VENDOR_HOOK_URL: good }), good).toEqual([])
  })

  it("refuses AGENTGOV_URL and CONNECTOR_PUBLIC_URL on http but to a loopback host, for every command", () => {
    const problemsOf = (env: Record<string, string>, command?: "install" | "start") => {
      try {
        loadConfig(
          definition,
          { AGENTGOV_WEBHOOK_SECRET: SECRET, SCRIPTED_TARGET: "https://x.example", AGENTGOV_API_KEY: "k", ...env },
          command,
        )
        return []
      } catch (e) {
        return (e as ConfigError).problems
      }
    }
    const https = "must be an https URL (http only to localhost, 127.0.0.0/8 or [::1])"
    const hint = "http:// to a host other than loopback needs AGENTGOV_CONNECTOR_ALLOW_HTTP=true"
    for (const command of ["install", "start"] as const)
      expect(
        problemsOf(
          { AGENTGOV_URL: "http://agentgov.internal:3000", CONNECTOR_PUBLIC_URL: "http://10.0.0.7:8080" },
          command,
        ),
        command,
      ).toEqual([
        `AGENTGOV_URL ${https} (got "http://agentgov.internal:3000"): the service's base URL, e.g. https://agentgov.example.com (${hint})`,
        `CONNECTOR_PUBLIC_URL ${https} (got "http://10.0.0.7:8080"): this connector's public base URL, which the service can reach (${hint})`,
      ])
    // The operator's opt-out, for a private network: http to any host, for both, at every command.
    for (const command of ["install", "start"] as const)
      expect(
        problemsOf(
          {
            AGENTGOV_URL: "http://agentgov.internal:3000",
            CONNECTOR_PUBLIC_URL: "http://10.0.0.7:8080",
            AGENTGOV_CONNECTOR_ALLOW_HTTP: "true",
          },
          command,
        ),
        command,
      ).toEqual([])
    expect(problemsOf({ AGENTGOV_CONNECTOR_ALLOW_HTTP: "maybe" })).toEqual([
      'AGENTGOV_CONNECTOR_ALLOW_HTTP must be true or false (got "maybe")',
    ])
    for (const good of [
      "https://agentgov.example.com",
      "http://127.0.0.1:3000",
      "http://localhost:3000",
      "http://[::1]:3000",
    ])
      expect(problemsOf({ AGENTGOV_URL: good, CONNECTOR_PUBLIC_URL: good }, "install"), good).toEqual([])
  })

  it("never echoes a secret in a problem", () => {
    try {
      loadConfig(definition, { AGENTGOV_WEBHOOK_SECRET: "short-secret", SCRIPTED_TARGET: "https://x.example" })
      expect.unreachable()
    } catch (e) {
      expect((e as ConfigError).message).toContain("at least 16 characters")
      expect((e as ConfigError).message).not.toContain("short-secret")
    }
  })

  it("reads routing from a config file, the environment winning", () => {
    const file = join(tempDir(), "routing.json")
    writeFileSync(
      file,
      JSON.stringify({ events: ["badge.*"], severity: { "badge.*": "warning" }, minSeverity: "info" }),
    )
    const { common } = loadConfig(definition, {
      AGENTGOV_WEBHOOK_SECRET: SECRET,
      SCRIPTED_TARGET: "https://x.example",
      AGENTGOV_CONNECTOR_CONFIG: file,
      AGENTGOV_CONNECTOR_MIN_SEVERITY: "error",
    })
    expect(common.routing).toEqual({ events: ["badge.*"], severity: [["badge.*", "warning"]], minSeverity: "error" })
  })

  it("keeps the store private to its owner", async () => {
    const dataDir = join(tempDir(), "nested")
    new Store(dataDir).close()
    expect(statSync(dataDir).mode & 0o777).toBe(0o700)
  })
})
