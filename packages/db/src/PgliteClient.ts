import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { PGlite } from "@electric-sql/pglite"
import { Context, Effect, Layer, Semaphore, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import { pgCompiler } from "./compiler.ts"
import { Database } from "./Database.ts"
import { toSqlError } from "./sqlErrors.ts"

/** int8 as a JS number (sequences and counters stay far below 2^53), matching the postgres driver. */
export const pgliteParsers = { 20: (v: string) => Number(v) }

export interface PgliteOptions {
  /** Directory of the data; omitted = in memory. Parent directories are created. */
  readonly dataDir?: string | undefined
  /** A dump (`dumpDataDir`) to start from, e.g. a migrated template for tests. */
  readonly loadDataDir?: Blob | undefined
}

const makeConnection = (pg: PGlite): Connection => {
  const run = <A>(operation: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: (cause) => toSqlError(cause, operation) })
  const rows = (sql: string, params: ReadonlyArray<unknown>) =>
    run("query", () => pg.query(sql, params as unknown[])).pipe(Effect.map((r) => r.rows as ReadonlyArray<any>))
  const execute: Connection["execute"] = (sql, params, transformRows) =>
    Effect.map(rows(sql, params), (r) => (transformRows ? transformRows(r) : r))
  return {
    execute,
    executeRaw: (sql, params) => run("query", () => pg.query(sql, params as unknown[])),
    executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(execute(sql, params, transformRows)),
    executeValues: (sql, params) =>
      run("query", () => pg.query(sql, params as unknown[], { rowMode: "array" })).pipe(
        Effect.map((r) => r.rows as ReadonlyArray<ReadonlyArray<unknown>>),
      ),
    executeValuesUnprepared: (sql, params) =>
      run("query", () => pg.query(sql, params as unknown[], { rowMode: "array" })).pipe(
        Effect.map((r) => r.rows as ReadonlyArray<ReadonlyArray<unknown>>),
      ),
    // Without parameters this is the simple protocol, which accepts several statements (migrations).
    executeUnprepared: (sql, params, transformRows) =>
      params.length > 0
        ? execute(sql, params, transformRows)
        : run("exec", () => pg.exec(sql)).pipe(
            Effect.map((results) => {
              const last = (results.at(-1)?.rows ?? []) as ReadonlyArray<any>
              return transformRows ? transformRows(last) : last
            }),
          ),
  }
}

/** Opens PGlite; PGlite has one connection, so statements and transactions queue behind one semaphore. */
export const openPglite = (options: PgliteOptions) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      if (options.dataDir) mkdirSync(dirname(options.dataDir), { recursive: true })
      return PGlite.create(options.dataDir, {
        parsers: pgliteParsers,
        ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
      })
    }),
    (pg) => Effect.promise(() => pg.close()),
  )

const make = (options: PgliteOptions) => Effect.flatMap(openPglite(options), makeClient)

const makeClient = (pg: PGlite) =>
  Effect.gen(function* () {
    const connection = makeConnection(pg)
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore: Semaphore.makeUnsafe(1),
    })
    const client = yield* SqlClient.make({
      acquirer: acquirers.acquirer,
      borrower: acquirers.borrower,
      transactionAcquirer: acquirers.transactionAcquirer,
      onCommitFailure: acquirers.onCommitFailure,
      compiler: pgCompiler,
      driver: "pglite",
      spanAttributes: [["db.system.name", "postgresql"]],
    })
    const database = Database.of({
      kind: "pglite",
      notify: async (channel, payload) => {
        await pg.query("SELECT pg_notify($1, $2)", [channel, payload])
      },
      listen: async (channel, onMessage) => {
        const unsubscribe = await pg.listen(channel, onMessage)
        return async () => unsubscribe()
      },
    })
    return { client, database }
  })

const toContext = ({ client, database }: Effect.Success<ReturnType<typeof makeClient>>) =>
  Context.make(SqlClient.SqlClient, client).pipe(Context.add(Database, database))

/** The embedded store: SqlClient and Database over one PGlite instance, closed with the layer. */
export const layer = (options: PgliteOptions): Layer.Layer<SqlClient.SqlClient | Database> =>
  Layer.effectContext(Effect.map(make(options), toContext)).pipe(Layer.provide(Reactivity.layer))

/** The same over an instance the caller opened and will close (e.g. to dump it afterwards). */
export const layerFromInstance = (pg: PGlite): Layer.Layer<SqlClient.SqlClient | Database> =>
  Layer.effectContext(Effect.map(makeClient(pg), toContext)).pipe(Layer.provide(Reactivity.layer))
