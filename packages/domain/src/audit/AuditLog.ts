import { canonicalize, chainHashOfCanonical, GENESIS_HASH } from "@agentgov/verifier"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Actor } from "../auth/Actor.ts"
import { newId } from "../shared/ids.ts"
import { WEBHOOKS_CHANNEL } from "../webhooks/WebhookRepo.ts"
import type { AuditEvent, NewEvent } from "./AuditEvent.ts"

/** The LISTEN/NOTIFY channel that announces committed appends as `<workspaceId>:<last sequence>`. */
export const EVENTS_CHANNEL = "agentgov_events"

/** The events one writer appends, with the actor recorded on each. */
export interface AppendGroup {
  readonly actor: Actor
  readonly events: ReadonlyArray<NewEvent>
}

interface HeadRow {
  readonly sequence: number
  readonly hash: string
  /** Enabled webhooks of the workspace (migration 0008): at 0 the append queues no deliveries. */
  readonly webhooks: number
}

const actorOf = (actor: Actor) =>
  ({ type: actor.credential.type, id: actor.credential.type === "system" ? null : actor.credential.id }) as const

/**
 * The write side of the audit trail. `append` must run inside the caller's
 * transaction: it takes the workspace's chain-head row lock, so appends to one
 * workspace are serialised and the chain stays linear, and the events commit
 * or roll back together with the change they record.
 */
export class AuditLog extends Context.Service<
  AuditLog,
  {
    readonly append: (actor: Actor, events: ReadonlyArray<NewEvent>) => Effect.Effect<ReadonlyArray<AuditEvent>>
    /**
     * Appends the events of several writers in one go (one INSERT, one head
     * update), in the order given; the result is per group. The events of a
     * call share one timestamp.
     */
    readonly appendGroups: (
      workspaceId: string,
      groups: ReadonlyArray<AppendGroup>,
    ) => Effect.Effect<ReadonlyArray<ReadonlyArray<AuditEvent>>>
    /** Creates the empty chain of a new workspace (in the workspace's creating transaction). */
    readonly initChain: (workspaceId: string) => Effect.Effect<void>
  }
>()("@agentgov/domain/audit/AuditLog") {
  static readonly layer = Layer.effect(
    AuditLog,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const initChain = (workspaceId: string) =>
        sql`INSERT INTO chain_heads (workspace_id, sequence, hash) VALUES (${workspaceId}, 0, ${GENESIS_HASH})
            ON CONFLICT (workspace_id) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie)

      /**
       * The append of a workspace with enabled webhooks: the same rows, plus one delivery per event and
       * matching webhook (exact name, `prefix.*`, `*`; aliases were resolved when the filters were saved),
       * written in this transaction, and a wake-up for the delivery workers once it commits. A delivery's id
       * is derived from its event and webhook (see migration 0008).
       */
      const appendWithDeliveries = (
        workspaceId: string,
        rows: string,
        timestamp: string,
        sequence: number,
        hash: string,
      ) =>
        sql`WITH appended AS (
            INSERT INTO events (workspace_id, sequence, id, type, agent_id, actor_type, actor_id, data, ts, occurred_at, prev_hash, hash)
            SELECT ${workspaceId}, r.s, r.id, r.t, r.a, r.at, r.ai, r.d, ${timestamp}::timestamptz, r.o, r.p, r.h
            FROM json_to_recordset(${rows}::text::json)
              AS r(s int8, id text, t text, a text, at text, ai text, d json, o timestamptz, p text, h text)
            RETURNING id, type, sequence
          ), head AS (
            UPDATE chain_heads SET sequence = ${sequence}, hash = ${hash} WHERE workspace_id = ${workspaceId}
          ), queued AS (
            INSERT INTO webhook_deliveries (id, workspace_id, webhook_id, event_sequence, event_id, event_type, status,
              next_attempt_at, created_at, updated_at)
            SELECT 'dlv_' || substr(a.id, 5, 10) || substr(md5(a.id || w.id), 1, 16), ${workspaceId}, w.id, a.sequence,
              a.id, a.type, 'pending', ${timestamp}::timestamptz, ${timestamp}::timestamptz, ${timestamp}::timestamptz
            FROM appended a JOIN webhooks w ON w.workspace_id = ${workspaceId} AND w.enabled
              AND (w.match_all OR w.match_types ? a.type
                   OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(w.match_prefixes) p WHERE starts_with(a.type, p)))
            RETURNING 1
          )
          SELECT pg_notify(${EVENTS_CHANNEL}, ${`${workspaceId}:${sequence}`}),
            (SELECT count(*) FROM (SELECT pg_notify(${WEBHOOKS_CHANNEL}, ${workspaceId}) FROM queued LIMIT 1) n)`

      const appendGroups = Effect.fn("AuditLog.appendGroups")(function* (
        workspaceId: string,
        groups: ReadonlyArray<AppendGroup>,
      ) {
        if (groups.every((g) => g.events.length === 0)) return groups.map(() => [])
        const heads = yield* sql<HeadRow>`SELECT sequence, hash, webhooks FROM chain_heads
          WHERE workspace_id = ${workspaceId} FOR UPDATE`
        const head = heads[0]
        if (head === undefined) return yield* Effect.die(new Error(`no chain head for workspace ${workspaceId}`))
        const now = yield* Clock.currentTimeMillis
        const timestamp = new Date(now).toISOString()
        let prevHash = head.hash
        let sequence = head.sequence
        // The rows travel as one JSON array (json_to_recordset), not as 12 bind parameters each: the data is
        // spliced in as its canonical text, which PostgreSQL's json type stores verbatim.
        let rows = ""
        const stored = groups.map((g) => {
          if (g.actor.workspaceId !== workspaceId) throw new Error("an append group of another workspace")
          const by = actorOf(g.actor)
          const actorJson = `${JSON.stringify(by.type)},"ai":${JSON.stringify(by.id)}`
          return g.events.map((e) => {
            sequence += 1
            const canonical = e.canonicalData ?? canonicalize(e.data)
            const hash = chainHashOfCanonical(prevHash, e.type, canonical, timestamp)
            const event: AuditEvent = {
              id: newId("evt", now),
              type: e.type,
              timestamp,
              workspaceId,
              agentId: e.agentId ?? null,
              occurredAt: e.occurredAt ?? null,
              actor: by,
              data: e.data,
              sequence,
              prevHash,
              hash,
            }
            rows += `${rows === "" ? "[" : ","}{"s":${sequence},"id":"${event.id}","t":${JSON.stringify(e.type)},"a":${JSON.stringify(event.agentId)},"at":${actorJson},"d":${canonical},"o":${JSON.stringify(event.occurredAt)},"p":"${prevHash}","h":"${hash}"}`
            prevHash = hash
            return event
          })
        })
        // One round trip: the rows, the new head, and the announcement (delivered by PostgreSQL only when this
        // transaction commits: live streams on every instance pull from here).
        if (head.webhooks > 0) {
          yield* appendWithDeliveries(workspaceId, `${rows}]`, timestamp, sequence, prevHash)
          return stored
        }
        yield* sql`WITH appended AS (
            INSERT INTO events (workspace_id, sequence, id, type, agent_id, actor_type, actor_id, data, ts, occurred_at, prev_hash, hash)
            SELECT ${workspaceId}, r.s, r.id, r.t, r.a, r.at, r.ai, r.d, ${timestamp}::timestamptz, r.o, r.p, r.h
            FROM json_to_recordset(${`${rows}]`}::text::json)
              AS r(s int8, id text, t text, a text, at text, ai text, d json, o timestamptz, p text, h text)
          ), head AS (
            UPDATE chain_heads SET sequence = ${sequence}, hash = ${prevHash} WHERE workspace_id = ${workspaceId}
          )
          SELECT pg_notify(${EVENTS_CHANNEL}, ${`${workspaceId}:${sequence}`})`
        return stored
      }, Effect.orDie)

      const append = (actor: Actor, events: ReadonlyArray<NewEvent>) =>
        appendGroups(actor.workspaceId, [{ actor, events }]).pipe(Effect.map((stored) => stored[0]!))

      return AuditLog.of({ append, appendGroups, initChain })
    }),
  )
}
