import { Context, Deferred, Effect, Exit, Layer, Option } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Actor } from "../auth/Actor.ts"
import {
  type Claim,
  Idempotency,
  type IdempotencyKeyReused,
  type IdempotencyRequest,
  type Replayed,
} from "../idempotency/Idempotency.ts"
import { transactional } from "../shared/transaction.ts"
import type { AuditEvent, NewEvent } from "./AuditEvent.ts"
import { AuditLog } from "./AuditLog.ts"

/** One writer's append: its events, and the Idempotency-Key it was made under, if any. */
export interface AppendRequest {
  readonly actor: Actor
  readonly events: ReadonlyArray<NewEvent>
  readonly idempotency?: IdempotencyRequest | undefined
}

/** Stored events, or the earlier response of the same Idempotency-Key. */
export type AppendOutcome = ReadonlyArray<AuditEvent> | Replayed

/** A batch stops growing here; the rest waits for the next transaction. */
const MAX_BATCH_EVENTS = 2_000

interface Job {
  readonly request: AppendRequest
  readonly done: Deferred.Deferred<AppendOutcome, IdempotencyKeyReused>
}

interface Queue {
  pending: Array<Job>
}

/**
 * Group commit for the audit trail's hot path (event ingest). Concurrent
 * appends to one workspace are handed to a single writer per workspace and
 * process, which writes everything waiting in one transaction: one claim of
 * the idempotency keys, one lock of the chain head, one INSERT, one commit.
 * Each caller resumes only after that commit, so an answered append is
 * durable. Several processes serialise on the chain-head row lock, so the
 * chain stays linear under any concurrency.
 *
 * A batch that fails is retried one append at a time, so one bad append
 * fails alone. Inside a caller's transaction the append joins that
 * transaction instead (its change and its events commit together).
 */
export class EventAppender extends Context.Service<
  EventAppender,
  { readonly append: (request: AppendRequest) => Effect.Effect<AppendOutcome, IdempotencyKeyReused> }
>()("@agentgov/domain/audit/EventAppender") {
  static readonly layer = Layer.effect(
    EventAppender,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* AuditLog
      const idempotency = yield* Idempotency
      const inTransaction = transactional(sql)
      const queues = new Map<string, Queue>()

      /** Writes the given appends of one workspace in the current transaction; the outcome is per append. */
      const write = (workspaceId: string, requests: ReadonlyArray<AppendRequest>) =>
        Effect.gen(function* () {
          // Keys first, then the chain head: the lock order of the idempotency store.
          const keyed = requests.flatMap((r, i) => (r.idempotency ? [[i, r.idempotency] as const] : []))
          const claims = new Map<number, Claim | IdempotencyKeyReused>()
          const results = yield* idempotency.claimMany(
            workspaceId,
            keyed.map(([, k]) => k),
          )
          for (const [j, [i]] of keyed.entries()) claims.set(i, results[j]!)
          const writing = requests.flatMap((_, i) => {
            const claim = claims.get(i)
            return claim === undefined || ("claimed" in claim && claim.claimed) ? [i] : []
          })
          const stored = yield* audit.appendGroups(
            workspaceId,
            writing.map((i) => requests[i]!),
          )
          const outcomes: Array<Exit.Exit<AppendOutcome, IdempotencyKeyReused>> = requests.map(() => Exit.succeed([]))
          const responses: Array<{ key: string; status: number; body: string }> = []
          writing.forEach((i, j) => {
            const events = stored[j]!
            outcomes[i] = Exit.succeed(events)
            const key = requests[i]!.idempotency
            if (key) responses.push({ key: key.key, ...key.render(events) })
          })
          yield* idempotency.complete(workspaceId, responses)
          for (const [i, claim] of claims) {
            if (!("claimed" in claim)) outcomes[i] = Exit.fail(claim)
            else if (!claim.claimed) outcomes[i] = Exit.succeed(claim.replay)
          }
          return outcomes
        })

      const settle = (
        jobs: ReadonlyArray<Job>,
        outcomes: ReadonlyArray<Exit.Exit<AppendOutcome, IdempotencyKeyReused>>,
      ) => Effect.forEach(jobs, (job, i) => Deferred.done(job.done, outcomes[i]!), { discard: true })

      /** One transaction for the batch; when it fails, each append alone, so that only the bad one fails. */
      const commit = (workspaceId: string, jobs: ReadonlyArray<Job>): Effect.Effect<void> =>
        Effect.gen(function* () {
          const exit = yield* Effect.exit(
            inTransaction(
              write(
                workspaceId,
                jobs.map((j) => j.request),
              ),
            ),
          )
          if (Exit.isSuccess(exit)) return yield* settle(jobs, exit.value)
          if (jobs.length > 1)
            return yield* Effect.forEach(jobs, (job) => commit(workspaceId, [job]), { discard: true })
          yield* Deferred.done(jobs[0]!.done, exit as Exit.Exit<never>)
        })

      /** Takes the waiting appends up to the batch limit; an Idempotency-Key seen twice waits for the next batch. */
      const take = (queue: Queue): Array<Job> => {
        const batch: Array<Job> = []
        const rest: Array<Job> = []
        const keys = new Set<string>()
        let events = 0
        for (const job of queue.pending) {
          const key = job.request.idempotency?.key
          const fits = batch.length === 0 || events + job.request.events.length <= MAX_BATCH_EVENTS
          if (fits && (key === undefined || !keys.has(key))) {
            batch.push(job)
            events += job.request.events.length
            if (key !== undefined) keys.add(key)
          } else rest.push(job)
        }
        queue.pending = rest
        return batch
      }

      const drain = (workspaceId: string, queue: Queue): Effect.Effect<void> =>
        Effect.gen(function* () {
          while (queue.pending.length > 0) yield* commit(workspaceId, take(queue))
          // Checked and removed in one synchronous step: an append arriving later starts a new writer.
          queues.delete(workspaceId)
        })

      const append = Effect.fn("EventAppender.append")(function* (request: AppendRequest) {
        const workspaceId = request.actor.workspaceId
        if (Option.isSome(yield* Effect.serviceOption(sql.transactionService))) {
          const [outcome] = yield* write(workspaceId, [request]).pipe(Effect.orDie)
          return yield* outcome!
        }
        const done = yield* Deferred.make<AppendOutcome, IdempotencyKeyReused>()
        const queue = queues.get(workspaceId)
        if (queue) queue.pending.push({ request, done })
        else {
          const fresh: Queue = { pending: [{ request, done }] }
          queues.set(workspaceId, fresh)
          yield* Effect.forkDetach(drain(workspaceId, fresh).pipe(Effect.uninterruptible))
        }
        return yield* Deferred.await(done)
      })

      return EventAppender.of({ append })
    }),
  )
}
