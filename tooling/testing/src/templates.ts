import { createHash } from "node:crypto"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { loadMigrations } from "@agentgov/db"

/** Changes whenever a migration changes, so cached templates are never stale. */
export const migrationsHash = (): string => {
  const h = createHash("sha256")
  for (const m of loadMigrations()) h.update(m.version).update(m.sql)
  return h.digest("hex").slice(0, 16)
}

export const pgliteTemplatePath = () => join(tmpdir(), `agentgov-pglite-template-${migrationsHash()}.tar`)

export const pgTemplateName = () => `agentgov_tpl_${migrationsHash()}`

/** DATABASE_URL with another database name. */
export const withDatabase = (url: string, database: string): string => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}
