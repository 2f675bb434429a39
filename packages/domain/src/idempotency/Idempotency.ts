import { Clock, Context, Effect, Layer, Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"

/** Stored responses are replayed for 24 hours (Stripe's window). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000

/** Keys the periodic purge deletes per statement, and statements per run (a backlog is worked through over runs). */
const PURGE_BATCH = 10_000
const PURGE_BATCHES = 50

/** The same Idempotency-Key was sent with a different request (409). */
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", {
  key: Schema.String,
}) {}

/** A request made under an Idempotency-Key, as the transport hands it to the domain. */
export interface IdempotencyRequest {
  readonly key: string
  /** The operation's name: a key is bound to the operation that first used it. */
  readonly operation: string
  /** SHA-256 of the canonical request; the same key with another hash is a 409. */
  readonly requestHash: string
  /** The response to store for a result: its status and body as the transport will replay them. */
  readonly render: (value: unknown) => { readonly status: number; readonly body: string }
}

/** An earlier response, answered again instead of running the request. */
export class Replayed {
  readonly status: number
  readonly body: string
  constructor(status: number, body: string) {
    this.status = status
    this.body = body
  }
}

export type Claim = { readonly claimed: true } | { readonly claimed: false; readonly replay: Replayed }

interface StoredRow {
  readonly key: string
  readonly request_hash: string
  readonly status_code: number
  readonly response_body: string
}

/**
 * The idempotency store (Stripe semantics). A key is claimed in the
 * transaction of the change it guards and completed with the response in that
 * same transaction, so a retry after a crash either replays the response or
 * finds that nothing was done. A concurrent request with the same key waits on
 * the claimed row until the first commits, then replays it.
 *
 * Lock order: every caller claims its keys before it takes any other lock
 * (the chain head in particular), and several keys in ascending order.
 */
export class Idempotency extends Context.Service<
  Idempotency,
  {
    /** Claims one key for a request; an existing record replays or conflicts. */
    readonly claim: (workspaceId: string, request: IdempotencyRequest) => Effect.Effect<Claim, IdempotencyKeyReused>
    /** Claims several distinct keys in one statement; the result is per request, in order. */
    readonly claimMany: (
      workspaceId: string,
      requests: ReadonlyArray<IdempotencyRequest>,
    ) => Effect.Effect<ReadonlyArray<Claim | IdempotencyKeyReused>>
    /**
     * Runs `effect` under `request`'s key in the caller's transaction, claiming it first (the lock order): a
     * retry gets the stored response instead, and the value, rendered by the request, is stored once it
     * succeeds (a `Replayed` value is not stored again). Without a request it just runs `effect`.
     */
    readonly within: <A, E, R>(
      workspaceId: string,
      request: IdempotencyRequest | undefined,
      effect: Effect.Effect<A, E, R>,
    ) => Effect.Effect<A | Replayed, E | IdempotencyKeyReused, R>
    /** Deletes the records older than the replay window (the periodic sweep). */
    readonly purgeExpired: Effect.Effect<void>
    /** Stores the responses of claimed keys. */
    readonly complete: (
      workspaceId: string,
      responses: ReadonlyArray<{ readonly key: string; readonly status: number; readonly body: string }>,
    ) => Effect.Effect<void>
  }
>()("@agentgov/domain/idempotency/Idempotency") {
  static readonly layer = Layer.effect(
    Idempotency,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const claimMany = Effect.fn("Idempotency.claimMany")(function* (
        workspaceId: string,
        requests: ReadonlyArray<IdempotencyRequest>,
      ) {
        if (requests.length === 0) return []
        const now = yield* Clock.currentTimeMillis
        const keys = requests.map((r) => r.key)
        if (new Set(keys).size !== keys.length) return yield* Effect.die(new Error("claimMany: keys must be distinct"))
        yield* sql`DELETE FROM idempotency_keys WHERE workspace_id = ${workspaceId} AND key IN ${sql.in(keys)}
            AND created_at < ${new Date(now - IDEMPOTENCY_WINDOW_MS).toISOString()}::timestamptz`
        const createdAt = new Date(now).toISOString()
        const rows = [...requests]
          .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
          .map(
            (r) => sql`(${workspaceId}, ${r.key}, ${r.operation}, ${r.requestHash}, 0, '', ${createdAt}::timestamptz)`,
          )
        const claimed = yield* sql<{ key: string }>`INSERT INTO idempotency_keys
            (workspace_id, key, operation, request_hash, status_code, response_body, created_at)
            VALUES ${sql.csv(rows)} ON CONFLICT (workspace_id, key) DO NOTHING RETURNING key`
        const claimedKeys = new Set(claimed.map((r) => r.key))
        const taken = keys.filter((k) => !claimedKeys.has(k))
        const prior = new Map<string, StoredRow>()
        if (taken.length > 0) {
          const rows = yield* sql<StoredRow>`SELECT key, request_hash, status_code, response_body FROM idempotency_keys
              WHERE workspace_id = ${workspaceId} AND key IN ${sql.in(taken)}`
          for (const row of rows) prior.set(row.key, row)
        }
        return requests.map((r): Claim | IdempotencyKeyReused => {
          const row = prior.get(r.key)
          if (!row) return { claimed: true }
          return row.request_hash === r.requestHash
            ? { claimed: false, replay: new Replayed(row.status_code, row.response_body) }
            : new IdempotencyKeyReused({ key: r.key })
        })
      }, Effect.orDie)

      const claim = (workspaceId: string, request: IdempotencyRequest) =>
        claimMany(workspaceId, [request]).pipe(
          Effect.flatMap(([c]) => (c instanceof IdempotencyKeyReused ? Effect.fail(c) : Effect.succeed(c!))),
        )

      const complete = Effect.fn("Idempotency.complete")(function* (
        workspaceId: string,
        responses: ReadonlyArray<{ readonly key: string; readonly status: number; readonly body: string }>,
      ) {
        if (responses.length === 0) return
        const values = responses.map((r) => sql`(${r.key}, ${r.status}::int, ${r.body}::text)`)
        yield* sql`UPDATE idempotency_keys AS k SET status_code = v.status, response_body = v.body
            FROM (VALUES ${sql.csv(values)}) AS v(key, status, body)
            WHERE k.workspace_id = ${workspaceId} AND k.key = v.key`
      }, Effect.orDie)

      /**
       * In batches taken oldest first through the age index, deleted by row address: with statistics of a day
       * before (taken when the table held the keys of the day before, all older than today's cut), a plain
       * `DELETE … WHERE created_at < cut` is estimated to delete the whole table and read it through (a sequential
       * scan every run). The LIMIT keeps the scan on the index whatever the estimate; keys a claim holds (it
       * deletes an expired key before taking it again) are skipped, not waited for. Each batch starts where the
       * last one ended: the entries of the rows it deleted stay in the index until a vacuum can clear them (never
       * while an older snapshot is open), and starting each batch from the oldest would read them all again.
       */
      const purgeExpired = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const cut = new Date(now - IDEMPOTENCY_WINDOW_MS).toISOString()
        let from: string | undefined
        for (let batch = 0; batch < PURGE_BATCHES; batch++) {
          const [gone] = yield* sql<{ n: number; last: Date | null }>`WITH gone AS (DELETE FROM idempotency_keys
                WHERE ctid = ANY (ARRAY(SELECT ctid FROM idempotency_keys WHERE created_at < ${cut}::timestamptz
                  ${from === undefined ? sql`` : sql`AND created_at >= ${from}::timestamptz`}
                  ORDER BY created_at LIMIT ${PURGE_BATCH} FOR UPDATE SKIP LOCKED))
                  AND created_at < ${cut}::timestamptz
                RETURNING created_at)
              SELECT count(*)::int AS n, max(created_at) AS last FROM gone`
          if (gone!.n < PURGE_BATCH || gone!.last === null) return
          // Milliseconds, at most the last one deleted: the next batch reads again at most that millisecond's entries.
          from = new Date(gone!.last).toISOString()
        }
      }).pipe(Effect.orDie)

      const within = <A, E, R>(
        workspaceId: string,
        request: IdempotencyRequest | undefined,
        effect: Effect.Effect<A, E, R>,
      ): Effect.Effect<A | Replayed, E | IdempotencyKeyReused, R> =>
        request === undefined
          ? effect
          : Effect.gen(function* () {
              const claimed = yield* claim(workspaceId, request)
              if (!claimed.claimed) return claimed.replay
              const value = yield* effect
              if (!(value instanceof Replayed))
                yield* complete(workspaceId, [{ key: request.key, ...request.render(value) }])
              return value
            })

      return Idempotency.of({ claim, claimMany, complete, within, purgeExpired })
    }),
  )
}
