import { loadMigrations } from "@agentgov/db"
import { type EmptyDatabase, makeEmptyDatabase, pgConnect } from "@agentgov/testing"
import { afterAll, beforeAll } from "vitest"

/**
 * A fresh database migrated up to (not including) `migration`, with workspace `ws_old`: the store a migration's test
 * fills as the code before it did, then migrates. Registers its own beforeAll and afterAll; `sql()` is its connection.
 */
export const storeBefore = (migration: string) => {
  let db: EmptyDatabase | undefined
  let sql: ReturnType<typeof pgConnect> | undefined
  beforeAll(async () => {
    db = await makeEmptyDatabase()
    sql = pgConnect(db.url)
    for (const m of loadMigrations()) {
      if (m.version >= migration) break
      await sql.unsafe(m.sql)
    }
    await sql`INSERT INTO workspaces (id, name, environment, created_at, updated_at)
      VALUES ('ws_old', 'old', 'live', now(), now())`
  }, 60_000)
  afterAll(async () => {
    await sql?.end()
    await db?.cleanup()
  })
  return { sql: () => sql! }
}
