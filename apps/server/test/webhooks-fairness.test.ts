import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer, unique } from "./helpers.ts"
import { type Receiver, startReceiver } from "./webhooks-support.ts"

/**
 * One workspace's backlog to endpoints that never answer does not hold another workspace's webhooks: a worker
 * gives a workspace at most 224 of its 256 attempts in flight, and takes each workspace's due deliveries
 * in turn. Before, 300 deliveries to a hanging endpoint took all 256 places for the whole 10 s time-out,
 * and the other workspace's delivery waited behind two rounds of them. Within a workspace, a webhook starts with 16
 * places and gains one with each answer, up to 192: receivers that never answer do not hold the workspace's other
 * webhooks either (two of them used to fill its share, 192 + 32).
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
const webhook = async (key: string, tag: string, server: TestServer = t) => {
  const res = await server.call("POST", "/api/v1/webhooks", { key, body: { url: `${r.url}?w=${tag}`, events: ["*"] } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
}
const ingest = async (key: string, n: number, server: TestServer = t) => {
  const res = await server.call("POST", "/api/v1/events/ingest", {
    key,
    body: { events: Array.from({ length: n }, (_, i) => ({ type: "load.tick", data: { i } })) },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
}

describe("webhook deliveries across workspaces", () => {
  it("a workspace's hanging endpoint takes at most its share of the worker; another's delivery goes at once", async () => {
    const noisy = await workspace()
    const quiet = await workspace()
    // Fifteen hanging endpoints: each holds the 16 places a webhook starts with (it never answers), and fourteen of
    // them would fill the workspace's share.
    for (let i = 0; i < 15; i++) await webhook(noisy, `slow-${i}-`)
    await webhook(quiet, "fast")
    for (let i = 0; i < 3; i++) await ingest(noisy, 100)
    const slow = () => r.received.filter((x) => x.url.includes("w=slow-")).length
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

describe("webhook deliveries within a workspace", () => {
  it("webhooks whose receivers never answer hold the places they start with; the workspace's others are all delivered meanwhile", async () => {
    // A server of its own: the other suite's hanging attempts would hold this worker's places.
    const own = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
    try {
      await webhook(own.key, "slow-dead-1", own)
      await webhook(own.key, "slow-dead-2", own)
      await webhook(own.key, "fast-healthy", own)
      for (let i = 0; i < 3; i++) await ingest(own.key, 100, own)
      const dead = () => r.received.filter((x) => x.url.includes("w=slow-dead"))
      const healthy = () => r.received.filter((x) => x.url.includes("w=fast-healthy"))
      // The moment the last of the healthy webhook's 300 deliveries arrives, what the dead receiver had been sent.
      let deadThen: ReadonlyArray<number> = []
      await r.waitFor(
        () => {
          if (healthy().length < 300) return false
          deadThen = dead().map((x) => x.body.metadata.attempt)
          return true
        },
        20_000,
        "the healthy webhook's deliveries",
      )
      expect(new Set(healthy().map((x) => x.body.id)).size).toBe(300)
      // None of the dead receivers' attempts had timed out (each would have been replaced by another, or retried).
      expect(deadThen.length).toBeLessThanOrEqual(32)
      expect(deadThen.every((n) => n === 1)).toBe(true)
      // Each dead receiver holds the 16 places a webhook starts with, and no more: it never answered.
      await r.waitFor(() => dead().length >= 32, 20_000, "the dead receivers' attempts")
      let held = -1
      while (dead().length !== held) {
        held = dead().length
        await new Promise((resolve) => setTimeout(resolve, 300))
      }
      expect(held).toBe(32)
      for (const tag of ["w=slow-dead-1", "w=slow-dead-2"])
        expect(dead().filter((x) => x.url.includes(tag))).toHaveLength(16)
      expect(dead().every((x) => x.body.metadata.attempt === 1)).toBe(true)
    } finally {
      await own.close()
    }
  })
})

describe("a webhook's places", () => {
  it("grow past the 16 it starts with as its receiver answers, however slowly, up to its share", {
    timeout: 90_000,
  }, async () => {
    const own = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
    const before = r.answer
    try {
      // Every request to it answered after 300 ms, its own webhook.created's too (set before it exists).
      r.answer = (x) => (x.url.includes("w=slow-answering") ? { status: 200, afterMs: 300 } : before(x))
      await webhook(own.key, "slow-answering", own)
      const all = () => r.received.filter((x) => x.url.includes("w=slow-answering"))
      const answering = () => all().filter((x) => x.body.type === "load.tick")
      for (let i = 0; i < 10; i++) await ingest(own.key, 100, own)
      await r.waitFor(
        () => answering().length >= 1_000 && all().every((x) => x.answeredAt !== undefined),
        60_000,
        "the 1,000 answers",
      )
      // The most attempts that were open at the receiver at once (each open from its arrival to its answer).
      const spans = all().map((x) => [x.at, x.answeredAt!] as const)
      const open = spans.map(([at]) => spans.filter(([from, to]) => from <= at && at < to).length)
      const peak = Math.max(...open)
      // Before its receiver's first answer, the webhook had its first 16 places and no more.
      const firstAnswer = Math.min(...spans.map(([, to]) => to))
      expect(spans.filter(([at]) => at < firstAnswer).length).toBeLessThanOrEqual(16)
      expect(new Set(answering().map((x) => x.body.id)).size).toBe(1_000)
      // Held at its first 16 it would never pass 16; each answer gave it another place (192 open at once on a quiet
      // machine; how many depends on how fast the queue is fed, so the test asks for twice the start).
      expect(peak).toBeGreaterThan(32)
      expect(peak).toBeLessThanOrEqual(192)
    } finally {
      r.answer = before
      await own.close()
    }
  })
})

describe("a webhook's places, when its receiver stops answering", () => {
  it("go back to the 16 it started with once an attempt ends unanswered", { timeout: 90_000 }, async () => {
    const own = await startTestServer({ webhookAllowlist: ["127.0.0.1"] })
    const before = r.answer
    try {
      const flaky = () => r.received.filter((x) => x.url.includes("w=flaky"))
      // Its first 150 requests (its own webhook.created among them: set before it exists) answered at once, so its
      // share grows to 16 + 150; then nothing is answered: every attempt hangs to its 10 s time-out.
      r.answer = (x) => (x.url.includes("w=flaky") ? (flaky().length <= 150 ? 200 : "hang") : before(x))
      await webhook(own.key, "flaky", own)
      for (let i = 0; i < 5; i++) await ingest(own.key, 100, own)
      /** Waits until `n` requests came, then a little longer: none more may come. */
      const exactly = async (n: number, what: string) => {
        await r.waitFor(() => flaky().length >= n, 30_000, what)
        await new Promise((resolve) => setTimeout(resolve, 1_500))
        return flaky().length
      }
      // The share it had grown to, all of it hanging now.
      expect(await exactly(150 + 166, "the grown share's attempts")).toBe(150 + 166)
      // Those attempts time out unanswered; the next ones (retries, and the deliveries still waiting) get 16 places.
      expect(await exactly(150 + 166 + 16, "attempts after the time-outs")).toBe(150 + 166 + 16)
    } finally {
      r.answer = before
      await own.close()
    }
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
