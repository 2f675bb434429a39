import { canonicalize, GENESIS_HASH, TreeBuilder } from "@agentgov/verifier"
import { Clock, Context, Deferred, Effect, Layer, Schema, Semaphore } from "effect"
import { AgentRepo } from "../agents/AgentRepo.ts"
import type { Actor } from "../auth/Actor.ts"
import { type IdempotencyKeyReused, type IdempotencyRequest, Replayed } from "../idempotency/Idempotency.ts"
import { InvalidInput, PermissionDenied } from "../shared/errors.ts"
import { type Page, pageWindow, toPage } from "../shared/pagination.ts"
import { InvalidCursor } from "../shared/paginationErrors.ts"
import { isTimestamp } from "../shared/schemas.ts"
import { requireStorable } from "../shared/storable.ts"
import type { AuditEvent, NewEvent } from "./AuditEvent.ts"
import type { ChainCheckTrigger } from "./ChainAlarm.ts"
import { ChainAlarm } from "./ChainAlarm.ts"
import {
  type EventQueryInput,
  type IngestEvent,
  type IngestResult,
  MAX_EVENT_DATA_BYTES,
  type Verification,
} from "./Event.ts"
import { EventAppender } from "./EventAppender.ts"
import { EventNotFound } from "./EventErrors.ts"
import { type ChainRow, chainLinkProblem, EventRepo, leafEventOf, type SignedRoot } from "./EventRepo.ts"
import {
  eventDataSchema,
  INGESTED_EVENT_TYPE,
  isAgentReported,
  isSystemEvent,
  systemNamespaceOf,
} from "./eventCatalog.ts"
import { compileFilters } from "./eventFilters.ts"
import { MerkleStore, STORED_LEVEL } from "./MerkleStore.ts"

/** Events whose signed checkpoints a verification reads at once, and whose completed subtrees it stores at once. */
const VERIFY_BATCH = 10_000

// Events page by sequence, the chain's own order, not by id.
const encodeSequenceCursor = (sequence: number) => Buffer.from(`e1:${sequence}`).toString("base64url")
const decodeSequenceCursor = (cursor: string): number | InvalidCursor => {
  const m = /^e1:(\d{1,15})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"))
  return m ? Number(m[1]) : new InvalidCursor({})
}

const ingestResult = (stored: ReadonlyArray<AuditEvent>): IngestResult => ({
  events: stored.map((e) => ({ id: e.id, sequence: e.sequence, hash: e.hash, timestamp: e.timestamp })),
})

/**
 * The audit trail seen from outside: batch ingest of the clients' own events
 * (atomic, 1–100), queries, and verification of the hash chain (D8).
 */
export class EventService extends Context.Service<
  EventService,
  {
    /** Group-committed (EventAppender); under an Idempotency-Key a retry replays the first response. */
    readonly ingest: (
      actor: Actor,
      events: ReadonlyArray<IngestEvent>,
      idempotency?: IdempotencyRequest,
    ) => Effect.Effect<IngestResult | Replayed, InvalidInput | PermissionDenied | IdempotencyKeyReused>
    readonly list: (
      actor: Actor,
      q: EventQueryInput,
    ) => Effect.Effect<Page<AuditEvent>, InvalidCursor | PermissionDenied | InvalidInput>
    readonly get: (actor: Actor, id: string) => Effect.Effect<AuditEvent, EventNotFound>
    /**
     * Recomputes the workspace's chain from its first event, and its Merkle root at every signed checkpoint's
     * size, and records the result; a broken chain is raised (`ChainAlarm`).
     */
    /**
     * Rehashes the whole chain and checks it against every signed root. With `storeTree`, the Merkle subtrees
     * it hashes on the way over events that verified are stored (`MerkleStore.store`), so that a checkpoint
     * taken next hashes only what came after: what a compliance report does, at the cost of one pass.
     */
    readonly verify: (
      actor: Actor,
      trigger: ChainCheckTrigger,
      options?: { readonly storeTree?: boolean },
    ) => Effect.Effect<Verification>
  }
>()("@agentgov/domain/audit/EventService") {
  static readonly layer = Layer.effect(
    EventService,
    Effect.gen(function* () {
      const repo = yield* EventRepo
      const appender = yield* EventAppender
      const agents = yield* AgentRepo
      const alarm = yield* ChainAlarm
      const merkle = yield* MerkleStore

      const ingest = Effect.fn("EventService.ingest")(function* (
        actor: Actor,
        events: ReadonlyArray<IngestEvent>,
        idempotency?: IdempotencyRequest,
      ) {
        yield* requireStorable(events, ["events"])
        const agentIds = new Set<string>()
        const prepared: Array<NewEvent> = []
        for (const [i, e] of events.entries()) {
          if (!INGESTED_EVENT_TYPE.test(e.type)) {
            return yield* new InvalidInput({
              field: `events[${i}].type`,
              message: "must be lowercase.dotted, e.g. tool.called",
            })
          }
          const namespace = systemNamespaceOf(e.type)
          if (isAgentReported(e.type)) {
            // Reported system events (the MCP gateway's): only for the credential's own agent, and only with
            // data a subscriber can rely on, since they reach `mcp.*` subscribers like the service's own.
            if (actor.agentId === undefined || (e.agentId !== undefined && e.agentId !== actor.agentId)) {
              return yield* new PermissionDenied({
                message: `events[${i}]: "${e.type}" is reported by an agent-bound credential, for its own agent`,
                field: `events[${i}].type`,
                issue: "needs an agent-bound credential",
              })
            }
            const data = e.data as { readonly agentId?: unknown }
            if (!Schema.is(eventDataSchema(e.type)!)(e.data) || data.agentId !== actor.agentId) {
              return yield* new InvalidInput({
                field: `events[${i}].data`,
                message: `does not match the data schema of "${e.type}" for this credential's agent (docs/events.md)`,
              })
            }
          } else if (namespace !== undefined) {
            return yield* new InvalidInput({
              field: `events[${i}].type`,
              message: isSystemEvent(e.type)
                ? `"${e.type}" is a system event name`
                : `"${e.type}" is in the system's "${namespace}.*" namespace; name custom events under another first segment`,
            })
          }
          if (actor.agentId !== undefined && e.agentId !== undefined && e.agentId !== actor.agentId) {
            return yield* new PermissionDenied({
              message: `events[${i}].agentId: this credential is bound to another agent`,
              field: `events[${i}].agentId`,
              issue: "outside this credential's agent",
            })
          }
          // Canonicalised here, outside the chain's lock; its size is the stored size.
          const canonicalData = canonicalize(e.data)
          if (Buffer.byteLength(canonicalData) > MAX_EVENT_DATA_BYTES) {
            return yield* new InvalidInput({
              field: `events[${i}].data`,
              message: `must encode to at most ${MAX_EVENT_DATA_BYTES} bytes`,
            })
          }
          let occurredAt: string | undefined
          if (e.occurredAt !== undefined) {
            if (!isTimestamp(e.occurredAt))
              return yield* new InvalidInput({ field: `events[${i}].occurredAt`, message: "not an ISO 8601 timestamp" })
            occurredAt = new Date(e.occurredAt).toISOString()
          }
          const agentId = e.agentId ?? actor.agentId
          if (agentId !== undefined) agentIds.add(agentId)
          prepared.push({ type: e.type, agentId, data: e.data, occurredAt, canonicalData })
        }
        // Agents are deregistered softly, never deleted: checked before the append, the answer stays true.
        for (const id of agentIds) {
          const agent = yield* agents.find(actor.workspaceId, id)
          if (!agent) {
            const i = prepared.findIndex((p) => p.agentId === id)
            return yield* new InvalidInput({
              field: `events[${i}].agentId`,
              message: `no agent ${id} in this workspace`,
            })
          }
        }
        const outcome = yield* appender.append({
          actor,
          events: prepared,
          // The stored response is the one this call answers, not the appender's raw events.
          idempotency: idempotency && {
            ...idempotency,
            render: (stored) => idempotency.render(ingestResult(stored as ReadonlyArray<AuditEvent>)),
          },
        })
        return outcome instanceof Replayed ? outcome : ingestResult(outcome)
      })

      const list = Effect.fn("EventService.list")(function* (actor: Actor, q: EventQueryInput) {
        if (actor.agentId !== undefined && q.agentId !== undefined && q.agentId !== actor.agentId) {
          return yield* new PermissionDenied({ message: "this credential is bound to another agent" })
        }
        // The rule webhooks and the stream filter by (D9): names with aliases resolved, `prefix.*`, `*`.
        const compiled = q.type !== undefined && q.type.length > 0 ? compileFilters(q.type) : undefined
        if (compiled?.ok === false)
          return yield* new InvalidInput({ field: `type[${compiled.index}]`, message: compiled.issue })
        // An inverted range is a mistake to say, not an empty page (export and proofs refuse it too).
        if (q.fromSequence !== undefined && q.toSequence !== undefined && q.fromSequence > q.toSequence)
          return yield* new InvalidInput({ field: "fromSequence", message: "must not exceed toSequence" })
        if (q.since !== undefined && q.until !== undefined && Date.parse(q.since) > Date.parse(q.until))
          return yield* new InvalidInput({ field: "since", message: "must not be after until" })
        const { limit, before } = yield* pageWindow(q, decodeSequenceCursor)
        const rows = yield* repo.list(actor.workspaceId, {
          filters: compiled?.compiled,
          agentId: actor.agentId ?? q.agentId,
          since: q.since,
          until: q.until,
          fromSequence: q.fromSequence,
          toSequence: q.toSequence,
          beforeSequence: before,
          limit: limit + 1,
        })
        return toPage(rows, limit, (last) => encodeSequenceCursor(last.sequence))
      })

      const get = Effect.fn("EventService.get")(function* (actor: Actor, id: string) {
        const event = yield* repo.find(actor.workspaceId, id)
        if (!event || (actor.agentId !== undefined && event.agentId !== actor.agentId))
          return yield* new EventNotFound({ eventId: id })
        return event
      })

      const verify = Effect.fn("EventService.verify")(function* (
        actor: Actor,
        trigger: ChainCheckTrigger,
        options?: { readonly storeTree?: boolean },
      ) {
        const workspaceId = actor.workspaceId
        // The chain only grows while this runs, so the bounds are read oldest first: a checkpoint is read before
        // the rows it signed, the highest row before the head (an append moves both in one commit), and rows
        // past that head, appended since, are left to the next verification (before 2026-11-29 they were read
        // with the pages and every verification during ingest reported "the chain head does not match").
        // Every checkpoint signed a root over the leaves of its first events: the chain must still have it.
        const signed = yield* repo.largestSigned(workspaceId)
        const lastRow = yield* repo.lastSequence(workspaceId)
        const head = yield* repo.head(workspaceId)
        let expected = 1
        let prevHash = GENESIS_HASH
        let failure: { sequence: number; reason: string } | undefined
        // Every stored row is read, up to the highest sequence (rows past the head are caught too).
        const last = Math.max(head?.sequence ?? 0, lastRow)
        const attributedFrom = yield* repo.attributedFrom(workspaceId)
        /** Subtrees completed since the last page was stored (only events that verified are pushed). */
        let subtrees: Array<{ level: number; idx: number; hash: string }> = []
        const tree = options?.storeTree
          ? new TreeBuilder((level, idx, hash) => subtrees.push({ level, idx, hash }), STORED_LEVEL)
          : new TreeBuilder()
        /** The largest signed size whose root the chain still has. */
        let matched = 0
        /** What hashing a row threw, raised once the driver is done with the statement. */
        let broken: unknown
        // Rows are hashed one by one as they arrive, none held (`streamChain`): PostgreSQL computes the next ones
        // meanwhile. Rows held 10,000 at a time (before 2026-12-01) outlived V8's young generation and cost more in
        // garbage collection than their hashing.
        let r0 = 0
        let roots: ReadonlyArray<SignedRoot> = []
        /** Hashes one row; false once there is no point in reading on. */
        const onRow = (r: ChainRow): boolean => {
          // Past a failure, the rows already asked for are received and left. (Rows appended after the bounds were
          // read are not asked for: the statements stop at `last`.)
          if (failure !== undefined || broken !== undefined) return false
          try {
            const problem = chainLinkProblem(r, expected, prevHash)
            if (problem !== undefined) {
              failure = { sequence: expected, reason: problem }
              return false
            }
            prevHash = r.hash
            expected += 1
            tree.pushEvent(leafEventOf(r), attributedFrom)
            const root = roots[r0]
            if (root !== undefined && root.tree_size === r.sequence) {
              r0 += 1
              if (tree.root() !== root.root_hash) {
                failure = {
                  sequence: matched + 1,
                  reason: `the Merkle root of events 1..${r.sequence} is not the one signed in checkpoint ${r.sequence}: an event in ${matched + 1}..${r.sequence} was replaced, or changed outside its chain hash (id, agentId, actor or occurredAt)`,
                }
                return false
              }
              matched = r.sequence
            }
            return true
          } catch (cause) {
            // Thrown inside the driver's handler it would fail the statement while its rows kept coming here: kept,
            // and raised once the statement is done.
            broken = cause
            return false
          }
        }
        for (let from = 0; failure === undefined && from < last; from += VERIFY_BATCH) {
          roots = yield* repo.signedRoots(workspaceId, from, from + VERIFY_BATCH)
          r0 = 0
          if (subtrees.length > 0) {
            yield* merkle.store(workspaceId, subtrees)
            subtrees = []
          }
          yield* repo.streamChain(workspaceId, from, Math.min(from + VERIFY_BATCH, last), onRow)
          if (broken !== undefined) return yield* Effect.die(broken)
        }
        // The last page's, unless it failed (what a failed chain hashed is left to the checkpoint's own pass).
        if (failure === undefined) yield* merkle.store(workspaceId, subtrees)
        // The events that verified before the break: for a signed root that no longer matches, those before the
        // range it names (their chain hashes held, but one of them may be the changed one).
        const checked = failure === undefined ? expected - 1 : Math.min(expected - 1, failure.sequence - 1)
        if (failure === undefined && head && (head.sequence !== checked || head.hash !== prevHash)) {
          failure =
            head.sequence > checked
              ? {
                  sequence: checked + 1,
                  reason: `event ${checked + 1} is missing (the chain head is at ${head.sequence})`,
                }
              : { sequence: head.sequence, reason: "the chain head does not match the last event" }
        }
        if (failure === undefined && signed > checked)
          failure = {
            sequence: checked + 1,
            reason: `event ${checked + 1} is missing: checkpoint ${signed} signed events 1..${signed}, and the chain ends at ${checked}`,
          }
        const verifiedAt = new Date(yield* Clock.currentTimeMillis).toISOString()
        const result: Verification = failure
          ? { valid: false, checked, firstBadSequence: failure.sequence, reason: failure.reason, verifiedAt }
          : { valid: true, checked, verifiedAt }
        yield* alarm.record(actor, trigger, result)
        return result
      })

      /**
       * `POST /events/verify` rehashes the whole chain (seconds of CPU for millions of events), and any credential
       * with `events:read`, an agent's too, may ask. Requests for one workspace share runs (outside review,
       * 2026-11-29): one runs at a time, and every request arriving meanwhile waits for the one next run, which starts
       * after it arrived, so each answer is still about the chain as it was when asked. Per process.
       */
      const onDemand = new Map<
        string,
        { readonly lock: Semaphore.Semaphore; next?: Deferred.Deferred<Verification>; runs: number }
      >()
      const verifyOnDemand = (actor: Actor) =>
        Effect.gen(function* () {
          let slot = onDemand.get(actor.workspaceId)
          if (slot === undefined) {
            slot = { lock: Semaphore.makeUnsafe(1), runs: 0 }
            onDemand.set(actor.workspaceId, slot)
          }
          if (slot.next !== undefined) return yield* Deferred.await(slot.next)
          const done = yield* Deferred.make<Verification>()
          slot.next = done
          slot.runs += 1
          const own = slot
          // Detached: a caller that goes away does not cancel the run the others wait for.
          yield* Effect.forkDetach(
            own.lock
              .withPermits(1)(
                Effect.suspend(() => {
                  own.next = undefined
                  return verify(actor, "api")
                }),
              )
              .pipe(
                Effect.exit,
                Effect.flatMap((exit) => Deferred.done(done, exit)),
                Effect.ensuring(
                  Effect.sync(() => {
                    own.runs -= 1
                    if (own.runs === 0) onDemand.delete(actor.workspaceId)
                  }),
                ),
              ),
          )
          return yield* Deferred.await(done)
        })

      return EventService.of({
        ingest,
        list,
        get,
        verify: (actor, trigger, options) =>
          trigger === "api" && options === undefined ? verifyOnDemand(actor) : verify(actor, trigger, options),
      })
    }),
  )
}
