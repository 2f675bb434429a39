import { Context, Effect, Layer, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import postgres from "postgres"
import { pgCompiler } from "./compiler.ts"
import { connectionOptions } from "./connectionUrl.ts"
import { Database } from "./Database.ts"
import { makeNotifications } from "./Notifications.ts"
import { toSqlError } from "./sqlErrors.ts"

export interface PostgresOptions {
  readonly url: string
  /** Pool size; default 10. */
  readonly max?: number | undefined
  /**
   * How long PostgreSQL lets a session sit idle inside a transaction before it ends the session (its
   * `idle_in_transaction_session_timeout`); default 60,000 ms. A transaction whose client vanished (a network
   * split, a process frozen mid-transaction) would otherwise hold its row locks, Idempotency-Keys and chain head
   * until the kernel noticed the dead peer, hours later.
   */
  readonly idleInTransactionTimeoutMs?: number | undefined
  /**
   * How long a statement waits for a lock (a row lock, an advisory lock) before it fails with SQLSTATE 55P03, which
   * the API answers 503 STORE_UNAVAILABLE with Retry-After (its `lock_timeout`); default 5,000 ms. A session outside
   * the service holding a lock (an operator's `psql` left inside a transaction on a chain head) would otherwise hold
   * every request that needs it, and through the pool every other request too, for as long as it stayed. The service's
   * own locks are held for milliseconds; its background waits that may be long (migrations, first start, checkpoints)
   * set their own `lock_timeout` to none (`waitForLocks`).
   */
  readonly lockTimeoutMs?: number | undefined
}

/** PostgresOptions' default `idleInTransactionTimeoutMs`: no transaction of this service waits that long. */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000

/** PostgresOptions' default `lockTimeoutMs`. */
export const LOCK_TIMEOUT_MS = 5_000

type Sql = postgres.Sql | postgres.ReservedSql

const makeConnection = (sql: Sql): Connection => {
  const run = <A>(operation: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: (cause) => toSqlError(cause, operation) })
  const execute: Connection["execute"] = (query, params, transformRows) =>
    run("query", () => sql.unsafe(query, params as postgres.ParameterOrJSON<never>[], { prepare: true })).pipe(
      Effect.map((rows) => (transformRows ? transformRows(rows as any) : (rows as ReadonlyArray<any>))),
    )
  const values = (query: string, params: ReadonlyArray<unknown>, prepare: boolean) =>
    run("query", () => sql.unsafe(query, params as postgres.ParameterOrJSON<never>[], { prepare }).values()).pipe(
      Effect.map((rows) => rows as unknown as ReadonlyArray<ReadonlyArray<unknown>>),
    )
  return {
    execute,
    executeRaw: (query, params) =>
      run("query", () => sql.unsafe(query, params as postgres.ParameterOrJSON<never>[], { prepare: true })),
    executeStream: (query, params, transformRows) => Stream.fromIterableEffect(execute(query, params, transformRows)),
    executeValues: (query, params) => values(query, params, true),
    executeValuesUnprepared: (query, params) => values(query, params, false),
    // Without parameters postgres.js uses the simple protocol, which accepts several statements (migrations).
    executeUnprepared: (query, params, transformRows) =>
      run("query", () => sql.unsafe(query, params as postgres.ParameterOrJSON<never>[])).pipe(
        Effect.map((rows) => (transformRows ? transformRows(rows as any) : (rows as ReadonlyArray<any>))),
      ),
  }
}

/** Opens a postgres.js pool with int8 parsed to number, the same as the embedded store. */
export const openPostgres = (options: PostgresOptions) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const target = connectionOptions(options.url)
      return postgres(target.url, {
        ...(target.host ? { host: target.host } : {}),
        max: options.max ?? 10,
        // Reconnect attempts at most a second apart (postgres.js backs off up to 20 s after repeated failures): once
        // PostgreSQL is back from a restart or an outage the pool serves within a second, and a request made during
        // the outage waits for one attempt, not for the backoff. A connection that gets no answer fails after 10 s.
        backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
        connect_timeout: 10,
        onnotice: () => {},
        types: {
          bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
        },
        connection: {
          application_name: "agentgov",
          idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? IDLE_IN_TRANSACTION_TIMEOUT_MS,
          lock_timeout: options.lockTimeoutMs ?? LOCK_TIMEOUT_MS,
        },
      })
    }),
    (sql) => Effect.promise(() => sql.end({ timeout: 5 })),
  )

const make = (options: PostgresOptions) =>
  Effect.gen(function* () {
    const sql = yield* openPostgres(options)
    const poolConnection = makeConnection(sql)
    // A transaction needs one physical connection for its whole life: reserve one per transaction.
    const transactionAcquirer = Effect.acquireRelease(
      Effect.tryPromise({ try: () => sql.reserve(), catch: (cause) => toSqlError(cause, "connect") }),
      (reserved) => Effect.sync(() => reserved.release()),
    ).pipe(Effect.map(makeConnection))
    const notifications = yield* Effect.acquireRelease(
      Effect.sync(() => makeNotifications(options.url)),
      (n) => Effect.promise(() => n.end()),
    )
    const client = yield* SqlClient.make({
      acquirer: Effect.succeed(poolConnection),
      transactionAcquirer,
      compiler: pgCompiler,
      driver: "postgres",
      spanAttributes: [["db.system.name", "postgresql"]],
    })
    const database = Database.of({
      kind: "postgres",
      notify: async (channel, payload) => {
        await sql.notify(channel, payload)
      },
      query: (text, params) => sql.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare: true }),
      forEachRow: async (text, next, onRow) => {
        await sql.begin("read only", async (tx) => {
          // One generic plan for every statement: with custom plans (the default for the first five, and for as long
          // as they look cheaper) PostgreSQL planned each 500-row statement of a chain again, about 1 µs a row.
          await tx.unsafe("SET LOCAL plan_cache_mode = force_generic_plan")
          const sent: Array<Promise<void>> = []
          /** Whether statements may still be sent: not once the transaction is over (a failed one ends at once). */
          let open = true
          /** What `next` threw when asked at a turn of its own (not inside a promise), raised after the loop. */
          let asked: { readonly error: unknown } | undefined
          const send = () => {
            if (!open) return
            const params = next()
            if (params === undefined) return
            let scheduled = false
            let followed = false
            const follow = () => {
              if (followed) return
              followed = true
              try {
                send()
              } catch (error) {
                asked ??= { error }
              }
            }
            const rows = tx
              .unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare: true })
              .forEach((row) => {
                // At the next turn of the event loop: what one turn reads from the socket is then at most what was
                // asked for before it, this statement's rows and the next's.
                if (!scheduled) {
                  scheduled = true
                  setImmediate(follow)
                }
                onRow(row)
              })
            // Settled before the loop below moves past it, and never left unobserved once that loop has thrown.
            const done = rows.then(follow)
            done.catch(() => {})
            sent.push(done)
          }
          try {
            send()
            for (let i = 0; i < sent.length; i++) await sent[i]
            if (asked !== undefined) throw asked.error
          } finally {
            open = false
          }
        })
      },
      listen: notifications.listen,
      announce: notifications.announce,
    })
    return { client, database }
  })

/** PostgreSQL through the `postgres` driver: a pool for statements, a reserved connection per transaction. */
export const layer = (options: PostgresOptions): Layer.Layer<SqlClient.SqlClient | Database> =>
  Layer.effectContext(
    Effect.map(make(options), ({ client, database }) =>
      Context.make(SqlClient.SqlClient, client).pipe(Context.add(Database, database)),
    ),
  ).pipe(Layer.provide(Reactivity.layer))
