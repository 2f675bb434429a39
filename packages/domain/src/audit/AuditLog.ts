import { Database } from "@agentgov/db"
import { canonicalize, chainHashOfCanonical, GENESIS_HASH } from "@agentgov/verifier"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Actor } from "../auth/Actor.ts"
import { newId } from "../shared/ids.ts"
import { settledWithin } from "../shared/settledWithin.ts"
import { WEBHOOKS_CHANNEL } from "../webhooks/WebhookRepo.ts"
import type { AuditEvent, NewEvent } from "./AuditEvent.ts"
import { type AppendEnd, makeAnnouncements } from "./announcements.ts"
import { ChainClosed } from "./EventErrors.ts"
import { callerTraceparent } from "./traceContext.ts"

/** The LISTEN/NOTIFY channel that announces committed appends as `<workspaceId>:<last sequence>`. */
export const EVENTS_CHANNEL = "agentgov_events"

/** The events one writer appends, with the actor recorded on each. */
export interface AppendGroup {
  readonly actor: Actor
  readonly events: ReadonlyArray<NewEvent>
  /** The W3C traceparent of the span that appends, when tracing is on: kept with the deliveries it queues. */
  readonly traceparent?: string | undefined
}

/** The last link of a workspace's chain (sequence 0 and the genesis hash when it is empty). */
export interface ChainHead {
  readonly sequence: number
  readonly hash: string
  /** The workspace's enabled webhooks as the head counted them, when known (see `appendStatement`). */
  readonly webhooks?: number | undefined
}

/** Events numbered and hashed after a given head, ready to be written in one statement. */
export interface PreparedAppend {
  /** Per group, in order: the events as they will be stored. */
  readonly stored: ReadonlyArray<ReadonlyArray<AuditEvent>>
  /** The rows as one JSON array (json_to_recordset), without their data. */
  readonly rows: string
  /**
   * The rows' data, in order: their canonical texts joined by U+0001, which no valid JSON text holds raw (a
   * control character in a string is escaped). Apart from the rows, so PostgreSQL reads each data once.
   */
  readonly data: string
  /** Event id → the traceparent of the group that appended it, as a JSON object (`{}` when tracing is off). */
  readonly traces: string
  /** Shared by every event of the append. */
  readonly timestamp: string
  /** The head after these events. */
  readonly head: ChainHead
}

/**
 * An Idempotency-Key claimed together with the events it stored, and the response it replays: what the
 * appender's one-statement path writes to the idempotency store (see Idempotency.ts).
 */
export interface CompletedKey {
  readonly key: string
  readonly operation: string
  readonly requestHash: string
  readonly status: number
  readonly body: string
}

/**
 * A `\u0000` or unpaired-surrogate escape in canonical JSON (one not itself escaped: after an even run of
 * backslashes). JSON allows both; PostgreSQL's json readers (`->>`, `::jsonb`) refuse them, so a row holding one
 * would fail every later reader of the trail. `findUnstorable` keeps them out of every request; this keeps them
 * out of the trail whatever calls `prepareAppend`.
 */
const UNSTORABLE_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\u(?:0000|d[89a-f])/

/** Whether canonical JSON text holds an escape PostgreSQL's json readers refuse (UNSTORABLE_ESCAPE). */
export const holdsUnstorableEscape = (canonical: string) =>
  (canonical.includes("\\u0000") || canonical.includes("\\ud")) && UNSTORABLE_ESCAPE.test(canonical)

/**
 * The group commit's direct appends of one workspace announce themselves to other instances at most once per
 * this gap (announcements.ts); this process's own listeners hear each at once. At one guard call at a time the
 * NOTIFY of every append was 10–22% of PostgreSQL's CPU per decision (docs/decisions.md, 2026-11-30, fifth
 * session). An instance that stops dead within the gap leaves its last appends unannounced to the others: their
 * live streams find them by their sweep (EventFeed.ts, FEED_SWEEP_MS), trust workers by their poll.
 */
export const ANNOUNCE_GAP_MS = 10

/** The gap in force: ANNOUNCE_GAP_MS, unless a test sets another. */
export const AnnounceGap = Context.Reference<number>("@agentgov/domain/audit/AnnounceGap", {
  defaultValue: () => ANNOUNCE_GAP_MS,
})

/** The SQLSTATE of `agentgov_abort_append()` (migration 0009). */
const APPEND_ABORTED = "AGA01"

const actorOf = (actor: Actor) =>
  ({ type: actor.credential.type, id: actor.credential.type === "system" ? null : actor.credential.id }) as const

/**
 * One statement that appends prepared rows after the head `expected`, and only there: it moves the head with
 * a compare-and-set (under the head's row lock, which PostgreSQL re-checks after waiting for a concurrent
 * writer), inserts the rows only when the head moved, queues one delivery per event and matching enabled
 * webhook (exact name, `prefix.*`, `*`; aliases were resolved when the filters were saved; a delivery's id is
 * derived from its event and webhook, see migration 0008), and announces the append to live streams and
 * delivery workers (PostgreSQL delivers the notifications only at commit). Run alone it is its own
 * transaction; inside one it joins it. `ok` is 0 when nothing was written: the head was no longer `expected`,
 * the workspace is deleted (`gone`), or (the shape without deliveries) the head counts an enabled webhook.
 * `webhooks` is the head's count of enabled webhooks, which the next statement's shape follows.
 *
 * With keys, it first claims them (ascending, the idempotency store's lock order) with their final responses,
 * and moves the head only if it claimed every one; if it did not, or the head moved,
 * `agentgov_abort_append()` aborts the whole statement, claims included.
 *
 * A deleted workspace's chain is closed: `workspace.deleted` is its last event. The head moves only while the
 * workspace is not deleted, checked in the statement (`gone`, one index probe, not a round trip of its own).
 * A statement that waited on the head's lock while the deletion committed sees the head moved by
 * `workspace.deleted` and writes nothing; one that starts after it sees `deleted_at` in its snapshot. `gone` is
 * 1 when that is why nothing was written.
 *
 * Plain text with numbered parameters, prepared once per connection, sent by the group commit's direct path
 * and (under the head's lock, without keys, always with the deliveries part and the announcement) by the
 * Effect path.
 *
 * It comes in the eight shapes `appendStatement` builds. The announcement (the `agentgov_events` NOTIFY) is
 * left out of a direct append that follows another within ANNOUNCE_GAP_MS, which `appendAtNow` announces
 * itself. A part with nothing to do still costs PostgreSQL its
 * set-up: opening the table and its indexes, taking their locks. Without keys and webhooks, the `claimed` and
 * `queued` parts were 42 µs of a one-event statement's 263, 60 of a ten-event one's 432 (backend CPU per
 * statement). So the claim is there only when the append carries keys. The deliveries are queued only when the
 * head's count of enabled webhooks may be above zero: a statement without `queued` moves the head only while
 * that count is 0. A webhook enabled since the writer last saw the head makes it write nothing, like a moved
 * head, and the append goes again under the lock, with the deliveries part (its keys claimed by the
 * idempotency store in the same transaction).
 */
const appendStatement = (withKeys: boolean, withWebhooks: boolean, withAnnouncement: boolean) => {
  const order: Array<keyof AppendValues> = []
  /** The placeholder of a value: numbered in the order of first use, so each shape binds only what it reads. */
  const $ = (name: keyof AppendValues) => {
    const at = order.indexOf(name)
    return `$${at < 0 ? order.push(name) : at + 1}`
  }
  const ws = $("workspaceId")
  const text = `WITH gone AS (
    SELECT 1 FROM workspaces WHERE id = ${ws} AND deleted_at IS NOT NULL
  ), ${
    withKeys
      ? `claimed AS (
    INSERT INTO idempotency_keys (workspace_id, key, operation, request_hash, status_code, response_body, created_at)
    SELECT ${ws}, c.k, c.op, c.rh, c.st, c.b, ${$("timestamp")}::timestamptz
    FROM json_to_recordset(${$("keys")}::text::json) AS c(k text, op text, rh text, st int4, b text)
    ORDER BY c.k
    ON CONFLICT (workspace_id, key) DO NOTHING
    RETURNING 1
  ), `
      : ""
  }head AS (
    UPDATE chain_heads SET sequence = ${$("sequence")}, hash = ${$("hash")}
    WHERE workspace_id = ${ws} AND sequence = ${$("expectedSequence")} AND hash = ${$("expectedHash")}
      ${withKeys ? `AND (SELECT count(*) FROM claimed) = ${$("keyCount")}::int4` : ""}
      ${withWebhooks ? "" : "AND webhooks = 0"}
      AND NOT EXISTS (SELECT 1 FROM gone)
    RETURNING webhooks
  ), appended AS (
    INSERT INTO events (workspace_id, sequence, id, type, agent_id, actor_type, actor_id, data, ts, occurred_at, prev_hash, hash)
    SELECT ${ws}, r.s, r.id, r.t, r.a, r.at, r.ai, r.d::json, ${$("timestamp")}::timestamptz, r.o, r.p, r.h
    FROM ROWS FROM (
        json_to_recordset(${$("rows")}::text::json)
          AS (s int8, id text, t text, a text, at text, ai text, o timestamptz, p text, h text),
        unnest(string_to_array(${$("data")}::text, chr(1)))
      ) AS r(s, id, t, a, at, ai, o, p, h, d)
    WHERE EXISTS (SELECT 1 FROM head)
    RETURNING id, type, sequence
  )${
    withWebhooks
      ? `, queued AS (
    INSERT INTO webhook_deliveries (id, workspace_id, webhook_id, event_sequence, event_id, event_type, status,
      next_attempt_at, created_at, updated_at, trace_parent)
    SELECT 'dlv_' || substr(a.id, 5, 10) || substr(md5(a.id || w.id), 1, 16), ${ws}, w.id, a.sequence,
      a.id, a.type, 'pending', ${$("timestamp")}::timestamptz, ${$("timestamp")}::timestamptz,
      ${$("timestamp")}::timestamptz, ${$("traces")}::text::jsonb ->> a.id
    FROM appended a JOIN webhooks w ON w.workspace_id = ${ws} AND w.enabled
      AND (w.match_all OR w.match_types ? a.type
           OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(w.match_prefixes) p WHERE starts_with(a.type, p)))
    WHERE (SELECT webhooks FROM head) > 0
    RETURNING 1
  )`
      : ""
  }
  SELECT ${withKeys ? "CASE WHEN NOT EXISTS (SELECT 1 FROM head) THEN agentgov_abort_append() ELSE 1 END" : "(SELECT count(*) FROM head)::int"} AS ok,
    (SELECT count(*) FROM gone)::int AS gone,
    (SELECT webhooks FROM head) AS webhooks${
      withAnnouncement
        ? `,
    (SELECT count(*) FROM (SELECT pg_notify('${EVENTS_CHANNEL}', ${$("announcement")}) FROM head) n) AS events`
        : ""
    }${
      withWebhooks
        ? `,
    (SELECT count(*) FROM (SELECT pg_notify('${WEBHOOKS_CHANNEL}', ${ws}) FROM queued LIMIT 1) n) AS deliveries`
        : ""
    }`
  return { text, order }
}

/** What the append statements bind, by name (`appendStatement` numbers them). */
interface AppendValues {
  readonly workspaceId: string
  readonly timestamp: string
  /** The keys as a JSON array (json_to_recordset). */
  readonly keys: string
  readonly keyCount: number
  readonly sequence: number
  readonly hash: string
  readonly expectedSequence: number
  readonly expectedHash: string
  readonly rows: string
  readonly data: string
  /** The `agentgov_events` payload: `<workspaceId>:<last sequence>`. */
  readonly announcement: string
  readonly traces: string
}

/** The eight shapes, `[with keys][with webhooks][with the announcement]`. */
const APPEND_STATEMENTS = [false, true].map((keys) =>
  [false, true].map((webhooks) => [false, true].map((announcement) => appendStatement(keys, webhooks, announcement))),
)

/**
 * The statement and parameters that append `prepared` after `expected`. Without a count of enabled webhooks
 * in `expected` (not known), the deliveries part is in.
 */
const appendQuery = (
  workspaceId: string,
  prepared: PreparedAppend,
  expected: ChainHead,
  keys: ReadonlyArray<CompletedKey>,
  announced = true,
) => {
  const { text, order } =
    APPEND_STATEMENTS[keys.length > 0 ? 1 : 0]![expected.webhooks === 0 ? 0 : 1]![announced ? 1 : 0]!
  const values: AppendValues = {
    workspaceId,
    timestamp: prepared.timestamp,
    keys: JSON.stringify(keys.map((k) => ({ k: k.key, op: k.operation, rh: k.requestHash, st: k.status, b: k.body }))),
    keyCount: keys.length,
    sequence: prepared.head.sequence,
    hash: prepared.head.hash,
    expectedSequence: expected.sequence,
    expectedHash: expected.hash,
    rows: prepared.rows,
    data: prepared.data,
    announcement: `${workspaceId}:${prepared.head.sequence}`,
    traces: prepared.traces,
  }
  return { text, params: order.map((name) => values[name]) }
}

/**
 * Numbers and hashes the events of several writers after `after`, in the
 * order given, at one timestamp. Pure but for the ids it draws. The rows
 * travel as one JSON array, not as 12 bind parameters each, and their data
 * beside it as one text of canonical texts, which PostgreSQL's json type
 * stores verbatim. Inside the array PostgreSQL would read each data twice:
 * once to walk the array, once more to check it as json.
 */
export const prepareAppend = (
  workspaceId: string,
  groups: ReadonlyArray<AppendGroup>,
  after: ChainHead,
  now: number,
): PreparedAppend => {
  const timestamp = new Date(now).toISOString()
  let prevHash = after.hash
  let sequence = after.sequence
  let rows = ""
  let data = ""
  let traces = ""
  const stored = groups.map((g) => {
    if (g.actor.workspaceId !== workspaceId) throw new Error("an append group of another workspace")
    const by = actorOf(g.actor)
    const actorJson = `${JSON.stringify(by.type)},"ai":${JSON.stringify(by.id)}`
    return g.events.map((e) => {
      sequence += 1
      const canonical = e.canonicalData ?? canonicalize(e.data)
      if (holdsUnstorableEscape(canonical))
        throw new Error(
          `the data of a ${e.type} event holds \\u0000 or an unpaired surrogate, which the trail cannot keep`,
        )
      const hash = chainHashOfCanonical(prevHash, e.type, canonical, timestamp)
      const event: AuditEvent = {
        id: newId("evt", now),
        type: e.type,
        timestamp,
        workspaceId,
        agentId: e.agentId ?? null,
        occurredAt: e.occurredAt ?? null,
        actor: by,
        data: e.data,
        sequence,
        prevHash,
        hash,
      }
      if (g.traceparent !== undefined)
        traces += `${traces === "" ? "{" : ","}"${event.id}":${JSON.stringify(g.traceparent)}`
      rows += `${rows === "" ? "[" : ","}{"s":${sequence},"id":"${event.id}","t":${JSON.stringify(e.type)},"a":${JSON.stringify(event.agentId)},"at":${actorJson},"o":${JSON.stringify(event.occurredAt)},"p":"${prevHash}","h":"${hash}"}`
      data += sequence === after.sequence + 1 ? canonical : `\u0001${canonical}`
      prevHash = hash
      return event
    })
  })
  return {
    stored,
    rows: rows === "" ? "[]" : `${rows}]`,
    data,
    traces: traces === "" ? "{}" : `${traces}}`,
    timestamp,
    head: { sequence, hash: prevHash },
  }
}

/**
 * The write side of the audit trail. `append` must run inside the caller's
 * transaction: it takes the workspace's chain-head row lock, so appends to one
 * workspace are serialised and the chain stays linear, and the events commit
 * or roll back together with the change they record. A deleted workspace's
 * chain takes nothing more: `append` and `appendGroups` die with `ChainClosed`
 * (the caller's transaction rolls back), `appendAtNow` writes nothing.
 */
export class AuditLog extends Context.Service<
  AuditLog,
  {
    readonly append: (actor: Actor, events: ReadonlyArray<NewEvent>) => Effect.Effect<ReadonlyArray<AuditEvent>>
    /**
     * Appends the events of several writers in one go (one INSERT, one head
     * update), in the order given; the result is per group. The events of a
     * call share one timestamp.
     */
    readonly appendGroups: (
      workspaceId: string,
      groups: ReadonlyArray<AppendGroup>,
    ) => Effect.Effect<ReadonlyArray<ReadonlyArray<AuditEvent>>>
    /**
     * Writes a prepared append if the chain's head is still `expected`, in one statement (its own transaction),
     * claiming `keys` with their responses in it: the head after it, with its count of enabled webhooks. False,
     * with nothing written, when another writer moved the head first, one of the keys is already taken, or a
     * webhook was enabled since `expected` counted none. The group commit's fast path: it keeps the head in
     * memory, so that a batch costs one round trip instead of a transaction's six. It runs outside the Effect
     * runtime, on the pool, and rejects with the driver's error when the statement failed (it may have committed
     * all the same).
     */
    readonly appendAtNow: (
      workspaceId: string,
      prepared: PreparedAppend,
      expected: ChainHead,
      keys?: ReadonlyArray<CompletedKey>,
    ) => Promise<ChainHead | false>
    /** Creates the empty chain of a new workspace (in the workspace's creating transaction). */
    readonly initChain: (workspaceId: string) => Effect.Effect<void>
  }
>()("@agentgov/domain/audit/AuditLog") {
  static readonly layer = Layer.effect(
    AuditLog,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const db = yield* Database

      const initChain = (workspaceId: string) =>
        sql`INSERT INTO chain_heads (workspace_id, sequence, hash) VALUES (${workspaceId}, 0, ${GENESIS_HASH})
            ON CONFLICT (workspace_id) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie)

      const write = (workspaceId: string, prepared: PreparedAppend, expected: ChainHead) => {
        const { text, params } = appendQuery(workspaceId, prepared, expected, [])
        return sql.unsafe<{ ok: number; gone: number }>(text, params).pipe(
          Effect.map((rows) => (rows[0]?.ok === 1 ? "written" : rows[0]?.gone === 1 ? "closed" : "refused")),
          Effect.catchIf(
            (e) => (e.reason.cause as { code?: unknown } | undefined)?.code === APPEND_ABORTED,
            () => Effect.succeed("refused" as const),
          ),
        )
      }

      const announcements = makeAnnouncements({
        gapMs: yield* AnnounceGap,
        notify: (payload) => db.notify(EVENTS_CHANNEL, payload),
        local: (payload) => db.announce(EVENTS_CHANNEL, payload),
      })
      // Owed announcements go out before the pool closes (this layer is released before the Database's), waited
      // for at most a second: a store that does not answer must not hold the shutdown (the feeds' sweep, FeedSweep,
      // and the trust worker's poll find those appends all the same).
      yield* Effect.addFinalizer(() => Effect.promise(() => settledWithin([announcements.flush()], 1_000)))

      const appendAtNow = async (
        workspaceId: string,
        prepared: PreparedAppend,
        expected: ChainHead,
        keys: ReadonlyArray<CompletedKey> = [],
      ) => {
        if (prepared.head.sequence === expected.sequence && keys.length === 0) return expected
        const statement = announcements.begin(workspaceId)
        let ended: AppendEnd = "unknown"
        try {
          const { text, params } = appendQuery(workspaceId, prepared, expected, keys, statement.carried)
          const row = (await db.query(text, params))[0]
          const written = row?.ok === 1
          ended = written ? "written" : "nothing"
          return written ? { ...prepared.head, webhooks: Number(row.webhooks) } : false
        } catch (error) {
          if ((error as { code?: unknown } | undefined)?.code !== APPEND_ABORTED) throw error
          ended = "nothing"
          return false
        } finally {
          // A statement that failed may have committed (the group commit then finds it in the chain): its
          // announcement is owed to every instance, this one's own LISTEN included.
          announcements.end(workspaceId, statement, ended, `${workspaceId}:${prepared.head.sequence}`)
        }
      }

      const appendGroups = Effect.fn("AuditLog.appendGroups")(function* (
        workspaceId: string,
        groups: ReadonlyArray<AppendGroup>,
      ) {
        if (groups.every((g) => g.events.length === 0)) return groups.map(() => [])
        const heads = yield* sql<ChainHead>`SELECT sequence, hash FROM chain_heads
          WHERE workspace_id = ${workspaceId} FOR UPDATE`
        const head = heads[0]
        if (head === undefined) return yield* Effect.die(new Error(`no chain head for workspace ${workspaceId}`))
        const prepared = prepareAppend(workspaceId, groups, head, yield* Clock.currentTimeMillis)
        // Under the lock the head cannot have moved; the workspace can have been deleted while this waited for it.
        const written = yield* write(workspaceId, prepared, head)
        if (written === "closed") return yield* Effect.die(new ChainClosed({ workspaceId }))
        if (written === "refused") return yield* Effect.die(new Error("the chain head moved under its lock"))
        return prepared.stored
      }, Effect.orDie)

      const append = (actor: Actor, events: ReadonlyArray<NewEvent>) =>
        Effect.flatMap(callerTraceparent, (traceparent) =>
          appendGroups(actor.workspaceId, [{ actor, events, traceparent }]),
        ).pipe(Effect.map((stored) => stored[0]!))

      return AuditLog.of({ append, appendGroups, appendAtNow, initChain })
    }),
  )
}
