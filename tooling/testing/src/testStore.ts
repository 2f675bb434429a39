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
  const url = clusterUrl()
  const name = `agentgov_t_${randomBytes(6).toString("hex")}`
  const admin = pgConnect(withDatabase(url, "postgres"))
  try {
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
  } finally {
    await admin.end()
  }
  const testUrl = withDatabase(url, name)
  return {
    layer: PostgresClient.layer({ url: testUrl, max: 5 }),
    url: testUrl,
    cleanup: async () => {
      const a = pgConnect(withDatabase(url, "postgres"))
      try {
        await a.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      } finally {
        await a.end()
      }
    },
  }
}
