import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { waitForLocks } from "./locks.ts"

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
export const MIGRATION_LOCK = 72_410_001

/** The store was migrated by a later release than this one: started on it, this release would write rows its schema no longer means. */
export class MigrationRefused extends Error {}

/**
 * Applies the migrations not yet recorded, in one transaction under an advisory
 * lock, so that instances starting together neither race nor half-apply.
 * Returns the versions applied. Dies with MigrationRefused, applying nothing, on
 * a store that records a migration this release does not ship (migrations are
 * forward-only: a release never runs on a later release's schema).
 */
export const migrate = Effect.fn("db.migrate")(function* () {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(
    Effect.gen(function* () {
      // Another instance's migrations may take long: wait for them, whatever the pool's lock_timeout.
      yield* waitForLocks(sql)
      yield* sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
      yield* sql.unsafe(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
      )
      const done = new Set(
        (yield* sql<{ version: string }>`SELECT version FROM schema_migrations`).map((r) => r.version),
      )
      const shipped = loadMigrations()
      const known = new Set(shipped.map((m) => m.version))
      const later = [...done].filter((v) => !known.has(v)).sort()
      if (later.length > 0)
        return yield* Effect.die(
          new MigrationRefused(
            `the store was migrated by a later release (migration ${later.join(", ")}; this release ends at ` +
              `${shipped.at(-1)?.version}): run that release or a newer one, or restore a backup this release made`,
          ),
        )
      const applied: Array<string> = []
      for (const m of shipped) {
        if (done.has(m.version)) continue
        yield* sql.unsafe(m.sql).unprepared
        yield* sql`INSERT INTO schema_migrations (version) VALUES (${m.version})`
        applied.push(m.version)
      }
      return applied
    }),
  )
})
