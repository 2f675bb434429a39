import { Context } from "effect"

/**
 * What the service needs from its store besides SQL: which engine runs
 * underneath, and PostgreSQL's LISTEN/NOTIFY for fan-out between instances.
 */
export interface DatabaseShape {
  readonly kind: "postgres"
  readonly notify: (channel: string, payload: string) => Promise<void>
  /**
   * One prepared statement on the pool, outside any transaction and outside the Effect runtime: for a hot
   * path (the group commit's append) where a fiber and a compiled template per statement cost more than the
   * statement's own work. Rejects with the driver's error, whose `code` is the SQLSTATE.
   */
  readonly query: (text: string, params: ReadonlyArray<unknown>) => Promise<ReadonlyArray<Record<string, unknown>>>
  /**
   * Subscribes; resolves to an unsubscribe function. `onMissed` is called when notifications may have been
   * lost (the listening connection dropped), and again once the subscription is back: whatever the
   * subscriber kept because no notification said otherwise must be taken as stale.
   */
  readonly listen: (
    channel: string,
    onMessage: (payload: string) => void,
    onMissed?: () => void,
  ) => Promise<() => Promise<void>>
  /**
   * Tells this process's own subscribers of `channel` what a NOTIFY would, without a round trip: for a change
   * this process made and saw committed, whose NOTIFY to other instances is sent later or coalesced (the audit
   * trail's appends, AuditLog.ts). Other instances hear nothing from it.
   */
  readonly announce: (channel: string, payload: string) => void
}

export class Database extends Context.Service<Database, DatabaseShape>()("@agentgov/db/Database") {}
