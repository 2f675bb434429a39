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
   * Prepared statements of one text, one after another in a read-only transaction (READ COMMITTED: each sees what
   * was committed when it began) with a generic plan, whose rows are handed to `onRow` one by one as they arrive,
   * none kept, in the statements' order. `next` gives each statement's parameters (undefined: no more); it is asked
   * for the first at once, and for each next one at the turn of the event loop after rows of the one before begin
   * to arrive (or when it ends with none). So PostgreSQL computes a statement while this process works on the last
   * one's rows, and one turn of the event loop reads at most two statements' rows. For reading a whole audit chain,
   * where rows held a page at a time cost more in garbage collection than the work on them. `onRow` must not
   * throw: the driver would fail the statement yet go on handing it the statement's rows. What `next` throws
   * rejects, with nothing sent after it.
   */
  readonly forEachRow: (
    text: string,
    next: () => ReadonlyArray<unknown> | undefined,
    onRow: (row: Record<string, unknown>) => void,
  ) => Promise<void>
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
