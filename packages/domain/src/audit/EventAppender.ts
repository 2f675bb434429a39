import { Clock, Context, Deferred, Effect, Exit, Layer, Option } from "effect"
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
import { AuditLog, type ChainHead, type CompletedKey, type PreparedAppend, prepareAppend } from "./AuditLog.ts"
import { appendBatchHook } from "./batchHook.ts"
import { EventRepo } from "./EventRepo.ts"
import { activeTraceparent, callerTraceparent } from "./traceContext.ts"

/** One writer's append: its events, and the Idempotency-Key it was made under, if any. */
export interface AppendRequest {
  readonly actor: Actor
  readonly events: ReadonlyArray<NewEvent>
  readonly idempotency?: IdempotencyRequest | undefined
  /** Set by the appender when tracing is on (the caller's span): kept with the deliveries the events queue. */
  readonly traceparent?: string | undefined
}

/** Stored events, or the earlier response of the same Idempotency-Key. */
export type AppendOutcome = ReadonlyArray<AuditEvent> | Replayed

/** A batch stops growing here; the rest waits for the next transaction. */
const MAX_BATCH_EVENTS = 2_000

/** Workspaces whose chain head a process remembers (the map is cleared beyond). */
const MAX_REMEMBERED_HEADS = 10_000

type AppendExit = Exit.Exit<AppendOutcome, IdempotencyKeyReused>

interface Job {
  readonly request: AppendRequest
  /** Called once, with the append's outcome, after its batch committed (or failed). */
  readonly done: (exit: AppendExit) => void
}

/** Events in a batch, for the batch hook only (appendBatchHook). */
const eventsIn = (jobs: ReadonlyArray<Job>) => {
  let n = 0
  for (const j of jobs) n += j.request.events.length
  return n
}

interface Queue {
  pending: Array<Job>
}

/**
 * What a fast batch came to: written (and the head after it), refused (nothing written), or not known (its
 * statement's failure).
 */
type FastOutcome =
  | { readonly written: PreparedAppend; readonly head: ChainHead }
  | { readonly refused: true }
  | { readonly unknown: Exit.Exit<never> }

/**
 * Group commit for the audit trail's hot paths (event ingest, the guard).
 * Concurrent appends to one workspace are handed to a single writer per
 * workspace and process, which writes everything waiting as one batch. Each
 * caller resumes only after its batch committed, so an answered append is
 * durable.
 *
 * A batch takes the fast path: the writer keeps the chain's head in memory,
 * numbers and hashes the batch after it, renders the responses of its
 * Idempotency-Keys, and writes it all in one statement (one round trip, its
 * own transaction) that claims the keys and moves the head only if every key
 * was free and the head is still the one predicted (`AuditLog.appendAtNow`).
 * Writers of other processes serialise on the head's row lock, so the chain
 * stays linear under any concurrency: a batch whose head moved, or that
 * carries a key already taken (a retry), writes nothing and goes again. A
 * batch whose statement failed goes again only once the chain shows it was
 * not written (see `fast`): its COMMIT may have gone through all the same.
 *
 * Again means the locked path, as for the first batch of an unknown head:
 * one transaction that claims the keys (replaying or refusing the taken
 * ones), locks the head, appends, completes the keys and commits. A locked
 * batch that fails is retried one append at a time, so one bad append fails
 * alone. Inside a caller's transaction the append joins that transaction
 * instead (its change and its events commit together).
 */
export class EventAppender extends Context.Service<
  EventAppender,
  {
    readonly append: (request: AppendRequest) => Effect.Effect<AppendOutcome, IdempotencyKeyReused>
    /**
     * `append` for callers outside an Effect runtime and outside any transaction (the guard's fast path):
     * the same group commit, answered as a promise of its outcome.
     */
    readonly appendNow: (request: AppendRequest) => Promise<AppendExit>
  }
>()("@agentgov/domain/audit/EventAppender") {
  static readonly layer = Layer.effect(
    EventAppender,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* AuditLog
      const repo = yield* EventRepo
      const idempotency = yield* Idempotency
      const inTransaction = transactional(sql)
      const clock = yield* Clock.Clock
      // The writers run on this layer's services, whoever started them: they outlive the request.
      const runExit = Effect.runPromiseExitWith(yield* Effect.context<never>())
      const queues = new Map<string, Queue>()
      /**
       * Per workspace, the head after this process's last append: what the fast path hashes after. Absent
       * when not known; a wrong one costs one refused statement.
       */
      const heads = new Map<string, ChainHead>()
      const remember = (workspaceId: string, head: ChainHead | undefined) => {
        if (head === undefined) return heads.delete(workspaceId)
        if (heads.size >= MAX_REMEMBERED_HEADS) heads.clear()
        heads.set(workspaceId, head)
      }

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
          const outcomes: Array<AppendExit> = requests.map(() => Exit.succeed([]))
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
          const last = stored.flat().at(-1)
          const head: ChainHead | undefined = last ? { sequence: last.sequence, hash: last.hash } : undefined
          return { outcomes, head }
        })

      const settle = (jobs: ReadonlyArray<Job>, outcomes: ReadonlyArray<AppendExit>) => {
        for (let i = 0; i < jobs.length; i++) jobs[i]!.done(outcomes[i]!)
      }

      /**
       * The locked path: one transaction for the batch; when it fails, each append alone, so that only the
       * bad one fails. The head after it, when it appended anything and that is known.
       */
      const commit = (workspaceId: string, jobs: ReadonlyArray<Job>): Effect.Effect<ChainHead | undefined> =>
        Effect.gen(function* () {
          const exit = yield* Effect.exit(
            inTransaction(
              write(
                workspaceId,
                jobs.map((j) => j.request),
              ),
            ),
          )
          if (Exit.isSuccess(exit)) {
            settle(jobs, exit.value.outcomes)
            return exit.value.head
          }
          if (jobs.length > 1) {
            yield* Effect.forEach(jobs, (job) => commit(workspaceId, [job]), { discard: true })
            return undefined
          }
          jobs[0]!.done(exit as Exit.Exit<never>)
          return undefined
        })

      /**
       * The fast path: the batch after `after`, in one statement sent straight to the pool (no fiber). Its events
       * when written, `refused` when it wrote nothing (or could not be prepared, so was never sent), and the
       * statement's failure when whether it wrote cannot be told.
       *
       * A statement can fail after its COMMIT went through (the connection lost before the answer came):
       * then the batch is in the chain and must not go to the locked path, which would write it again. Its
       * last event tells: present with its hash, the batch was written; absent, it was not. When that cannot
       * be read either, the appends are answered with the failure rather than risk a second copy.
       */
      const fast = async (workspaceId: string, jobs: ReadonlyArray<Job>, after: ChainHead): Promise<FastOutcome> => {
        let prepared: PreparedAppend
        let keys: Array<CompletedKey>
        try {
          prepared = prepareAppend(
            workspaceId,
            jobs.map((j) => j.request),
            after,
            clock.currentTimeMillisUnsafe(),
          )
          keys = jobs.flatMap((job, i): Array<CompletedKey> => {
            const key = job.request.idempotency
            if (!key) return []
            const { status, body } = key.render(prepared.stored[i]!)
            return [{ key: key.key, operation: key.operation, requestHash: key.requestHash, status, body }]
          })
        } catch {
          return { refused: true }
        }
        try {
          const head = await audit.appendAtNow(workspaceId, prepared, after, keys)
          return head ? { written: prepared, head } : { refused: true }
        } catch (error) {
          const held = await runExit(repo.holds(workspaceId, prepared.head))
          if (Exit.isFailure(held)) return { unknown: Exit.die(error) }
          return held.value ? { written: prepared, head: prepared.head } : { refused: true }
        }
      }

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

      /**
       * A workspace's writer: plain code on the common path (the head known, the batch written in one
       * statement), the runtime only for a head to read, a doubt to settle or the locked path. It never
       * rejects: every job it takes is settled.
       */
      const drain = async (workspaceId: string, queue: Queue): Promise<void> => {
        /** After a refused or failed fast batch, the next one takes the lock: it cannot lose again. */
        let lock = false
        while (queue.pending.length > 0) {
          if (!lock) {
            if (!heads.has(workspaceId)) {
              const read = await runExit(repo.head(workspaceId))
              if (Exit.isSuccess(read)) remember(workspaceId, read.value)
            }
            const head = heads.get(workspaceId)
            if (head !== undefined) {
              const jobs = take(queue)
              const hook = appendBatchHook.current
              const outcome = hook
                ? await hook(jobs.length, eventsIn(jobs), () => fast(workspaceId, jobs, head))
                : await fast(workspaceId, jobs, head)
              if ("unknown" in outcome) {
                // Whether the batch was written cannot be told: answered with the failure, not written twice.
                settle(
                  jobs,
                  jobs.map(() => outcome.unknown),
                )
                remember(workspaceId, undefined)
              } else if ("written" in outcome) {
                settle(
                  jobs,
                  outcome.written.stored.map((events) => Exit.succeed(events)),
                )
                remember(workspaceId, outcome.head)
              } else {
                // Another writer moved the head, a key was taken, a webhook was enabled since the head counted none,
                // the batch failed without writing, or could not be prepared: the locked path, in order, ahead of
                // the rest.
                queue.pending.unshift(...jobs)
                remember(workspaceId, undefined)
                lock = true
              }
              continue
            }
          }
          const jobs = take(queue)
          const hook = appendBatchHook.current
          const committed = hook
            ? await hook(jobs.length, eventsIn(jobs), () => runExit(commit(workspaceId, jobs)))
            : await runExit(commit(workspaceId, jobs))
          if (Exit.isFailure(committed))
            settle(
              jobs,
              jobs.map(() => committed as Exit.Exit<never>),
            )
          remember(workspaceId, Exit.isSuccess(committed) ? committed.value : undefined)
          lock = false
        }
        // Checked and removed in one synchronous step: an append arriving later starts a new writer.
        queues.delete(workspaceId)
      }

      const enqueue = (job: Job) => {
        const workspaceId = job.request.actor.workspaceId
        const queue = queues.get(workspaceId)
        if (queue) queue.pending.push(job)
        else {
          const fresh: Queue = { pending: [job] }
          queues.set(workspaceId, fresh)
          void drain(workspaceId, fresh)
        }
      }

      const append = Effect.fn("EventAppender.append")(function* (given: AppendRequest) {
        // Tracing off: one property read, no effect.
        const traceparent = activeTraceparent.current === undefined ? undefined : yield* callerTraceparent
        const request = traceparent === undefined ? given : { ...given, traceparent }
        if (Option.isSome(yield* Effect.serviceOption(sql.transactionService))) {
          const workspaceId = request.actor.workspaceId
          const { outcomes } = yield* write(workspaceId, [request]).pipe(Effect.orDie)
          // This write moves the head behind the fast path's back; forgetting it spares a refused statement.
          remember(workspaceId, undefined)
          return yield* outcomes[0]!
        }
        const done = yield* Deferred.make<AppendOutcome, IdempotencyKeyReused>()
        enqueue({ request, done: (exit) => Deferred.doneUnsafe(done, exit) })
        return yield* Deferred.await(done)
      })

      const appendNow = (given: AppendRequest) => {
        const traceparent = activeTraceparent.current?.()
        const request = traceparent === undefined ? given : { ...given, traceparent }
        return new Promise<AppendExit>((done) => enqueue({ request, done }))
      }

      return EventAppender.of({ append, appendNow })
    }),
  )
}
