import { type ClientRequest, request } from "node:http"
import { setTimeout as sleep } from "node:timers/promises"
import { measure, round, summarise } from "./report.ts"
import { type BenchServer, processRssBytes } from "./server.ts"

export interface SseShape {
  readonly subscribers: number
  /** Events written, one per ingest call ... */
  readonly events: number
  /** ... one call every `intervalMs`. */
  readonly intervalMs: number
}

interface Subscriber {
  readonly req: ClientRequest
  primed: boolean
  ticks: number
}

/** Milliseconds since the epoch, sub-millisecond: the send time in the event and the receive time here. */
const now = () => performance.timeOrigin + performance.now()

/** Opens one stream; every `data:` message is handed to `onMessage` with the time its chunk arrived. */
const subscribe = (server: BenchServer, onMessage: (s: Subscriber, data: any, at: number) => void) =>
  new Promise<Subscriber>((resolve, reject) => {
    // One connection per stream (no agent): 1,000 open sockets, as 1,000 separate subscribers would have.
    const req = request(`${server.url}/api/v1/events/stream?types=bench.sse.*`, {
      agent: false,
      headers: { authorization: `Bearer ${server.key}`, accept: "text/event-stream" },
    })
    const s: Subscriber = { req, primed: false, ticks: 0 }
    req.on("error", reject)
    req.on("response", (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`))
      res.setEncoding("utf8")
      res.on("error", () => {}) // destroyed at the end
      let buffer = ""
      res.on("data", (chunk: string) => {
        const at = now()
        buffer += chunk
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const line = block.split("\n").find((l) => l.startsWith("data: "))
          if (line) onMessage(s, JSON.parse(line.slice(6)), at)
        }
      })
      resolve(s)
    })
    req.end()
  })

const ingestOne = (server: BenchServer, type: string, data: Record<string, unknown>) =>
  server.call("POST", "/api/v1/events/ingest", { events: [{ type, data }] }).then((res) => {
    if (res.status !== 201) throw new Error(`ingest answered ${res.status}: ${JSON.stringify(res.body)}`)
  })

/**
 * `subscribers` streams on `GET /events/stream`; then one event every
 * `intervalMs`, each carrying the time just before its ingest call. Delivery
 * latency is that time to the arrival of the event on each stream.
 */
export const runSse = async (server: BenchServer, shape: SseShape) => {
  const latencies: Array<number> = []
  const onMessage = (s: Subscriber, data: any, at: number) => {
    if (data.type === "bench.sse.prime") s.primed = true
    else if (data.type === "bench.sse.tick") {
      s.ticks += 1
      latencies.push(at - data.payload.data.sentAt)
    }
  }

  // The server's RSS before the streams and once all are open and primed: what they hold.
  const rssBeforeBytes = processRssBytes(server.pid)
  // Connect, 50 at a time.
  const subscribers: Array<Subscriber> = []
  const connectStart = performance.now()
  for (let i = 0; i < shape.subscribers; i += 50) {
    const n = Math.min(50, shape.subscribers - i)
    subscribers.push(...(await Promise.all(Array.from({ length: n }, () => subscribe(server, onMessage)))))
  }
  const connectMs = performance.now() - connectStart

  try {
    // A stream subscribes after its headers are sent: wait until every one has received an event.
    let primes = 0
    while (subscribers.some((s) => !s.primed)) {
      if (primes === 20)
        throw new Error(`${subscribers.filter((s) => !s.primed).length} streams never received an event`)
      primes += 1
      await ingestOne(server, "bench.sse.prime", { n: primes })
      for (let waited = 0; waited < 1_000 && subscribers.some((s) => !s.primed); waited += 20) await sleep(20)
    }

    const rssOpenBytes = processRssBytes(server.pid)
    const expected = shape.subscribers * shape.events
    const measured = await measure(server, async () => {
      const calls: Array<Promise<void>> = []
      const start = performance.now()
      for (let i = 0; i < shape.events; i++) {
        calls.push(ingestOne(server, "bench.sse.tick", { i, sentAt: now() }))
        await sleep(Math.max(0, start + (i + 1) * shape.intervalMs - performance.now()))
      }
      await Promise.all(calls)
      const deadline = performance.now() + 5_000
      while (latencies.length < expected && performance.now() < deadline) await sleep(10)
    })
    return {
      ...measured,
      connectMs: round(connectMs),
      primes,
      rssBeforeBytes,
      rssOpenBytes,
      expected,
      delivered: latencies.length,
      latencyMs: summarise(latencies),
    }
  } finally {
    for (const s of subscribers) s.req.destroy()
  }
}
