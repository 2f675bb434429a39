import { createHash } from "node:crypto"
import { chmodSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connectionOptions, loadMigrations } from "@agentgov/db"
import postgres from "postgres"

/** Changes whenever a migration changes, so cached templates are never stale. */
export const migrationsHash = (): string => {
  const h = createHash("sha256")
  for (const m of loadMigrations()) h.update(m.version).update(m.sql)
  return h.digest("hex").slice(0, 16)
}

export const pgTemplateName = () => `agentgov_tpl_${migrationsHash()}`

/** Set by the global setup when it started the run's own embedded cluster (no DATABASE_URL). */
export const EMBEDDED_URL_ENV = "AGENTGOV_TEST_EMBEDDED_URL"

/** The test run's PostgreSQL: DATABASE_URL, or the embedded cluster the global setup started. */
export const clusterUrl = (): string => {
  const url = process.env.DATABASE_URL || process.env[EMBEDDED_URL_ENV]
  if (!url) throw new Error("no test database: the global setup (@agentgov/testing/globalSetup) did not run")
  return url
}

/** DATABASE_URL with another database name. */
export const withDatabase = (url: string, database: string): string => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/** A plain postgres.js connection for setup and assertions, socket URLs (`?host=/dir`) included. */
export const pgConnect = (url: string, options: postgres.Options<Record<string, postgres.PostgresType>> = {}) => {
  const target = connectionOptions(url)
  return postgres(target.url, {
    max: 1,
    onnotice: () => {},
    ...(target.host ? { host: target.host } : {}),
    ...options,
  })
}

/**
 * A new temporary directory to hold a server's data directory (or a cluster): mode 0755, as the
 * embedded PostgreSQL runs as the `postgres` user when the tests run as root, and must enter it.
 */
export const reachableTempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  chmodSync(dir, 0o755)
  return dir
}
