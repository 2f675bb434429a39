import { createServer, type Server } from "node:http"
import { connect, type Socket } from "node:net"
import { Database } from "@agentgov/db"
import { type Actor, CredentialWatch, EventFeed, StreamSlots } from "@agentgov/domain"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it, vi } from "vitest"
// The store under the feed, replaced by rows in memory: not part of the domain's public surface.
import { EventRepo, type EventRow, toEvent } from "../../domain/src/audit/EventRepo.ts"
import type { Executor, Runtime } from "../src/Executor.ts"
import { makeEventStreamHandler } from "../src/rest/eventStream.ts"

const WS = "ws_1"
const actor: Actor = {
  workspaceId: WS,
  environment: "live",
  credential: { type: "api_key", id: "key_1" },
  keyType: "workspace",
  scopes: new Set(["events:read"]),
}

const row = (sequence: number, pad: string): EventRow => ({
  workspace_id: WS,
  sequence,
  id: `evt_${sequence}`,
  type: "test.blob",
  agent_id: null,
  actor_type: "system",
  actor_id: null,
  data: { pad },
  ts: new Date(0),
  occurred_at: null,
  prev_hash: "0".repeat(64),
  hash: "0".repeat(64),
})

/** A stream handler over `count` stored events of about 30 KB each, on a server of its own. */
const start = async (count: number, options: Parameters<typeof makeEventStreamHandler>[2]) => {
  const pad = "x".repeat(30_000)
  const rows = Array.from({ length: count }, (_, i) => row(i + 1, pad))
  const repo = Layer.succeed(EventRepo)(
    EventRepo.of({
      batch: (_ws: string, after: number, limit: number) =>
        Effect.succeed(rows.filter((r) => r.sequence > after).slice(0, limit)),
      head: () => Effect.succeed({ sequence: count, hash: "" }),
      find: (_ws: string, id: string) =>
        Effect.succeed(rows.find((r) => r.id === id) && toEvent(rows.find((r) => r.id === id)!)),
    } as unknown as EventRepo["Service"]),
  )
  const db = Layer.succeed(Database)(
    Database.of({
      kind: "postgres",
      notify: async () => {},
      announce: () => {},
      query: async () => [],
      forEachRow: async () => {},
      listen: async () => async () => {},
    }),
  )
  let released = 0
  let acquired = 0
  const services = Layer.mergeAll(
    EventFeed.layer.pipe(Layer.provide(Layer.mergeAll(repo, db))),
    Layer.succeed(CredentialWatch)(CredentialWatch.of({ watch: () => ({ checking: () => false, stop: () => {} }) })),
    Layer.succeed(StreamSlots)(
      StreamSlots.of({
        acquire: () =>
          Effect.sync(() => {
            acquired++
            return { ok: true, release: () => void released++ }
          }),
      }),
    ),
  )
  const runtime = ManagedRuntime.make(services) as unknown as Runtime
  const executor = { requireScope: () => undefined } as unknown as Executor
  const handler = makeEventStreamHandler(runtime, executor, options)
  const server: Server = createServer((req, res) => {
    void handler(req, res, new URL(req.url ?? "/", "http://localhost"), "req_1", { ok: true, value: actor }, "s")
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as { port: number }).port
  const sockets: Array<Socket> = []
  const open = (lastEventId: string) => {
    const socket = connect(port, "127.0.0.1")
    sockets.push(socket)
    socket.write(`GET /events/stream HTTP/1.1\r\nHost: x\r\nLast-Event-ID: ${lastEventId}\r\n\r\n`)
    return socket
  }
  return {
    open,
    released: () => released,
    /** Slots taken: a stream holds one from its start (as soon as its response begins) to its end. */
    acquired: () => acquired,
    /** Connections the server holds open. */
    connections: () => new Promise<number>((resolve) => server.getConnections((_, n) => resolve(n))),
    closeStreams: () => handler.closeAll(),
    close: async () => {
      handler.closeAll()
      for (const s of sockets) s.destroy()
      await new Promise((r) => server.close(r))
      await (runtime as unknown as ManagedRuntime.ManagedRuntime<never, never>).dispose()
    },
  }
}

let stop: (() => Promise<void>) | undefined
afterEach(async () => {
  await stop?.()
  stop = undefined
})

describe("GET /events/stream and clients that read slowly or not at all", () => {
  it("sends a backlog larger than the buffer bound at the pace of a client that reads, without dropping it", async () => {
    // 400 stored events of ~30 KB (12 MB) and a 256 KiB bound: more than loopback's socket buffers take at once.
    const s = await start(400, { maxBufferedBytes: 256 * 1024, heartbeatMs: 60_000, stallMs: 5_000 })
    stop = s.close
    const socket = s.open("evt_1")
    // A client busy for a moment (it reads nothing), then reading as fast as it can.
    socket.pause()
    let text = ""
    let ended = false
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1")
    })
    socket.on("close", () => {
      ended = true
    })
    socket.on("error", () => {})
    await new Promise((r) => setTimeout(r, 500))
    socket.resume()
    const ids = () => text.match(/\nid: evt_\d+\n/g)?.length ?? 0
    const deadline = Date.now() + 20_000
    while (ids() < 399 && !ended && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(ended, "the server dropped a client that was reading").toBe(false)
    expect(ids()).toBe(399)
    const all = [...text.matchAll(/\nid: (evt_\d+)\n/g)].map((m) => m[1])
    expect(all[0]).toBe("evt_2")
    expect(all.at(-1)).toBe("evt_400")
  }, 30_000)

  it("drops a client that takes nothing while it catches up, freeing its slot", async () => {
    const s = await start(400, { maxBufferedBytes: 256 * 1024, heartbeatMs: 60_000, stallMs: 300 })
    stop = s.close
    const socket = s.open("evt_1")
    socket.pause()
    socket.on("error", () => {})
    const deadline = Date.now() + 5_000
    while (s.released() === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(s.released()).toBe(1)
  }, 10_000)

  it("does not hold the socket of a stream it ended while its client reads nothing", async () => {
    // Ended (here: shutdown; likewise a revoked or expired credential) with bytes still queued for a client that
    // takes none: no "finish", so no keep-alive time-out either, and the socket would stay for good.
    const s = await start(400, { maxBufferedBytes: 256 * 1024, heartbeatMs: 60_000, stallMs: 300 })
    stop = s.close
    const socket = s.open("evt_1")
    socket.pause()
    socket.on("error", () => {})
    // Open once it took its slot (a fixed wait once ran out before the server got to it).
    await vi.waitFor(() => expect(s.acquired()).toBe(1), { timeout: 5_000, interval: 20 })
    s.closeStreams()
    expect(s.released()).toBe(1)
    const deadline = Date.now() + 3_000
    while ((await s.connections()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(await s.connections()).toBe(0)
  }, 10_000)
})
