import type { Runtime } from "@agentgov/api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startWebhookWorker, type WebhookWorker } from "../src/webhookWorker.ts"
import { startTestServer, type TestServer } from "./helpers.ts"
import { type Receiver, sleep, startReceiver } from "./webhooks-support.ts"

/**
 * A worker whose due deliveries all wait for their webhook's share (a receiver that never answers holds it) does not
 * read the queue again and again for nothing: it sleeps until attempts end, a notification, or the due time of a
 * delivery a claim could take. Before, it claimed and read the next due time every 10 ms for as long as the dead
 * receiver's attempts hung (about 12% of a core in the server and as much in the embedded store, measured from outside).
 * The workspace's other webhooks are delivered meanwhile, their retries at their due times.
 */

let t: TestServer
let r: Receiver
let worker: WebhookWorker | undefined
/** Every queue read (claim, next due time) and record the worker makes goes through here. */
let reads = 0
beforeAll(async () => {
  // No worker of the server's own: the only one is the test's, whose queue reads are counted.
  t = await startTestServer({ webhookAllowlist: ["127.0.0.1"], roles: ["api"] })
  r = await startReceiver()
  r.answer = (x) => {
    if (x.url.includes("w=dead")) return "hang"
    // The healthy webhook's first attempt at a `retry` event fails: its retry is due a second later.
    if (x.body?.data?.retry && x.body.metadata.attempt === 1) return 500
    return 200
  }
  const counting: Pick<Runtime, "runPromise"> = {
    runPromise: ((effect: Parameters<Runtime["runPromise"]>[0]) => {
      reads++
      return t.server.runtime.runPromise(effect)
    }) as Runtime["runPromise"],
  }
  // 8 places: the workspace holds 7, one webhook 6. The poll is far away: only notifications, ended attempts and due
  // times wake the worker here.
  worker = await startWebhookWorker(
    counting,
    makeLogger("error", () => {}),
    { concurrency: 8, pollMs: 600_000 },
  )
})
afterAll(async () => {
  await worker?.stop()
  await r?.close()
  await t?.close()
})

const webhook = async (tag: string, retryPolicy: "exponential" | "extended") => {
  const res = await t.call("POST", "/api/v1/webhooks", {
    body: { url: `${r.url}?w=${tag}`, events: ["idle.*"], retryPolicy },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
}
const ingest = async (events: Array<{ type: string; data: Record<string, unknown> }>) => {
  const res = await t.call("POST", "/api/v1/events/ingest", { body: { events } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
}

describe("a worker whose due deliveries wait for their webhook's share", () => {
  it("reads the queue no more until something can be claimed, and delivers the other webhooks meanwhile", async () => {
    await webhook("dead", "extended")
    await ingest(Array.from({ length: 20 }, (_, i) => ({ type: "idle.tick", data: { i } })))
    const dead = () => r.received.filter((x) => x.url.includes("w=dead")).length
    await r.waitFor(() => dead() >= 6, 20_000, "the dead receiver's attempts")
    // Settled: the claims that filled the share and their follow-ups are done (no read for three 300 ms spells in a
    // row, however long that took on a loaded machine).
    const settling = Date.now()
    for (let last = reads, quiet = 0; quiet < 3 && Date.now() - settling < 5_000; ) {
      await sleep(300)
      quiet = reads === last ? quiet + 1 : 0
      last = reads
    }
    const before = reads
    await sleep(1_000)
    // 14 deliveries are due and none can be claimed (the dead receiver's attempts hang for 30 s): nothing to read.
    expect(reads - before).toBe(0)
    expect(dead()).toBe(6)

    // Another webhook of the workspace: a notification wakes the worker for its delivery, and its retry goes at its
    // due time (a second after the failed attempt), with nothing else waking the worker.
    await webhook("healthy", "exponential")
    await ingest([{ type: "idle.retry", data: { retry: true } }])
    const healthy = () => r.received.filter((x) => x.url.includes("w=healthy"))
    await r.waitFor(() => healthy().length >= 2, 20_000, "the healthy webhook's attempt and retry")
    expect(healthy().map((x) => x.body.metadata.attempt)).toEqual([1, 2])
    expect(dead()).toBe(6)
  })
})
