import { randomBytes } from "node:crypto"
import { connect, createServer, type Server, type Socket } from "node:net"
import { makeTestStore, type TestStore } from "@agentgov/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ChildServer, spawnServer, stopChildren } from "./childServer.ts"
import { type Receiver, sleep, startReceiver } from "./webhooks-support.ts"

/**
 * A rolling restart (issue 34): two instances on one PostgreSQL behind a small TCP balancer, each
 * stopped (SIGTERM) and started again in turn while clients keep writing. No request fails and
 * every event written reaches its webhook.
 *
 * The balancer does what a production one is configured to do (HAProxy `retry-on conn-failure
 * empty-response` with `option redispatch`, Envoy's `reset`/`connect-failure` retry policy): a
 * connection the instance refuses, or closes before answering a byte, is sent again to the next
 * instance. Every write carries an Idempotency-Key, which is what makes that replay safe.
 */

interface Balancer {
  readonly url: string
  /** The instances' ports, in turn; replaced as instances restart. */
  readonly backends: Array<number>
  readonly close: () => Promise<void>
}

const startBalancer = async (backends: Array<number>): Promise<Balancer> => {
  let next = 0
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    sockets.add(client)
    // The request being sent (every chunk since the last answer began), replayed when an instance refuses
    // the connection or closes it before answering; the client's connection outlives its instances'.
    let sent: Array<Buffer> = []
    let answered = false
    let up: Socket | undefined
    let upReady = false
    const attempt = (tries: number) => {
      if (tries > 200) return void client.destroy()
      const s = connect(backends[next++ % backends.length]!, "127.0.0.1")
      sockets.add(s)
      up = s
      upReady = false
      s.on("connect", () => {
        if (up !== s) return
        upReady = true
        for (const c of sent) s.write(c)
      })
      s.on("data", (chunk: Buffer) => {
        if (up !== s) return
        answered = true
        client.write(chunk)
      })
      s.on("close", () => {
        sockets.delete(s)
        if (up !== s) return
        up = undefined
        upReady = false
        if (!client.destroyed && !answered && sent.length > 0) setTimeout(() => attempt(tries + 1), 25)
      })
      s.on("error", () => {})
    }
    client.on("data", (chunk: Buffer) => {
      if (answered) {
        answered = false
        sent = []
      }
      sent.push(chunk)
      if (up === undefined) attempt(0)
      else if (upReady) up.write(chunk)
    })
    client.on("close", () => {
      sockets.delete(client)
      up?.destroy()
    })
    client.on("error", () => {})
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    backends,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}

const portOf = (c: ChildServer) => Number(new URL(c.url).port)

let store: TestStore
let hooks: Receiver
let balancer: Balancer
const env = (s: TestStore): Record<string, string> => ({
  DATABASE_URL: s.url,
  AGENTGOV_MASTER_KEY: randomBytes(32).toString("hex"),
  AGENTGOV_PUBLIC_URL: "http://agentgov.test",
  AGENTGOV_WEBHOOK_ALLOWLIST: "127.0.0.1",
  AGENTGOV_WEBHOOK_TIME_SCALE: "0.001",
})
let shared: Record<string, string>

beforeAll(async () => {
  store = await makeTestStore()
  hooks = await startReceiver()
  shared = env(store)
})
afterAll(async () => {
  await stopChildren()
  await balancer?.close()
  await hooks?.close()
  await store?.cleanup()
})

describe("a rolling restart of two instances", () => {
  it("drops no request and no webhook delivery", async () => {
    const a = await spawnServer({ ...shared, AGENTGOV_BOOTSTRAP: "true" })
    const key = await a.waitForKey()
    const b = await spawnServer({ ...shared, AGENTGOV_BOOTSTRAP: "false" })
    balancer = await startBalancer([portOf(a), portOf(b)])
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${balancer.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          ...(method === "POST" ? { "idempotency-key": randomBytes(12).toString("hex") } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      })
      return { status: res.status, body: (await res.json()) as any }
    }
    const hook = await call("POST", "/api/v1/webhooks", { url: `${hooks.url}?w=roll`, events: ["roll.tick"] })
    expect(hook.status, JSON.stringify(hook.body)).toBe(201)

    const failures: Array<string> = []
    const written = new Set<number>()
    let n = 0
    let running = true
    const client = async () => {
      while (running) {
        const i = n++
        try {
          const r =
            i % 3 === 2
              ? await call("GET", "/api/v1/agents")
              : await call("POST", "/api/v1/events/ingest", { events: [{ type: "roll.tick", data: { n: i } }] })
          if (r.status >= 300) failures.push(`#${i}: ${r.status} ${JSON.stringify(r.body)}`)
          else if (i % 3 !== 2) written.add(i)
        } catch (e) {
          failures.push(`#${i}: ${String(e)}`)
        }
      }
    }
    const clients = [client(), client(), client()]

    const restart = async (old: ChildServer, index: number) => {
      await sleep(300)
      old.proc.kill("SIGTERM")
      await old.exited
      const fresh = await spawnServer({ ...shared, AGENTGOV_BOOTSTRAP: "false" })
      balancer.backends[index] = portOf(fresh)
      return fresh
    }
    await restart(a, 0)
    await restart(b, 1)
    await sleep(300)
    running = false
    await Promise.all(clients)

    expect(failures).toEqual([])
    expect(written.size).toBeGreaterThan(10)
    // Every event written reached the webhook (at least once; a receiver dedupes by the delivery id).
    await hooks.waitFor(
      (all) => {
        const seen = new Set(all.filter((r) => r.url === "/hook?w=roll").map((r) => r.body?.data?.n as number))
        return [...written].every((i) => seen.has(i))
      },
      60_000,
      `deliveries of ${written.size} events`,
    )
  }, 180_000)
})
