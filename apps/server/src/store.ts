import { join } from "node:path"
import { type Database, type EmbeddedPostgres, migrate, PostgresClient, startEmbeddedPostgres } from "@agentgov/db"
import { Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { ServerConfig } from "./config.ts"
import { StartupError } from "./startupError.ts"

export type StoreLayer = Layer.Layer<SqlClient.SqlClient | Database>

/** The embedded cluster's directory inside the data directory. */
export const embeddedClusterDir = (dataDir: string) => join(dataDir, "pg")

/** Starts the data directory's embedded PostgreSQL (creating it on the first start). */
export const startEmbedded = (dataDir: string): Promise<EmbeddedPostgres> =>
  startEmbeddedPostgres({ dir: embeddedClusterDir(dataDir) })

/**
 * A store on an embedded PostgreSQL: `start` is called when the layer is built (main.ts passes a
 * start already under way, so the cluster boots while the server's modules load), and the cluster
 * is stopped when the layer is released, after the pool has closed.
 */
export const embeddedStore = (start: () => Promise<EmbeddedPostgres>): StoreLayer =>
  Layer.unwrap(
    Effect.acquireRelease(Effect.promise(start), (pg) => Effect.promise(() => pg.stop())).pipe(
      Effect.map((pg) => PostgresClient.layer({ url: pg.url })),
    ),
  )

/** PostgreSQL at DATABASE_URL, else the embedded PostgreSQL in `<data dir>/pg`: one engine and one driver. */
export const storeLayer = (config: Pick<ServerConfig, "databaseUrl" | "dataDir">): StoreLayer =>
  config.databaseUrl
    ? PostgresClient.layer({ url: config.databaseUrl })
    : embeddedStore(() => startEmbedded(config.dataDir))

/** What a start that cannot reach the store names: DATABASE_URL's host (never its password), or the embedded one. */
export const storeName = (config: Pick<ServerConfig, "databaseUrl">): string => {
  if (!config.databaseUrl) return "the embedded PostgreSQL"
  const u = new URL(config.databaseUrl)
  return `the PostgreSQL at ${u.hostname}:${u.port || "5432"}${u.pathname} (DATABASE_URL)`
}

/**
 * The store with every migration applied before anything uses it. A store that does not answer
 * is a StartupError naming it (`name`), rather than whatever the first statement's failure says.
 */
export const migratedStore = (store: StoreLayer, name = "the store"): StoreLayer =>
  Layer.effectDiscard(
    SqlClient.SqlClient.use((sql) => sql`SELECT 1`).pipe(
      Effect.mapError((e) => new StartupError(`${name} does not answer: ${e.reason.message}`)),
      Effect.andThen(migrate()),
      Effect.tap((applied) => Effect.sync(() => migratedAtStart.push(...applied))),
    ),
  ).pipe(Layer.orDie, Layer.provideMerge(store))

/** The migrations this process applied as its store came up (the CLI's `migrate` reports them). */
export const migratedAtStart: Array<string> = []
