import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { afterEach, describe, expect, it } from "vitest"
import { DigestStore, type PendingEvent } from "../src/DigestStore.ts"

/**
 * The digest store's bookkeeping by watermark and range: a digest holds exactly the events waiting when
 * it was built, for its recipients, and a store written before the watermark (each event marked with its
 * digest) is read the same way after the upgrade.
 */

const dirs: Array<string> = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "agentgov-digest-store-"))
  dirs.push(d)
  return d
}

let n = 0
const event = (type: string, agentKey: string, recipients = "ops@example.com"): PendingEvent => ({
  eventId: `evt_store${++n}`,
  type,
  agentKey,
  agentLabel: agentKey,
  severity: "warning",
  title: `${type} ${n}`,
  summary: "",
  link: null,
  occurredAt: 1_764_000_000_000 + n,
  fields: "[]",
  recipients,
})
const render = () => ({ subject: "s", text: "t", html: "h" })
const messageId = () => `<m${++n}@test>`

describe("DigestStore", () => {
  it("gives each digest exactly the events waiting for its recipients, and later ones to the next", () => {
    const store = new DigestStore(tempDir())
    try {
      store.add(event("a.one", "agt_1"), 1)
      store.add(event("a.one", "agt_1", "sec@example.com"), 1)
      store.add(event("b.two", "agt_2"), 1)
      expect(store.pendingCount()).toBe(3)
      const first = store.assign(messageId, 2, render)
      expect(first.map((d) => [d.recipients, d.eventCount])).toEqual([
        ["ops@example.com", 2],
        ["sec@example.com", 1],
      ])
      expect(store.pendingCount()).toBe(0)
      expect(store.groups(first[0]!.id).map((g) => [g.type, g.agentKey, g.count])).toEqual([
        ["a.one", "agt_1", 1],
        ["b.two", "agt_2", 1],
      ])
      // nothing waiting: nothing built
      expect(store.assign(messageId, 3, render)).toEqual([])
      store.add(event("a.one", "agt_1"), 4)
      const second = store.assign(messageId, 5, render)
      expect(second.map((d) => d.eventCount)).toEqual([1])
      expect(store.eventIds(second[0]!.id)).toHaveLength(1)
      expect(store.eventIds(first[0]!.id)).toHaveLength(2)
      // the samples of a group are its own events in this digest: not the other recipients', not later ones
      expect(
        store.samples(first[0]!.id, 3, [{ type: "a.one", agentKey: "agt_1" }]).map((s) => [s.recipients, s.type]),
      ).toEqual([["ops@example.com", "a.one"]])
      // pruning forgets a sent digest's events and nothing else
      store.markSent(first[0]!.id, 10)
      expect(store.prune(11)).toBe(1)
      expect(store.eventIds(first[1]!.id)).toHaveLength(1)
      expect(store.eventIds(second[0]!.id)).toHaveLength(1)
    } finally {
      store.close()
    }
  })

  it("reads a store from before the watermark: its digests keep their events, the waiting ones still wait", () => {
    const dir = tempDir()
    // the previous layout: each event marked with its digest, digests without a range
    const old = new DatabaseSync(join(dir, "email.db"))
    old.exec(`
      CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, type TEXT NOT NULL,
        agent_key TEXT NOT NULL, agent_label TEXT NOT NULL, severity TEXT NOT NULL, severity_rank INTEGER NOT NULL,
        title TEXT NOT NULL, summary TEXT NOT NULL, link TEXT, occurred_at INTEGER NOT NULL, fields TEXT NOT NULL,
        recipients TEXT NOT NULL, received_at INTEGER NOT NULL, digest_id INTEGER);
      CREATE INDEX events_digest ON events (digest_id, type, seq);
      CREATE TABLE digests (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL UNIQUE,
        recipients TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('sending', 'sent', 'failed')),
        subject TEXT NOT NULL DEFAULT '', text TEXT NOT NULL DEFAULT '', html TEXT NOT NULL DEFAULT '',
        event_count INTEGER NOT NULL, created_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL, last_error TEXT, sent_at INTEGER);
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
      INSERT INTO digests (message_id, recipients, status, event_count, created_at, next_attempt_at, sent_at)
        VALUES ('<old1@test>', 'ops@example.com', 'sent', 2, 1, 1, 5), ('<old2@test>', 'sec@example.com', 'sending', 1, 1, 1, NULL);
    `)
    const insert = old.prepare(
      `INSERT INTO events (event_id, type, agent_key, agent_label, severity, severity_rank, title, summary, link,
         occurred_at, fields, recipients, received_at, digest_id) VALUES (?, 't.x', 'agt_1', 'agt_1', 'info', 0, 'x', '', NULL, 1, '[]', ?, 1, ?)`,
    )
    insert.run("evt_old1", "ops@example.com", 1)
    insert.run("evt_old2", "sec@example.com", 2)
    insert.run("evt_old3", "ops@example.com", 1)
    insert.run("evt_wait", "ops@example.com", null)
    old.close()

    const store = new DigestStore(dir)
    try {
      expect(store.eventIds(1)).toEqual(["evt_old1", "evt_old3"])
      expect(store.eventIds(2)).toEqual(["evt_old2"])
      expect(store.pendingCount()).toBe(1)
      expect(store.unsent()?.messageId).toBe("<old2@test>")
      const [next] = store.assign(messageId, 10, render)
      expect(store.eventIds(next!.id)).toEqual(["evt_wait"])
      expect(store.prune(6)).toBe(1)
      expect(store.eventIds(2)).toEqual(["evt_old2"])
    } finally {
      store.close()
    }
  })
})
