import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync, type StatementSync } from "node:sqlite"

/**
 * The e-mail connector's own durable state in `<data dir>/email.db` (node:sqlite, WAL,
 * `synchronous=FULL`): the events waiting for a digest, the digests (each with its rendered
 * message and Message-ID, written before the first byte goes to the SMTP server), and when the
 * next digest is due.
 *
 * An event belongs to exactly one digest: `assign` gives every waiting event to a new digest in the
 * same transaction that stores the digest's message, so a later digest never repeats it and a
 * crash never loses it (it is either still waiting, or in a stored digest that is sent again).
 *
 * Events are never rewritten to join a digest: `assign` takes every waiting event at once, so the
 * waiting events are those after a watermark (`meta.assigned_through`, an event `seq`), and a digest is
 * its recipient set and its `seq` range (`from_seq`, `to_seq`]. Building a digest of 100,000 events then
 * reads one index (counts by type and agent, a few samples each) and writes one row per digest; marking
 * each event instead rewrote 100,000 wide rows and their index entries, most of the build's time.
 */

export interface PendingEvent {
  readonly eventId: string
  readonly type: string
  /** The agent's id, or "" for events without one. */
  readonly agentKey: string
  /** How the agent reads: its name, or its id. */
  readonly agentLabel: string
  readonly severity: string
  readonly title: string
  readonly summary: string
  readonly link: string | null
  /** The event's own time, epoch ms. */
  readonly occurredAt: number
  /** Label/value pairs, JSON. */
  readonly fields: string
  /** Who gets it: addresses, `, `-separated, sorted (a digest goes to one such set). */
  readonly recipients: string
}

export interface StoredDigest {
  readonly id: number
  readonly messageId: string
  readonly recipients: string
  readonly subject: string
  readonly text: string
  readonly html: string
  readonly eventCount: number
  readonly createdAt: number
  readonly attempts: number
  readonly nextAttemptAt: number
}

/** A digest given up on: sent again only by `replay`. */
export interface FailedDigest {
  readonly id: number
  readonly eventCount: number
  readonly attempts: number
  readonly lastError: string
  /** Epoch ms. */
  readonly failedAt: number
}

/** A type's or an agent's count in a digest. */
export interface GroupCount {
  readonly type: string
  readonly agentKey: string
  readonly agentLabel: string
  readonly count: number
  readonly severityRank: number
}

export const SEVERITY_RANK: Readonly<Record<string, number>> = { info: 0, warning: 1, error: 2, critical: 3 }

const SCHEMA = `
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL,
  agent_key TEXT NOT NULL,
  agent_label TEXT NOT NULL,
  severity TEXT NOT NULL,
  severity_rank INTEGER NOT NULL,
  title TEXT NOT NULL,
  summary TEXT NOT NULL,
  link TEXT,
  occurred_at INTEGER NOT NULL,
  fields TEXT NOT NULL,
  recipients TEXT NOT NULL,
  received_at INTEGER NOT NULL,
  digest_id INTEGER
);
-- a digest's counts by type and agent come from this index alone, in its order, and each group's samples
-- by one seek; digest_id (above) is only read to migrate a store from before the watermark
DROP INDEX IF EXISTS events_digest;
DROP INDEX IF EXISTS events_group;
CREATE INDEX IF NOT EXISTS events_by_recipients ON events (recipients, type, agent_key, seq, severity_rank, agent_label);
CREATE TABLE IF NOT EXISTS digests (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id TEXT NOT NULL UNIQUE,
  recipients TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('sending', 'sent', 'failed')),
  subject TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL DEFAULT '',
  html TEXT NOT NULL DEFAULT '',
  event_count INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_error TEXT,
  sent_at INTEGER,
  from_seq INTEGER,
  to_seq INTEGER,
  failed_at INTEGER
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
`

const rowToDigest = (r: any): StoredDigest => ({
  id: Number(r.id),
  messageId: String(r.message_id),
  recipients: String(r.recipients),
  subject: String(r.subject),
  text: String(r.text),
  html: String(r.html),
  eventCount: Number(r.event_count),
  createdAt: Number(r.created_at),
  attempts: Number(r.attempts),
  nextAttemptAt: Number(r.next_attempt_at),
})

export class DigestStore {
  private readonly db: DatabaseSync
  private open = true
  private insert: StatementSync | undefined

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    this.db = new DatabaseSync(join(dataDir, "email.db"))
    this.db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000;")
    this.db.exec(SCHEMA)
    this.migrate()
  }

  /** A store from before the watermark: its digests get their ranges, and the watermark is set. */
  private migrate() {
    const columns = (this.db.prepare("PRAGMA table_info(digests)").all() as Array<{ name: string }>).map((c) => c.name)
    if (!columns.includes("failed_at")) this.db.exec("ALTER TABLE digests ADD COLUMN failed_at INTEGER")
    if (this.meta("assigned_through") !== undefined && columns.includes("from_seq")) return
    this.transaction(() => {
      if (!columns.includes("from_seq")) this.db.exec("ALTER TABLE digests ADD COLUMN from_seq INTEGER")
      if (!columns.includes("to_seq")) this.db.exec("ALTER TABLE digests ADD COLUMN to_seq INTEGER")
      this.db.exec(`UPDATE digests SET
        from_seq = COALESCE((SELECT MIN(seq) - 1 FROM events WHERE digest_id = digests.id), 0),
        to_seq = COALESCE((SELECT MAX(seq) FROM events WHERE digest_id = digests.id), 0)
        WHERE from_seq IS NULL`)
      const row = this.db.prepare("SELECT MAX(seq) AS s FROM events WHERE digest_id IS NOT NULL").get() as any
      this.setMeta("assigned_through", String(Number(row?.s ?? 0)))
    })
  }

  /** The last event `seq` given to a digest: the events after it are waiting. */
  private watermark(): number {
    return Number(this.meta("assigned_through") ?? 0)
  }

  /** A digest's recipient set and event range. */
  private range(digestId: number): { recipients: string; from: number; to: number } {
    const r = this.db.prepare("SELECT recipients, from_seq, to_seq FROM digests WHERE id = ?").get(digestId) as any
    if (!r) throw new Error(`no digest ${digestId}`)
    return { recipients: String(r.recipients), from: Number(r.from_seq), to: Number(r.to_seq) }
  }

  get isOpen() {
    return this.open
  }

  /** Runs `f` in one transaction of the store's connection (several `add`s, one commit). */
  transaction<A>(f: () => A): A {
    this.db.exec("BEGIN IMMEDIATE")
    try {
      const result = f()
      this.db.exec("COMMIT")
      return result
    } catch (error) {
      this.db.exec("ROLLBACK")
      throw error
    }
  }

  /** Stores an event for the next digest; a second copy of one event id is ignored. */
  add(e: PendingEvent, now: number): void {
    this.insert ??= this.db.prepare(
      `INSERT OR IGNORE INTO events (event_id, type, agent_key, agent_label, severity, severity_rank, title, summary, link, occurred_at, fields, recipients, received_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    this.insert.run(
      e.eventId,
      e.type,
      e.agentKey,
      e.agentLabel,
      e.severity,
      SEVERITY_RANK[e.severity] ?? 0,
      e.title,
      e.summary,
      e.link,
      e.occurredAt,
      e.fields,
      e.recipients,
      now,
    )
  }

  pendingCount(): number {
    return Number((this.db.prepare("SELECT COUNT(*) AS n FROM events WHERE seq > ?").get(this.watermark()) as any).n)
  }

  meta(key: string): string | undefined {
    const row = this.db.prepare("SELECT value FROM meta WHERE key = ?").get(key) as { value: string } | undefined
    return row?.value
  }

  setMeta(key: string, value: string): void {
    this.db
      .prepare("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
      .run(key, value)
  }

  /**
   * In one transaction: every waiting event goes to a new digest, one digest per set of
   * recipients; `render` builds each digest's message from its events (through the read helpers
   * below), and the messages are stored with status `sending`. Returns the digests, none (and
   * stores nothing) when no event waits.
   */
  assign(
    messageId: () => string,
    now: number,
    render: (digestId: number) => { subject: string; text: string; html: string },
  ): Array<StoredDigest> {
    this.db.exec("BEGIN IMMEDIATE")
    try {
      const from = this.watermark()
      const to = Number((this.db.prepare("SELECT MAX(seq) AS s FROM events").get() as any)?.s ?? 0)
      // the recipient sets (few) from the index, then each one's waiting events counted there
      const sets = (this.db.prepare("SELECT DISTINCT recipients FROM events").all() as Array<{ recipients: string }>)
        .map((r) => {
          const c = this.db
            .prepare(
              "SELECT COUNT(*) AS n, MIN(seq) AS first FROM events WHERE recipients = ? AND seq > ? AND seq <= ?",
            )
            .get(r.recipients, from, to) as any
          return { recipients: String(r.recipients), count: Number(c.n), first: Number(c.first) }
        })
        .filter((set) => set.count > 0)
        .sort((a, b) => a.first - b.first)
      const ids: Array<number> = []
      for (const set of sets) {
        const id = Number(
          this.db
            .prepare(
              "INSERT INTO digests (message_id, recipients, status, event_count, created_at, next_attempt_at, from_seq, to_seq) VALUES (?, ?, 'sending', ?, ?, ?, ?, ?)",
            )
            .run(messageId(), set.recipients, set.count, now, now, from, to).lastInsertRowid,
        )
        const m = render(id)
        this.db
          .prepare("UPDATE digests SET subject = ?, text = ?, html = ? WHERE id = ?")
          .run(m.subject, m.text, m.html, id)
        ids.push(id)
      }
      if (to > from) this.setMeta("assigned_through", String(to))
      this.db.exec("COMMIT")
      return ids.map((id) => this.digest(id)!)
    } catch (error) {
      this.db.exec("ROLLBACK")
      throw error
    }
  }

  digest(id: number): StoredDigest | undefined {
    const r = this.db.prepare("SELECT * FROM digests WHERE id = ?").get(id)
    return r ? rowToDigest(r) : undefined
  }

  /** The oldest digest marked `sending` and not yet sent: after a crash, the one to send again. */
  unsent(): StoredDigest | undefined {
    const r = this.db.prepare("SELECT * FROM digests WHERE status = 'sending' ORDER BY id LIMIT 1").get()
    return r ? rowToDigest(r) : undefined
  }

  markSent(id: number, now: number): void {
    this.db
      .prepare("UPDATE digests SET status = 'sent', sent_at = ?, attempts = attempts + 1 WHERE id = ?")
      .run(now, id)
  }

  markAttemptFailed(id: number, error: string, now: number, nextAttemptAt: number, giveUp: boolean): void {
    this.db
      .prepare(
        `UPDATE digests SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?,
           status = CASE WHEN ? THEN 'failed' ELSE status END, failed_at = CASE WHEN ? THEN ? ELSE failed_at END
         WHERE id = ?`,
      )
      .run(error, nextAttemptAt, giveUp ? 1 : 0, giveUp ? 1 : 0, now, id)
  }

  /** The digests given up on (the connector's dead letters), oldest first. */
  failed(): Array<FailedDigest> {
    return (this.db.prepare("SELECT * FROM digests WHERE status = 'failed' ORDER BY id").all() as Array<any>).map(
      (r) => ({
        id: Number(r.id),
        eventCount: Number(r.event_count),
        attempts: Number(r.attempts),
        lastError: String(r.last_error ?? ""),
        failedAt: Number(r.failed_at ?? r.next_attempt_at),
      }),
    )
  }

  failedCount(): number {
    return Number((this.db.prepare("SELECT COUNT(*) AS n FROM digests WHERE status = 'failed'").get() as any).n)
  }

  /**
   * Puts failed digests (all, or those with the given ids) back to `sending` with fresh attempts, due at
   * once: the digest loop sends them, unchanged, before anything new. Returns the ones moved.
   */
  retryFailed(ids: ReadonlyArray<number> | "all"): Array<FailedDigest> {
    return this.transaction(() => {
      const chosen = this.failed().filter((d) => ids === "all" || ids.includes(d.id))
      const back = this.db.prepare(
        "UPDATE digests SET status = 'sending', attempts = 0, next_attempt_at = 0, failed_at = NULL WHERE id = ? AND status = 'failed'",
      )
      for (const d of chosen) back.run(d.id)
      return chosen
    })
  }

  counts(): { pending: number; sending: number; sent: number; failed: number } {
    const rows = this.db.prepare("SELECT status, COUNT(*) AS n FROM digests GROUP BY status").all() as Array<{
      status: string
      n: number
    }>
    const by = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]))
    return { pending: this.pendingCount(), sending: by.sending ?? 0, sent: by.sent ?? 0, failed: by.failed ?? 0 }
  }

  /** Counts by type and agent in a digest, from the index alone. */
  groups(digestId: number): Array<GroupCount> {
    const d = this.range(digestId)
    return (
      this.db
        .prepare(
          `SELECT type, agent_key, MAX(agent_label) AS agent_label, COUNT(*) AS n, MAX(severity_rank) AS rank
           FROM events WHERE recipients = ? AND seq > ? AND seq <= ? GROUP BY type, agent_key`,
        )
        .all(d.recipients, d.from, d.to) as Array<any>
    ).map((r) => ({
      type: String(r.type),
      agentKey: String(r.agent_key),
      agentLabel: String(r.agent_label),
      count: Number(r.n),
      severityRank: Number(r.rank),
    }))
  }

  /**
   * Up to `perGroup` events, oldest first, of each of `groups` (a type and an agent) in a digest: one index
   * seek each, so a digest renders the groups it shows without reading its other events.
   */
  samples(
    digestId: number,
    perGroup: number,
    groups: ReadonlyArray<{ readonly type: string; readonly agentKey: string }>,
  ): Array<PendingEvent & { readonly seq: number }> {
    const d = this.range(digestId)
    const one = this.db.prepare(
      "SELECT * FROM events WHERE recipients = ? AND type = ? AND agent_key = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
    )
    return groups
      .flatMap((g) => one.all(d.recipients, g.type, g.agentKey, d.from, d.to, perGroup) as Array<any>)
      .sort((a, b) => Number(a.seq) - Number(b.seq))
      .map((r) => ({
        seq: Number(r.seq),
        eventId: String(r.event_id),
        type: String(r.type),
        agentKey: String(r.agent_key),
        agentLabel: String(r.agent_label),
        severity: String(r.severity),
        title: String(r.title),
        summary: String(r.summary),
        link: r.link === null ? null : String(r.link),
        occurredAt: Number(r.occurred_at),
        fields: String(r.fields),
        recipients: String(r.recipients),
      }))
  }

  /** The event ids of a digest (tests, and the log line of a sent digest). */
  eventIds(digestId: number): Array<string> {
    return (
      this.db
        .prepare("SELECT event_id FROM events WHERE recipients = ? AND seq > ? AND seq <= ? ORDER BY seq")
        .all(...Object.values(this.range(digestId))) as Array<any>
    ).map((r) => String(r.event_id))
  }

  /** Forgets the digests sent (and their events) before `before`; returns how many digests. */
  prune(before: number): number {
    this.db.exec("BEGIN IMMEDIATE")
    try {
      this.db
        .prepare(
          `DELETE FROM events WHERE EXISTS (SELECT 1 FROM digests d WHERE d.status = 'sent' AND d.sent_at < ?
             AND d.recipients = events.recipients AND events.seq > d.from_seq AND events.seq <= d.to_seq)`,
        )
        .run(before)
      const gone = Number(
        this.db.prepare("DELETE FROM digests WHERE status = 'sent' AND sent_at < ?").run(before).changes,
      )
      this.db.exec("COMMIT")
      return gone
    } catch (error) {
      this.db.exec("ROLLBACK")
      throw error
    }
  }

  close(): void {
    if (!this.open) return
    this.open = false
    this.db.close()
  }
}
