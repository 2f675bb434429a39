import { randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { type Database, PgliteClient, PostgresClient } from "@agentgov/db"
import type { Layer } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import postgres from "postgres"
import { pgliteTemplatePath, pgTemplateName, withDatabase } from "./templates.ts"

export interface TestStore {
  readonly kind: "pglite" | "postgres"
  /** A layer over this test's own, already migrated database. */
  readonly layer: Layer.Layer<SqlClient.SqlClient | Database>
  /** PostgreSQL only: the URL of this test's database, for child processes. */
  readonly url: string | undefined
  /** Drops the database (PostgreSQL); PGlite's memory goes with its layer. */
  readonly cleanup: () => Promise<void>
}

let pgliteTemplate: Buffer | undefined

/**
 * A fresh, migrated database for one test file: PGlite restored from the
 * prepared dump (about 1.5 s instead of 5–7 s for a cold start), or, when
 * DATABASE_URL is set, a new PostgreSQL database cloned from the template.
 */
export const makeTestStore = async (): Promise<TestStore> => {
  const url = process.env.DATABASE_URL
  if (!url) {
    pgliteTemplate ??= readFileSync(pgliteTemplatePath())
    return {
      kind: "pglite",
      layer: PgliteClient.layer({ loadDataDir: new Blob([new Uint8Array(pgliteTemplate)]) }),
      url: undefined,
      cleanup: async () => {},
    }
  }
  const name = `agentgov_t_${randomBytes(6).toString("hex")}`
  const admin = postgres(withDatabase(url, "postgres"), { max: 1, onnotice: () => {} })
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
    kind: "postgres",
    layer: PostgresClient.layer({ url: testUrl, max: 5 }),
    url: testUrl,
    cleanup: async () => {
      const a = postgres(withDatabase(url, "postgres"), { max: 1, onnotice: () => {} })
      try {
        await a.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      } finally {
        await a.end()
      }
    },
  }
}
