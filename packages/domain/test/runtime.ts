import { randomBytes } from "node:crypto"
import { Database, type DatabaseShape } from "@agentgov/db"
import { makeTestStore, type TestStore } from "@agentgov/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
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
      listen,
    }),
  )
