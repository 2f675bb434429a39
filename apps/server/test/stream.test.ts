import { connect } from "node:net"
import { PostgresClient } from "@agentgov/db"
import postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ConfigError, loadConfig } from "../src/config.ts"
import { makeLogger } from "../src/logger.ts"
import { startServer } from "../src/server.ts"
import { expectError, startTestServer, type TestServer, testConfig, unique, withAuthorizations } from "./helpers.ts"

interface SseMessage {
  readonly id?: string
  /** The `event:` name; absent on event messages. */
  readonly event?: string
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
  let ended = false
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
          const msg: { id?: string; event?: string; data?: any; comment?: string } = {}
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) msg.comment = line.slice(1).trim()
            else if (line.startsWith("id: ")) msg.id = line.slice(4)
            else if (line.startsWith("event: ")) msg.event = line.slice(7)
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
    ended = true
    for (const w of waiters.splice(0)) w()
  })()
  const events = () => messages.filter((m) => m.data !== undefined && m.event === undefined)
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
    /** The server ended the response (not the client). */
    ended: () => ended,
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

  it("refuses two Authorization headers whichever comes first, and watches no credential for it", async () => {
    // The stream is authenticated and watched by the one rule of the API (bearerOfRequest): never the first of two.
    const streamWith = async (authorization: Array<string>) => {
      const res = await withAuthorizations(`${t.url}/api/v1/events/stream`, authorization)
      return { status: res.status, body: JSON.parse(res.text) }
    }
    for (const headers of [
      [`Bearer ${t.key}`, "Bearer svc_ws_live_guess"],
      ["Bearer svc_ws_live_guess", `Bearer ${t.key}`],
      [`Bearer ${t.key}`, `Bearer ${t.key}`],
    ]) {
      const res = await streamWith(headers)
      expect(res.status).toBe(401)
      expect(res.body.error.message).toMatch(/one Authorization header/)
    }
  })
})

/** A key of the bootstrap workspace that may read events, and its id. */
const readerKey = async (extra: Record<string, unknown> = {}) => {
  const res = await t.call("POST", "/api/v1/api-keys", {
    body: { name: unique("stream reader"), type: "workspace", scopes: ["events:read"], ...extra },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return { key: res.body.data.apiKey as string, id: res.body.data.id as string }
}

const exchange = async (server: { url: string }, key: string) => {
  const res = await fetch(`${server.url}/api/v1/tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
  })
  expect(res.status).toBe(201)
  return ((await res.json()) as any).data.token as string
}

/** The stream ended itself, its last message the 401 envelope as an `error` event naming the reason. */
const expectEndedBecause = (s: Awaited<ReturnType<typeof openStream>>, reason: RegExp) => {
  expect(s.ended()).toBe(true)
  const last = s.messages.at(-1)!
  expect(last.event).toBe("error")
  expect(last.data).toMatchObject({ ok: false, error: { code: "UNAUTHORIZED" } })
  expect(last.data.error.message).toMatch(reason)
}

describe("a stream's credential is held to the rule of every request (D4, D5)", () => {
  it("ends once its API key is revoked, and delivers nothing recorded after the revocation", async () => {
    const { key, id } = await readerKey()
    const s = await openStream(`${t.url}/api/v1/events/stream?types=revoking.*`, key)
    await ingest(["revoking.before"])
    await s.waitFor(() => s.events().length >= 1)
    expect((await t.call("DELETE", `/api/v1/api-keys/${id}`)).status).toBe(200)
    await ingest(["revoking.after"])
    await s.waitFor(s.ended, 15_000)
    expectEndedBecause(s, /revoked/)
    expect(s.events().map((m) => m.data.type)).toEqual(["revoking.before"])
    // What the client does next: reconnecting is refused.
    expect((await fetch(`${t.url}/api/v1/events/stream`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(
      401,
    )
  })

  it("ends a stream of an SDK token once the key it came from is revoked", async () => {
    const { key, id } = await readerKey()
    const s = await openStream(`${t.url}/api/v1/events/stream`, await exchange(t, key))
    expect(s.status).toBe(200)
    expect((await t.call("DELETE", `/api/v1/api-keys/${id}`)).status).toBe(200)
    await s.waitFor(s.ended, 15_000)
    expectEndedBecause(s, /revoked/)
  })

  it("ends when its API key expires, and when its key's token does", async () => {
    // 5 s: both streams (one after a token exchange) open before it on a loaded machine too.
    const expiresAt = new Date(Date.now() + 5_000).toISOString()
    const { key } = await readerKey({ expiresAt })
    const byKey = await openStream(`${t.url}/api/v1/events/stream`, key)
    const byToken = await openStream(`${t.url}/api/v1/events/stream`, await exchange(t, key))
    expect([byKey.status, byToken.status]).toEqual([200, 200])
    await byKey.waitFor(byKey.ended, 15_000)
    await byToken.waitFor(byToken.ended, 15_000)
    expectEndedBecause(byKey, /expired/)
    expectEndedBecause(byToken, /expired/)
  })
})

describe("limits", () => {
  let limited: TestServer
  beforeAll(async () => {
    limited = await startTestServer({
      streamLimits: { plans: { free: 3, pro: 3, enterprise: 3 }, key: 2, process: 1_000 },
    })
  })
  afterAll(async () => limited?.close())

  const keyOf = async () => limited.createKey({ type: "workspace", scopes: ["events:read"] })
  const refused = async (key: string, server = limited) => {
    const res = await fetch(`${server.url}/api/v1/events/stream`, { headers: { authorization: `Bearer ${key}` } })
    if (res.status !== 429) await res.body?.cancel()
    expect(res.status).toBe(429)
    const body = (await res.json()) as any
    expectError({ status: res.status, headers: res.headers, body }, 429, "RATE_LIMITED")
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
    return body.error.message as string
  }

  /** Opens a stream, waiting while it is refused: the server learns of a client's close asynchronously. */
  const openWhenFree = async (key: string, server = limited) => {
    const deadline = Date.now() + 10_000
    for (;;) {
      const s = await openStream(`${server.url}/api/v1/events/stream`, key)
      if (s.status !== 429 || Date.now() > deadline) return s
      await s.close()
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  it("refuses a key's stream beyond its limit, keeps the open ones, and frees a slot on close", async () => {
    const key = await keyOf()
    const token = await exchange(limited, key)
    const first = await openStream(`${limited.url}/api/v1/events/stream?types=capped.*`, key)
    // An SDK token counts against the key it came from.
    const second = await openStream(`${limited.url}/api/v1/events/stream?types=capped.*`, token)
    try {
      expect([first.status, second.status]).toEqual([200, 200])
      expect(await refused(key)).toMatch(/API key/)
      const ingested = await limited.call("POST", "/api/v1/events/ingest", {
        body: { events: [{ type: "capped.still", data: {} }] },
      })
      expect(ingested.status).toBe(201)
      await first.waitFor(() => first.events().length >= 1)
      await second.waitFor(() => second.events().length >= 1)
      await first.close()
      const again = await openWhenFree(key)
      expect(again.status).toBe(200)
      await again.close()
    } finally {
      await first.close()
      await second.close()
    }
  })

  /** Runs `f` with the workspace's three streams open, each by a key of its own; closes them after. */
  const withWorkspaceFull = async (f: () => Promise<void>) => {
    const held: Array<Awaited<ReturnType<typeof openStream>>> = []
    try {
      // Earlier streams may still be closing on the server.
      for (let i = 0; i < 3; i++) {
        const s = await openWhenFree(await keyOf())
        held.push(s)
        expect(s.status).toBe(200)
      }
      await f()
    } finally {
      for (const s of held) await s.close()
    }
  }

  it("refuses a workspace's stream beyond its plan's limit, whichever key asks", async () => {
    await withWorkspaceFull(async () => {
      expect(await refused(await keyOf())).toMatch(/workspace \(plan free\)/)
    })
  })

  it("a client that hangs up while its stream is being set up holds no slot", async () => {
    const key = await keyOf()
    const { hostname, port } = new URL(limited.url)
    // More hang-ups than the workspace has slots: each writes the request and closes at once, before the handler
    // has its listener on (a slot taken then was held until a restart).
    for (let i = 0; i < 6; i++)
      await new Promise<void>((resolve, reject) => {
        const socket = connect(Number(port), hostname, () => {
          socket.write(
            `GET /api/v1/events/stream HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${key}\r\n\r\n`,
          )
          socket.destroy()
          resolve()
        })
        socket.on("error", reject)
      })
    // Once the server has seen them go, other keys open streams up to the workspace's limit.
    await withWorkspaceFull(async () => {})
  })

  it("refuses any workspace's stream beyond the process's limit, and frees a slot on close", async () => {
    // Workspaces and keys far below their own limits: only the process's is reached.
    const small = await startTestServer({
      streamLimits: { plans: { free: 50, pro: 50, enterprise: 50 }, key: 50, process: 2 },
    })
    const held: Array<Awaited<ReturnType<typeof openStream>>> = []
    try {
      const created = await small.call("POST", "/api/v1/workspaces", { body: { name: unique("streams") } })
      expect(created.status).toBe(201)
      const elsewhere = created.body.data.apiKey.apiKey as string
      held.push(await openStream(`${small.url}/api/v1/events/stream`, small.key))
      held.push(await openStream(`${small.url}/api/v1/events/stream`, elsewhere))
      expect(held.map((s) => s.status)).toEqual([200, 200])
      expect(await refused(small.key, small)).toMatch(/this server .* 2 open event streams/)
      expect(await refused(elsewhere, small)).toMatch(/this server/)
      // The open ones are not touched by the refusal.
      const ingested = await small.call("POST", "/api/v1/events/ingest", {
        body: { events: [{ type: "process.capped", data: {} }] },
      })
      expect(ingested.status).toBe(201)
      await held[0]!.waitFor(() => held[0]!.events().length >= 1)
      await held[1]!.close()
      const again = await openWhenFree(small.key, small)
      held.push(again)
      expect(again.status).toBe(200)
    } finally {
      for (const s of held) await s.close()
      await small.close()
    }
  })

  it("are configured per plan, per key and per process, and a limit below 1 is refused at start", () => {
    const env = {
      AGENTGOV_STREAM_LIMIT_FREE: "5",
      AGENTGOV_STREAM_LIMIT_ENTERPRISE: "700",
      AGENTGOV_STREAM_LIMIT_KEY: "2",
      AGENTGOV_STREAM_LIMIT_PROCESS: "900",
    }
    expect(loadConfig(env).streamLimits).toEqual({
      plans: { free: 5, pro: 200, enterprise: 700 },
      key: 2,
      process: 900,
    })
    expect(loadConfig({}).streamLimits.process).toBe(5_000)
    expect(() => loadConfig({ AGENTGOV_STREAM_LIMIT_KEY: "0" })).toThrow(ConfigError)
    expect(() => loadConfig({ AGENTGOV_STREAM_LIMIT_PROCESS: "0" })).toThrow(ConfigError)
  })
})

describe("a token's own expiry", () => {
  it("ends a stream when its SDK token expires", async () => {
    // A server of its own: a 2 s lifetime would expire the other suites' tokens on a loaded machine.
    const short = await startTestServer({ tokenTtlSeconds: 2 })
    try {
      const s = await openStream(
        `${short.url}/api/v1/events/stream`,
        await exchange(short, await short.createKey({ type: "workspace", scopes: ["events:read"] })),
      )
      expect(s.status).toBe(200)
      await s.waitFor(s.ended, 15_000)
      expectEndedBecause(s, /expired/)
    } finally {
      await short.close()
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

  /** A token stream on another instance, then its key revoked here (by `revoke`): the stream must end within 5 s. */
  const streamRevokedElsewhere = async (revoke: (keyId: string) => Promise<void>) => {
    const other = await startServer(testConfig({ bootstrap: false }), {
      store: PostgresClient.layer({ url: t.store.url! }),
      logger: makeLogger("error", () => {}),
    })
    try {
      const { key, id } = await readerKey()
      const s = await openStream(`${other.url}/api/v1/events/stream`, await exchange(other, key))
      expect(s.status).toBe(200)
      await revoke(id)
      await s.waitFor(s.ended, 5_000)
      expectEndedBecause(s, /revoked/)
    } finally {
      await other.close()
    }
  }

  it("ends a token's stream on one instance within 5 s of its key's revocation on another", async () => {
    await streamRevokedElsewhere(async (id) => {
      expect((await t.call("DELETE", `/api/v1/api-keys/${id}`)).status).toBe(200)
    })
  })

  it("and when the listening connections have just dropped, the revocation's notice lost", async () => {
    const admin = postgres(t.store.url!, { max: 1, onnotice: () => {} })
    try {
      await streamRevokedElsewhere(async (id) => {
        // The key revoked behind the service's back (no notice: the service sends it, not a trigger), committed,
        // then the listening connections cut: their drop must make every instance read its credentials again. Cut
        // first, inside the revoking transaction, the instances could read the key again before it committed (the
        // drop's read and the one after subscribing again both racing the commit), a flake under CI's load.
        await admin`UPDATE api_keys SET status = 'revoked', revoked_at = now() WHERE id = ${id}`
        const cut = await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'agentgov-listen'`
        expect(cut.length, "both instances listen on a connection of their own").toBeGreaterThanOrEqual(2)
      })
    } finally {
      await admin.end()
    }
  })
})
