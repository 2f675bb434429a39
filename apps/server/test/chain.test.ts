/**
 * Decision D8, checked from outside: the audit chain of a workspace is recomputed here with this
 * file's own RFC 8785 canonicalisation and node:crypto SHA-256 (nothing of the project's hashing or
 * JCS code is imported), from the events as the store holds them and, where the catalog has it, as
 * the API returns them.
 *
 *   hash = hex(SHA-256(prevHash ‖ type ‖ JCS(data) ‖ timestamp)), UTF-8, no separators;
 *   the first prevHash is 64 zeros; sequence 1, 2, 3 … without gaps; prevHash = previous hash.
 */
import { createHash } from "node:crypto"
import { operations } from "@agentgov/api"
import type * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ApiResponse, startTestServer, type TestServer } from "./helpers.ts"

// ---------------------------------------------------------------------------------------------
// RFC 8785 (JSON Canonicalization Scheme), written for this test

const jcsString = (s: string): string => {
  let out = '"'
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1)
      if (!(next >= 0xdc00 && next <= 0xdfff)) throw new TypeError("JCS: lone surrogate")
      out += s[i]! + s[i + 1]!
      i++
      continue
    }
    if (c >= 0xdc00 && c <= 0xdfff) throw new TypeError("JCS: lone surrogate")
    if (c === 0x22) out += '\\"'
    else if (c === 0x5c) out += "\\\\"
    else if (c === 0x08) out += "\\b"
    else if (c === 0x09) out += "\\t"
    else if (c === 0x0a) out += "\\n"
    else if (c === 0x0c) out += "\\f"
    else if (c === 0x0d) out += "\\r"
    else if (c < 0x20) out += `\\u${c.toString(16).padStart(4, "0")}`
    else out += s[i]
  }
  return `${out}"`
}

/** RFC 8785 §3.2.2.3: the ECMAScript Number-to-String algorithm; -0 is 0; NaN and ±Infinity are errors. */
const jcsNumber = (n: number): string => {
  if (!Number.isFinite(n)) throw new TypeError(`JCS: ${n} is not a JSON number`)
  return Object.is(n, -0) ? "0" : n.toString()
}

/** Object members sorted by their names' UTF-16 code units (RFC 8785 §3.2.3). */
const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

const jcs = (v: unknown): string => {
  if (v === null) return "null"
  if (v === true) return "true"
  if (v === false) return "false"
  if (typeof v === "number") return jcsNumber(v)
  if (typeof v === "string") return jcsString(v)
  if (Array.isArray(v)) return `[${v.map(jcs).join(",")}]`
  if (typeof v === "object") {
    const o = v as Record<string, unknown>
    return `{${Object.keys(o)
      .sort(byCodeUnits)
      .map((k) => `${jcsString(k)}:${jcs(o[k])}`)
      .join(",")}}`
  }
  throw new TypeError(`JCS: ${typeof v} is not JSON`)
}

const GENESIS = "0".repeat(64)
const chainHash = (prevHash: string, type: string, data: unknown, timestamp: string) =>
  createHash("sha256")
    .update(Buffer.from(prevHash + type + jcs(data) + timestamp, "utf8"))
    .digest("hex")

interface ChainEvent {
  readonly id: string
  readonly sequence: number
  readonly type: string
  readonly data: unknown
  readonly timestamp: string
  readonly prevHash: string
  readonly hash: string
}

type Verdict =
  | { readonly valid: true; readonly checked: number }
  | { readonly valid: false; readonly firstBadSequence: number; readonly reason: string }

/** Verifies a chain given in any order: complete from 1, linked, every hash recomputed. */
const verifyChain = (events: ReadonlyArray<ChainEvent>): Verdict => {
  const sorted = [...events].sort((a, b) => a.sequence - b.sequence)
  let prev = GENESIS
  for (const [i, e] of sorted.entries()) {
    const expected = i + 1
    if (e.sequence !== expected)
      return { valid: false, firstBadSequence: expected, reason: `sequence ${e.sequence} where ${expected} belongs` }
    if (e.prevHash !== prev)
      return { valid: false, firstBadSequence: e.sequence, reason: "prevHash is not the previous hash" }
    const recomputed = chainHash(e.prevHash, e.type, e.data, e.timestamp)
    if (recomputed !== e.hash)
      return { valid: false, firstBadSequence: e.sequence, reason: "hash does not match the content" }
    prev = e.hash
  }
  return { valid: true, checked: sorted.length }
}

// ---------------------------------------------------------------------------------------------

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
})
afterAll(async () => t?.close())

const sql = <A>(f: (sql: SqlClient.SqlClient) => any): Promise<A> => t.query(f) as Promise<any>

/** The events of a workspace as an API would return them: `timestamp` is `ts.toISOString()`, `data` the parsed object. */
const readChain = async (workspaceId: string): Promise<Array<ChainEvent>> => {
  const rows = await sql<ReadonlyArray<Record<string, any>>>(
    (q) => q`SELECT * FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
  )
  return rows.map((r) => {
    expect(r.ts).toBeInstanceOf(Date)
    expect(typeof r.data === "object" && r.data !== null && !Array.isArray(r.data), `data of ${r.id}`).toBe(true)
    return {
      id: r.id,
      sequence: Number(r.sequence),
      type: r.type,
      data: r.data,
      timestamp: (r.ts as Date).toISOString(),
      prevHash: r.prev_hash,
      hash: r.hash,
    }
  })
}

const expectValid = (events: ReadonlyArray<ChainEvent>) => {
  const verdict = verifyChain(events)
  expect(verdict, JSON.stringify(verdict)).toEqual({ valid: true, checked: events.length })
}

const ok = async (method: string, path: string, body?: unknown, key?: string) => {
  const res = await t.call(method, path, { body, ...(key ? { key } : {}) })
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300)
  return res.body.data
}

const hasOp = (name: string) => operations.some((op) => op.name === name)

describe("my RFC 8785 implementation (so that the checks below mean something)", () => {
  it("reproduces the RFC's examples", () => {
    // §3.2.2 (the input of the RFC's example, written as a JS value)
    expect(
      jcs({
        // biome-ignore lint/correctness/noPrecisionLoss: the RFC 8785 example input, digits as the RFC writes them
        numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001],
        string: "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"/",
        literals: [null, true, false],
      }),
    ).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    )
    // §3.2.3: sorting by UTF-16 code units
    const sorted = jcs({
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis",
    })
    expect(sorted).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    )
    // Appendix B: numbers by their IEEE 754 bits
    const vectors: Array<[string, string]> = [
      ["0000000000000000", "0"],
      ["8000000000000000", "0"],
      ["0000000000000001", "5e-324"],
      ["8000000000000001", "-5e-324"],
      ["7fefffffffffffff", "1.7976931348623157e+308"],
      ["4340000000000000", "9007199254740992"],
      ["4430000000000000", "295147905179352830000"],
      ["44b52d02c7e14af6", "1e+23"],
      ["444b1ae4d6e2ef4f", "999999999999999900000"],
      ["444b1ae4d6e2ef50", "1e+21"],
      ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
      ["3eb0c6f7a0b5ed8d", "0.000001"],
      ["41b3de4355555554", "333333333.33333325"],
      ["becbf647612f3696", "-0.0000033333333333333333"],
      ["43143ff3c1cb0959", "1424953923781206.2"],
    ]
    for (const [bits, text] of vectors) expect(jcs(Buffer.from(bits, "hex").readDoubleBE(0)), bits).toBe(text)
    expect(() => jcs(Number.NaN)).toThrow()
    expect(() => jcs(Number.POSITIVE_INFINITY)).toThrow()
    expect(() => jcs("\ud800")).toThrow()
    // The concatenation: no separators, UTF-8.
    expect(chainHash(GENESIS, "a.b", { x: "é" }, "2026-01-01T00:00:00.000Z")).toBe(
      createHash("sha256").update(`${GENESIS}a.b{"x":"é"}2026-01-01T00:00:00.000Z`).digest("hex"),
    )
  })
})

describe("the audit chain, recomputed independently", () => {
  const state = { agents: [] as Array<string>, eventsAfterActivity: 0 }

  it("stays a valid, linear chain through many state changes, concurrent ones included", async () => {
    const ws = t.workspaceId
    const tricky = [
      "agent-ü-ñ-中文-😀",
      // A name holds no controls, line separators or bidirectional overrides (422), and is stored in NFC: the
      // controls' escapes are covered by the ingested data below.
      "rtl-\u05e9\u05dc\u05d5\u05dd-\u200f-mark",
      "combining-e\u0301-vs-\u00e9",
      "quotes-\"'-\\-/-\u00a0-\u3000-spaces",
      "astral-\ud834\udd1e-\ud83d\udc4d\ud83c\udffd",
      "zero-width-\u200b\u200d-\ufeff-inside",
    ]
    for (const [i, name] of tricky.entries()) {
      const agent = await ok("POST", "/api/v1/agents", {
        name,
        description: `agent ${i}`,
        labels: ["chain", `n${i}`],
        metadata: {
          z: 1,
          a: { "\u20ac": 1e21, "\r": 0.1, "1": -0, "\ud83d\ude00": [1e-7, 5e-324, 1.7976931348623157e308] },
          B: "mixed case sorts before lower case",
          é: { nested: { deeper: [{ k: "v" }, null, true, 333333333.3333333] } },
        },
      })
      state.agents.push(agent.id)
    }
    // Updates, versions, keys: every kind of event the catalog emits today.
    const [a0, a1, a2] = state.agents as [string, string, string]
    await ok("PATCH", `/api/v1/agents/${a0}`, { name: "renamed-\u00fc\u00f1\u00ee\u00e7\u00f8d\u00e9", labels: ["x"] })
    await ok("PATCH", `/api/v1/agents/${a1}`, { description: null, metadata: { replaced: true } })
    await ok("POST", `/api/v1/agents/${a0}/versions`, { version: "1.0.0", metadata: { n: 1 } })
    await ok("POST", `/api/v1/agents/${a0}/versions`, { version: "1.1.0-β+build.7", description: "ß" })
    const k1 = await ok("POST", "/api/v1/api-keys", {
      name: "chain-key-ключ",
      type: "workspace",
      scopes: ["agents:read", "agents:write"],
    })
    const k2 = await ok("POST", "/api/v1/api-keys", {
      name: "chain-agent-key",
      type: "agent",
      agentId: a2,
      scopes: ["agents:read"],
    })
    const k1r = await ok("POST", `/api/v1/api-keys/${k1.id}/rotate`, { overlapSeconds: 0 })
    const k1rr = await ok("POST", `/api/v1/api-keys/${k1r.id}/rotate`, {})
    await ok("DELETE", `/api/v1/api-keys/${k1rr.id}`)
    await ok("PATCH", `/api/v1/workspaces/${ws}`, { plan: "enterprise", guardDefault: "deny" })
    await ok("PATCH", `/api/v1/workspaces/${ws}`, { guardDefault: "allow" })
    await ok("DELETE", `/api/v1/agents/${a2}`) // also revokes k2
    expect((await t.call("GET", `/api/v1/api-keys/${k2.id}`)).body.data.status).toBe("revoked")

    // 20 registrations at once, then a mix of writes at once.
    const before = (await readChain(ws)).length
    const burst = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        t.call("POST", "/api/v1/agents", { body: { name: `burst-${i}-ø`, metadata: { i } } }),
      ),
    )
    expect(burst.map((r) => r.status)).toEqual(Array(20).fill(201))
    state.agents.push(...burst.map((r) => r.body.data.id as string))
    const mixed = await Promise.all([
      ...burst
        .slice(0, 5)
        .map((r, i) => t.call("PATCH", `/api/v1/agents/${r.body.data.id}`, { body: { description: `d${i}` } })),
      ...burst
        .slice(5, 10)
        .map((r) => t.call("POST", `/api/v1/agents/${r.body.data.id}/versions`, { body: { version: "v1" } })),
      ...burst.slice(10, 13).map((r) => t.call("DELETE", `/api/v1/agents/${r.body.data.id}`)),
      ...Array.from({ length: 5 }, (_, i) =>
        t.call("POST", "/api/v1/api-keys", {
          body: { name: `burst-key-${i}`, type: "workspace", scopes: ["agents:read"] },
        }),
      ),
    ])
    expect(
      mixed.every((r) => r.status < 300),
      JSON.stringify(mixed.map((r) => r.status)),
    ).toBe(true)

    const chain = await readChain(ws)
    expectValid(chain)
    // 20 registrations + 5 updates + 5 versions + 3 deregistrations + 5 keys, each exactly one event at least.
    expect(chain.length - before).toBeGreaterThanOrEqual(38)
    expect(chain.map((e) => e.sequence)).toEqual(chain.map((_, i) => i + 1))
    expect(chain[0]!.prevHash).toBe(GENESIS)
    expect(new Set(chain.map((e) => e.id)).size).toBe(chain.length)
    expect(chain.every((e) => /^evt_/.test(e.id) && /^[0-9a-f]{64}$/.test(e.hash))).toBe(true)
    const count = (type: string) => chain.filter((e) => e.type === type).length
    expect(count("agent.registered")).toBe(state.agents.length)
    expect(count("agent.deregistered")).toBe(4)
    expect(count("apikey.created")).toBeGreaterThanOrEqual(7) // bootstrap + 2 + 5
    expect(count("apikey.rotated")).toBe(2)
    expect(count("apikey.revoked")).toBeGreaterThanOrEqual(3) // rotated with overlap 0, revoked, the agent's key
    expect(count("workspace.updated")).toBe(2)
    // The unicode names are in the hashed data, as sent but in NFC.
    const names = chain
      .filter((e) => e.type === "agent.registered")
      .map((e) => (e.data as { agentName: string }).agentName)
    for (const name of tricky) expect(names).toContain(name.normalize("NFC"))
    state.eventsAfterActivity = chain.length
  })

  it.runIf(hasOp("events.ingest"))(
    "covers client data that stresses JCS: number forms, key order, unicode",
    async () => {
      const ws = t.workspaceId
      // Raw JSON text, so that the server parses exactly these number forms and keys.
      const texts = [
        '{"events":[{"type":"jcs.numbers","data":{"a":1e21,"b":1E30,"c":0.1,"d":-0,"e":-0.0,"f":5e-324,"g":1.7976931348623157e308,"h":333333333.33333329,"i":9007199254740993,"j":123456789012345678901234567890,"k":1e-7,"l":0.000001,"m":4.50,"n":-1.5e-10}}]}',
        '{"events":[{"type":"jcs.keys","data":{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Dalet","1":"One","\\ud83d\\ude00":"Emoji","\\u0080":"Control","\\u00f6":"o umlaut","aa":1,"a":2,"A":3,"":4,"__proto__":{"polluted":true},"constructor":5}}]}',
        '{"events":[{"type":"jcs.strings","data":{"s":"\\u0001\\u001f\\u007f\\u2028\\u2029\\"\\\\/\\b\\f\\n\\r\\t","astral":"\\ud834\\udd1e","nested":[[[{"z":[],"y":{}}]]],"dup":1,"dup":2}}]}',
      ]
      const responses = []
      for (const rawBody of texts) {
        const res = await t.call("POST", "/api/v1/events/ingest", { rawBody })
        expect(res.status, JSON.stringify(res.body)).toBe(201)
        responses.push(...(res.body.data.events as Array<{ sequence: number; hash: string; timestamp: string }>))
      }
      // Concurrent ingests interleave with concurrent registrations without forking the chain.
      const concurrent = await Promise.all([
        ...Array.from({ length: 10 }, (_, i) =>
          t.call("POST", "/api/v1/events/ingest", {
            body: { events: Array.from({ length: 3 }, (_, j) => ({ type: "jcs.burst", data: { i, j, ü: [i, j] } })) },
          }),
        ),
        ...Array.from({ length: 5 }, (_, i) =>
          t.call("POST", "/api/v1/agents", { body: { name: `ingest-burst-${i}` } }),
        ),
      ])
      expect(
        concurrent.map((r) => r.status).every((s) => s === 201),
        JSON.stringify(concurrent.map((r) => r.body)),
      ).toBe(true)
      for (const r of concurrent.slice(0, 10)) responses.push(...r.body.data.events)

      const chain = await readChain(ws)
      expectValid(chain)
      expect(chain.length).toBe(state.eventsAfterActivity + 3 + 30 + 5)
      // What ingest answered is what the chain holds.
      const bySequence = new Map(chain.map((e) => [e.sequence, e]))
      for (const r of responses) {
        const e = bySequence.get(r.sequence)
        expect(e, `sequence ${r.sequence}`).toBeDefined()
        expect({ hash: e!.hash, timestamp: e!.timestamp }).toEqual({ hash: r.hash, timestamp: r.timestamp })
      }
      // The stored data is the data sent (numbers as JSON.parse reads them; keys all kept).
      const numbers = chain.find((e) => e.type === "jcs.numbers")!.data as Record<string, number>
      expect(numbers).toEqual({
        a: 1e21,
        b: 1e30,
        c: 0.1,
        d: 0,
        e: 0,
        f: 5e-324,
        g: 1.7976931348623157e308,
        h: 333333333.3333333,
        i: 9007199254740992,
        j: 1.2345678901234568e29,
        k: 1e-7,
        l: 0.000001,
        m: 4.5,
        n: -1.5e-10,
      })
      expect(jcs(numbers)).toBe(
        '{"a":1e+21,"b":1e+30,"c":0.1,"d":0,"e":0,"f":5e-324,"g":1.7976931348623157e+308,"h":333333333.3333333,"i":9007199254740992,"j":1.2345678901234568e+29,"k":1e-7,"l":0.000001,"m":4.5,"n":-1.5e-10}',
      )
      const keys = chain.find((e) => e.type === "jcs.keys")!.data as Record<string, unknown>
      expect(Object.keys(keys).sort(byCodeUnits)).toEqual(
        [
          "\u20ac",
          "\r",
          "\ufb33",
          "1",
          "\ud83d\ude00",
          "\u0080",
          "\u00f6",
          "aa",
          "a",
          "A",
          "",
          "__proto__",
          "constructor",
        ].sort(byCodeUnits),
      )
      expect(Object.getOwnPropertyDescriptor(keys, "__proto__")?.value).toEqual({ polluted: true })
      state.eventsAfterActivity = chain.length
    },
  )

  it.runIf(hasOp("events.ingest"))(
    "stores each event of one batch with its own data when the data holds U+0001, the append's data separator",
    async () => {
      // One request, one statement: the rows' data travel joined by U+0001, which canonical JSON escapes.
      const sent = [
        { s: "a\u0001b", n: 1 },
        { "\u0001": ["\u0001", null, "\u0001\u0001"], "x\u0001": { y: "\ud834\udd1e" } },
        {},
        { last: "\u0001" },
      ]
      const res = await t.call("POST", "/api/v1/events/ingest", {
        body: { events: sent.map((data) => ({ type: "jcs.separator", data })) },
      })
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      const answered = res.body.data.events as Array<{ sequence: number }>
      const chain = await readChain(t.workspaceId)
      expectValid(chain)
      const stored = answered.map((a) => chain.find((e) => e.sequence === a.sequence)!)
      expect(stored.map((e) => e.data)).toEqual(sent)
      expect(stored.map((e) => e.sequence)).toEqual(answered.map((_, i) => answered[0]!.sequence + i))
    },
  )

  it.runIf(hasOp("events.list"))(
    "recomputes from the API's own output (GET /events), which matches the store",
    async () => {
      const fromApi: Array<ChainEvent & Record<string, unknown>> = []
      let cursor: string | null = null
      for (let page = 0; page < 100; page++) {
        const res: ApiResponse = await t.call(
          "GET",
          `/api/v1/events?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        )
        expect(res.status, JSON.stringify(res.body)).toBe(200)
        fromApi.push(...res.body.data)
        cursor = res.body.meta.cursor
        if (!res.body.meta.hasMore) break
      }
      expectValid(fromApi)
      const stored = await readChain(t.workspaceId)
      expect(fromApi.length).toBe(stored.length)
      const sorted = [...fromApi].sort((a, b) => a.sequence - b.sequence)
      for (const [i, e] of sorted.entries()) {
        const s = stored[i]!
        expect({
          sequence: e.sequence,
          type: e.type,
          data: e.data,
          timestamp: e.timestamp,
          prevHash: e.prevHash,
          hash: e.hash,
        }).toEqual({
          sequence: s.sequence,
          type: s.type,
          data: s.data,
          timestamp: s.timestamp,
          prevHash: s.prevHash,
          hash: s.hash,
        })
      }
    },
  )

  it("records nothing for failed requests, and nothing for reads", async () => {
    const ws = t.workspaceId
    const before = (await readChain(ws)).length
    const deregistered = state.agents[2]!
    const failures = await Promise.all([
      t.call("POST", "/api/v1/agents", { body: { name: "burst-0-ø" } }), // name taken
      t.call("POST", "/api/v1/agents", { body: { name: "" } }),
      t.call("POST", `/api/v1/agents/${deregistered}/versions`, { body: { version: "2" } }),
      t.call("PATCH", `/api/v1/agents/${deregistered}`, { body: { name: "zombie" } }),
      t.call("POST", "/api/v1/api-keys", {
        body: { name: "k", type: "agent", agentId: "agt_missing", scopes: ["agents:read"] },
      }),
      t.call("DELETE", `/api/v1/workspaces/${ws}`),
      t.call("POST", "/api/v1/agents", { body: { name: "no-auth" }, key: null }),
      t.call("POST", "/api/v1/agents", { rawBody: "{not json" }),
    ])
    expect(
      failures.map((r) => r.status).every((s) => s >= 400 && s < 500),
      JSON.stringify(failures.map((r) => r.status)),
    ).toBe(true)
    await Promise.all([
      t.call("GET", "/api/v1/agents"),
      t.call("GET", `/api/v1/agents/${state.agents[0]}`),
      t.call("GET", "/api/v1/api-keys"),
      t.call("GET", `/api/v1/workspaces/${ws}`),
    ])
    const after = await readChain(ws)
    expect(after.length).toBe(before)
    expectValid(after)
  })

  it("gives every workspace its own chain from sequence 1", async () => {
    const created = await ok("POST", "/api/v1/workspaces", { name: "second-chain-ω" })
    const ws2 = created.workspace.id as string
    const key2 = created.apiKey.apiKey as string
    await Promise.all(Array.from({ length: 6 }, (_, i) => ok("POST", "/api/v1/agents", { name: `ws2-${i}` }, key2)))
    const chain2 = await readChain(ws2)
    expectValid(chain2)
    expect(chain2[0]).toMatchObject({ sequence: 1, prevHash: GENESIS, type: "workspace.created" })
    expect(chain2.filter((e) => e.type === "agent.registered")).toHaveLength(6)
    // Nothing of it leaked into the first workspace's chain, which is still valid.
    const chain1 = await readChain(t.workspaceId)
    expectValid(chain1)
    expect(chain1.some((e) => chain2.some((f) => f.id === e.id))).toBe(false)
  })
})

describe("negative controls: the verifier rejects a tampered chain", () => {
  it("rejects edited data, an edited timestamp and a re-hashed row, and accepts the chain again once restored", async () => {
    const ws = t.workspaceId
    const original = await readChain(ws)
    expectValid(original)
    expect(original.length).toBeGreaterThan(10)
    const victim = original.find((e) => e.type === "agent.registered" && e.sequence > 3)!
    const k = victim.sequence

    // 1. Edit the data of one row.
    await sql(
      (q) =>
        q`UPDATE events SET data = (data::jsonb || ${JSON.stringify({ agentName: "mallory" })}::text::jsonb)::json WHERE workspace_id = ${ws} AND sequence = ${k}`,
    )
    expect((await readChain(ws)).find((e) => e.sequence === k)!.data).toEqual({
      ...(victim.data as object),
      agentName: "mallory",
    })
    let verdict = verifyChain(await readChain(ws))
    expect(verdict).toMatchObject({ valid: false, firstBadSequence: k, reason: "hash does not match the content" })

    // 2. Also recompute that row's hash, as a forger would: the next row's link breaks.
    const forged = (await readChain(ws)).find((e) => e.sequence === k)!
    const forgedHash = chainHash(forged.prevHash, forged.type, forged.data, forged.timestamp)
    await sql((q) => q`UPDATE events SET hash = ${forgedHash} WHERE workspace_id = ${ws} AND sequence = ${k}`)
    verdict = verifyChain(await readChain(ws))
    expect(verdict).toMatchObject({
      valid: false,
      firstBadSequence: k + 1,
      reason: "prevHash is not the previous hash",
    })

    // Restore, and the chain verifies again: the rejections were the tampering's doing.
    await sql(
      (q) =>
        q`UPDATE events SET data = ${JSON.stringify(victim.data)}::text::jsonb, hash = ${victim.hash} WHERE workspace_id = ${ws} AND sequence = ${k}`,
    )
    expectValid(await readChain(ws))

    // 3. Move one timestamp by a millisecond.
    const later = new Date(Date.parse(victim.timestamp) + 1).toISOString()
    await sql((q) => q`UPDATE events SET ts = ${later}::timestamptz WHERE workspace_id = ${ws} AND sequence = ${k}`)
    expect(verifyChain(await readChain(ws))).toMatchObject({ valid: false, firstBadSequence: k })
    await sql(
      (q) => q`UPDATE events SET ts = ${victim.timestamp}::timestamptz WHERE workspace_id = ${ws} AND sequence = ${k}`,
    )

    // 4. Change only the event's type.
    await sql((q) => q`UPDATE events SET type = 'agent.updated' WHERE workspace_id = ${ws} AND sequence = ${k}`)
    expect(verifyChain(await readChain(ws))).toMatchObject({ valid: false, firstBadSequence: k })
    await sql((q) => q`UPDATE events SET type = ${victim.type} WHERE workspace_id = ${ws} AND sequence = ${k}`)

    expectValid(await readChain(ws))
    expect(await readChain(ws)).toEqual(original)
  })

  it.runIf(hasOp("events.verify"))(
    "POST /events/verify agrees with this verifier, before and after tampering",
    async () => {
      const ws = t.workspaceId
      const chain = await readChain(ws)
      const good = await t.call("POST", "/api/v1/events/verify", { body: {} })
      expect(good.status).toBe(200)
      expect(good.body.data).toMatchObject({ valid: true, checked: chain.length })
      const victim = chain[Math.floor(chain.length / 2)]!
      await sql(
        (q) =>
          q`UPDATE events SET data = (data::jsonb || '{"tampered":true}'::jsonb)::json WHERE workspace_id = ${ws} AND sequence = ${victim.sequence}`,
      )
      try {
        expect(verifyChain(await readChain(ws))).toMatchObject({ valid: false, firstBadSequence: victim.sequence })
        const bad = await t.call("POST", "/api/v1/events/verify", { body: {} })
        expect(bad.status).toBe(200)
        expect(bad.body.data).toMatchObject({ valid: false, firstBadSequence: victim.sequence })
      } finally {
        await sql(
          (q) =>
            q`UPDATE events SET data = ${JSON.stringify(victim.data)}::text::jsonb WHERE workspace_id = ${ws} AND sequence = ${victim.sequence}`,
        )
      }
      expectValid(await readChain(ws))
    },
  )

  it("rejects a chain with a row removed", async () => {
    // On a workspace of its own, so the main chain stays intact for the checks above.
    const created = await ok("POST", "/api/v1/workspaces", { name: "gap-chain" })
    const ws = created.workspace.id as string
    for (let i = 0; i < 4; i++) await ok("POST", "/api/v1/agents", { name: `gap-${i}` }, created.apiKey.apiKey)
    const chain = await readChain(ws)
    expectValid(chain)
    const middle = chain[2]!.sequence
    await sql((q) => q`DELETE FROM events WHERE workspace_id = ${ws} AND sequence = ${middle}`)
    expect(verifyChain(await readChain(ws))).toMatchObject({ valid: false, firstBadSequence: middle })
  })
})
