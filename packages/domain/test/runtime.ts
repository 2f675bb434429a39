import { randomBytes } from "node:crypto"
import { Database, type DatabaseShape } from "@agentgov/db"
import { makeTestStore, type TestStore } from "@agentgov/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { TestClock } from "effect/testing"
import {
  Counters,
  DEFAULT_RATE_LIMITS,
  DomainLayer,
  type DomainServices,
  MasterKey,
  RateLimitSettings,
  TokenSettings,
} from "../src/index.ts"

export type R = DomainServices | SqlClient.SqlClient | Database

/** What the domain takes from configuration, as the domain tests set it. */
export const testSettings = Layer.mergeAll(
  MasterKey.layer(randomBytes(32)),
  TokenSettings.layer({ issuer: "http://test", audience: "agentgov", ttlSeconds: 900 }),
  RateLimitSettings.layer(DEFAULT_RATE_LIMITS),
  Counters.memory,
)

export interface DomainTestRuntime {
  readonly store: TestStore
  readonly rt: ManagedRuntime.ManagedRuntime<R, never>
  readonly run: <A, E>(effect: Effect.Effect<A, E, R>) => Promise<A>
  readonly failure: <A, E>(effect: Effect.Effect<A, E, R>) => Promise<E>
  readonly dispose: () => Promise<void>
}

/**
 * Every domain service over this test file's own fresh database. `notifications: false`: the services
 * listen on a Database that never delivers, as when the LISTEN connection lags behind the writes.
 */
export const makeDomainRuntime = async (
  options: { readonly notifications?: boolean } = {},
): Promise<DomainTestRuntime> => {
  const store = await makeTestStore()
  const base = Layer.merge(store.layer, testSettings)
  const silent = Layer.effect(
    Database,
    Effect.gen(function* () {
      const db = yield* Database
      return Database.of({ ...db, listen: async () => async () => {} })
    }),
  )
  const domain =
    options.notifications === false
      ? DomainLayer.pipe(Layer.provide(silent), Layer.provideMerge(base))
      : DomainLayer.pipe(Layer.provideMerge(base))
  const rt = ManagedRuntime.make(domain)
  return {
    store,
    rt,
    run: (effect) => rt.runPromise(effect),
    failure: (effect) => rt.runPromise(Effect.flip(effect)),
    dispose: async () => {
      await rt.dispose()
      await store.cleanup()
    },
  }
}

/** Runs `effect` with effect's clock at `ms`: every expiry is judged by it (the store's clock never is). */
export const at = <A, E>(ms: number, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(ms)
    return yield* effect
  }).pipe(Effect.provide(TestClock.layer()))

/**
 * What the current transaction's scans of `table` returned so far, whatever the plan: rows of sequential scans and
 * entries of its indexes' scans (plain or bitmap). How the tests tell a read of a few rows from a read of a backlog
 * without timing anything.
 */
export const rowsRead = (sql: SqlClient.SqlClient, table: string) =>
  sql<{ n: number }>`SELECT (pg_stat_get_xact_tuples_returned(${table}::regclass)
      + coalesce((SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) FROM pg_index
          WHERE indrelid = ${table}::regclass), 0))::int AS n`.pipe(Effect.map(([r]) => r!.n))

/**
 * Takes `tables`' statistics now (after a vacuum with `vacuum`) and keeps them for the rest of the file: autovacuum
 * is turned off on each (the file's own database), so a test of the plan a quiet spell's statistics give reads that
 * plan however loaded the machine. On a loaded CI machine autovacuum once analysed a backlog a test had just written.
 */
export const holdStatistics = (
  sql: SqlClient.SqlClient,
  tables: ReadonlyArray<string>,
  options: { readonly vacuum?: boolean } = {},
) =>
  Effect.gen(function* () {
    for (const table of tables) {
      if (!/^[a-z_]+$/.test(table)) return yield* Effect.die(new Error(`not a table name: ${table}`))
      yield* sql.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`)
    }
    yield* sql.unsafe(`${options.vacuum === true ? "VACUUM " : ""}ANALYZE ${tables.join(", ")}`)
  })

/**
 * A transaction of its own that runs `lock` and then stays open, holding the rows it locked, until `release` is
 * called; `after` then runs in it before it commits, and `release` answers `after`'s value. `held` resolves once
 * `lock` ran, and rejects if the transaction ended first. How a test puts another session's lock in a statement's
 * way. The transaction's end is handled from the start: a failure while the test awaits something else fails the
 * test where it releases, not the run.
 */
export const holdInTransaction = <A = undefined>(
  run: <X>(effect: Effect.Effect<X, never, R>) => Promise<X>,
  lock: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>,
  after?: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>,
) => {
  let locked!: () => void
  const isLocked = new Promise<void>((resolve) => (locked = resolve))
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  const done = run(
    SqlClient.SqlClient.use((sql) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* lock(sql)
          locked()
          yield* Effect.promise(() => released)
          return after === undefined ? (undefined as A) : yield* after(sql)
        }),
      ),
    ).pipe(Effect.orDie),
  )
  done.catch(() => {})
  const ended = done.then(() => Promise.reject(new Error("the holding transaction ended before it held its locks")))
  ended.catch(() => {})
  return {
    held: Promise.race([isLocked, ended]),
    release: (): Promise<A> => {
      release()
      return done
    },
  }
}

/** A Database with no store behind it: no statements, and `listen` as the test gives it (by default never told). */
export const storelessDatabase = (listen: DatabaseShape["listen"] = async () => async () => {}) =>
  Layer.succeed(Database)(
    Database.of({
      kind: "postgres",
      notify: async () => {},
      announce: () => {},
      query: async () => {
        throw new Error("no statements in this test")
      },
      forEachRow: async () => {
        throw new Error("no statements in this test")
      },
      listen,
    }),
  )
