import { EmbeddedPostgresError, MigrationRefused } from "@agentgov/db"
import { RedisUnreachable } from "@agentgov/domain"
import { ConfigError } from "./config.ts"

/**
 * A start that cannot go on for a reason the operator fixes (a port in use, a data directory held by
 * another process, a store that does not answer): said in its message, in one line.
 */
export class StartupError extends Error {}

/** The exit code of every refusal at start, the server's and the CLI's: configuration, arguments, port, data directory, store, Redis. */
export const REFUSED_EXIT_CODE = 2

/** Prints the refusal and exits: one `agentgov: …` line on stderr, no stack trace. */
export const refuse = (message: string): never => {
  process.stderr.write(`agentgov: ${message}\n`)
  process.exit(REFUSED_EXIT_CODE)
}

/**
 * Refuses to start for a failure the operator can fix; anything else is a defect, rethrown with its
 * stack. (effect's runtime rejects with the failure itself when a layer dies while it is built.)
 */
export const refuseStart = (e: unknown): never => {
  if (
    e instanceof StartupError ||
    e instanceof ConfigError ||
    e instanceof EmbeddedPostgresError ||
    e instanceof MigrationRefused ||
    e instanceof RedisUnreachable
  )
    return refuse(e.message)
  throw e
}
