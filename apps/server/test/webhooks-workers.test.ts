import { randomBytes } from "node:crypto"
import { rmSync } from "node:fs"
import { join } from "node:path"
import { makeTestStore, reachableTempDir } from "@agentgov/testing"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type ChildServer, kill9, spawnServer, stopChildren } from "./childServer.ts"
import { call, eventually, type Receiver, signedWith, startReceiver } from "./webhooks-support.ts"

/**
 * Delivery workers as real server processes: two on one PostgreSQL database never send the same
 * attempt twice and deliver every event; a worker killed with -9 between retries loses nothing,
 * and the remaining attempts happen after a restart.
 */

// Instances sharing a database share the master key: each must open the secrets the other sealed.
const MASTER_KEY = randomBytes(32).toString("hex")

interface ChildStore {
  readonly env: Record<string, string>
  readonly cleanup: () => Promise<void>
}

const makeChildStore = async (): Promise<ChildStore> => {
  if (process.env.DATABASE_URL) {
    const store = await makeTestStore()
    // Loopback targets need the operator's allowlist on every store (docs/security.md, Webhooks).
    return {
      env: { DATABASE_URL: store.url!, AGENTGOV_MASTER_KEY: MASTER_KEY, AGENTGOV_WEBHOOK_ALLOWLIST: "127.0.0.1" },
      cleanup: store.cleanup,
    }
  }
  const dir = reachableTempDir("agentgov-webhooks-")
  return {
    env: {
      AGENTGOV_DATA_DIR: join(dir, "data"),
      AGENTGOV_MASTER_KEY: MASTER_KEY,
      AGENTGOV_WEBHOOK_ALLOWLIST: "127.0.0.1",
    },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
}

describe.runIf(process.env.DATABASE_URL)("two worker processes on one PostgreSQL database", () => {
  let store: ChildStore | undefined
  let servers: Array<ChildServer> = []
  let key: string
  let r: Receiver
  beforeAll(async () => {
    store = await makeChildStore()
    r = await startReceiver()
    // Real time: the one retry each failing event needs is 1 s away, and a loaded machine never hits the 10 s time-out.
    servers = await Promise.all([spawnServer(store.env), spawnServer(store.env)])
    key = await Promise.any(servers.map((s) => s.waitForKey()))
  })
  afterAll(async () => {
    await stopChildren()
    await r?.close()
    await store?.cleanup()
  })

  it("every event is delivered, each (delivery, attempt) reaches the receiver once, history matches", async () => {
    const created = await call(servers[0]!.url, key, "POST", "/api/v1/webhooks", {
      url: r.url,
      events: ["multi.*"],
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const { id, secret } = created.body.data
    // Every fifth event's first attempt fails: retries go through the same two workers.
    r.answer = (x) => (x.body.data.n % 5 === 0 && x.body.metadata.attempt === 1 ? 500 : 200)

    const CALLS = 30
    const SIZE = 20
    const ids: Array<string> = []
    await Promise.all(
      Array.from({ length: CALLS }, async (_, c) => {
        const events = Array.from({ length: SIZE }, (_, i) => ({ type: "multi.event", data: { n: c * SIZE + i } }))
        const res = await call(servers[c % 2]!.url, key, "POST", "/api/v1/events/ingest", { events })
        expect(res.status, JSON.stringify(res.body)).toBe(201)
        ids.push(...res.body.data.events.map((e: any) => e.id))
      }),
    )
    const N = CALLS * SIZE
    const delivered = () =>
      new Set(r.received.filter((x) => x.body.data.n % 5 !== 0 || x.body.metadata.attempt > 1).map((x) => x.body.id))
    await r.waitFor(() => delivered().size === N, 60_000, `${N} events delivered`)

    const pairs = r.received.map((x) => `${x.headers["x-svc-webhook-id"]}#${x.body.metadata.attempt}`)
    expect(pairs.length - new Set(pairs).size).toBe(0)
    expect([...delivered()].sort()).toEqual([...ids].sort())
    expect(r.received.every((x) => signedWith(x, secret))).toBe(true)
    expect(r.received).toHaveLength(N + N / 5)
    // Each attempt is recorded once, by whichever process made it.
    const stats = await eventually(async () => {
      const w = await call(servers[1]!.url, key, "GET", `/api/v1/webhooks/${id}`)
      return w.body.data.stats.total === N + N / 5 ? w.body.data.stats : undefined
    })
    expect(stats).toEqual({ total: N + N / 5, successful: N, failed: N / 5, successRate: N / (N + N / 5) })
  }, 120_000)
})

describe("a worker killed with -9 mid-retry", () => {
  let store: ChildStore | undefined
  let r: Receiver | undefined
  afterEach(async () => {
    await stopChildren()
    await r?.close()
    await store?.cleanup()
  })

  it("resumes after a restart: the remaining attempts happen and the webhook is disabled after the last", async () => {
    store = await makeChildStore()
    r = await startReceiver()
    r.answer = () => 500
    // 10× fast: retries 100, 200, 400, 800 ms apart; attempts lease for 1 s + 3 s.
    const env = { ...store.env, AGENTGOV_WEBHOOK_TIME_SCALE: "0.1" }
    const first = await spawnServer(env)
    const key = await first.waitForKey()
    const created = await call(first.url, key, "POST", "/api/v1/webhooks", { url: r.url, events: ["crash.*"] })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const webhookId = created.body.data.id
    const ingest = await call(first.url, key, "POST", "/api/v1/events/ingest", {
      events: [{ type: "crash.event", data: {} }],
    })
    expect(ingest.status).toBe(201)
    const eventId = ingest.body.data.events[0].id

    await r.waitFor((all) => all.length >= 2, 20_000, "the second attempt")
    await kill9(first)
    const sentBeforeKill = r.received.length
    expect(sentBeforeKill).toBeLessThan(5)

    const second = await spawnServer(env)
    const off = await eventually(
      async () => {
        const w = await call(second.url, key, "GET", `/api/v1/webhooks/${webhookId}?includeDeliveries=true`)
        return w.body.data.enabled ? undefined : w.body.data
      },
      30_000,
      "the webhook to be disabled after the restart",
    )
    expect(off.disabledReason).toBe("all_attempts_failed")
    // The history holds each attempt once; an attempt cut short by the kill may have been sent again.
    expect([...off.deliveries].reverse().map((a: any) => a.attempt)).toEqual([1, 2, 3, 4, 5])
    expect(off.deliveries.every((a: any) => a.eventId === eventId && a.status === "failed")).toBe(true)
    const attempts = r.received.map((x) => x.body.metadata.attempt as number)
    expect(new Set(attempts)).toEqual(new Set([1, 2, 3, 4, 5]))
    expect(r.received.slice(sentBeforeKill).length).toBeGreaterThan(0)
    expect(new Set(r.received.map((x) => x.headers["x-svc-webhook-id"])).size).toBe(1)
    await kill9(second)
  }, 120_000)
})
