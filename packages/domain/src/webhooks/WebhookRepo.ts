import { jsonb } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { CompiledFilters } from "../audit/eventFilters.ts"
import type { DisabledReason, RetryPolicy, WebhookDelivery, WebhookStats } from "./Webhook.ts"

/**
 * The LISTEN/NOTIFY channel that wakes delivery workers: new deliveries were queued (payload: workspace id), or a
 * webhook was deleted and its history waits for the purge (payload: REMOVED_PREFIX and the workspace id).
 */
export const WEBHOOKS_CHANNEL = "agentgov_webhooks"
export const REMOVED_PREFIX = "removed:"

/** A webhook as stored: its secrets sealed with the master key. */
export interface StoredWebhook {
  readonly id: string
  readonly workspaceId: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly compiled: CompiledFilters
  readonly description: string | null
  readonly retryPolicy: RetryPolicy
  readonly enabled: boolean
  readonly disabledReason: DisabledReason | null
  readonly disabledAt: string | null
  readonly secret: string
  readonly secretHint: string
  readonly previousSecret: string | null
  readonly previousSecretExpiresAt: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

interface WebhookRow {
  readonly id: string
  readonly workspace_id: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly match_all: boolean
  readonly match_types: ReadonlyArray<string>
  readonly match_prefixes: ReadonlyArray<string>
  readonly description: string | null
  readonly retry_policy: RetryPolicy
  readonly enabled: boolean
  readonly disabled_reason: DisabledReason | null
  readonly disabled_at: Date | null
  readonly secret: string
  readonly secret_hint: string
  readonly previous_secret: string | null
  readonly previous_secret_expires_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

const toStored = (r: WebhookRow): StoredWebhook => ({
  id: r.id,
  workspaceId: r.workspace_id,
  url: r.url,
  events: r.events,
  compiled: { all: r.match_all, types: r.match_types, prefixes: r.match_prefixes },
  description: r.description,
  retryPolicy: r.retry_policy,
  enabled: r.enabled,
  disabledReason: r.disabled_reason,
  disabledAt: r.disabled_at?.toISOString() ?? null,
  secret: r.secret,
  secretHint: r.secret_hint,
  previousSecret: r.previous_secret,
  previousSecretExpiresAt: r.previous_secret_expires_at?.toISOString() ?? null,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
})

interface AttemptRow {
  /** attempted_at in microseconds since the epoch, exactly as stored: the attempt's place in the history. */
  readonly at_us: string
  readonly delivery_id: string
  readonly attempt: number
  readonly event_id: string
  readonly event_type: string
  readonly status: "success" | "failed"
  readonly status_code: number | null
  readonly response_time_ms: number
  readonly error: string | null
  readonly attempted_at: Date
  readonly next_retry_at: Date | null
}

const toDelivery = (r: AttemptRow): WebhookDelivery => ({
  id: r.delivery_id,
  eventId: r.event_id,
  eventType: r.event_type,
  status: r.status,
  ...(r.status_code === null ? {} : { statusCode: r.status_code }),
  responseTimeMs: r.response_time_ms,
  attempt: r.attempt,
  ...(r.next_retry_at === null ? {} : { nextRetryAt: r.next_retry_at.toISOString() }),
  attemptedAt: r.attempted_at.toISOString(),
  ...(r.error === null ? {} : { error: r.error }),
})

/** A place in a webhook's attempts, newest first (attempted_at, then delivery id, then attempt number, descending). */
export interface AttemptPosition {
  /** attempted_at in microseconds since the epoch. */
  readonly atMicros: string
  readonly deliveryId: string
  readonly attempt: number
}

/** An attempt with its place in the history (what a page's cursor continues after). */
export interface PlacedAttempt {
  readonly id: string
  readonly delivery: WebhookDelivery
  readonly position: AttemptPosition
}

/** A delivery as redelivery sees it. */
export interface DeliveryState {
  readonly id: string
  readonly eventId: string
  readonly eventType: string
  readonly status: "pending" | "paused" | "success" | "failed"
  readonly attempts: number
}

export interface RequeueWindow {
  readonly ids?: ReadonlyArray<string> | undefined
  readonly since?: string | undefined
  readonly until?: string | undefined
  readonly limit: number
}

/**
 * SQL for webhooks and their delivery history; every statement is scoped by
 * workspace or by a webhook id read through one. Lock order, everywhere: the
 * workspace's chain head, then the webhook row, then its deliveries. (Appends
 * take the head; since migration 0031 the deliveries have no foreign key to
 * their webhook, whose deletion leaves its history to the workers' purge.)
 */
export class WebhookRepo extends Context.Service<
  WebhookRepo,
  {
    readonly insert: (w: StoredWebhook) => Effect.Effect<void>
    readonly find: (workspaceId: string, id: string) => Effect.Effect<StoredWebhook | undefined>
    /** Locks the row (`FOR NO KEY UPDATE`) for the rest of the transaction. */
    readonly findForUpdate: (workspaceId: string, id: string) => Effect.Effect<StoredWebhook | undefined>
    readonly list: (
      workspaceId: string,
      filter: { readonly enabled?: boolean | undefined; readonly before?: string | undefined; readonly limit: number },
    ) => Effect.Effect<ReadonlyArray<StoredWebhook>>
    readonly count: (workspaceId: string) => Effect.Effect<number>
    readonly update: (w: StoredWebhook) => Effect.Effect<void>
    /**
     * Deletes the webhook row and leaves its delivery history (deliveries and attempts, as many as there are) to the
     * workers' purge (`webhooks_removed`, migration 0031; the workers are woken for it at commit): a cascade here
     * held the workspace's chain head for as long as it took.
     */
    readonly remove: (workspaceId: string, id: string) => Effect.Effect<void>
    /** Takes the workspace's chain-head lock: appends wait until this transaction ends. */
    readonly lockHead: (workspaceId: string) => Effect.Effect<void>
    /** Recounts the workspace's enabled webhooks into its chain head (under the head lock). */
    readonly syncHead: (workspaceId: string) => Effect.Effect<void>
    /** Pending deliveries of a disabled webhook wait, paused. */
    readonly pauseDeliveries: (workspaceId: string, webhookId: string) => Effect.Effect<void>
    /** Paused deliveries of a re-enabled webhook are due again; wakes the workers. */
    readonly resumeDeliveries: (workspaceId: string, webhookId: string) => Effect.Effect<number>
    readonly stats: (webhookIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, WebhookStats>>
    /** The webhook's attempts, newest first, after `before` when given (keyset pagination), at most `limit`. */
    readonly attempts: (
      webhookId: string,
      window: { readonly before?: AttemptPosition | undefined; readonly limit: number },
    ) => Effect.Effect<ReadonlyArray<PlacedAttempt>>
    readonly deliveries: (webhookId: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<DeliveryState>>
    /**
     * Queues failed deliveries again (a new round of the schedule, attempt
     * numbers continuing), oldest first, at most `limit`; wakes the workers.
     * Returns those queued and whether more would have matched.
     */
    readonly requeueFailed: (
      workspaceId: string,
      webhookId: string,
      window: RequeueWindow,
    ) => Effect.Effect<{ readonly queued: ReadonlyArray<DeliveryState>; readonly hasMore: boolean }>
  }
>()("@agentgov/domain/webhooks/WebhookRepo") {
  static readonly layer = Layer.effect(
    WebhookRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const find = (lock: boolean) => (workspaceId: string, id: string) =>
        sql<WebhookRow>`SELECT * FROM webhooks WHERE workspace_id = ${workspaceId} AND id = ${id}
            ${lock ? sql`FOR NO KEY UPDATE` : sql``}`.pipe(
          Effect.map((rows) => (rows[0] ? toStored(rows[0]) : undefined)),
          Effect.orDie,
        )
      const wake = (workspaceId: string) => sql`SELECT pg_notify(${WEBHOOKS_CHANNEL}, ${workspaceId})`

      return WebhookRepo.of({
        insert: (w) =>
          sql`INSERT INTO webhooks (id, workspace_id, url, events, match_all, match_types, match_prefixes, description,
                retry_policy, enabled, disabled_reason, disabled_at, secret, secret_hint, previous_secret,
                previous_secret_expires_at, created_at, updated_at)
              VALUES (${w.id}, ${w.workspaceId}, ${w.url}, ${jsonb(sql, w.events)}, ${w.compiled.all},
                ${jsonb(sql, w.compiled.types)}, ${jsonb(sql, w.compiled.prefixes)}, ${w.description}, ${w.retryPolicy},
                ${w.enabled}, ${w.disabledReason}, ${w.disabledAt}::timestamptz, ${w.secret}, ${w.secretHint},
                ${w.previousSecret}, ${w.previousSecretExpiresAt}::timestamptz, ${w.createdAt}::timestamptz,
                ${w.updatedAt}::timestamptz)`.pipe(Effect.asVoid, Effect.orDie),
        find: find(false),
        findForUpdate: find(true),
        list: (workspaceId, f) =>
          sql<WebhookRow>`SELECT * FROM webhooks WHERE workspace_id = ${workspaceId}
              ${f.enabled === undefined ? sql`` : sql`AND enabled = ${f.enabled}`}
              ${f.before ? sql`AND id < ${f.before}` : sql``}
              ORDER BY id DESC LIMIT ${f.limit}`.pipe(
            Effect.map((rows) => rows.map(toStored)),
            Effect.orDie,
          ),
        count: (workspaceId) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM webhooks WHERE workspace_id = ${workspaceId}`.pipe(
            Effect.map((rows) => rows[0]?.n ?? 0),
            Effect.orDie,
          ),
        update: (w) =>
          sql`UPDATE webhooks SET url = ${w.url}, events = ${jsonb(sql, w.events)}, match_all = ${w.compiled.all},
                match_types = ${jsonb(sql, w.compiled.types)}, match_prefixes = ${jsonb(sql, w.compiled.prefixes)},
                description = ${w.description}, retry_policy = ${w.retryPolicy}, enabled = ${w.enabled},
                disabled_reason = ${w.disabledReason}, disabled_at = ${w.disabledAt}::timestamptz, secret = ${w.secret},
                secret_hint = ${w.secretHint}, previous_secret = ${w.previousSecret},
                previous_secret_expires_at = ${w.previousSecretExpiresAt}::timestamptz,
                updated_at = ${w.updatedAt}::timestamptz
              WHERE workspace_id = ${w.workspaceId} AND id = ${w.id}`.pipe(Effect.asVoid, Effect.orDie),
        remove: (workspaceId, id) =>
          sql`WITH gone AS (
                DELETE FROM webhooks WHERE workspace_id = ${workspaceId} AND id = ${id} RETURNING id, workspace_id
              ), kept AS (
                INSERT INTO webhooks_removed (id, workspace_id, removed_at)
                SELECT id, workspace_id, now() FROM gone ON CONFLICT (id) DO NOTHING RETURNING 1
              )
              SELECT pg_notify(${WEBHOOKS_CHANNEL}, ${`${REMOVED_PREFIX}${workspaceId}`}) FROM kept`.pipe(
            Effect.asVoid,
            Effect.orDie,
          ),
        lockHead: (workspaceId) =>
          sql`SELECT 1 FROM chain_heads WHERE workspace_id = ${workspaceId} FOR UPDATE`.pipe(
            Effect.asVoid,
            Effect.orDie,
          ),
        syncHead: (workspaceId) =>
          sql`UPDATE chain_heads SET webhooks =
                (SELECT count(*) FROM webhooks WHERE workspace_id = ${workspaceId} AND enabled)
              WHERE workspace_id = ${workspaceId}`.pipe(Effect.asVoid, Effect.orDie),
        pauseDeliveries: (workspaceId, webhookId) =>
          sql`UPDATE webhook_deliveries SET status = 'paused', updated_at = now()
              WHERE workspace_id = ${workspaceId} AND webhook_id = ${webhookId} AND status = 'pending'`.pipe(
            Effect.asVoid,
            Effect.orDie,
          ),
        resumeDeliveries: (workspaceId, webhookId) =>
          Effect.gen(function* () {
            const rows = yield* sql<{ id: string }>`UPDATE webhook_deliveries SET status = 'pending', updated_at = now()
                WHERE webhook_id = ${webhookId} AND status = 'paused' RETURNING id`
            if (rows.length > 0) yield* wake(workspaceId)
            return rows.length
          }).pipe(Effect.orDie),
        stats: (ids) =>
          ids.length === 0
            ? Effect.succeed(new Map())
            : sql<{ webhook_id: string; total: number; successful: number }>`SELECT webhook_id, count(*)::int AS total,
                  (count(*) FILTER (WHERE status = 'success'))::int AS successful
                FROM webhook_attempts WHERE webhook_id IN ${sql.in(ids)} GROUP BY webhook_id`.pipe(
                Effect.map((rows) => {
                  const out = new Map<string, WebhookStats>()
                  for (const id of ids) {
                    const r = rows.find((x) => x.webhook_id === id)
                    const total = r?.total ?? 0
                    const successful = r?.successful ?? 0
                    out.set(id, {
                      total,
                      successful,
                      failed: total - successful,
                      successRate: total === 0 ? 0 : successful / total,
                    })
                  }
                  return out
                }),
                Effect.orDie,
              ),
        attempts: (webhookId, { before, limit }) =>
          sql<AttemptRow>`SELECT (extract(epoch FROM attempted_at) * 1000000)::bigint::text AS at_us, delivery_id,
                attempt, event_id, event_type, status, status_code, response_time_ms, error, attempted_at, next_retry_at
              FROM webhook_attempts WHERE webhook_id = ${webhookId}
              ${
                before
                  ? sql`AND (attempted_at, delivery_id, attempt) <
                      (timestamptz 'epoch' + ${before.atMicros}::bigint * interval '1 microsecond',
                       ${before.deliveryId}, ${before.attempt})`
                  : sql``
              }
              ORDER BY attempted_at DESC, delivery_id DESC, attempt DESC LIMIT ${limit}`.pipe(
            Effect.map((rows) =>
              rows.map(
                (r): PlacedAttempt => ({
                  id: r.delivery_id,
                  delivery: toDelivery(r),
                  position: { atMicros: r.at_us, deliveryId: r.delivery_id, attempt: r.attempt },
                }),
              ),
            ),
            Effect.orDie,
          ),
        deliveries: (webhookId, ids) =>
          ids.length === 0
            ? Effect.succeed([])
            : sql<{
                id: string
                event_id: string
                event_type: string
                status: DeliveryState["status"]
                attempts: number
              }>`
                SELECT id, event_id, event_type, status, attempts FROM webhook_deliveries
                WHERE webhook_id = ${webhookId} AND id IN ${sql.in(ids)} FOR UPDATE`.pipe(
                Effect.map((rows) =>
                  rows.map((r) => ({
                    id: r.id,
                    eventId: r.event_id,
                    eventType: r.event_type,
                    status: r.status,
                    attempts: r.attempts,
                  })),
                ),
                Effect.orDie,
              ),
        requeueFailed: (workspaceId, webhookId, w) =>
          Effect.gen(function* () {
            const picked = yield* sql<{ id: string }>`SELECT id FROM webhook_deliveries
                WHERE webhook_id = ${webhookId} AND status = 'failed'
                  ${w.ids ? sql`AND id IN ${sql.in(w.ids)}` : sql``}
                  ${w.since ? sql`AND created_at >= ${w.since}::timestamptz` : sql``}
                  ${w.until ? sql`AND created_at < ${w.until}::timestamptz` : sql``}
                ORDER BY created_at, id LIMIT ${w.limit + 1} FOR UPDATE`
            const ids = picked.slice(0, w.limit).map((r) => r.id)
            if (ids.length === 0) return { queued: [], hasMore: false }
            const rows = yield* sql<{ id: string; event_id: string; event_type: string; attempts: number }>`
                UPDATE webhook_deliveries SET status = 'pending', round_start = attempts, next_attempt_at = now(),
                  updated_at = now()
                WHERE id IN ${sql.in(ids)} RETURNING id, event_id, event_type, attempts`
            const byId = new Map(rows.map((r) => [r.id, r]))
            yield* wake(workspaceId)
            return {
              queued: ids.flatMap((id): Array<DeliveryState> => {
                const r = byId.get(id)
                return r
                  ? [{ id, eventId: r.event_id, eventType: r.event_type, status: "pending", attempts: r.attempts }]
                  : []
              }),
              hasMore: picked.length > w.limit,
            }
          }).pipe(Effect.orDie),
      })
    }),
  )
}
