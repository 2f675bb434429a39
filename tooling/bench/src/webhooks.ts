import { createHmac, timingSafeEqual } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import { type BenchmarkResult, benchmark, measure, round, summarise, target } from "./report.ts"
import { type BenchServer, jsonClient } from "./server.ts"

export interface WebhookShape {
  /** Latency: single-event ingest calls ... */
  readonly latencyEvents: number
  /** ... one every `latencyIntervalMs`. */
  readonly latencyIntervalMs: number
  /** Throughput: events ingested as fast as `clients` can, in calls of `batch`. */
  readonly throughputEvents: number
  readonly batch: number
  readonly clients: number
}

export const WEBHOOK_SHAPE: WebhookShape = {
  latencyEvents: 200,
  latencyIntervalMs: 20,
  throughputEvents: 20_000,
  batch: 100,
  clients: 4,
}

/** Milliseconds since the epoch, sub-millisecond: the send time in the event and the arrival time here. */
const now = () => performance.timeOrigin + performance.now()

interface Arrival {
  readonly at: number
  readonly body: any
  readonly signedOk: boolean
}

/** A receiver on loopback that answers 200 at once and checks each signature (spec rule 1–2). */
const startReceiver = async (onArrival: (a: Arrival) => void) => {
  let secret = ""
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const at = now()
      res.writeHead(200).end()
      const raw = Buffer.concat(chunks).toString("utf8")
      const expected = Buffer.from(
        `v1=${createHmac("sha256", secret).update(`${req.headers["x-svc-webhook-id"]}.${req.headers["x-svc-webhook-timestamp"]}.${raw}`).digest("hex")}`,
      )
      const given = Buffer.from(String(req.headers["x-svc-webhook-signature"] ?? ""))
      onArrival({
        at,
        body: JSON.parse(raw),
        signedOk: given.length === expected.length && timingSafeEqual(given, expected),
      })
    })
  })
  server.keepAliveTimeout = 30_000
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/bench`,
    setSecret: (s: string) => {
      secret = s
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

const expectStatus = (res: { status: number; body: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what} answered ${res.status}: ${JSON.stringify(res.body)}`)
  return res.body.data
}

/**
 * Webhook delivery: event written → delivered to a receiver on loopback.
 * A workspace with one webhook, on loopback (the bench server's
 * AGENTGOV_WEBHOOK_ALLOWLIST names 127.0.0.1); latency from just before each ingest call
 * to the delivery's arrival (single events, paced); throughput as
 * deliveries per second from the first ingest call to the last arrival, with
 * events ingested as fast as the clients can.
 */
export async function runWebhookBenchmark(
  server: BenchServer,
  shape: WebhookShape = WEBHOOK_SHAPE,
): Promise<BenchmarkResult> {
  const arrivals = new Map<string, Arrival>()
  let duplicates = 0
  const receiver = await startReceiver((a) => {
    if (arrivals.has(a.body.id)) duplicates++
    else arrivals.set(a.body.id, a)
  })
  const ws = expectStatus(
    await server.call("POST", "/api/v1/workspaces", {
      name: `bench-webhooks-${Date.now()}`,
      environment: "test",
      plan: "enterprise",
    }),
    201,
    "creating the workspace",
  )
  const api = jsonClient(server.url, ws.apiKey.apiKey as string, 64)
  try {
    const hook = expectStatus(
      await api.call("POST", "/api/v1/webhooks", { url: receiver.url, events: ["bench.webhook.*"] }),
      201,
      "registering the webhook",
    )
    receiver.setSecret(hook.secret)
    const ingest = async (events: ReadonlyArray<{ type: string; data: Record<string, unknown> }>) =>
      expectStatus(await api.call("POST", "/api/v1/events/ingest", { events }), 201, "ingest").events as Array<{
        id: string
      }>
    const waitFor = async (ids: ReadonlyArray<string>, ms: number) => {
      const deadline = performance.now() + ms
      while (performance.now() < deadline && ids.some((id) => !arrivals.has(id))) await sleep(5)
    }

    // Warm-up: connections, plans, JIT.
    const warm = await ingest(Array.from({ length: 100 }, (_, i) => ({ type: "bench.webhook.warm", data: { i } })))
    await waitFor(
      warm.map((e) => e.id),
      30_000,
    )

    // Latency, paced single events.
    const sent = new Map<string, number>()
    const latency = await measure(server, async () => {
      const calls: Array<Promise<void>> = []
      const start = performance.now()
      for (let i = 0; i < shape.latencyEvents; i++) {
        const sentAt = now()
        calls.push(
          ingest([{ type: "bench.webhook.tick", data: { i, sentAt } }]).then(([e]) => {
            sent.set(e!.id, sentAt)
          }),
        )
        await sleep(Math.max(0, start + (i + 1) * shape.latencyIntervalMs - performance.now()))
      }
      await Promise.all(calls)
      await waitFor([...sent.keys()], 10_000)
    })
    const latencies = [...sent].flatMap(([id, at]) => (arrivals.has(id) ? [arrivals.get(id)!.at - at] : []))

    // Throughput: as fast as the clients ingest; deliveries per second until the last one arrives.
    const ids: Array<string> = []
    let firstSend = 0
    let ingested = 0
    const perClient = Math.ceil(shape.throughputEvents / shape.batch / shape.clients)
    const throughput = await measure(server, async () => {
      firstSend = now()
      await Promise.all(
        Array.from({ length: shape.clients }, async (_, c) => {
          for (let k = 0; k < perClient; k++) {
            const stored = await ingest(
              Array.from({ length: shape.batch }, (_, i) => ({ type: "bench.webhook.load", data: { c, k, i } })),
            )
            ids.push(...stored.map((e) => e.id))
          }
        }),
      )
      ingested = now()
      await waitFor(ids, 120_000)
    })
    const delivered = ids.filter((id) => arrivals.has(id))
    const lastArrival = Math.max(...delivered.map((id) => arrivals.get(id)!.at))
    const perSecond = delivered.length / ((lastArrival - firstSend) / 1000)
    const badSignatures = [...arrivals.values()].filter((a) => !a.signedOk).length
    const stats = expectStatus(await api.call("GET", `/api/v1/webhooks/${hook.id}`), 200, "reading the webhook").stats

    const lat = summarise(latencies)
    return benchmark({
      name: "webhooks",
      what: `one webhook on a loopback receiver; latency: ${shape.latencyEvents} single-event ingest calls, one every ${shape.latencyIntervalMs} ms, from before the call to arrival; throughput: ${ids.length} events in calls of ${shape.batch} by ${shape.clients} clients, deliveries/s from the first call to the last arrival`,
      unit: "ms (p50)",
      value: lat.p50,
      targets: [
        target("event → delivery p50 (ms)", "max", 50, lat.p50),
        target("deliveries/s, sustained", "min", 1_000, perSecond),
        target("share delivered", "min", 1, (latencies.length + delivered.length) / (sent.size + ids.length)),
        target("deliveries with a bad signature", "max", 1, badSignatures),
      ],
      details: {
        shape,
        latencyMs: lat,
        latencyWindow: latency,
        throughput: {
          events: ids.length,
          delivered: delivered.length,
          deliveriesPerSecond: round(perSecond),
          ingestAndDrainMs: round(lastArrival - firstSend),
          ingestMs: round(ingested - firstSend),
          ...throughput,
        },
        duplicateArrivals: duplicates,
        badSignatures,
        webhookStats: stats,
      },
    })
  } finally {
    api.close()
    await receiver.close()
  }
}
