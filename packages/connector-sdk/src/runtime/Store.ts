import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite"

/**
 * The connector's durable state in `<data dir>/connector.db` (node:sqlite, WAL): the event ids seen
 * (de-duplication), the jobs still to deliver, the dead letters, and a small key-value table apps use
 * for vendor state (a Slack thread's `ts`). Every write is committed before the caller goes on, so
 * everything survives a kill -9. What was answered 2xx (`accept`, `acceptAll`), dead letters, replays
 * and vendor state are also synced to disk (`synchronous=FULL`), so they survive a power cut; the
 * worker's bookkeeping (an attempt started, a job delivered or rescheduled) is committed without its
 * own fsync (`synchronous=NORMAL`, synced with the next FULL commit or checkpoint): after a power cut
 * it can only make a delivery go again or an attempt uncounted, never lose an event. That takes two of
 * the three fsyncs per event off the connector's event loop (node:sqlite is synchronous).
 *
 * Several processes may open one store at once (the running connector and a `replay` command):
 * SQLite's locking serialises the writes, and the connector polls for jobs it did not insert.
 */

/** What a job and a dead letter both hold of their event. */
export interface StoredEvent {
  readonly eventId: string
  readonly deliveryId: string
  readonly type: string
  /** The envelope as JSON. */
  readonly body: string
  /** Jobs sharing a key are delivered one at a time, in arrival order. */
  readonly orderKey: string | null
  readonly attempts: number
}

/** What {@link Store.accept} stores of a delivery. */
export interface AcceptedJob {
  readonly eventId: string
  readonly deliveryId: string
  readonly type: string
  readonly body: string
  readonly orderKey: string | undefined
  readonly now: number
}

/** One event waiting for delivery. */
export interface StoredJob extends StoredEvent {
  readonly seq: number
  /** Epoch ms before which the job is not tried. */
  readonly nextAt: number
  readonly lastError: string | null
  /** Split out of a refused batch: delivered alone. */
  readonly solo: boolean
}

/** An event whose delivery failed for good; `replay` moves it back to the jobs. */
export interface StoredDeadLetter extends StoredEvent {
  readonly id: number
  /** `non_retryable` (the vendor refused it), `max_attempts`. */
  readonly reason: string
  readonly error: string
  /** Epoch ms. */
  readonly failedAt: number
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS received (
  event_id TEXT PRIMARY KEY,
  received_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS received_at ON received (received_at);
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL,
  delivery_id TEXT NOT NULL,
  type TEXT NOT NULL,
  body TEXT NOT NULL,
  order_key TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_at INTEGER NOT NULL,
  last_error TEXT,
  solo INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_next ON jobs (next_at, seq);
CREATE INDEX IF NOT EXISTS jobs_order ON jobs (order_key, seq);
CREATE TABLE IF NOT EXISTS dead_letters (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL,
  delivery_id TEXT NOT NULL,
  type TEXT NOT NULL,
  body TEXT NOT NULL,
  order_key TEXT,
  attempts INTEGER NOT NULL,
  reason TEXT NOT NULL,
  error TEXT NOT NULL,
  failed_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS state (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  expires_at INTEGER
) WITHOUT ROWID;
`

/** The index the prune of expired state entries reads (after the column exists in a store made before it). */
const STATE_EXPIRY = `
CREATE INDEX IF NOT EXISTS state_expires ON state (expires_at) WHERE expires_at IS NOT NULL;
`

/** Expired state entries deleted per transaction by {@link Store.pruneState}: each holds the write lock briefly. */
const STATE_PRUNE_BATCH = 1_000

type Row = Record<string, SQLInputValue>

const toEvent = (r: Row): StoredEvent => ({
  eventId: String(r.event_id),
  deliveryId: String(r.delivery_id),
  type: String(r.type),
  body: String(r.body),
  orderKey: r.order_key === null ? null : String(r.order_key),
  attempts: Number(r.attempts),
})

const toJob = (r: Row): StoredJob => ({
  ...toEvent(r),
  seq: Number(r.seq),
  nextAt: Number(r.next_at),
  lastError: r.last_error === null ? null : String(r.last_error),
  solo: Number(r.solo) === 1,
})

const toDeadLetter = (r: Row): StoredDeadLetter => ({
  ...toEvent(r),
  id: Number(r.id),
  reason: String(r.reason),
  error: String(r.error),
  failedAt: Number(r.failed_at),
})

/**
 * The store of one connector. Synchronous: node:sqlite's calls are, and each is a short local
 * transaction.
 */
export class Store {
  readonly path: string
  readonly #db: DatabaseSync
  /** Each statement prepared once and reused: a few per event otherwise, each with native memory of its own. */
  readonly #statements = new Map<string, StatementSync>()

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    this.path = join(dataDir, "connector.db")
    this.#db = new DatabaseSync(this.path, { timeout: 5000 })
    this.#db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
    this.#db.exec(SCHEMA)
    // A store from before state entries expired: its entries keep no expiry (NULL), as they were written (what
    // they are needed for is the connector's to say); every entry written from now on has one.
    const columns = this.#db.prepare("PRAGMA table_info(state)").all() as Array<Row>
    if (!columns.some((c) => c.name === "expires_at"))
      try {
        this.#db.exec("ALTER TABLE state ADD COLUMN expires_at INTEGER")
      } catch (error) {
        // another process opening the store (a `replay` beside the connector) added it first
        if (!/duplicate column/i.test((error as Error).message)) throw error
      }
    this.#db.exec(STATE_EXPIRY)
  }

  close(): void {
    this.#statements.clear()
    if (this.#db.isOpen) this.#db.close()
  }

  #prepare(sql: string): StatementSync {
    let statement = this.#statements.get(sql)
    if (statement === undefined) {
      statement = this.#db.prepare(sql)
      this.#statements.set(sql, statement)
    }
    return statement
  }

  get isOpen(): boolean {
    return this.#db.isOpen
  }

  /** Runs `f`'s writes without their own fsync (see the class comment). */
  #relaxed<A>(f: () => A): A {
    this.#db.exec("PRAGMA synchronous = NORMAL")
    try {
      return f()
    } finally {
      this.#db.exec("PRAGMA synchronous = FULL")
    }
  }

  #tx<A>(f: () => A): A {
    this.#db.exec("BEGIN IMMEDIATE")
    try {
      const result = f()
      this.#db.exec("COMMIT")
      return result
    } catch (error) {
      this.#db.exec("ROLLBACK")
      throw error
    }
  }

  /**
   * Records the event id and queues its job, in one transaction. False when the id was seen before
   * (a redelivery): nothing is queued.
   */
  accept(job: AcceptedJob): boolean {
    return this.acceptAll([job])[0]!
  }

  /**
   * {@link accept} for several events in one transaction (one fsync): one answer each, in order. An id
   * seen before, or earlier in `jobs`, is not queued again.
   */
  acceptAll(jobs: ReadonlyArray<AcceptedJob>): Array<boolean> {
    return this.#tx(() => {
      const seen = this.#prepare("INSERT INTO received (event_id, received_at) VALUES (?, ?) ON CONFLICT DO NOTHING")
      const insert = this.#prepare(
        "INSERT INTO jobs (event_id, delivery_id, type, body, order_key, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      )
      return jobs.map((job) => {
        if (Number(seen.run(job.eventId, job.now).changes) === 0) return false
        insert.run(job.eventId, job.deliveryId, job.type, job.body, job.orderKey ?? null, job.now, job.now)
        return true
      })
    })
  }

  /** Records an event id without queueing anything (an event the routing filtered out). */
  markSeen(eventId: string, now: number): boolean {
    const r = this.#prepare("INSERT INTO received (event_id, received_at) VALUES (?, ?) ON CONFLICT DO NOTHING").run(
      eventId,
      now,
    )
    return Number(r.changes) > 0
  }

  /** Forgets ids seen before `before` (epoch ms). */
  pruneSeen(before: number): number {
    return Number(this.#prepare("DELETE FROM received WHERE received_at < ?").run(before).changes)
  }

  /**
   * Up to `limit` jobs due at `now`, oldest first, skipping `busy` ones and any job behind an
   * earlier job of the same order key (which must be delivered, or dead-lettered, first).
   */
  dueJobs(now: number, limit: number, busy: ReadonlySet<number>): Array<StoredJob> {
    const rows = this.#prepare(
      `SELECT * FROM jobs j
         WHERE j.next_at <= ?
           AND (j.order_key IS NULL OR NOT EXISTS (
             SELECT 1 FROM jobs k WHERE k.order_key = j.order_key AND k.seq < j.seq))
         ORDER BY j.seq LIMIT ?`,
    ).all(now, limit + busy.size) as Array<Row>
    return rows
      .map(toJob)
      .filter((j) => !busy.has(j.seq))
      .slice(0, limit)
  }

  /** When the next job not in `busy` is due (epoch ms), if any. */
  nextDue(busy: ReadonlySet<number>): number | undefined {
    const rows = this.#prepare("SELECT seq, next_at FROM jobs ORDER BY next_at LIMIT ?").all(
      busy.size + 1,
    ) as Array<Row>
    const row = rows.find((r) => !busy.has(Number(r.seq)))
    return row === undefined ? undefined : Number(row.next_at)
  }

  /** Marks an attempt started: counted even if the process dies during it. */
  startAttempt(seq: number): number {
    this.#relaxed(() => this.#prepare("UPDATE jobs SET attempts = attempts + 1 WHERE seq = ?").run(seq))
    const row = this.#prepare("SELECT attempts FROM jobs WHERE seq = ?").get(seq) as Row | undefined
    return row === undefined ? 0 : Number(row.attempts)
  }

  delivered(seq: number): void {
    this.#relaxed(() => this.#prepare("DELETE FROM jobs WHERE seq = ?").run(seq))
  }

  reschedule(seq: number, nextAt: number, error: string, options: { readonly solo?: boolean } = {}): void {
    this.#relaxed(() =>
      this.#prepare("UPDATE jobs SET next_at = ?, last_error = ?, solo = max(solo, ?) WHERE seq = ?").run(
        nextAt,
        error,
        options.solo ? 1 : 0,
        seq,
      ),
    )
  }

  /** Holds every job until `until` at least (a vendor's rate limit applies to all of them). */
  pauseAll(until: number): void {
    this.#prepare("UPDATE jobs SET next_at = ? WHERE next_at < ?").run(until, until)
  }

  deadLetter(seq: number, reason: string, error: string, now: number): void {
    this.#tx(() => {
      this.#prepare(
        `INSERT INTO dead_letters (event_id, delivery_id, type, body, order_key, attempts, reason, error, failed_at)
           SELECT event_id, delivery_id, type, body, order_key, attempts, ?, ?, ? FROM jobs WHERE seq = ?`,
      ).run(reason, error, now, seq)
      this.#prepare("DELETE FROM jobs WHERE seq = ?").run(seq)
    })
  }

  deadLetters(): Array<StoredDeadLetter> {
    return (this.#prepare("SELECT * FROM dead_letters ORDER BY id").all() as Array<Row>).map(toDeadLetter)
  }

  /**
   * Moves dead letters back to the queue with fresh attempts: those with the given ids (dead-letter
   * ids or event ids), or all. Returns the ones moved.
   */
  replay(ids: ReadonlyArray<string> | "all", now: number): Array<StoredDeadLetter> {
    return this.#tx(() => {
      const all = this.deadLetters()
      const chosen = ids === "all" ? all : all.filter((d) => ids.includes(String(d.id)) || ids.includes(d.eventId))
      for (const d of chosen) {
        this.#prepare(
          "INSERT INTO jobs (event_id, delivery_id, type, body, order_key, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ).run(d.eventId, d.deliveryId, d.type, d.body, d.orderKey, now, now)
        this.#prepare("DELETE FROM dead_letters WHERE id = ?").run(d.id)
      }
      return chosen
    })
  }

  counts(): { readonly queued: number; readonly deadLetters: number } {
    const q = this.#prepare("SELECT count(*) AS n FROM jobs").get() as Row
    const d = this.#prepare("SELECT count(*) AS n FROM dead_letters").get() as Row
    return { queued: Number(q.n), deadLetters: Number(d.n) }
  }

  /** The value of `key` unless it expired by `now` (whether or not {@link pruneState} deleted it yet). */
  getState(key: string, now: number): string | undefined {
    const row = this.#prepare("SELECT value FROM state WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)").get(
      key,
      now,
    ) as Row | undefined
    return row === undefined ? undefined : String(row.value)
  }

  /** Sets `key` until `expiresAt` (epoch ms; null: until deleted), replacing its value and expiry. */
  setState(key: string, value: string, now: number, expiresAt: number | null): void {
    this.#prepare(
      `INSERT INTO state (key, value, updated_at, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE
         SET value = excluded.value, updated_at = excluded.updated_at, expires_at = excluded.expires_at`,
    ).run(key, value, now, expiresAt)
  }

  /**
   * Deletes state entries expired by `now`, at most `limit` of them, in transactions of
   * {@link STATE_PRUNE_BATCH}; returns how many. The rest wait for the next call.
   */
  pruneState(now: number, limit = 10 * STATE_PRUNE_BATCH): number {
    let deleted = 0
    while (deleted < limit) {
      const n = Number(
        this.#prepare(
          "DELETE FROM state WHERE key IN (SELECT key FROM state WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)",
        ).run(now, Math.min(STATE_PRUNE_BATCH, limit - deleted)).changes,
      )
      deleted += n
      if (n < STATE_PRUNE_BATCH) break
    }
    return deleted
  }

  deleteState(key: string): void {
    this.#prepare("DELETE FROM state WHERE key = ?").run(key)
  }
}
