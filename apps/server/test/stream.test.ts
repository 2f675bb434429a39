import { PostgresClient } from "@agentgov/db"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startServer } from "../src/server.ts"
import { startTestServer, type TestServer, testConfig } from "./helpers.ts"

interface SseMessage {
  readonly id?: string
  readonly data?: any
  readonly comment?: string
}

/** A minimal SSE reader over fetch: collects messages until closed. */
const openStream = async (url: string, key: string, headers: Record<string, string> = {}) => {
  const controller = new AbortController()
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}`, ...headers }, signal: controller.signal })
  const messages: Array<SseMessage> = []
  const waiters: Array<() => void> = []
  let buffer = ""
  const pump = (async () => {
    if (!res.body) return
    const decoder = new TextDecoder()
    try {
      for await (const chunk of res.body as any as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true })
        let idx = buffer.indexOf("\n\n")
        while (idx >= 0) {
          const block = buffer.slice(0, idx)
          buffer = buffer.slice(idx + 2)
          const msg: { id?: string; data?: any; comment?: string } = {}
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) msg.comment = line.slice(1).trim()
            else if (line.startsWith("id: ")) msg.id = line.slice(4)
            else if (line.startsWith("data: ")) msg.data = JSON.parse(line.slice(6))
          }
          messages.push(msg)
          for (const w of waiters.splice(0)) w()
          idx = buffer.indexOf("\n\n")
        }
      }
    } catch {
      // aborted
    }
  })()
  const events = () => messages.filter((m) => m.data !== undefined)
  const waitFor = async (predicate: () => boolean, ms = 10_000) => {
    const deadline = Date.now() + ms
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out; got ${JSON.stringify(messages.slice(-5))}`)
      await new Promise<void>((r) => {
        waiters.push(r)
        setTimeout(r, 100)
      })
    }
  }
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    messages,
    events,
    waitFor,
    close: async () => {
      controller.abort()
      await pump
    },
  }
}

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
})
afterAll(async () => t?.close())

const ingest = (types: Array<string>, agentId?: string) =>
  t.call("POST", "/api/v1/events/ingest", {
    body: { events: types.map((type, i) => ({ type, data: { i }, ...(agentId ? { agentId } : {}) })) },
  })

describe("GET /events/stream", () => {
  it("delivers events committed after connecting, in order, as {type, payload} with the event id", async () => {
    const s = await openStream(`${t.url}/api/v1/events/stream?types=live.*`, t.key)
    expect(s.status).toBe(200)
    expect(s.contentType).toContain("text/event-stream")
    await ingest(["live.one", "other.skip", "live.two"])
    await s.waitFor(() => s.events().length >= 2)
    const [a, b] = s.events()
    expect(a!.data.type).toBe("live.one")
    expect(b!.data.type).toBe("live.two")
    expect(a!.id).toBe(a!.data.payload.id)
    expect(b!.data.payload.sequence).toBeGreaterThan(a!.data.payload.sequence)
    expect(b!.data.payload).toMatchObject({ workspaceId: t.workspaceId, hash: expect.stringMatching(/^[0-9a-f]{64}$/) })
    await s.close()
  })

  it("resumes with Last-Event-ID across a disconnect without loss or duplicate", async () => {
    const first = await openStream(`${t.url}/v1/events/stream?types=resume.*`, t.key)
    await ingest(["resume.a", "resume.b"])
    await first.waitFor(() => first.events().length >= 2)
    const lastSeen = first.events().at(-1)!.id!
    await first.close()
    // Written while nobody listens.
    await ingest(["resume.c", "resume.d", "resume.e"])
    const second = await openStream(`${t.url}/v1/events/stream?types=resume.*`, t.key, { "last-event-id": lastSeen })
    await ingest(["resume.f"])
    await second.waitFor(() => second.events().length >= 4)
    expect(second.events().map((m) => m.data.type)).toEqual(["resume.c", "resume.d", "resume.e", "resume.f"])
    await second.close()
  })

  it("filters by agent and refuses an agent key another agent's stream", async () => {
    const a = (await t.call("POST", "/api/v1/agents", { body: { name: "stream-a" } })).body.data.id
    const b = (await t.call("POST", "/api/v1/agents", { body: { name: "stream-b" } })).body.data.id
    const key = await t.createKey({ type: "agent", agentId: a, scopes: ["events:read"] })
    expect(
      (await fetch(`${t.url}/api/v1/events/stream?agentId=${b}`, { headers: { authorization: `Bearer ${key}` } }))
        .status,
    ).toBe(403)
    const s = await openStream(`${t.url}/api/v1/events/stream?types=agentscoped.*`, key)
    await ingest(["agentscoped.x"], b)
    await ingest(["agentscoped.y"], a)
    await s.waitFor(() => s.events().length >= 1)
    await new Promise((r) => setTimeout(r, 200))
    expect(s.events().map((m) => m.data.payload.agentId)).toEqual([a])
    await s.close()
  })

  it("refuses a missing credential, a missing scope and an unknown Last-Event-ID", async () => {
    expect((await fetch(`${t.url}/api/v1/events/stream`)).status).toBe(401)
    const key = await t.createKey({ type: "workspace", scopes: ["agents:read"] })
    const forbidden = await fetch(`${t.url}/api/v1/events/stream`, { headers: { authorization: `Bearer ${key}` } })
    expect(forbidden.status).toBe(403)
    expect(((await forbidden.json()) as any).error.details.field).toBe("scope")
    const unknown = await fetch(`${t.url}/api/v1/events/stream`, {
      headers: { authorization: `Bearer ${t.key}`, "last-event-id": "evt_nope" },
    })
    expect(unknown.status).toBe(400)
    // A filter that can match nothing is refused, not a stream that stays silent.
    for (const bad of ["Foo", "tool", "query.*.x"]) {
      const res = await fetch(`${t.url}/api/v1/events/stream?types=${encodeURIComponent(bad)}`, {
        headers: { authorization: `Bearer ${t.key}` },
      })
      expect(res.status, bad).toBe(400)
      expect(((await res.json()) as any).error.details.field).toBe("types")
    }
  })
})

describe("heartbeats", () => {
  it("sends a comment heartbeat on an idle stream", async () => {
    const fast = await startTestServer({}, { heartbeatMs: 100 })
    try {
      const s = await openStream(`${fast.url}/api/v1/events/stream`, fast.key)
      await s.waitFor(() => s.messages.filter((m) => m.comment === "heartbeat").length >= 2, 5_000)
      expect(s.events()).toHaveLength(0)
      await s.close()
    } finally {
      await fast.close()
    }
  })
})

describe.runIf(process.env.DATABASE_URL)("across server instances (PostgreSQL LISTEN/NOTIFY)", () => {
  it("streams on one instance the events written through another", async () => {
    const other = await startServer(testConfig({ bootstrap: false }), {
      store: PostgresClient.layer({ url: t.store.url! }),
      logger: makeLogger("error", () => {}),
    })
    try {
      const s = await openStream(`${t.url}/api/v1/events/stream?types=cross.*`, t.key)
      const res = await fetch(`${other.url}/api/v1/events/ingest`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
        body: JSON.stringify({ events: [{ type: "cross.instance", data: {} }] }),
      })
      expect(res.status).toBe(201)
      await s.waitFor(() => s.events().length >= 1)
      expect(s.events()[0]!.data.type).toBe("cross.instance")
      await s.close()
    } finally {
      await other.close()
    }
  })
})
