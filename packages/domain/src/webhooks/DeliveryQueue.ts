import { randomBytes } from "node:crypto"
import { Database } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { AuditLog } from "../audit/AuditLog.ts"
import { systemActor } from "../auth/Actor.ts"
import { MasterKey } from "../keys/SigningKeys.ts"
import { unseal } from "../keys/sealed.ts"
import { leaseMs, type Schedule, scaledSchedule } from "./schedules.ts"
import { envelopeBody, signatureHeaders } from "./signing.ts"
import type { DisabledReason, RetryPolicy } from "./Webhook.ts"
import { type AttemptOutcome, WebhookClient } from "./WebhookClient.ts"
import { REMOVED_PREFIX, WEBHOOKS_CHANNEL, WebhookRepo } from "./WebhookRepo.ts"
import { WebhookSettings } from "./WebhookSettings.ts"

/** A delivery taken by a worker, with what its attempt needs. */
export interface ClaimedDelivery {
  readonly id: string
  readonly workspaceId: string
  readonly webhookId: string
  readonly eventId: string
  readonly eventType: string
  readonly eventTimestamp: string
  /** The event's `data`, as its stored JSON text. */
  readonly dataJson: string
  /** The number this attempt carries (attempts made so far + 1). */
  readonly attempt: number
  /** Its place in the current round of the schedule, from 1. */
  readonly roundAttempt: number
  readonly retryPolicy: RetryPolicy
  readonly url: string
  /** The workspace's: the worker records `webhook.disabled` as its system actor. */
  readonly environment: "live" | "test"
  /** Sealed secrets: the current one, and the previous one while a rotation's overlap lasts. */
  readonly secret: string
  readonly previousSecret: string | null
  readonly leaseToken: string
  /** The W3C traceparent of the span that appended the event, when tracing was on: the attempt's parent. */
  readonly traceParent: string | null
  /**
   * The workspace was deleted: a first attempt is sent, a later one is recorded as failed without being sent, and
   * either ends the delivery (no retry, no disabling).
   */
  readonly workspaceDeleted: boolean
}

/** A worker's attempts in flight, by workspace and by webhook, and the most either may hold (fair claims). */
export interface ClaimFairness {
  readonly busy: ReadonlyMap<string, number>
  readonly perWorkspace: number
  readonly busyWebhooks?: ReadonlyMap<string, number> | undefined
  /** A webhook's share, unless `webhookShares` gives it its own. Unset: a webhook may hold its workspace's whole share. */
  readonly perWebhook?: number | undefined
  /** The webhooks whose share is not `perWebhook` (the worker's, grown as their receivers answer), with theirs. */
  readonly webhookShares?: ReadonlyMap<string, number> | undefined
}

/** When the next pending delivery is due, and the next one a claim could take (milliseconds from now). */
export interface NextDue {
  readonly due: number | undefined
  readonly claimable: number | undefined
}

/** What follows an attempt. */
export type NextStep =
  | { readonly kind: "delivered" }
  | { readonly kind: "retry"; readonly at: number }
  | { readonly kind: "failed"; readonly disable: DisabledReason | undefined }

export interface AttemptResult {
  readonly delivery: ClaimedDelivery
  readonly outcome: AttemptOutcome
  readonly next: NextStep
}

/**
 * The step after an attempt: success ends the delivery; `410 Gone` fails it
 * and disables the webhook at once; a failure is retried after the
 * schedule's delay, counted from the end of the attempt, until the round's
 * last attempt fails, which fails the delivery and disables the webhook (D9).
 */
export const nextStep = (schedule: Schedule, roundAttempt: number, outcome: AttemptOutcome): NextStep => {
  if (outcome.success) return { kind: "delivered" }
  if (outcome.statusCode === 410) return { kind: "failed", disable: "endpoint_gone" }
  if (roundAttempt >= schedule.attempts) return { kind: "failed", disable: "all_attempts_failed" }
  return { kind: "retry", at: outcome.startedAt + outcome.responseTimeMs + schedule.delaysMs[roundAttempt - 1]! }
}

/**
 * The transaction-scoped advisory lock the history purge takes with try-lock semantics: one instance purges at a time,
 * and instances starting together (each purges as its worker starts) do not all delete the same rows.
 */
export const PURGE_LOCK = 72_410_031

/** The error of a retry of a deleted workspace's delivery, recorded unsent. */
export const WORKSPACE_DELETED_NOT_SENT = "not sent: the workspace was deleted"

/** The associated data that binds a sealed webhook secret to its webhook. */
export const secretAad = (webhookId: string) => `webhook:${webhookId}`

interface ClaimRow {
  readonly id: string
  readonly workspace_id: string
  readonly webhook_id: string
  readonly event_id: string
  readonly attempts: number
  readonly round_start: number
  readonly type: string
  readonly ts: Date
  readonly data: string
  readonly url: string
  readonly retry_policy: RetryPolicy
  readonly secret: string
  readonly previous_secret: string | null
  readonly environment: "live" | "test"
  readonly trace_parent: string | null
  readonly workspace_deleted: boolean
}

/**
 * The delivery side of webhooks, for workers. `claim` takes due deliveries
 * with `FOR UPDATE SKIP LOCKED` in one short statement and leases them (their
 * due time moves to the lease's end), so concurrent workers never take the
 * same one; `attempt` sends outside any transaction; `record` stores each
 * result with its lease token, so a worker whose lease ran out (and whose
 * attempt another worker has taken over) records nothing. A worker that dies
 * loses nothing: its leases run out and the attempts are taken again.
 */
export class DeliveryQueue extends Context.Service<
  DeliveryQueue,
  {
    /**
     * Up to `limit` due deliveries, each workspace's earliest in turn (its first due one, then every workspace's
     * second, …), and none of a workspace that already has `perWorkspace` attempts in flight here (`busy`, this
     * worker's count by workspace), so one workspace's backlog cannot take all of a worker's attempts; nor of a
     * webhook that already has `perWebhook` (`busyWebhooks`, by webhook), so one webhook's receiver that never
     * answers cannot take all of its workspace's share from the workspace's other webhooks.
     */
    readonly claim: (limit: number, fairness?: ClaimFairness) => Effect.Effect<ReadonlyArray<ClaimedDelivery>>
    /** Signs and sends one attempt; never fails (a failure is an outcome). */
    readonly attempt: (delivery: ClaimedDelivery) => Promise<AttemptResult>
    /** Records results in one transaction; disables webhooks whose results say so, each with its `webhook.disabled`. */
    readonly record: (results: ReadonlyArray<AttemptResult>) => Effect.Effect<void>
    /**
     * Milliseconds until the next pending delivery is due (`due`, ≤ 0: due now; undefined when none is pending), and
     * until the next one `claim` with the same `fairness` could take (`claimable`: its workspace and its webhook below
     * their shares), so that a worker whose due deliveries all wait for shares sleeps until attempts end, a
     * notification, or a claimable delivery's due time, rather than claiming again and again for nothing.
     */
    readonly untilNextDue: (fairness?: ClaimFairness) => Effect.Effect<NextDue>
    /**
     * Deletes, at most `limit` at a time, the deliveries of deleted webhooks (`webhooks_removed`, forgetting a
     * deleted webhook once none is left) and then the finished (delivered or failed) deliveries of events older than
     * `before`, with their attempts; returns how many. Pending and paused ones of existing webhooks stay. One
     * instance at a time: under a transaction-scoped advisory try-lock, so a purge while another instance's is in
     * its transaction deletes nothing and answers undefined at once (it neither waits nor repeats that work).
     */
    readonly purgeFinished: (before: string, limit?: number) => Effect.Effect<number | undefined>
    /**
     * Calls `onWake` whenever deliveries were queued on any instance, and `onRemoved` when a webhook was deleted (its
     * history waits for the purge); resolves to the unsubscribe function.
     */
    readonly wakeups: (onWake: () => void, onRemoved?: () => void) => Promise<() => Promise<void>>
  }
>()("@agentgov/domain/webhooks/DeliveryQueue") {
  static readonly layer = Layer.effect(
    DeliveryQueue,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const db = yield* Database
      const { key: master } = yield* MasterKey
      const settings = yield* WebhookSettings
      const client = yield* WebhookClient
      const audit = yield* AuditLog
      const webhooks = yield* WebhookRepo
      const scale = settings.timeScale
      const schedules = {
        exponential: scaledSchedule("exponential", scale),
        extended: scaledSchedule("extended", scale),
      } as const
      // Leases are as long as the longer schedule's: a claim does not know which policy each row has.
      const lease = Math.max(leaseMs(schedules.exponential, scale), leaseMs(schedules.extended, scale))
      const instance = randomBytes(6).toString("hex")
      let claims = 0

      /**
       * The workspaces with pending deliveries, one descent of `webhook_deliveries_pending` each (a
       * skip scan): what the claim and the next due time walk, so neither reads a workspace's whole backlog.
       */
      const pendingWorkspaces = sql.literal(`ws(workspace_id) AS (
            (SELECT workspace_id FROM webhook_deliveries WHERE status = 'pending' ORDER BY workspace_id LIMIT 1)
            UNION ALL
            SELECT (SELECT d.workspace_id FROM webhook_deliveries d
                    WHERE d.status = 'pending' AND d.workspace_id > ws.workspace_id ORDER BY d.workspace_id LIMIT 1)
            FROM ws WHERE ws.workspace_id IS NOT NULL
          )`)

      /**
       * A claim's fairness as its SQL reads it: the workspace's and the webhook's shares (`unlimited` where the worker
       * gave none; a webhook's is its workspace's unless given), and the `busy` and `busy_hooks` CTEs of the attempts
       * in flight on this worker, by workspace and by webhook.
       */
      const sharesOf = (fairness: ClaimFairness | undefined, unlimited: number) => {
        const share = fairness?.perWorkspace ?? unlimited
        const busyIds = [...(fairness?.busy.keys() ?? [])]
        const busyCounts = busyIds.map((id) => fairness!.busy.get(id)!)
        // Each webhook with attempts in flight here or a share of its own, once: its count (0 when none) and its own
        // share (null: perWebhook's).
        const hookIds = [
          ...new Set([...(fairness?.busyWebhooks?.keys() ?? []), ...(fairness?.webhookShares?.keys() ?? [])]),
        ]
        const hookCounts = hookIds.map((id) => fairness?.busyWebhooks?.get(id) ?? 0)
        const hookShares = hookIds.map((id) => fairness?.webhookShares?.get(id) ?? null)
        const busy = sql`busy AS (
            SELECT * FROM unnest(${busyIds}::text[], ${busyCounts}::int[]) AS b(workspace_id, n)
          ), busy_hooks AS (
            SELECT * FROM unnest(${hookIds}::text[], ${hookCounts}::int[], ${hookShares}::int[]) AS b(webhook_id, n, share)
          )`
        return { share, hookShare: fairness?.perWebhook ?? share, busy }
      }

      const claim = Effect.fn("DeliveryQueue.claim")(function* (limit: number, fairness?: ClaimFairness) {
        const token = `${instance}.${++claims}`
        const { share, hookShare, busy } = sharesOf(fairness, limit)
        // Each workspace's room (its share less its attempts in flight here), then each of its webhooks' earliest due
        // rows up to the room the webhook's own share leaves (read, not locked), ranked across workspaces: the first
        // of each, then the second of each, … within the workspace's share. Only the rows taken are locked, in rank
        // order: rows another worker holds are skipped (the next candidates take their places), and a row it claimed
        // meanwhile fails the due check again.
        const rows = yield* sql<ClaimRow>`WITH RECURSIVE ${pendingWorkspaces}, ${busy}, room AS (
            SELECT ws.workspace_id, coalesce(b.n, 0) AS n, least(greatest(${share} - coalesce(b.n, 0), 0), ${limit}) AS free
            FROM ws LEFT JOIN busy b ON b.workspace_id = ws.workspace_id
            WHERE ws.workspace_id IS NOT NULL
          ), candidates AS (
            SELECT room.workspace_id, room.n, c.id, c.next_attempt_at, c.event_sequence FROM room
            CROSS JOIN LATERAL (
              SELECT h.id, least(room.free, greatest(coalesce(bh.share, ${hookShare}) - coalesce(bh.n, 0), 0)) AS free
              FROM webhooks h LEFT JOIN busy_hooks bh ON bh.webhook_id = h.id
              WHERE h.workspace_id = room.workspace_id
            ) hook
            CROSS JOIN LATERAL (
              SELECT d.id, d.next_attempt_at, d.event_sequence FROM webhook_deliveries d
              WHERE d.workspace_id = room.workspace_id AND d.webhook_id = hook.id AND d.status = 'pending'
                AND d.next_attempt_at <= now()
              ORDER BY d.next_attempt_at, d.event_sequence LIMIT hook.free
            ) c
            WHERE room.free > 0
          ), ranked AS (
            SELECT id, next_attempt_at,
              n + row_number() OVER (PARTITION BY workspace_id ORDER BY next_attempt_at, event_sequence) AS rank
            FROM candidates
          ), due AS (
            -- One primary-key lookup and lock per row, taken in rank order as the limit pulls them: a join let the
            -- planner scan every due row once per candidate (320 ms for 3,000 candidates), and locked them all. The
            -- lookup names the id alone, and the row is checked still pending and due once locked (its newest
            -- version: one another worker claimed meanwhile fails here); its LIMIT keeps those tests out of it. With
            -- them inside, statistics taken while the queue held no pending row let the planner walk the pending
            -- index for each candidate instead: every due row per candidate (15,600 for each of 100 in the webhook
            -- benchmark, 350 ms a claim; claim.test.ts).
            SELECT l.id, r.rank, r.next_attempt_at
            FROM (SELECT * FROM ranked WHERE rank <= ${share} ORDER BY rank, next_attempt_at) r
            CROSS JOIN LATERAL (
              SELECT d.id, d.status, d.next_attempt_at FROM webhook_deliveries d
              WHERE d.id = r.id
              LIMIT 1 FOR UPDATE SKIP LOCKED
            ) l
            WHERE l.status = 'pending' AND l.next_attempt_at <= now()
            ORDER BY r.rank, r.next_attempt_at LIMIT ${limit}
          ), claimed AS (
            UPDATE webhook_deliveries d SET lease_token = ${token},
              next_attempt_at = now() + ${lease} * interval '1 millisecond'
            FROM due WHERE d.id = due.id
            RETURNING d.id, d.workspace_id, d.webhook_id, d.event_sequence, d.event_id, d.attempts, d.round_start,
              d.trace_parent, due.rank, due.next_attempt_at AS due_at
          )
          SELECT c.id, c.workspace_id, c.webhook_id, c.event_id, c.attempts, c.round_start, c.trace_parent,
            e.type, e.ts, e.data, w.url, w.retry_policy, w.secret,
            CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret END AS previous_secret,
            ws.environment, ws.deleted_at IS NOT NULL AS workspace_deleted
          FROM claimed c
          -- One primary-key lookup per delivery, whatever the planner knows of the events table's size.
          CROSS JOIN LATERAL (
            SELECT type, ts, data::text AS data FROM events
            WHERE workspace_id = c.workspace_id AND sequence = c.event_sequence LIMIT 1
          ) e
          JOIN webhooks w ON w.id = c.webhook_id
          JOIN workspaces ws ON ws.id = c.workspace_id
          -- Sent in this order: a workspace's deliveries in due time and then event order (one append's are due at once).
          ORDER BY c.rank, c.due_at, c.event_sequence`
        return rows.map(
          (r): ClaimedDelivery => ({
            id: r.id,
            workspaceId: r.workspace_id,
            webhookId: r.webhook_id,
            eventId: r.event_id,
            eventType: r.type,
            eventTimestamp: r.ts.toISOString(),
            dataJson: r.data,
            attempt: r.attempts + 1,
            roundAttempt: r.attempts + 1 - r.round_start,
            retryPolicy: r.retry_policy,
            url: r.url,
            environment: r.environment,
            secret: r.secret,
            previousSecret: r.previous_secret,
            leaseToken: token,
            traceParent: r.trace_parent,
            workspaceDeleted: r.workspace_deleted,
          }),
        )
      }, Effect.orDie)

      const attempt = async (d: ClaimedDelivery): Promise<AttemptResult> => {
        const schedule = schedules[d.retryPolicy]
        if (d.workspaceDeleted && d.attempt > 1) {
          // Nobody can manage (or stop) a deleted workspace's webhooks: no retry goes out, and the webhook is left
          // as it was (disabling it would append an event to the deleted workspace's chain).
          const outcome: AttemptOutcome = {
            success: false,
            startedAt: Date.now(),
            responseTimeMs: 0,
            error: WORKSPACE_DELETED_NOT_SENT,
          }
          return { delivery: d, outcome, next: { kind: "failed", disable: undefined } }
        }
        const current = unseal(master, secretAad(d.webhookId), d.secret)
        if (current === undefined) {
          const outcome: AttemptOutcome = {
            success: false,
            startedAt: Date.now(),
            responseTimeMs: 0,
            error:
              "the webhook's secret cannot be opened: this instance's AGENTGOV_MASTER_KEY is not the one that sealed it",
          }
          return { delivery: d, outcome, next: nextStep(schedule, d.roundAttempt, outcome) }
        }
        const previous =
          d.previousSecret === null ? undefined : unseal(master, secretAad(d.webhookId), d.previousSecret)
        const body = envelopeBody({
          eventId: d.eventId,
          type: d.eventType,
          timestamp: d.eventTimestamp,
          workspaceId: d.workspaceId,
          dataJson: d.dataJson,
          deliveryId: d.id,
          webhookId: d.webhookId,
          attempt: d.attempt,
        })
        const headers = signatureHeaders(
          { current: current.toString("utf8"), previous: previous?.toString("utf8") },
          d.id,
          Math.floor(Date.now() / 1000),
          body,
        )
        const outcome = await client.send({
          url: d.url,
          headers,
          body,
          timeoutMs: schedule.timeoutMs,
          workspaceId: d.workspaceId,
        })
        // A deleted workspace's event (`workspace.deleted` itself) gets its first attempt, and nothing after it.
        if (d.workspaceDeleted)
          return {
            delivery: d,
            outcome,
            next: outcome.success ? { kind: "delivered" } : { kind: "failed", disable: undefined },
          }
        return { delivery: d, outcome, next: nextStep(schedule, d.roundAttempt, outcome) }
      }

      const record = Effect.fn("DeliveryQueue.record")(function* (results: ReadonlyArray<AttemptResult>) {
        if (results.length === 0) return
        const rows = JSON.stringify(
          results.map(({ delivery: d, outcome: o, next }) => ({
            id: d.id,
            tok: d.leaseToken,
            n: d.attempt,
            st: o.success ? "success" : "failed",
            code: o.statusCode ?? null,
            ms: o.responseTimeMs,
            err: o.error?.slice(0, 1000) ?? null,
            at: new Date(o.startedAt).toISOString(),
            nxt: next.kind === "retry" ? new Date(next.at).toISOString() : null,
            fin: next.kind === "delivered" ? "success" : next.kind === "failed" ? "failed" : null,
          })),
        )
        const disabling = results.flatMap((r) =>
          r.next.kind === "failed" && r.next.disable !== undefined ? [{ ...r.delivery, reason: r.next.disable }] : [],
        )
        yield* sql.withTransaction(
          Effect.gen(function* () {
            if (disabling.length > 0) {
              // The lock order of every webhook change: chain heads, webhook rows, then deliveries.
              const workspaces = [...new Set(disabling.map((d) => d.workspaceId))].sort()
              yield* sql`SELECT 1 FROM chain_heads WHERE workspace_id IN ${sql.in(workspaces)}
                  ORDER BY workspace_id FOR UPDATE`
              const at = new Date().toISOString()
              for (const d of [...disabling].sort((a, b) => (a.webhookId < b.webhookId ? -1 : 1))) {
                // Only while the attempt is still this worker's: a worker that lost its lease decides nothing.
                const disabled = yield* sql<{ id: string }>`UPDATE webhooks SET enabled = false,
                      disabled_reason = ${d.reason}, disabled_at = ${at}::timestamptz, updated_at = ${at}::timestamptz
                    WHERE id = ${d.webhookId} AND enabled AND EXISTS (SELECT 1 FROM webhook_deliveries
                      WHERE id = ${d.id} AND lease_token = ${d.leaseToken})
                    RETURNING id`
                if (disabled.length === 0) continue
                // As an operator's PATCH that disables it (WebhookService): the head's count, the pending paused.
                yield* webhooks.syncHead(d.workspaceId)
                yield* webhooks.pauseDeliveries(d.workspaceId, d.webhookId)
                yield* audit.append(systemActor(d.workspaceId, d.environment, new Set()), [
                  {
                    type: "webhook.disabled",
                    data: { webhookId: d.webhookId, reason: d.reason, deliveryId: d.id, eventId: d.eventId },
                  },
                ])
              }
            }
            yield* sql`WITH r AS (
                SELECT * FROM json_to_recordset(${rows}::text::json) AS r(id text, tok text, n int, st text, code int,
                  ms int, err text, at timestamptz, nxt timestamptz, fin text)
              ), done AS (
                UPDATE webhook_deliveries d SET attempts = r.n,
                  status = CASE WHEN r.fin IS NOT NULL THEN r.fin WHEN d.status = 'paused' THEN 'paused' ELSE 'pending' END,
                  next_attempt_at = r.nxt, lease_token = NULL, updated_at = now()
                -- The id list keeps this a primary-key lookup even before the table has statistics.
                FROM r WHERE d.id IN ${sql.in(results.map((x) => x.delivery.id))} AND d.id = r.id AND d.lease_token = r.tok
                RETURNING d.id, d.webhook_id, d.event_id, d.event_type
              )
              INSERT INTO webhook_attempts (delivery_id, attempt, webhook_id, event_id, event_type, status, status_code,
                response_time_ms, error, attempted_at, next_retry_at)
              SELECT r.id, r.n, done.webhook_id, done.event_id, done.event_type, r.st, r.code, r.ms, r.err, r.at, r.nxt
              FROM r JOIN done ON done.id = r.id
              ON CONFLICT (delivery_id, attempt) DO NOTHING`
          }),
        )
      }, Effect.orDie)

      // Each existing webhook's earliest pending row (one descent of the index of 0034 each; a deleted webhook's rows
      // wait for the purge and are never claimed, and are not walked either), the earliest of those; and the same
      // among the webhooks below their shares in workspaces below theirs.
      const untilNextDue = (fairness?: ClaimFairness) => {
        const { share, hookShare, busy } = sharesOf(fairness, 2_147_483_647)
        return sql<{ due: number | null; claimable: number | null }>`WITH RECURSIVE ${pendingWorkspaces}, ${busy}
          SELECT (SELECT (extract(epoch FROM min(f.next_attempt_at) - now()) * 1000)::float8
              FROM ws JOIN webhooks h ON h.workspace_id = ws.workspace_id
              CROSS JOIN LATERAL (
                SELECT d.next_attempt_at FROM webhook_deliveries d
                WHERE d.workspace_id = ws.workspace_id AND d.webhook_id = h.id AND d.status = 'pending'
                ORDER BY d.next_attempt_at, d.event_sequence LIMIT 1
              ) f
              WHERE ws.workspace_id IS NOT NULL) AS due,
            (SELECT (extract(epoch FROM min(f.next_attempt_at) - now()) * 1000)::float8
              FROM ws LEFT JOIN busy b ON b.workspace_id = ws.workspace_id
              JOIN webhooks h ON h.workspace_id = ws.workspace_id
              LEFT JOIN busy_hooks bh ON bh.webhook_id = h.id
              CROSS JOIN LATERAL (
                SELECT d.next_attempt_at FROM webhook_deliveries d
                WHERE d.workspace_id = ws.workspace_id AND d.webhook_id = h.id AND d.status = 'pending'
                ORDER BY d.next_attempt_at, d.event_sequence LIMIT 1
              ) f
              WHERE ws.workspace_id IS NOT NULL AND coalesce(b.n, 0) < ${share}
                AND coalesce(bh.n, 0) < coalesce(bh.share, ${hookShare})) AS claimable`.pipe(
          Effect.map(
            (rows): NextDue => ({
              due: rows[0]?.due ?? undefined,
              claimable: rows[0]?.claimable ?? undefined,
            }),
          ),
          Effect.orDie,
        )
      }

      // Per webhook, so that each scan is a range of the (webhook_id, created_at) index.
      const purgeFinished = (before: string, limit = 10_000) =>
        sql
          .withTransaction(
            Effect.gen(function* () {
              const [lock] = yield* sql<{ got: boolean }>`SELECT pg_try_advisory_xact_lock(${PURGE_LOCK}) AS got`
              if (lock?.got !== true) return undefined
              // A deleted webhook's history first (WebhookService.remove leaves it here, out of its transaction).
              // `= ANY (ARRAY(...))`: the ids are gathered first (an init plan), then deleted by primary-key probes.
              // With `id IN (...)` the planner, its estimate the limit (webhooks_removed is small and rarely analysed),
              // hashed the ids and read the whole table beside them for each batch.
              const removed = yield* sql<{ id: string }>`DELETE FROM webhook_deliveries WHERE id = ANY (ARRAY(
                  SELECT d.id FROM webhooks_removed r CROSS JOIN LATERAL (
                    SELECT id FROM webhook_deliveries WHERE webhook_id = r.id LIMIT ${limit}
                  ) d LIMIT ${limit}))
                RETURNING id`
              if (removed.length < limit)
                yield* sql`DELETE FROM webhooks_removed r
                    WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = r.id)`
              const room = limit - removed.length
              if (room === 0) return removed.length
              // The same form: statistics taken before the last purge caught up still count the rows it deleted as
              // old, and `id IN (...)` then read the whole table to delete the few left.
              const old = yield* sql<{ id: string }>`DELETE FROM webhook_deliveries WHERE id = ANY (ARRAY(
                  SELECT d.id FROM webhooks w CROSS JOIN LATERAL (
                    SELECT id FROM webhook_deliveries
                    WHERE webhook_id = w.id AND status IN ('success', 'failed') AND created_at < ${before}::timestamptz
                    LIMIT ${room}
                  ) d LIMIT ${room}))
                RETURNING id`
              return removed.length + old.length
            }),
          )
          .pipe(Effect.orDie)

      return DeliveryQueue.of({
        claim,
        purgeFinished,
        attempt,
        record,
        untilNextDue,
        // After a gap in the notifications the workers look for due deliveries too.
        wakeups: (onWake, onRemoved) =>
          db.listen(
            WEBHOOKS_CHANNEL,
            (payload) => (payload.startsWith(REMOVED_PREFIX) ? onRemoved?.() : onWake()),
            () => {
              onWake()
              onRemoved?.()
            },
          ),
      })
    }),
  )
}
