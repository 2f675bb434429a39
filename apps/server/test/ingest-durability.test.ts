import { rmSync } from "node:fs"
import { join } from "node:path"
import { isDeepStrictEqual } from "node:util"
import { EventService, SCOPES, systemActor } from "@agentgov/domain"
import { makeTestStore, reachableTempDir, type TestStore } from "@agentgov/testing"
import { Effect, Exit } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type ChildServer, KEY_LINE, kill9, spawnServer, stopChildren } from "./childServer.ts"
import { startTestServer, type TestServer } from "./helpers.ts"

/**
 * The durability and ordering promises of group-committed ingest: under
 * concurrency (one process and two), and across a kill -9 of the server.
 * Runs on the selected store: the embedded PostgreSQL by default, PostgreSQL at DATABASE_URL with it.
 */

// ---------------------------------------------------------------- HTTP client

interface Res {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

const request = async (
  base: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Res> => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    // A hang is a failure, not a stuck suite.
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed }
}

const ingest = (base: string, key: string, events: ReadonlyArray<unknown>, headers: Record<string, string> = {}) =>
  request(base, key, "POST", "/api/v1/events/ingest", { events }, headers)

const verify = async (base: string, key: string) => {
  const res = await request(base, key, "POST", "/api/v1/events/verify")
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return res.body.data as { valid: boolean; checked: number; firstBadSequence?: number; reason?: string }
}

interface StoredEvent {
  readonly id: string
  readonly type: string
  readonly sequence: number
  readonly hash: string
  readonly prevHash: string
  readonly timestamp: string
  readonly data: any
}

/** Every event of the workspace from `fromSequence` on, oldest first, through the paged list. */
const listAll = async (base: string, key: string, fromSequence = 1): Promise<Array<StoredEvent>> => {
  const out: Array<StoredEvent> = []
  let cursor: string | null = null
  do {
    const res: Res = await request(
      base,
      key,
      "GET",
      `/api/v1/events?limit=100&fromSequence=${fromSequence}${cursor ? `&cursor=${cursor}` : ""}`,
    )
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    out.push(...res.body.data)
    cursor = res.body.meta.cursor
  } while (cursor)
  return out.reverse()
}

/** The head sequence: the newest event's, 0 for an empty chain. */
const headOf = async (base: string, key: string) => {
  const res = await request(base, key, "GET", "/api/v1/events?limit=1")
  expect(res.status).toBe(200)
  return (res.body.data[0]?.sequence ?? 0) as number
}

/** One linear chain: sequences from..from+n-1 without gap or duplicate, each prevHash the previous hash. */
const expectLinearChain = (events: ReadonlyArray<StoredEvent>, from: number) => {
  const sequences = events.map((e) => e.sequence)
  expect(sequences).toEqual(Array.from({ length: events.length }, (_, i) => from + i))
  const broken = events.slice(1).filter((e, i) => e.prevHash !== events[i]!.hash)
  expect(broken.map((e) => e.sequence)).toEqual([])
  expect(new Set(events.map((e) => e.id)).size).toBe(events.length)
}

interface Acked {
  readonly id: string
  readonly sequence: number
  readonly hash: string
  readonly data: unknown
}

/** Every acknowledged event is stored with the sequence and hash it was answered with, and its data. */
const expectAllStored = (acked: ReadonlyArray<Acked>, stored: ReadonlyArray<StoredEvent>) => {
  const byId = new Map(stored.map((e) => [e.id, e]))
  const wrong = acked.filter((a) => {
    const e = byId.get(a.id)
    return !e || e.sequence !== a.sequence || e.hash !== a.hash || !isDeepStrictEqual(e.data, a.data)
  })
  const sample = wrong.slice(0, 3).map((a) => ({ acked: a, stored: byId.get(a.id) }))
  expect(
    wrong.length,
    `${wrong.length} of ${acked.length} acknowledged events lost or changed, e.g. ${JSON.stringify(sample)}`,
  ).toBe(0)
}

/** The answered events of one 201, paired with the data that was sent for them. */
const ackedOf = (res: Res, sent: ReadonlyArray<{ data: unknown }>): Array<Acked> => {
  const events = res.body.data.events as Array<{ id: string; sequence: number; hash: string }>
  expect(events).toHaveLength(sent.length)
  return events.map((e, i) => ({ id: e.id, sequence: e.sequence, hash: e.hash, data: sent[i]!.data }))
}

// ------------------------------------------------------------ child servers

/** The store a child server runs on: a fresh database at DATABASE_URL, or a new data dir (its own embedded PostgreSQL). */
interface ChildStore {
  readonly env: Record<string, string>
  readonly cleanup: () => Promise<void>
}

const makeChildStore = async (): Promise<ChildStore> => {
  if (process.env.DATABASE_URL) {
    const store: TestStore = await makeTestStore()
    return { env: { DATABASE_URL: store.url! }, cleanup: store.cleanup }
  }
  const dir = reachableTempDir("agentgov-durability-")
  return {
    env: { AGENTGOV_DATA_DIR: join(dir, "data") },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
}

// ------------------------------------------------------------------- tests

describe("group commit under concurrency (one process)", () => {
  let t: TestServer
  beforeAll(async () => {
    t = await startTestServer()
  })
  afterAll(async () => t?.close())

  it("8 clients × 10 concurrent ingests of 50 events: every call 201, atomic and contiguous, all stored", async () => {
    const before = await headOf(t.url, t.key)
    const CLIENTS = 8
    const CALLS = 10
    const SIZE = 50
    const sentOf = (client: number, call: number) =>
      Array.from({ length: SIZE }, (_, i) => ({ type: "load.event", data: { client, call, i } }))
    const results = await Promise.all(
      Array.from({ length: CLIENTS }, (_, client) =>
        Promise.all(
          Array.from({ length: CALLS }, async (_, call) => {
            const sent = sentOf(client, call)
            return { sent, res: await ingest(t.url, t.key, sent) }
          }),
        ),
      ),
    ).then((r) => r.flat())

    const failed = results
      .filter((r) => r.res.status !== 201)
      .map((r) => `${r.res.status} ${JSON.stringify(r.res.body)}`)
    expect(failed).toEqual([])
    const acked: Array<Acked> = []
    for (const { sent, res } of results) {
      const mine = ackedOf(res, sent)
      // Atomic: one call's events are one run of the chain, with one timestamp.
      expect(mine.map((e) => e.sequence)).toEqual(mine.map((_, i) => mine[0]!.sequence + i))
      expect(new Set(res.body.data.events.map((e: any) => e.timestamp)).size).toBe(1)
      acked.push(...mine)
    }
    const N = CLIENTS * CALLS * SIZE
    expect(acked.map((e) => e.sequence).sort((a, b) => a - b)).toEqual(
      Array.from({ length: N }, (_, i) => before + 1 + i),
    )

    const stored = await listAll(t.url, t.key, before + 1)
    expect(stored).toHaveLength(N)
    expectLinearChain(stored, before + 1)
    expect(stored.every((e) => e.type === "load.event")).toBe(true)
    expectAllStored(acked, stored)
    expect(await verify(t.url, t.key)).toMatchObject({ valid: true, checked: before + N })
  })

  it("10 concurrent calls with one Idempotency-Key and one body: all 201 with the same body, stored once", async () => {
    const events = [
      { type: "idem.same", data: { n: 1 } },
      { type: "idem.same", data: { n: 2 } },
      { type: "idem.same", data: { n: 3 } },
    ]
    const headers = { "idempotency-key": `same-${Date.now()}` }
    const before = await headOf(t.url, t.key)
    const results = await Promise.all(Array.from({ length: 10 }, () => ingest(t.url, t.key, events, headers)))
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(201))
    for (const r of results) expect(r.body).toEqual(results[0]!.body)
    expect(results.filter((r) => r.headers.get("idempotent-replayed") === "true")).toHaveLength(9)

    const ids = results[0]!.body.data.events.map((e: any) => e.id)
    const stored = await request(t.url, t.key, "GET", "/api/v1/events?type=idem.same&limit=100")
    expect(stored.body.data.map((e: any) => e.id).reverse()).toEqual(ids)
    expect(await headOf(t.url, t.key)).toBe(before + 3)
  })

  it("10 concurrent calls with one Idempotency-Key and different bodies: one 201, nine 409, only the winner stored", async () => {
    const headers = { "idempotency-key": `diff-${Date.now()}` }
    const before = await headOf(t.url, t.key)
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, variant) =>
        ingest(t.url, t.key, [{ type: "idem.diff", data: { variant } }], headers),
      ),
    )
    const won = results.filter((r) => r.status === 201)
    const lost = results.filter((r) => r.status !== 201)
    expect(won).toHaveLength(1)
    expect(lost).toHaveLength(9)
    for (const r of lost) {
      expect(r.status, JSON.stringify(r.body)).toBe(409)
      expect(r.body.error.code).toBe("IDEMPOTENCY_KEY_REUSED")
    }
    const stored = await request(t.url, t.key, "GET", "/api/v1/events?type=idem.diff&limit=100")
    expect(stored.body.data.map((e: any) => e.id)).toEqual([won[0]!.body.data.events[0].id])
    expect(await headOf(t.url, t.key)).toBe(before + 1)
    expect(await verify(t.url, t.key)).toMatchObject({ valid: true, checked: before + 1 })
  })

  it("an invalid call among concurrent valid ones fails alone", async () => {
    const before = await headOf(t.url, t.key)
    const sentOf = (call: number) => Array.from({ length: 5 }, (_, i) => ({ type: "mixed.ok", data: { call, i } }))
    const calls = Array.from({ length: 10 }, (_, call) =>
      call === 4
        ? [
            { type: "mixed.bad", data: { call, i: 0 } },
            { type: "mixed.bad", agentId: "agt_nope", data: { call, i: 1 } },
          ]
        : sentOf(call),
    )
    const results = await Promise.all(calls.map((events) => ingest(t.url, t.key, events)))
    const bad = results[4]!
    expect(bad.status, JSON.stringify(bad.body)).toBe(422)
    expect(bad.body.error.details.field).toBe("events[1].agentId")
    const good = results.filter((_, i) => i !== 4)
    expect(good.map((r) => r.status)).toEqual(Array(9).fill(201))
    const acked = good.flatMap((r, j) => ackedOf(r, calls[j < 4 ? j : j + 1]!))

    const stored = await listAll(t.url, t.key, before + 1)
    expect(stored).toHaveLength(45)
    expectLinearChain(stored, before + 1)
    expect(stored.filter((e) => e.type === "mixed.bad")).toEqual([])
    expectAllStored(acked, stored)
    expect(await verify(t.url, t.key)).toMatchObject({ valid: true, checked: before + 45 })
  })

  it("a call the database refuses inside the group's transaction fails alone, as a 422", async () => {
    // 9999-12-31T23:59:59-01:00 passes the timestamp check (year 9999) but is year 10000 in UTC,
    // which only the INSERT refuses: the group's transaction fails and is retried call by call.
    const before = await headOf(t.url, t.key)
    const calls = Array.from({ length: 9 }, (_, call) =>
      Array.from({ length: 5 }, (_, i) => ({
        type: call === 4 ? "late.bad" : "late.ok",
        data: { call, i },
        ...(call === 4 ? { occurredAt: "9999-12-31T23:59:59-01:00" } : {}),
      })),
    )
    const results = await Promise.all(calls.map((events) => ingest(t.url, t.key, events)))
    const good = results.filter((_, i) => i !== 4)
    expect(good.map((r) => r.status)).toEqual(Array(8).fill(201))
    const acked = good.flatMap((r, j) => ackedOf(r, calls[j < 4 ? j : j + 1]!))
    const stored = await listAll(t.url, t.key, before + 1)
    expect(stored).toHaveLength(40)
    expectLinearChain(stored, before + 1)
    expect(stored.filter((e) => e.type === "late.bad")).toEqual([])
    expectAllStored(acked, stored)
    expect(await verify(t.url, t.key)).toMatchObject({ valid: true, checked: before + 40 })
    const bad = results[4]!
    expect(bad.status, JSON.stringify(bad.body)).toBe(422)
    expect(bad.body.error.details.field).toBe("events[0].occurredAt")
  })

  it("appends queued into one group: the one the database refuses fails alone, the others are stored", async () => {
    // Over HTTP, whether calls share a group depends on timing; appends started together in
    // process always do, so this takes the group's failure path (one transaction, then call by call).
    const before = await headOf(t.url, t.key)
    const actor = systemActor(t.workspaceId, "live", new Set(SCOPES))
    const calls = Array.from({ length: 9 }, (_, call) =>
      Array.from({ length: 3 }, (_, i) => ({
        type: call === 4 ? "grouped.bad" : "grouped.ok",
        data: { call, i },
        ...(call === 4 ? { occurredAt: "9999-12-31T23:59:59-01:00" } : {}),
      })),
    )
    const exits = await t.server.runtime.runPromise(
      Effect.all(
        calls.map((events) => EventService.use((s) => s.ingest(actor, events)).pipe(Effect.exit)),
        { concurrency: "unbounded" },
      ),
    )
    expect(Exit.isFailure(exits[4]!)).toBe(true)
    const acked: Array<Acked> = []
    exits.forEach((exit, call) => {
      if (call === 4) return
      expect(Exit.isSuccess(exit), String(exit)).toBe(true)
      if (!Exit.isSuccess(exit) || !("events" in exit.value)) return
      const mine = exit.value.events.map((e, i) => ({ ...e, data: calls[call]![i]!.data }))
      expect(mine.map((e) => e.sequence)).toEqual(mine.map((_, i) => mine[0]!.sequence + i))
      acked.push(...mine)
    })
    const stored = await listAll(t.url, t.key, before + 1)
    expect(stored).toHaveLength(24)
    expectLinearChain(stored, before + 1)
    expect(stored.filter((e) => e.type === "grouped.bad")).toEqual([])
    expectAllStored(acked, stored)
    expect(await verify(t.url, t.key)).toMatchObject({ valid: true, checked: before + 24 })
  })
})

describe("crash safety: kill -9 mid-ingest", () => {
  let store: ChildStore | undefined
  afterEach(stopChildren)
  afterAll(async () => store?.cleanup())

  // Two server starts (the first creating the embedded cluster) on a loaded machine: a generous bound.
  it("keeps every acknowledged event, whole batches only, and a valid chain after a restart; a keyed retry of a call in flight stores it once", async () => {
    store = await makeChildStore()
    const first = await spawnServer(store.env)
    const key = await first.waitForKey()

    const CLIENTS = 6
    const SIZE = 20
    const acked: Array<Acked> = []
    const unexpected: Array<string> = []
    /** Calls whose answer the kill took: written or not, unknown to the client, which retries with their key. */
    const inFlight: Array<{
      readonly sent: Array<{ type: string; data: unknown }>
      readonly headers: Record<string, string>
    }> = []
    /** One answered call, retried after the restart: it must replay, not store again. */
    let answeredCall:
      | {
          readonly sent: Array<{ type: string; data: unknown }>
          readonly headers: Record<string, string>
          readonly body: unknown
        }
      | undefined
    let killed = false
    let answered = 0
    const loop = async (client: number) => {
      for (let call = 0; ; call++) {
        const sent = Array.from({ length: SIZE }, (_, i) => ({
          type: "crash.event",
          data: { client, call, n: call * SIZE + i },
        }))
        // Every call under its own key, as the SDK sends them (half the clients: unkeyed calls take the same paths).
        const headers: Record<string, string> = client % 2 === 0 ? { "idempotency-key": `crash-${client}-${call}` } : {}
        let res: Res
        try {
          res = await ingest(first.url, key, sent, headers)
        } catch (e) {
          // The server is gone: this call's outcome is unknown, and the loop ends.
          if (!killed) unexpected.push(`client ${client} call ${call}: ${String(e)}`)
          else if (headers["idempotency-key"]) inFlight.push({ sent, headers })
          return
        }
        if (res.status !== 201) {
          unexpected.push(`client ${client} call ${call}: ${res.status} ${JSON.stringify(res.body)}`)
          return
        }
        acked.push(...ackedOf(res, sent))
        if (headers["idempotency-key"]) answeredCall = { sent, headers, body: res.body }
        answered++
      }
    }
    const loops = Array.from({ length: CLIENTS }, (_, c) => loop(c))
    // About a second of load, and in any case several answered calls, then kill -9 with calls in flight.
    const start = Date.now()
    while (Date.now() - start < 1000 || answered < 2 * CLIENTS) {
      if (unexpected.length > 0) break
      await new Promise((r) => setTimeout(r, 20))
    }
    killed = true
    await kill9(first)
    await Promise.all(loops)
    expect(unexpected).toEqual([])
    expect(answered).toBeGreaterThanOrEqual(2 * CLIENTS)

    const second = await spawnServer(store.env)
    // The keyed calls the kill cut off, retried: each is answered 201, from its record when it had been written.
    for (const { sent, headers } of inFlight) {
      const res = await ingest(second.url, key, sent, headers)
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      acked.push(...ackedOf(res, sent))
    }
    const replay = await ingest(second.url, key, answeredCall!.sent, answeredCall!.headers)
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    expect(replay.body).toEqual(answeredCall!.body)
    const stored = await listAll(second.url, key)
    const head = stored.at(-1)!.sequence
    expectLinearChain(stored, 1)
    expectAllStored(acked, stored)
    // Batches in flight at the kill are stored whole or not at all.
    const calls = new Map<string, Array<StoredEvent>>()
    for (const e of stored.filter((e) => e.type === "crash.event")) {
      const id = `${e.data.client}/${e.data.call}`
      calls.set(id, [...(calls.get(id) ?? []), e])
    }
    const partial = [...calls].filter(
      ([, es]) =>
        es.length !== SIZE ||
        es.some((e, i) => e.sequence !== es[0]!.sequence + i || e.data.n !== e.data.call * SIZE + i),
    )
    expect(partial.map(([id]) => id)).toEqual([])
    expect(await verify(second.url, key)).toEqual(expect.objectContaining({ valid: true, checked: head }))

    // The chain head survived with the events: the next append continues it.
    const next = await ingest(second.url, key, [{ type: "crash.after", data: {} }])
    expect(next.status, JSON.stringify(next.body)).toBe(201)
    expect(next.body.data.events[0].sequence).toBe(head + 1)
    const after = await listAll(second.url, key, head)
    expectLinearChain(after, head)
    await kill9(second)
  }, 120_000)
})

describe.runIf(process.env.DATABASE_URL)("two server processes on one PostgreSQL database", () => {
  let store: ChildStore | undefined
  let servers: Array<ChildServer> = []
  let key: string
  beforeAll(async () => {
    store = await makeChildStore()
    // Both start together on the empty database.
    servers = await Promise.all([spawnServer(store.env), spawnServer(store.env)])
    key = await Promise.any(servers.map((s) => s.waitForKey()))
  })
  afterAll(async () => {
    await stopChildren()
    await store?.cleanup()
  })

  it("interleaved ingests through both processes form one linear chain", async () => {
    const CLIENTS = 8
    const CALLS = 30
    const SIZE = 10
    const acked: Array<Acked> = []
    const failed: Array<string> = []
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        for (let call = 0; call < CALLS; call++) {
          // Clients alternate between the processes, call by call.
          const server = servers[(client + call) % 2]!
          const sent = Array.from({ length: SIZE }, (_, i) => ({ type: "multi.event", data: { client, call, i } }))
          const res = await ingest(server.url, key, sent)
          if (res.status !== 201) failed.push(`${res.status} ${JSON.stringify(res.body)}`)
          else {
            const mine = ackedOf(res, sent)
            expect(mine.map((e) => e.sequence)).toEqual(mine.map((_, i) => mine[0]!.sequence + i))
            acked.push(...mine)
          }
        }
      }),
    )
    expect(failed).toEqual([])
    expect(acked).toHaveLength(CLIENTS * CALLS * SIZE)

    const stored = await listAll(servers[0]!.url, key)
    expectLinearChain(stored, 1)
    expectAllStored(acked, stored)
    expect(stored.filter((e) => e.type === "multi.event")).toHaveLength(CLIENTS * CALLS * SIZE)
    const head = stored.at(-1)!.sequence
    for (const s of servers) expect(await verify(s.url, key)).toMatchObject({ valid: true, checked: head })
    // Only one of the two bootstrapped the empty database (their output is complete by now).
    expect(servers.filter((s) => KEY_LINE.test(s.output()))).toHaveLength(1)
  })

  it("one Idempotency-Key sent through both processes at once is stored once", async () => {
    const before = await headOf(servers[0]!.url, key)
    const same = { "idempotency-key": `multi-same-${Date.now()}` }
    const events = [
      { type: "multi.idem", data: { n: 1 } },
      { type: "multi.idem", data: { n: 2 } },
    ]
    const replays = await Promise.all(
      Array.from({ length: 10 }, (_, i) => ingest(servers[i % 2]!.url, key, events, same)),
    )
    expect(replays.map((r) => r.status)).toEqual(Array(10).fill(201))
    for (const r of replays) expect(r.body).toEqual(replays[0]!.body)

    const diff = { "idempotency-key": `multi-diff-${Date.now()}` }
    const conflicting = await Promise.all(
      Array.from({ length: 10 }, (_, variant) =>
        ingest(servers[variant % 2]!.url, key, [{ type: "multi.conflict", data: { variant } }], diff),
      ),
    )
    const won = conflicting.filter((r) => r.status === 201)
    expect(won).toHaveLength(1)
    for (const r of conflicting.filter((r) => r.status !== 201)) {
      expect(r.status, JSON.stringify(r.body)).toBe(409)
      expect(r.body.error.code).toBe("IDEMPOTENCY_KEY_REUSED")
    }

    const stored = await listAll(servers[1]!.url, key, before + 1)
    expect(stored.map((e) => e.id).sort()).toEqual(
      [...replays[0]!.body.data.events, ...won[0]!.body.data.events].map((e: any) => e.id).sort(),
    )
    expectLinearChain(stored, before + 1)
    expect(await verify(servers[1]!.url, key)).toMatchObject({ valid: true, checked: before + 3 })
  })
})
