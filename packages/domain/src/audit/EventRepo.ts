import { Database } from "@agentgov/db"
import { chainHash, chainHashOfCanonical, eventLeaf, GENESIS_HASH, type LeafEvent } from "@agentgov/verifier"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { AuditEvent } from "./AuditEvent.ts"
import type { CompiledFilters } from "./eventFilters.ts"

export interface EventRow {
  readonly workspace_id: string
  readonly sequence: number
  readonly id: string
  readonly type: string
  readonly agent_id: string | null
  readonly actor_type: AuditEvent["actor"]["type"]
  readonly actor_id: string | null
  readonly data: Record<string, unknown>
  readonly ts: Date
  readonly occurred_at: Date | null
  readonly prev_hash: string
  readonly hash: string
}

/**
 * `data` is the stored JSON text, unparsed; `ts` the timestamp as hashed (ISO 8601 in UTC with milliseconds, as
 * `Date#toISOString` writes it), formatted by PostgreSQL: no Date is parsed and printed again per event.
 */
export type ChainRow = Pick<EventRow, "sequence" | "prev_hash"> &
  LeafRow & {
    /** The hashed fields: null when PostgreSQL checked the hash (`hashed`) unless `chainBatch` was asked for them. */
    readonly type: string | null
    readonly data: string | null
    readonly ts: string | null
    /**
     * Whether PostgreSQL's own SHA-256 over exactly these columns' bytes (prev_hash ‖ type ‖ data ‖ ts, UTF-8)
     * is the stored hash: then the event's chain hash holds without hashing it again here. False otherwise (a
     * mismatch, or a database not in UTF8), and the caller hashes it itself. True cannot be wrong but by a
     * SHA-256 collision: PostgreSQL hashed the very bytes the caller would.
     */
    readonly hashed: boolean
  }

/**
 * Why a chain row is not event `expected` linked to `prevHash`, or undefined when it is: the one check of a link
 * that a verification (EventService.verify) and a new checkpoint (Checkpoints) both make. Checked by PostgreSQL
 * when it says so (`hashed`, and then the hashed fields were not sent); else here: stored data is the hashed JCS
 * text, and only text that is not canonical needs parsing.
 */
export const chainLinkProblem = (r: ChainRow, expected: number, prevHash: string): string | undefined => {
  if (r.sequence !== expected) return `event ${expected} is missing (found ${r.sequence} next)`
  if (r.prev_hash !== prevHash) return "prevHash does not link to the previous event"
  if (r.hashed) return undefined
  const type = r.type!
  const data = r.data!
  if (chainHashOfCanonical(prevHash, type, data, r.ts!) === r.hash) return undefined
  if (chainHash(prevHash, type, JSON.parse(data), r.ts!) === r.hash) return undefined
  return "hash does not match the event's type, data and timestamp"
}

/** One statement with positional parameters, outside the Effect runtime (a restore's transaction). */
export type RawQuery = (text: string, params: ReadonlyArray<unknown>) => Promise<ReadonlyArray<Record<string, unknown>>>

/**
 * Events a streamed read of a chain (`streamChain`) asks for with one statement. PostgreSQL is at most two
 * statements ahead (`Database.forEachRow`), so one turn of the event loop hashes at most 1,000 rows, the bound
 * verification has kept since 2026-11-28. One statement of 10,000 let PostgreSQL run up to 8,000 rows ahead, all
 * handed over in one turn: 25-65 ms in which no other request was served.
 */
const CHAIN_STATEMENT = 500

/** Rows a chain check reads at a time. */
const CHECK_PAGE = 10_000

/**
 * The first broken link of any chain in the store, named as a verification names it (workspace, sequence, why), or
 * undefined when every chain holds from its first event to its head: each event's hash over its type, data and
 * timestamp, each `prevHash` the event before's, no sequence missing, and the head at the last event. What it does
 * not cover is what only the Merkle leaves do (an event's id, agent, actor or occurredAt): a verification after the
 * restore checks those against the signed checkpoints. A backup's restore runs it before committing (a file edited
 * behind its chain would otherwise restore and be caught only later).
 */
export const firstChainProblem = async (query: RawQuery): Promise<string | undefined> => {
  const heads = await query(
    `SELECT h.workspace_id, h.sequence::text AS sequence, h.hash,
        (SELECT coalesce(max(e.sequence), 0)::text FROM events e WHERE e.workspace_id = h.workspace_id) AS last
      FROM chain_heads h ORDER BY h.workspace_id`,
    [],
  )
  for (const head of heads) {
    const workspaceId = head.workspace_id as string
    const at = Number(head.sequence)
    const upto = Math.max(at, Number(head.last))
    let expected = 1
    let prevHash = GENESIS_HASH
    for (let after = 0; after < upto; after += CHECK_PAGE) {
      for (const row of await query(chainBatchSql("checked"), [workspaceId, after, after + CHECK_PAGE])) {
        const r = { ...row, sequence: Number(row.sequence) } as unknown as ChainRow
        const problem = chainLinkProblem(r, expected, prevHash)
        if (problem !== undefined) return `workspace ${workspaceId}, event ${expected}: ${problem}`
        prevHash = r.hash
        expected += 1
      }
    }
    if (expected - 1 !== at || prevHash !== head.hash)
      return `workspace ${workspaceId}: its chain head (event ${at}) is not its last event (${expected - 1})`
  }
  const [stray] = await query(
    `SELECT e.workspace_id FROM events e
      WHERE NOT EXISTS (SELECT 1 FROM chain_heads h WHERE h.workspace_id = e.workspace_id) LIMIT 1`,
    [],
  )
  return stray === undefined ? undefined : `workspace ${stray.workspace_id as string}: events without a chain head`
}

/** What an event's Merkle leaf covers (`eventLeaf`), `occurred_at` as text in the form the API returns. */
export type LeafRow = Pick<EventRow, "sequence" | "hash" | "id" | "agent_id" | "actor_type" | "actor_id"> & {
  readonly occurred_at: string | null
}

/**
 * A timestamp column as text in the form `Date#toISOString` writes, formatted by PostgreSQL whatever the
 * session's time zone.
 */
const isoText = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/** The select list of a `LeafRow`: timestamps as `isoText`. */
const LEAF_COLUMNS = `sequence, hash, id, agent_id, actor_type, actor_id, ${isoText("occurred_at")} AS occurred_at`

/** `LEAF_COLUMNS` as a fragment of a statement. */
export const leafColumns = (sql: SqlClient.SqlClient) => sql.literal(LEAF_COLUMNS)

/**
 * The page `chainBatch` reads (`$1` the workspace, events `$2` < sequence ≤ `$3`). The chain hash is checked by
 * PostgreSQL on its own core while this process hashes the Merkle leaves (verification was bound by this
 * process's CPU, three SHA-256 an event). A row it found hashed comes without the hashed fields unless `fields`
 * is "all": the data is most of a row's bytes, and receiving it was most of what this process still spent per
 * event besides the leaf. Built-ins are called by their schema. `OFFSET 0` keeps `hashed` a subquery evaluated
 * once a row: pulled up, its SHA-256 was inlined at each of its four uses (EXPLAIN VERBOSE), and a page of 10,000
 * cost PostgreSQL 114 ms instead of 43.
 */
export const chainBatchSql = (fields: "checked" | "all") => `SELECT ${LEAF_COLUMNS}, prev_hash, c.hashed,
    ${
      fields === "all"
        ? "type, data::text AS data, t.ts"
        : `CASE WHEN c.hashed THEN NULL ELSE type END AS type,
    CASE WHEN c.hashed THEN NULL ELSE data::text END AS data,
    CASE WHEN c.hashed THEN NULL ELSE t.ts END AS ts`
    }
  FROM events,
    LATERAL (SELECT ${isoText("ts")} AS ts) t,
    LATERAL (SELECT CASE WHEN pg_catalog.getdatabaseencoding() = 'UTF8'
      THEN pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
        pg_catalog.concat(prev_hash, type, data::text, t.ts), 'UTF8')), 'hex') = hash
      ELSE false END AS hashed OFFSET 0) c
  WHERE workspace_id = $1 AND sequence > $2 AND sequence <= $3
  ORDER BY sequence`

/** What a stored event's Merkle leaf covers, from its row (for `eventLeaf` and `TreeBuilder.pushEvent`). */
export const leafEventOf = (r: LeafRow): LeafEvent & { readonly sequence: number } => ({
  sequence: r.sequence,
  hash: r.hash,
  id: r.id,
  agentId: r.agent_id,
  actor: { type: r.actor_type, id: r.actor_id },
  occurredAt: r.occurred_at,
})

/** The leaf hash of a stored event in a workspace whose leaves cover attribution from `attributedFrom` on. */
export const leafOfRow = (r: LeafRow, attributedFrom: number): string => eventLeaf(leafEventOf(r), attributedFrom)

/** A signed checkpoint's size and root, as verification compares them with the chain. */
export interface SignedRoot {
  readonly tree_size: number
  readonly root_hash: string
}

export const toEvent = (r: EventRow): AuditEvent => ({
  id: r.id,
  type: r.type,
  timestamp: r.ts.toISOString(),
  workspaceId: r.workspace_id,
  agentId: r.agent_id,
  occurredAt: r.occurred_at?.toISOString() ?? null,
  actor: { type: r.actor_type, id: r.actor_id },
  data: r.data,
  sequence: r.sequence,
  prevHash: r.prev_hash,
  hash: r.hash,
})

export interface EventQuery {
  /** Type filters as compiled for webhooks too; none (or `*`) is every type. */
  readonly filters?: CompiledFilters | undefined
  readonly agentId?: string | undefined
  readonly since?: string | undefined
  readonly until?: string | undefined
  readonly fromSequence?: number | undefined
  readonly toSequence?: number | undefined
  /** Keyset: only events with a smaller sequence. */
  readonly beforeSequence?: number | undefined
  readonly limit: number
}

/** Reads of the audit trail, by workspace, newest first. */
export class EventRepo extends Context.Service<
  EventRepo,
  {
    readonly list: (workspaceId: string, q: EventQuery) => Effect.Effect<ReadonlyArray<AuditEvent>>
    readonly find: (workspaceId: string, id: string) => Effect.Effect<AuditEvent | undefined>
    /** Oldest first from `afterSequence`, for verification. */
    readonly batch: (
      workspaceId: string,
      afterSequence: number,
      limit: number,
    ) => Effect.Effect<ReadonlyArray<EventRow>>
    /**
     * The hashed fields of the events numbered `afterSequence + 1 .. afterSequence + limit`, oldest
     * first: what verification reads. Bounded by sequence, not LIMIT, so the plan stays an index range
     * scan even before the table has statistics.
     */
    readonly chainBatch: (
      workspaceId: string,
      afterSequence: number,
      limit: number,
      /** `checked` (the default): type, data and ts only for rows PostgreSQL did not find hashed; `all`: always. */
      fields?: "checked" | "all",
    ) => Effect.Effect<ReadonlyArray<ChainRow>>
    /**
     * `chainBatch`'s rows (fields "checked") of the events numbered `afterSequence + 1 .. upto`, handed to `onRow`
     * one by one as they arrive rather than collected, 500 a statement (`Database.forEachRow`): what a verification
     * of a whole chain reads. `onRow` must not throw; once it returns false no further statement is sent (the rows
     * of those already sent still arrive).
     */
    readonly streamChain: (
      workspaceId: string,
      afterSequence: number,
      upto: number,
      onRow: (row: ChainRow) => boolean,
    ) => Effect.Effect<void>
    /** Signed checkpoints of sizes `after + 1 .. upto`, smallest first. */
    readonly signedRoots: (workspaceId: string, after: number, upto: number) => Effect.Effect<ReadonlyArray<SignedRoot>>
    /** The largest tree size ever signed (0 when none). */
    readonly largestSigned: (workspaceId: string) => Effect.Effect<number>
    /** The first sequence whose Merkle leaf covers attribution (see `eventLeaf`; 1 for a new workspace). */
    readonly attributedFrom: (workspaceId: string) => Effect.Effect<number>
    /** The highest sequence stored (0 when none), whatever the chain head says. */
    readonly lastSequence: (workspaceId: string) => Effect.Effect<number>
    /** Events `from..to` by sequence, oldest first. */
    readonly range: (workspaceId: string, from: number, to: number) => Effect.Effect<ReadonlyArray<AuditEvent>>
    readonly head: (workspaceId: string) => Effect.Effect<{ sequence: number; hash: string } | undefined>
    /** Whether the chain holds an event at `link.sequence` with hash `link.hash` (so everything hashed before it). */
    readonly holds: (workspaceId: string, link: { sequence: number; hash: string }) => Effect.Effect<boolean>
  }
>()("@agentgov/domain/audit/EventRepo") {
  static readonly layer = Layer.effect(
    EventRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const db = yield* Database
      return EventRepo.of({
        list: (workspaceId, q) => {
          const { filters } = q
          const typeClauses =
            filters === undefined || filters.all
              ? []
              : [
                  ...(filters.types.length > 0 ? [sql`type IN ${sql.in(filters.types)}`] : []),
                  ...filters.prefixes.map((p) => sql`starts_with(type, ${p})`),
                ]
          return sql<EventRow>`SELECT * FROM events WHERE workspace_id = ${workspaceId}
              ${typeClauses.length > 0 ? sql`AND ${sql.or(typeClauses)}` : sql``}
              ${q.agentId ? sql`AND agent_id = ${q.agentId}` : sql``}
              ${q.since ? sql`AND ts >= ${q.since}::timestamptz` : sql``}
              ${q.until ? sql`AND ts < ${q.until}::timestamptz` : sql``}
              ${q.fromSequence !== undefined ? sql`AND sequence >= ${q.fromSequence}` : sql``}
              ${q.toSequence !== undefined ? sql`AND sequence <= ${q.toSequence}` : sql``}
              ${q.beforeSequence !== undefined ? sql`AND sequence < ${q.beforeSequence}` : sql``}
              ORDER BY sequence DESC LIMIT ${q.limit}`.pipe(
            Effect.map((rows) => rows.map(toEvent)),
            Effect.orDie,
          )
        },
        find: (workspaceId, id) =>
          sql<EventRow>`SELECT * FROM events WHERE workspace_id = ${workspaceId} AND id = ${id}`.pipe(
            Effect.map((rows) => (rows[0] ? toEvent(rows[0]) : undefined)),
            Effect.orDie,
          ),
        batch: (workspaceId, afterSequence, limit) =>
          sql<EventRow>`SELECT * FROM events WHERE workspace_id = ${workspaceId} AND sequence > ${afterSequence}
              ORDER BY sequence LIMIT ${limit}`.pipe(Effect.orDie),
        chainBatch: (workspaceId, afterSequence, limit, fields = "checked") =>
          sql
            .unsafe<ChainRow>(chainBatchSql(fields), [workspaceId, afterSequence, afterSequence + limit])
            .pipe(Effect.orDie),
        streamChain: (workspaceId, afterSequence, upto, onRow) =>
          Effect.promise(() => {
            let at = afterSequence
            let going = true
            return db.forEachRow(
              chainBatchSql("checked"),
              () => {
                if (!going || at >= upto) return undefined
                const from = at
                at = Math.min(at + CHAIN_STATEMENT, upto)
                return [workspaceId, from, at]
              },
              (row) => {
                if (onRow(row as unknown as ChainRow) === false) going = false
              },
            )
          }),
        signedRoots: (workspaceId, after, upto) =>
          sql<SignedRoot>`SELECT tree_size, root_hash FROM checkpoints WHERE workspace_id = ${workspaceId}
              AND tree_size > ${after} AND tree_size <= ${upto} ORDER BY tree_size`.pipe(Effect.orDie),
        largestSigned: (workspaceId) =>
          sql<{ size: number | null }>`SELECT max(tree_size)::int8 AS size FROM checkpoints
              WHERE workspace_id = ${workspaceId}`.pipe(
            Effect.map((rows) => rows[0]?.size ?? 0),
            Effect.orDie,
          ),
        attributedFrom: (workspaceId) =>
          sql<{ attributed_from: number }>`SELECT attributed_from FROM chain_heads
              WHERE workspace_id = ${workspaceId}`.pipe(
            Effect.map((rows) => rows[0]?.attributed_from ?? 1),
            Effect.orDie,
          ),
        lastSequence: (workspaceId) =>
          sql<{
            last: number | null
          }>`SELECT max(sequence)::int8 AS last FROM events WHERE workspace_id = ${workspaceId}`.pipe(
            Effect.map((rows) => rows[0]?.last ?? 0),
            Effect.orDie,
          ),
        range: (workspaceId, from, to) =>
          sql<EventRow>`SELECT * FROM events WHERE workspace_id = ${workspaceId}
              AND sequence >= ${from} AND sequence <= ${to} ORDER BY sequence`.pipe(
            Effect.map((rows) => rows.map(toEvent)),
            Effect.orDie,
          ),
        head: (workspaceId) =>
          sql<{
            sequence: number
            hash: string
          }>`SELECT sequence, hash FROM chain_heads WHERE workspace_id = ${workspaceId}`.pipe(
            Effect.map((rows) => rows[0]),
            Effect.orDie,
          ),
        holds: (workspaceId, link) =>
          sql`SELECT 1 FROM events WHERE workspace_id = ${workspaceId} AND sequence = ${link.sequence}
              AND hash = ${link.hash}`.pipe(
            Effect.map((rows) => rows.length > 0),
            Effect.orDie,
          ),
      })
    }),
  )
}
