import { Context } from "effect"

/**
 * What the service needs from its store besides SQL: which engine runs
 * underneath, and PostgreSQL's LISTEN/NOTIFY for fan-out between instances
 * (PGlite implements both in-process, so one embedded instance behaves the same).
 */
export interface DatabaseShape {
  readonly kind: "pglite" | "postgres"
  readonly notify: (channel: string, payload: string) => Promise<void>
  /** Subscribes; resolves to an unsubscribe function. */
  readonly listen: (channel: string, onMessage: (payload: string) => void) => Promise<() => Promise<void>>
}

export class Database extends Context.Service<Database, DatabaseShape>()("@agentgov/db/Database") {}
