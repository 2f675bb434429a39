import { randomBytes } from "node:crypto"
import { type Database, PostgresClient } from "@agentgov/db"
import type { Layer } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import { clusterUrl, pgConnect, pgTemplateName, withDatabase } from "./templates.ts"

export interface TestStore {
  /** A layer over this test's own, already migrated database. */
  readonly layer: Layer.Layer<SqlClient.SqlClient | Database>
  /** The URL of this test's database, for a second instance or for assertions in SQL. */
  readonly url: string
  /** Drops the database. */
  readonly cleanup: () => Promise<void>
}

/**
 * A fresh, migrated database for one test file, cloned from the template the global setup built:
 * on DATABASE_URL's server, or on the run's embedded cluster when DATABASE_URL is not set.
 */
export const makeTestStore = async (): Promise<TestStore> => {
  const name = `agentgov_t_${randomBytes(6).toString("hex")}`
  await asAdmin(async (admin) => {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.unsafe(`CREATE DATABASE "${name}" TEMPLATE "${pgTemplateName()}"`)
        break
      } catch (e) {
        // Two files cloning the template at the same instant: PostgreSQL refuses the second briefly.
        if (attempt >= 20 || !String(e).includes("being accessed by other users")) throw e
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200))
      }
    }
  })
  const testUrl = withDatabase(clusterUrl(), name)
  return { layer: PostgresClient.layer({ url: testUrl, max: 5 }), url: testUrl, cleanup: () => dropDatabase(name) }
}

export interface EmptyDatabase {
  /** The URL of the new database. */
  readonly url: string
  /** Drops it (with FORCE: connections a test left open do not keep it). */
  readonly cleanup: () => Promise<void>
}

/**
 * A new, empty database (from `template0`: no tables, no migrations) on the run's cluster, for a test that builds
 * its store itself: migrations run by hand, a restore, an older release's schema.
 */
export const makeEmptyDatabase = async (): Promise<EmptyDatabase> => {
  const name = `agentgov_e_${randomBytes(6).toString("hex")}`
  await asAdmin((admin) => admin.unsafe(`CREATE DATABASE "${name}" TEMPLATE template0`))
  return { url: withDatabase(clusterUrl(), name), cleanup: () => dropDatabase(name) }
}

/** `f` on a connection to the run's cluster's `postgres` database, closed after. */
const asAdmin = async <A>(f: (admin: ReturnType<typeof pgConnect>) => Promise<A>): Promise<A> => {
  const admin = pgConnect(withDatabase(clusterUrl(), "postgres"))
  try {
    return await f(admin)
  } finally {
    await admin.end()
  }
}

const dropDatabase = async (name: string) => {
  await asAdmin((admin) => admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))
}
