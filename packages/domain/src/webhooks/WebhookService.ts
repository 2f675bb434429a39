import { randomBytes } from "node:crypto"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { AuditLog } from "../audit/AuditLog.ts"
import { compileFilters } from "../audit/eventFilters.ts"
import type { Actor } from "../auth/Actor.ts"
import {
  Idempotency,
  type IdempotencyKeyReused,
  type IdempotencyRequest,
  type Replayed,
} from "../idempotency/Idempotency.ts"
import { MasterKey } from "../keys/SigningKeys.ts"
import { seal, unseal } from "../keys/sealed.ts"
import { InvalidInput, StateConflict } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { DEFAULT_LIMIT, idCursor, type Page, type PageRequest, pageWindow, toPage } from "../shared/pagination.ts"
import { InvalidCursor } from "../shared/paginationErrors.ts"
import { requireStorable } from "../shared/storable.ts"
import { nowIso } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { secretAad } from "./DeliveryQueue.ts"
import { sampleEvent } from "./samples.ts"
import { scaledSchedule } from "./schedules.ts"
import { envelopeBody, signatureHeaders } from "./signing.ts"
import { checkUrlSyntax, resolveTarget } from "./targets.ts"
import {
  type CreateWebhook,
  DEFAULT_SECRET_OVERLAP_SECONDS,
  MAX_REDELIVER,
  type Redeliver,
  type RedeliverResult,
  type RotateWebhookSecret,
  type TestResult,
  UPDATABLE_WEBHOOK_FIELDS,
  type UpdateWebhook,
  type Webhook,
  type WebhookDelivery,
  type WebhookWithSecret,
} from "./Webhook.ts"
import { WebhookClient } from "./WebhookClient.ts"
import { WebhookNotFound } from "./WebhookErrors.ts"
import { type AttemptPosition, type StoredWebhook, WebhookRepo } from "./WebhookRepo.ts"
import { WebhookSettings } from "./WebhookSettings.ts"

/** Webhooks one workspace may have: every event is matched against each enabled one in its append. */
export const MAX_WEBHOOKS_PER_WORKSPACE = 100

/** DNS at registration waits this long at most; a host that does not answer in time is checked at delivery. */
const REGISTRATION_DNS_MS = 5_000

export interface WebhookListFilter extends PageRequest {
  readonly enabled?: boolean | undefined
}

export interface WebhookGetOptions {
  readonly includeDeliveries?: boolean | undefined
  readonly limit?: number | undefined
}

/**
 * The cursor of a webhook's delivery history: the last attempt shown, by its place (attempted_at to the microsecond,
 * delivery id, attempt number), so that pages continue exactly after it while new attempts arrive.
 */
const encodeAttemptCursor = (p: AttemptPosition) =>
  Buffer.from(`v1:${p.atMicros}:${p.deliveryId}:${p.attempt}`).toString("base64url")

const decodeAttemptCursor = (cursor: string): AttemptPosition | InvalidCursor => {
  const m = /^v1:(-?\d{1,18}):(dlv_[0-9a-z]+):(\d{1,9})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"))
  return m ? { atMicros: m[1]!, deliveryId: m[2]!, attempt: Number(m[3]) } : new InvalidCursor({})
}

const generateSecret = () => `whsec_${randomBytes(24).toString("base64url")}`
const hintOf = (secret: string) => `…${secret.slice(-4)}`
/** What the audit trail records of a URL: its path and query often carry the receiver's own credentials. */
const originOf = (url: string) => new URL(url).origin

/**
 * Webhooks (D9): endpoints that receive the workspace's events, signed with
 * a secret that is shown once (it is kept sealed with the master key, since
 * signing needs it). Registration checks the URL against the target policy
 * (SSRF); a change to which webhooks are enabled takes the chain-head lock, so
 * every event appended after it commits is matched against it. Deliveries
 * themselves are written by the append (AuditLog) and sent by workers
 * (DeliveryQueue).
 */
export class WebhookService extends Context.Service<
  WebhookService,
  {
    readonly create: (
      actor: Actor,
      input: CreateWebhook,
      idempotency?: IdempotencyRequest,
    ) => Effect.Effect<WebhookWithSecret | Replayed, InvalidInput | StateConflict | IdempotencyKeyReused>
    readonly list: (actor: Actor, filter: WebhookListFilter) => Effect.Effect<Page<Webhook>, InvalidCursor>
    readonly get: (actor: Actor, id: string, options?: WebhookGetOptions) => Effect.Effect<Webhook, WebhookNotFound>
    /** The webhook's delivery attempts, newest first, a page at a time. */
    readonly deliveries: (
      actor: Actor,
      id: string,
      page: PageRequest,
    ) => Effect.Effect<Page<WebhookDelivery>, WebhookNotFound | InvalidCursor>
    readonly update: (
      actor: Actor,
      id: string,
      patch: UpdateWebhook,
    ) => Effect.Effect<Webhook, WebhookNotFound | InvalidInput>
    readonly remove: (actor: Actor, id: string) => Effect.Effect<Webhook, WebhookNotFound>
    readonly rotate: (
      actor: Actor,
      id: string,
      input: RotateWebhookSecret,
    ) => Effect.Effect<WebhookWithSecret, WebhookNotFound | InvalidInput>
    /** Sends a sample event of `eventType` now, signed as real deliveries are; nothing is stored. */
    readonly test: (
      actor: Actor,
      id: string,
      eventType: string,
    ) => Effect.Effect<TestResult, WebhookNotFound | InvalidInput>
    readonly redeliver: (
      actor: Actor,
      id: string,
      input: Redeliver,
    ) => Effect.Effect<RedeliverResult, WebhookNotFound | InvalidInput | StateConflict>
  }
>()("@agentgov/domain/webhooks/WebhookService") {
  static readonly layer = Layer.effect(
    WebhookService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* WebhookRepo
      const idempotencyStore = yield* Idempotency
      const { key: master } = yield* MasterKey
      const settings = yield* WebhookSettings
      const client = yield* WebhookClient
      const audit = yield* AuditLog
      const tx = transactional(sql)

      const present = (w: StoredWebhook, stats: Webhook["stats"]): Webhook => ({
        id: w.id,
        url: w.url,
        events: w.events,
        description: w.description,
        retryPolicy: w.retryPolicy,
        enabled: w.enabled,
        disabledReason: w.disabledReason,
        disabledAt: w.disabledAt,
        secretHint: w.secretHint,
        previousSecretExpiresAt: w.previousSecretExpiresAt,
        createdAt: w.createdAt,
        updatedAt: w.updatedAt,
        stats,
      })
      const withStats = (ws: ReadonlyArray<StoredWebhook>) =>
        Effect.map(repo.stats(ws.map((w) => w.id)), (stats) => ws.map((w) => present(w, stats.get(w.id)!)))

      /** The URL's syntax, then its host's addresses against the target policy (unresolvable hosts pass). */
      const checkTarget = (raw: string, workspaceId: string) =>
        Effect.gen(function* () {
          const syntax = checkUrlSyntax(raw)
          if ("issue" in syntax) return yield* new InvalidInput({ field: "url", message: syntax.issue })
          const judged = yield* Effect.promise(() =>
            resolveTarget(settings.targets, syntax.url, settings.resolver, workspaceId),
          ).pipe(Effect.timeoutOption(REGISTRATION_DNS_MS))
          if (judged._tag === "Some" && !judged.value.ok && judged.value.unresolved !== true)
            return yield* new InvalidInput({ field: "url", message: judged.value.issue })
          return syntax.url.href
        })

      const filtersOf = (events: ReadonlyArray<string>) => {
        const r = compileFilters(events)
        return r.ok
          ? Effect.succeed(r)
          : Effect.fail(new InvalidInput({ field: `events[${r.index}]`, message: r.issue }))
      }

      const load = (actor: Actor, id: string, lock = false) =>
        Effect.gen(function* () {
          const w = yield* (lock ? repo.findForUpdate : repo.find)(actor.workspaceId, id)
          if (!w) return yield* new WebhookNotFound({ webhookId: id })
          return w
        })

      /** The executor's Idempotency-Key semantics, in a transaction that starts after the slow checks. */
      const idempotent = <A, E, R>(
        actor: Actor,
        idempotency: IdempotencyRequest | undefined,
        run: Effect.Effect<A, E, R>,
      ): Effect.Effect<A | Replayed, E | IdempotencyKeyReused, R> =>
        tx(idempotencyStore.within(actor.workspaceId, idempotency, run))

      const create = Effect.fn("WebhookService.create")(function* (
        actor: Actor,
        input: CreateWebhook,
        idempotency?: IdempotencyRequest,
      ) {
        yield* requireStorable(input)
        const { events, compiled } = yield* filtersOf(input.events)
        const url = yield* checkTarget(input.url, actor.workspaceId)
        const secret = input.secret ?? generateSecret()
        const now = yield* nowIso
        const id = newId("whk")
        const enabled = input.enabled ?? true
        const stored: StoredWebhook = {
          id,
          workspaceId: actor.workspaceId,
          url,
          events,
          compiled,
          description: input.description ?? null,
          retryPolicy: input.retryPolicy ?? "exponential",
          enabled,
          disabledReason: enabled ? null : "disabled_by_user",
          disabledAt: enabled ? null : now,
          secret: seal(master, secretAad(id), Buffer.from(secret, "utf8")),
          secretHint: hintOf(secret),
          previousSecret: null,
          previousSecretExpiresAt: null,
          createdAt: now,
          updatedAt: now,
        }
        return yield* idempotent(
          actor,
          idempotency,
          Effect.gen(function* () {
            yield* repo.lockHead(actor.workspaceId)
            if ((yield* repo.count(actor.workspaceId)) >= MAX_WEBHOOKS_PER_WORKSPACE)
              return yield* new StateConflict({
                code: "WEBHOOK_LIMIT_REACHED",
                message: `a workspace has at most ${MAX_WEBHOOKS_PER_WORKSPACE} webhooks; delete one first`,
              })
            yield* repo.insert(stored)
            yield* repo.syncHead(actor.workspaceId)
            yield* audit.append(actor, [
              {
                type: "webhook.created",
                data: {
                  webhookId: id,
                  origin: originOf(url),
                  events,
                  retryPolicy: stored.retryPolicy,
                  enabled,
                },
              },
            ])
            const result: WebhookWithSecret = {
              ...present(stored, { total: 0, successful: 0, failed: 0, successRate: 0 }),
              secret,
            }
            return result
          }),
        )
      })

      const list = Effect.fn("WebhookService.list")(function* (actor: Actor, filter: WebhookListFilter) {
        const { limit, before } = yield* pageWindow(filter, idCursor("whk"))
        const rows = yield* repo.list(actor.workspaceId, { enabled: filter.enabled, before, limit: limit + 1 })
        const page = toPage(rows, limit)
        return { data: yield* withStats(page.data), meta: page.meta }
      })

      const get = Effect.fn("WebhookService.get")(function* (
        actor: Actor,
        id: string,
        options: WebhookGetOptions = {},
      ) {
        const w = yield* load(actor, id)
        const [webhook] = yield* withStats([w])
        if (!options.includeDeliveries) return webhook!
        const recent = yield* repo.attempts(w.id, { limit: options.limit ?? DEFAULT_LIMIT })
        return { ...webhook!, deliveries: recent.map((a) => a.delivery) }
      })

      const deliveries = Effect.fn("WebhookService.deliveries")(function* (
        actor: Actor,
        id: string,
        page: PageRequest,
      ) {
        const { limit, before } = yield* pageWindow(page, decodeAttemptCursor)
        const w = yield* load(actor, id)
        const rows = yield* repo.attempts(w.id, { before, limit: limit + 1 })
        const { data, meta } = toPage(rows, limit, (last) => encodeAttemptCursor(last.position))
        return { data: data.map((a) => a.delivery), meta }
      })

      const update = Effect.fn("WebhookService.update")(function* (actor: Actor, id: string, patch: UpdateWebhook) {
        yield* requireStorable(patch)
        const filters = patch.events === undefined ? undefined : yield* filtersOf(patch.events)
        const url = patch.url === undefined ? undefined : yield* checkTarget(patch.url, actor.workspaceId)
        const updated = yield* tx(
          Effect.gen(function* () {
            yield* repo.lockHead(actor.workspaceId)
            const current = yield* load(actor, id, true)
            const now = yield* nowIso
            const enabled = patch.enabled ?? current.enabled
            const next: StoredWebhook = {
              ...current,
              ...(url === undefined ? {} : { url }),
              ...(filters === undefined ? {} : { events: filters.events, compiled: filters.compiled }),
              ...(patch.description === undefined ? {} : { description: patch.description }),
              ...(patch.retryPolicy === undefined ? {} : { retryPolicy: patch.retryPolicy }),
              enabled,
              disabledReason: enabled ? null : current.enabled ? "disabled_by_user" : current.disabledReason,
              disabledAt: enabled ? null : current.enabled ? now : current.disabledAt,
              updatedAt: now,
            }
            const changes = UPDATABLE_WEBHOOK_FIELDS.filter(
              (f) => JSON.stringify(next[f]) !== JSON.stringify(current[f]),
            )
            if (changes.length === 0) return current
            yield* repo.update(next)
            if (enabled !== current.enabled) {
              yield* repo.syncHead(actor.workspaceId)
              if (enabled) yield* repo.resumeDeliveries(actor.workspaceId, id)
              else yield* repo.pauseDeliveries(actor.workspaceId, id)
            }
            const data: Record<string, unknown> = { webhookId: id, changes }
            for (const f of changes)
              if (f === "url") data.origin = originOf(next.url)
              else data[f] = next[f]
            yield* audit.append(actor, [{ type: "webhook.updated", data }])
            return next
          }),
        )
        return (yield* withStats([updated]))[0]!
      })

      const remove = Effect.fn("WebhookService.remove")(function* (actor: Actor, id: string) {
        return yield* tx(
          Effect.gen(function* () {
            // The history's counts before the head is taken: with a long history, counting it is no work to hold
            // every append of the workspace for. The history itself is left to the workers' purge (repo.remove).
            const stats = yield* repo.stats([id])
            yield* repo.lockHead(actor.workspaceId)
            const current = yield* load(actor, id, true)
            const webhook = present(current, stats.get(id)!)
            yield* repo.remove(actor.workspaceId, id)
            yield* repo.syncHead(actor.workspaceId)
            yield* audit.append(actor, [
              { type: "webhook.deleted", data: { webhookId: id, origin: originOf(current.url) } },
            ])
            return webhook
          }),
        )
      })

      const rotate = Effect.fn("WebhookService.rotate")(function* (
        actor: Actor,
        id: string,
        input: RotateWebhookSecret,
      ) {
        yield* requireStorable(input)
        const secret = input.secret ?? generateSecret()
        const overlap = input.overlapSeconds ?? DEFAULT_SECRET_OVERLAP_SECONDS
        const updated = yield* tx(
          Effect.gen(function* () {
            // The lock order of every webhook change (the event's append takes the head): head, then the row.
            yield* repo.lockHead(actor.workspaceId)
            const current = yield* load(actor, id, true)
            const now = yield* Clock.currentTimeMillis
            const next: StoredWebhook = {
              ...current,
              secret: seal(master, secretAad(id), Buffer.from(secret, "utf8")),
              secretHint: hintOf(secret),
              // One overlap at a time: the secret being replaced becomes the previous one, an older one is dropped.
              previousSecret: overlap > 0 ? current.secret : null,
              previousSecretExpiresAt: overlap > 0 ? new Date(now + overlap * 1000).toISOString() : null,
              updatedAt: new Date(now).toISOString(),
            }
            yield* repo.update(next)
            yield* audit.append(actor, [
              { type: "webhook.secret.rotated", data: { webhookId: id, overlapSeconds: overlap } },
            ])
            return next
          }),
        )
        const [webhook] = yield* withStats([updated])
        const result: WebhookWithSecret = { ...webhook!, secret }
        return result
      })

      const test = Effect.fn("WebhookService.test")(function* (actor: Actor, id: string, eventType: string) {
        const w = yield* load(actor, id)
        const now = yield* Clock.currentTimeMillis
        const attemptedAt = new Date(now).toISOString()
        const sample = sampleEvent(eventType, attemptedAt)
        if (!sample)
          return yield* new InvalidInput({
            field: "eventType",
            message: "not a system event name: test deliveries send the events of docs/events.md (or an alias)",
          })
        const current = unseal(master, secretAad(w.id), w.secret)
        if (current === undefined)
          return yield* Effect.die(new Error(`the secret of webhook ${w.id} cannot be opened with this master key`))
        const overlapping = w.previousSecret !== null && Date.parse(w.previousSecretExpiresAt ?? "") > now
        const previous = overlapping ? unseal(master, secretAad(w.id), w.previousSecret!) : undefined
        const deliveryId = newId("dlv")
        const eventId = newId("evt")
        const body = envelopeBody({
          eventId,
          type: sample.type,
          timestamp: attemptedAt,
          workspaceId: actor.workspaceId,
          dataJson: JSON.stringify(sample.data),
          deliveryId,
          webhookId: w.id,
          attempt: 1,
        })
        const headers = signatureHeaders(
          { current: current.toString("utf8"), previous: previous?.toString("utf8") },
          deliveryId,
          Math.floor(now / 1000),
          body,
        )
        const outcome = yield* Effect.promise(() =>
          client.send({
            url: w.url,
            headers,
            body,
            timeoutMs: scaledSchedule(w.retryPolicy, settings.timeScale).timeoutMs,
            workspaceId: actor.workspaceId,
          }),
        )
        const result: TestResult = {
          delivered: outcome.success,
          delivery: {
            id: deliveryId,
            eventId,
            eventType: sample.type,
            status: outcome.success ? "success" : "failed",
            ...(outcome.statusCode === undefined ? {} : { statusCode: outcome.statusCode }),
            responseTimeMs: outcome.responseTimeMs,
            attempt: 1,
            attemptedAt: new Date(outcome.startedAt).toISOString(),
            ...(outcome.error === undefined ? {} : { error: outcome.error }),
          },
        }
        return result
      })

      const redeliver = Effect.fn("WebhookService.redeliver")(function* (actor: Actor, id: string, input: Redeliver) {
        yield* requireStorable(input)
        if (input.deliveryIds === undefined && input.since === undefined && input.until === undefined)
          return yield* new InvalidInput({
            field: "deliveryIds",
            message: "name the deliveries to re-send: deliveryIds, since or until",
          })
        if (
          input.since !== undefined &&
          input.until !== undefined &&
          Date.parse(input.since) >= Date.parse(input.until)
        )
          return yield* new InvalidInput({ field: "until", message: "must be later than since" })
        const ids = input.deliveryIds === undefined ? undefined : [...new Set(input.deliveryIds)]
        return yield* tx(
          Effect.gen(function* () {
            // The event's append takes the head: first, as in every webhook change.
            yield* repo.lockHead(actor.workspaceId)
            const w = yield* load(actor, id, true)
            if (!w.enabled)
              return yield* new StateConflict({
                code: "WEBHOOK_DISABLED",
                message: `webhook ${id} is disabled; enable it (PATCH enabled: true) before re-sending`,
              })
            let skipped: RedeliverResult["skipped"] = []
            if (ids !== undefined) {
              const found = yield* repo.deliveries(w.id, ids)
              const byId = new Map(found.map((d) => [d.id, d]))
              const missing = input.deliveryIds!.findIndex((d) => !byId.has(d))
              if (missing >= 0)
                return yield* new InvalidInput({
                  field: `deliveryIds[${missing}]`,
                  message: "no delivery of this webhook has this id",
                })
              skipped = found.flatMap((d) => (d.status === "failed" ? [] : [{ id: d.id, status: d.status }]))
            }
            const { queued, hasMore } = yield* repo.requeueFailed(actor.workspaceId, w.id, {
              ids,
              since: input.since,
              until: input.until,
              limit: MAX_REDELIVER,
            })
            if (queued.length > 0)
              yield* audit.append(actor, [
                { type: "webhook.redelivered", data: { webhookId: w.id, queued: queued.length } },
              ])
            const result: RedeliverResult = {
              queued: queued.map((d) => ({
                id: d.id,
                eventId: d.eventId,
                eventType: d.eventType,
                attempt: d.attempts + 1,
              })),
              skipped,
              hasMore,
            }
            return result
          }),
        )
      })

      return WebhookService.of({ create, list, get, deliveries, update, remove, rotate, test, redeliver })
    }),
  )
}
