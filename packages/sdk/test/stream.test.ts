import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SseParser } from "../src/core/sse.ts"
import type { AgentGov, StreamEvent } from "../src/index.ts"
import { clientFor, startProxy, startTestServer, type TestServer } from "./helpers.ts"

/** The SSE parser on tricky input, and `events.stream()` against a real server, with resumption. */

describe("SseParser", () => {
  const feedAll = (chunks: ReadonlyArray<string>) => {
    const parser = new SseParser()
    return chunks.flatMap((c) => parser.feed(c))
  }

  it("parses ids, multi-line data, comments and every line ending, across any chunking", () => {
    const text =
      ': connected\n\nid: evt_1\ndata: {"a":1}\n\r\n' +
      "id: evt_2\r\ndata: line one\r\ndata:line two\r\r" +
      ": heartbeat\n\nevent: custom\ndata: x\n\n" +
      "data: no id here\n\n"
    const expected = [
      { id: "evt_1", event: "message", data: '{"a":1}' },
      { id: "evt_2", event: "message", data: "line one\nline two" },
      { id: "evt_2", event: "custom", data: "x" },
      { id: "evt_2", event: "message", data: "no id here" },
    ]
    expect(feedAll([text])).toEqual(expected)
    // One character at a time (a CR and its LF land in different chunks).
    expect(feedAll([...text])).toEqual(expected)
    for (let cut = 1; cut < text.length; cut++) expect(feedAll([text.slice(0, cut), text.slice(cut)])).toEqual(expected)
  })

  it("does not dispatch an unterminated message", () => {
    expect(feedAll(["data: partial"])).toEqual([])
  })
})

describe("events.stream()", () => {
  let t: TestServer
  let client: AgentGov
  beforeAll(async () => {
    t = await startTestServer()
    client = clientFor(t.url, t.key)
  })
  afterAll(() => t.close())

  const type = `sdk.stream.s${Date.now().toString(36)}`

  /** Collects `n` events of the stream, then stops it. */
  const collect = async (iterable: AsyncIterable<StreamEvent>, n: number) => {
    const out: Array<StreamEvent> = []
    for await (const event of iterable) {
      out.push(event)
      if (out.length === n) break
    }
    return out
  }

  it("delivers events as they are recorded, and resumes after lastEventId without loss", async () => {
    // Anchored at an event recorded first, so that nothing recorded while it connects is missed.
    const anchor = (await client.events.ingest([{ type, data: { i: -1 } }])).events[0]!.id
    const live = collect(client.events.stream({ types: [type], lastEventId: anchor }), 3)
    const ingested: Array<string> = []
    for (let i = 0; i < 3; i++) {
      const { events } = await client.events.ingest([{ type, data: { i } }])
      ingested.push(events[0]!.id)
    }
    expect((await live).map((e) => e.id)).toEqual(ingested)

    const resumed = await collect(client.events.stream({ types: [type], lastEventId: ingested[0] }), 2)
    expect(resumed.map((e) => e.id)).toEqual(ingested.slice(1))
    expect(resumed.map((e) => [e.type, e.payload.data.i, e.payload.sequence > 0])).toEqual([
      [type, 1, true],
      [type, 2, true],
    ])
  })

  it("reconnects with Last-Event-ID when the connection drops", async () => {
    const first = (await client.events.ingest([{ type, data: { i: 10 } }])).events[0]!.id
    let streams = 0
    const proxy = await startProxy(t.url, (r) => {
      if (r.path.startsWith("/api/v1/events/stream")) streams++
      // The first connection is refused with a 503: a transient failure to reconnect after.
      return streams === 1 && r.path.startsWith("/api/v1/events/stream") ? { status: 503 } : "pass"
    })
    const via = clientFor(proxy.url, t.key)
    const more = await client.events.ingest([
      { type, data: { i: 11 } },
      { type, data: { i: 12 } },
    ])
    const events = await collect(via.events.stream({ types: [type], lastEventId: first }), 2)
    expect(events.map((e) => e.id)).toEqual(more.events.map((e) => e.id))
    expect(streams).toBe(2)
    await proxy.close()
  })

  it("backs off reconnecting to a service that answers Retry-After: 0, or 200 and an empty body, every time", async () => {
    const cases = [
      // Without backoff: hundreds of connections in 2 s.
      { fault: { status: 503, headers: { "retry-after": "0" } }, ms: 2_000, most: 12 },
      // Without backoff growing (reset on every connect): some 15 in 4 s; growing, some 5.
      { fault: { status: 200, body: "" }, ms: 4_000, most: 10 },
    ]
    for (const { fault, ms, most } of cases) {
      const proxy = await startProxy(t.url, (r) => (r.path.startsWith("/api/v1/events/stream") ? fault : "pass"))
      const controller = new AbortController()
      const iterating = collect(
        clientFor(proxy.url, t.key).events.stream({ types: [type], signal: controller.signal }),
        1,
      )
      await new Promise((r) => setTimeout(r, ms))
      controller.abort()
      await iterating
      expect(proxy.requests.length).toBeLessThan(most)
      await proxy.close()
    }
  })

  it("ends with the service's 401 when the stream's key is revoked, not with a garbled event", async () => {
    const created = await client.apiKeys.create({ name: "stream-revoked", type: "workspace", scopes: ["events:read"] })
    const via = clientFor(t.url, created.apiKey)
    const seen: Array<StreamEvent> = []
    // Settled into a value at once: the stream may end before the revoke call returns.
    const ended = (async () => {
      for await (const event of via.events.stream({ types: [type] })) seen.push(event)
    })().then(
      () => undefined,
      (error: unknown) => error,
    )
    // Connected: an event recorded now arrives.
    const marker = (await client.events.ingest([{ type, data: { i: 20 } }])).events[0]!.id
    for (let i = 0; i < 100 && !seen.some((e) => e.id === marker); i++) await new Promise((r) => setTimeout(r, 50))
    await client.apiKeys.revoke(created.id)
    expect(await ended).toMatchObject({ status: 401, code: "UNAUTHORIZED" })
    expect(seen.every((e) => e.type === type)).toBe(true)
  })

  it("ends with the server's error for a request it refuses", async () => {
    await expect(collect(client.events.stream({ lastEventId: "evt_unknown" }), 1)).rejects.toMatchObject({
      status: 400,
      code: "BAD_REQUEST",
    })
  })
})
