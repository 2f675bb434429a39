import { join } from "node:path"
import { type Database, type EmbeddedPostgres, migrate, PostgresClient, startEmbeddedPostgres } from "@agentgov/db"
import { Effect, Layer } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { ServerConfig } from "./config.ts"

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

/** The store with every migration applied before anything uses it. */
export const migratedStore = (store: StoreLayer): StoreLayer =>
  Layer.effectDiscard(migrate()).pipe(Layer.orDie, Layer.provideMerge(store))
