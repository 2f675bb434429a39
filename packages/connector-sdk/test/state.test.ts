import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { afterEach, describe, expect, it } from "vitest"
import {
  DEFAULT_STATE_TTL_MS,
  defineConnector,
  ok,
  type RunningConnector,
  type StateStore,
  startConnector,
} from "../src/runtime/index.ts"
import { Store } from "../src/runtime/Store.ts"
import { envelope, SECRET, signedHeaders } from "./helpers.ts"

/**
 * The connector's state store expires its entries: `get` stops returning one at its expiry, the runtime deletes
 * expired ones (a bounded number a pass), and an entry set to be kept until deleted is kept.
 */

const DAY = 86_400_000
const dirs: Array<string> = []
const running: Array<RunningConnector> = []
const stores: Array<Store> = []
afterEach(async () => {
  for (const r of running.splice(0)) await r.close()
  for (const s of stores.splice(0)) s.close()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "agentgov-state-"))
  dirs.push(d)
  return d
}
const open = (dir: string) => {
  const s = new Store(dir)
  stores.push(s)
  return s
}
const rows = (dir: string) => {
  const db = new DatabaseSync(join(dir, "connector.db"))
  try {
    return db.prepare("SELECT key, expires_at FROM state ORDER BY key").all() as Array<{
      key: string
      expires_at: number | null
    }>
  } finally {
    db.close()
  }
}

describe("the state store's expiry", () => {
  it("hides an entry at its expiry, and the prune deletes the expired ones only, at most `limit` a call", () => {
    const dir = tempDir()
    const store = open(dir)
    const now = 1_000_000
    store.setState("live", "1", now, now + DAY)
    store.setState("kept", "2", now, null)
    for (let i = 0; i < 1_500; i++) store.setState(`old:${String(i).padStart(4, "0")}`, "x", now, now + 1)
    expect(store.getState("old:0000", now)).toBe("x")
    expect(store.getState("old:0000", now + 1)).toBeUndefined()
    expect(store.getState("live", now + 1)).toBe("1")
    // bounded: the rest wait for the next pass
    expect(store.pruneState(now + 1, 1_200)).toBe(1_200)
    expect(rows(dir)).toHaveLength(302)
    expect(store.pruneState(now + 1)).toBe(300)
    expect(rows(dir)).toEqual([
      { key: "kept", expires_at: null },
      { key: "live", expires_at: now + DAY },
    ])
    expect(store.pruneState(now + 2 * DAY)).toBe(1)
    expect(store.getState("kept", now + 10_000 * DAY)).toBe("2")
  })

  it("a set starts the entry's time again", () => {
    const store = open(tempDir())
    store.setState("k", "a", 0, 10)
    store.setState("k", "b", 5, 15)
    expect(store.getState("k", 12)).toBe("b")
    expect(store.pruneState(12)).toBe(0)
  })

  it("opens a store made before entries expired, keeping its entries (no expiry) and expiring new ones", () => {
    const dir = tempDir()
    const db = new DatabaseSync(join(dir, "connector.db"))
    db.exec("CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID")
    db.prepare("INSERT INTO state VALUES (?, ?, ?)").run("tier:agt_1", "trusted", 1)
    db.close()
    const store = open(dir)
    expect(store.getState("tier:agt_1", Date.now())).toBe("trusted")
    store.setState("thread:apr_1", "ts", 100, 200)
    expect(store.pruneState(Date.now())).toBe(1)
    expect(rows(dir)).toEqual([{ key: "tier:agt_1", expires_at: null }])
  })

  it("ctx.state: the default expiry, a ttl, until deleted; a bad ttl is refused; expired entries go at start", async () => {
    const dir = tempDir()
    // an entry that expired while the connector was down
    const before = open(dir)
    before.setState("stale", "x", 1, 2)
    before.close()
    let seen: StateStore | undefined
    const definition = defineConnector({
      name: "stateful",
      description: "a connector for tests",
      defaultEvents: ["*"],
      settings: {},
      deliver: (_event, ctx) => {
        seen = ctx.state
        return ok()
      },
    })
    const r = await startConnector(definition, {
      env: { PORT: "0", HOST: "127.0.0.1", AGENTGOV_WEBHOOK_SECRET: SECRET, AGENTGOV_CONNECTOR_DATA_DIR: dir },
      log: () => {},
    })
    running.push(r)
    expect(rows(dir)).toEqual([])
    const body = JSON.stringify(envelope("approval.requested", { approvalId: "apr_1" }))
    expect((await fetch(`${r.url}/webhooks`, { method: "POST", headers: signedHeaders(body), body })).status).toBe(200)
    for (let i = 0; i < 400 && seen === undefined; i++) await new Promise((res) => setTimeout(res, 25))
    const state = seen!
    const t0 = Date.now()
    state.set("thread:apr_1", "ts-1")
    state.set("short", "s", { ttlMs: 60_000 })
    state.set("tier:agt_1", "trusted", { ttlMs: Number.POSITIVE_INFINITY })
    const t1 = Date.now()
    for (const bad of [0, -1, Number.NaN]) expect(() => state.set("bad", "v", { ttlMs: bad })).toThrow(RangeError)
    expect(state.get("thread:apr_1")).toBe("ts-1")
    const byKey = Object.fromEntries(rows(dir).map((row) => [row.key, row.expires_at]))
    expect(Object.keys(byKey).sort()).toEqual(["short", "thread:apr_1", "tier:agt_1"])
    expect(byKey["thread:apr_1"]).toBeGreaterThanOrEqual(t0 + DEFAULT_STATE_TTL_MS)
    expect(byKey["thread:apr_1"]).toBeLessThanOrEqual(t1 + DEFAULT_STATE_TTL_MS)
    expect(byKey.short).toBeLessThanOrEqual(t1 + 60_000)
    expect(byKey["tier:agt_1"]).toBeNull()
    // longer than the longest approval (30 days) by far
    expect(DEFAULT_STATE_TTL_MS).toBeGreaterThanOrEqual(90 * DAY)
    // what an hourly pass 91 days on finds
    const later = open(dir)
    expect(later.pruneState(t1 + 91 * DAY)).toBe(2)
    expect(rows(dir)).toEqual([{ key: "tier:agt_1", expires_at: null }])
  })
})
