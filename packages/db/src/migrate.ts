import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"

const migrationsDir = join(import.meta.dirname, "..", "migrations")

export interface Migration {
  readonly version: string
  readonly sql: string
}

/** The plain-SQL migrations shipped with this package, in order. */
export const loadMigrations = (): ReadonlyArray<Migration> =>
  readdirSync(migrationsDir)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ""), sql: readFileSync(join(migrationsDir, f), "utf8") }))

// Any constant: serialises concurrent starts of several instances on one PostgreSQL.
const MIGRATION_LOCK = 72_410_001

/**
 * Applies the migrations not yet recorded, in one transaction under an advisory
 * lock, so that instances starting together neither race nor half-apply.
 * Returns the versions applied.
 */
export const migrate = Effect.fn("db.migrate")(function* () {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
      yield* sql.unsafe(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
      )
      const done = new Set(
        (yield* sql<{ version: string }>`SELECT version FROM schema_migrations`).map((r) => r.version),
      )
      const applied: Array<string> = []
      for (const m of loadMigrations()) {
        if (done.has(m.version)) continue
        yield* sql.unsafe(m.sql).unprepared
        yield* sql`INSERT INTO schema_migrations (version) VALUES (${m.version})`
        applied.push(m.version)
      }
      return applied
    }),
  )
})
