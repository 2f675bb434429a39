export {
  BACKUP_FORMAT,
  BackupError,
  type BackupHeader,
  type BackupSummary,
  backupTo,
  type RestoreOptions,
  restoreFrom,
} from "./backup.ts"
export { jsonb, pgCompiler } from "./compiler.ts"
export { connectionOptions } from "./connectionUrl.ts"
export { Database, type DatabaseShape } from "./Database.ts"
export {
  type EmbeddedPostgres,
  EmbeddedPostgresError,
  type EmbeddedPostgresOptions,
  processAlive,
  runningClusterUrl,
  startEmbeddedPostgres,
  stopLeftoverPostmaster,
} from "./EmbeddedPostgres.ts"
export { waitForLocks } from "./locks.ts"
export { loadMigrations, type Migration, MigrationRefused, migrate } from "./migrate.ts"
export * as PostgresClient from "./PostgresClient.ts"
export { storeUnreachable, toSqlError, uniqueViolation } from "./sqlErrors.ts"
