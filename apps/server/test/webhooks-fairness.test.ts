import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer, unique } from "./helpers.ts"
import { type Receiver, startReceiver } from "./webhooks-support.ts"

/**
 * One workspace's backlog to an endpoint that never answers does not hold another workspace's webhooks: a worker
 * gives a workspace at most 224 of its 256 attempts in flight, and takes each workspace's due deliveries
 * in turn. Before, 300 deliveries to a hanging endpoint took all 256 places for the whole 10 s time-out,
 * and the other workspace's delivery waited behind two rounds of them.
 */

let t: TestServer
let r: Receiver
beforeAll(async () => {
  t = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
  r = await startReceiver()
  r.answer = (x) => (x.url.includes("w=slow") ? "hang" : 200)
})
afterAll(async () => {
  await t?.close()
  await r?.close()
})

const workspace = async () => {
  const made = await t.call("POST", "/api/v1/workspaces", { body: { name: unique("fair") } })
  expect(made.status, JSON.stringify(made.body)).toBe(201)
  return made.body.data.apiKey.apiKey as string
}
const webhook = async (key: string, tag: string) => {
  const res = await t.call("POST", "/api/v1/webhooks", { key, body: { url: `${r.url}?w=${tag}`, events: ["*"] } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
}
const ingest = async (key: string, n: number) => {
  const res = await t.call("POST", "/api/v1/events/ingest", {
    key,
    body: { events: Array.from({ length: n }, (_, i) => ({ type: "load.tick", data: { i } })) },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
}

describe("webhook deliveries across workspaces", () => {
  it("a workspace's hanging endpoint takes at most its share of the worker; another's delivery goes at once", async () => {
    const noisy = await workspace()
    const quiet = await workspace()
    await webhook(noisy, "slow")
    await webhook(quiet, "fast")
    for (let i = 0; i < 3; i++) await ingest(noisy, 100)
    const slow = () => r.received.filter((x) => x.url.includes("w=slow")).length
    // The noisy workspace's attempts open and hang there, as many as the worker gives it: its share.
    await r.waitFor(() => slow() >= 224, 20_000, "the noisy workspace's attempts")
    let held = -1
    while (slow() !== held) {
      held = slow()
      await new Promise((resolve) => setTimeout(resolve, 300))
    }
    expect(held).toBe(224)
    await ingest(quiet, 1)
    await r.waitFor((all) => all.some((x) => x.url.includes("w=fast")), 20_000, "the quiet workspace's delivery")
    // It went while the noisy attempts still hung: none had timed out, been retried or been replaced.
    expect(slow()).toBe(held)
  })
})

describe("stopping with attempts in flight", () => {
  it("records what finished, leaves the rest to their leases, and logs no error for them", async () => {
    const own = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
    let closed = false
    try {
      const made = await own.call("POST", "/api/v1/webhooks", {
        body: { url: `${r.url}?w=slow-stop`, events: ["*"], retryPolicy: "extended" },
      })
      expect(made.status, JSON.stringify(made.body)).toBe(201)
      const ingested = await own.call("POST", "/api/v1/events/ingest", {
        body: { events: Array.from({ length: 10 }, (_, i) => ({ type: "stop.tick", data: { i } })) },
      })
      expect(ingested.status).toBe(201)
      await r.waitFor((all) => all.filter((x) => x.url.includes("w=slow-stop")).length >= 10, 20_000, "ten attempts")
      await own.close()
      closed = true
      // The attempts end once the runtime is gone (their connections closed); give them the turn to.
      await new Promise((resolve) => setTimeout(resolve, 500))
      const errors = own.logs.filter((l) => l.includes('"level":"error"'))
      expect(errors).toEqual([])
    } finally {
      if (!closed) await own.close()
    }
  })
})
