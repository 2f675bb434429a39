import { join } from "node:path"
import { type Database, migrate, PgliteClient, PostgresClient } from "@agentgov/db"
import { Layer } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { ServerConfig } from "./config.ts"

export type StoreLayer = Layer.Layer<SqlClient.SqlClient | Database>

/** PostgreSQL when DATABASE_URL is set, else embedded PGlite in the data directory. */
export const storeLayer = (config: Pick<ServerConfig, "databaseUrl" | "dataDir">): StoreLayer =>
  config.databaseUrl
    ? PostgresClient.layer({ url: config.databaseUrl })
    : PgliteClient.layer({ dataDir: join(config.dataDir, "pglite") })

/** The store with every migration applied before anything uses it. */
export const migratedStore = (store: StoreLayer): StoreLayer =>
  Layer.effectDiscard(migrate()).pipe(Layer.orDie, Layer.provideMerge(store))
