import { waitForLocks } from "@agentgov/db"
import {
  BUNDLE_FORMAT,
  type Bundle,
  type Checkpoint,
  type ConsistencyProof,
  consistencyProofRanges,
  EMPTY_ROOT,
  GENESIS_HASH,
  type InclusionProof,
  inclusionProofRanges,
  signCheckpoint,
} from "@agentgov/verifier"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Actor } from "../auth/Actor.ts"
import { SigningKeys } from "../keys/SigningKeys.ts"
import { InvalidInput, PermissionDenied } from "../shared/errors.ts"
import { transactional } from "../shared/transaction.ts"
import { ChainAlarm } from "./ChainAlarm.ts"
import { chainLinkProblem, EventRepo } from "./EventRepo.ts"
import { CHECKPOINT_LOCK, MerkleStore, type RangeHasher } from "./MerkleStore.ts"

/** At most this many events per export bundle (each carries its inclusion proof). */
export const MAX_EXPORT_EVENTS = 10_000

/**
 * Exports built at once per workspace, and in the process. A bundle of 10,000 events with their proofs is about
 * 16 MB of JSON and some 45 MB while it is built and sent; 60 at once took a server to 2.3 GB (outside review,
 * 2026-11-29). Past either bound the export is refused at once (`ExportBusy`), not queued: a queue would hold the
 * requests' connections and memory as well.
 */
export const MAX_EXPORTS_PER_WORKSPACE = 2
export const MAX_EXPORTS_IN_PROCESS = 4
/** The `Retry-After` of a refused export: about one bundle's time to build. */
export const EXPORT_RETRY_AFTER_SECONDS = 5

/** As many exports are being built as the workspace or the process allows (`MAX_EXPORTS_*`): nothing was done. */
export class ExportBusy extends Schema.TaggedError<ExportBusy>()("ExportBusy", {
  /** Whose bound was reached: the workspace's, or the whole process's. */
  per: Schema.Literals(["workspace", "process"]),
  limit: Schema.Number,
  retryAfterSeconds: Schema.Number,
}) {}

/** No checkpoint of that tree size (checkpoints are made as the chain grows, and on demand). */
export class CheckpointNotFound extends Schema.TaggedError<CheckpointNotFound>()("CheckpointNotFound", {
  treeSize: Schema.Number,
  /** The request's parameter that named the size (`treeSize`, or `toSize` of a consistency proof). */
  field: Schema.optional(Schema.String),
}) {}

/**
 * The chain as stored no longer matches a checkpoint already signed (it is shorter, or its root at that size
 * differs): nothing is signed over it and no proof is made against it. Recorded and raised (`ChainAlarm`).
 */
export class ChainInconsistent extends Schema.TaggedError<ChainInconsistent>()("ChainInconsistent", {
  treeSize: Schema.Number,
  firstBadSequence: Schema.Number,
  reason: Schema.String,
}) {}

/** Events read a page when the events a new checkpoint is to sign are checked (as verification reads them). */
const CHAIN_PAGE = 10_000

/** How far back a broken root is traced through older checkpoints to name the first sequence it may be. */
const MAX_CHECKPOINTS_TRACED = 200

interface CheckpointRow {
  readonly workspace_id: string
  readonly tree_size: number
  readonly root_hash: string
  readonly head_hash: string
  readonly signed_at: Date
  readonly kid: string
  readonly signature: string
}

const toCheckpoint = (r: CheckpointRow): Checkpoint => ({
  workspaceId: r.workspace_id,
  treeSize: r.tree_size,
  rootHash: r.root_hash,
  headHash: r.head_hash,
  timestamp: r.signed_at.toISOString(),
  kid: r.kid,
  signature: r.signature,
})

/**
 * The sequences an export covers, in a chain of `treeSize` events: the latest bundle's worth by default;
 * with one end named, up to a bundle's worth from that end (`fromSequence=1` alone is the first 10,000,
 * not an error about a `toSequence` nobody sent). An error names the end that is wrong.
 */
export const exportRange = (
  treeSize: number,
  q: { readonly fromSequence?: number | undefined; readonly toSequence?: number | undefined },
): { readonly from: number; readonly to: number } | InvalidInput => {
  if (treeSize === 0) return new InvalidInput({ field: "fromSequence", message: "the chain has no events yet" })
  const to =
    q.toSequence ??
    (q.fromSequence === undefined ? treeSize : Math.min(treeSize, q.fromSequence + MAX_EXPORT_EVENTS - 1))
  const from = q.fromSequence ?? Math.max(1, to - MAX_EXPORT_EVENTS + 1)
  const beyond = `is beyond the chain, which has ${treeSize} events`
  // The end that was sent is the one at fault: `toSequence=99999999` alone is not about a `fromSequence`.
  if (q.toSequence !== undefined && q.toSequence > treeSize)
    return new InvalidInput({ field: "toSequence", message: beyond })
  if (from > treeSize) return new InvalidInput({ field: "fromSequence", message: beyond })
  if (from > to) return new InvalidInput({ field: "fromSequence", message: "must not exceed toSequence" })
  if (to - from + 1 > MAX_EXPORT_EVENTS)
    return new InvalidInput({
      field: "toSequence",
      message: `a bundle holds at most ${MAX_EXPORT_EVENTS} events; export in several ranges`,
    })
  return { from, to }
}

/**
 * Signed checkpoints of each workspace's Merkle tree, and the proofs and
 * export bundles that let anyone check the audit trail offline with
 * `@agentgov/verifier`. A checkpoint signs (tree size, Merkle root, chain
 * head hash, time) with the service's Ed25519 key published in the JWKS.
 */
export class Checkpoints extends Context.Service<
  Checkpoints,
  {
    /** The checkpoint of the current chain head, signed now if the head moved since the last one. */
    readonly latest: (actor: Actor) => Effect.Effect<Checkpoint, ChainInconsistent>
    /**
     * The audit path of event `sequence` in the tree of a checkpoint (the latest covering it by default). An
     * agent-bound credential gets it for its own agent's events only (as `GET /events/:id`).
     */
    readonly inclusion: (
      actor: Actor,
      sequence: number,
      treeSize?: number,
    ) => Effect.Effect<
      InclusionProof & { readonly attributedFrom: number; readonly checkpoint: Checkpoint },
      CheckpointNotFound | InvalidInput | ChainInconsistent | PermissionDenied
    >
    /** Proof that the tree of `fromSize` leaves is a prefix of a checkpoint's tree (the latest by default). */
    readonly consistency: (
      actor: Actor,
      fromSize: number,
      toSize?: number,
    ) => Effect.Effect<
      ConsistencyProof & { readonly checkpoint: Checkpoint },
      CheckpointNotFound | InvalidInput | ChainInconsistent
    >
    /**
     * Events `from..to` with a checkpoint covering them, their inclusion proofs and the JWKS. Not for agent-bound
     * credentials; at most `MAX_EXPORTS_PER_WORKSPACE` built at once per workspace and `MAX_EXPORTS_IN_PROCESS` in
     * the process, past which `ExportBusy`.
     */
    readonly exportBundle: (
      actor: Actor,
      q: { readonly fromSequence?: number; readonly toSequence?: number; readonly sinceTreeSize?: number },
    ) => Effect.Effect<Bundle, CheckpointNotFound | InvalidInput | PermissionDenied | ChainInconsistent | ExportBusy>
  }
>()("@agentgov/domain/audit/Checkpoints") {
  static readonly layer = Layer.effect(
    Checkpoints,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const merkle = yield* MerkleStore
      const keys = yield* SigningKeys
      const events = yield* EventRepo
      const alarm = yield* ChainAlarm
      const inTransaction = transactional(sql)

      const find = (workspaceId: string, treeSize: number, field = "treeSize") =>
        sql<CheckpointRow>`SELECT * FROM checkpoints WHERE workspace_id = ${workspaceId} AND tree_size = ${treeSize}`.pipe(
          Effect.orDie,
          Effect.flatMap((rows) =>
            rows[0] ? Effect.succeed(toCheckpoint(rows[0])) : Effect.fail(new CheckpointNotFound({ treeSize, field })),
          ),
        )

      const newest = (workspaceId: string) =>
        sql<CheckpointRow>`SELECT * FROM checkpoints WHERE workspace_id = ${workspaceId}
            ORDER BY tree_size DESC LIMIT 1`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie,
        )

      /** The audit path of event `sequence` in the tree of the first `treeSize` events. */
      const inclusionProof = (hasher: RangeHasher, sequence: number, treeSize: number) =>
        Effect.forEach(inclusionProofRanges(sequence - 1, treeSize), ([s, e]) => hasher.hash(s, e)).pipe(
          Effect.map((path): InclusionProof => ({ sequence, leafIndex: sequence - 1, treeSize, path })),
        )

      /** The proof that the tree of `fromSize` events is a prefix of the tree of `toSize`. */
      const consistencyProof = (hasher: RangeHasher, fromSize: number, toSize: number) =>
        Effect.gen(function* () {
          const fromRoot = yield* hasher.hash(0, fromSize)
          const path = yield* Effect.forEach(consistencyProofRanges(fromSize, toSize), ([s, e]) => hasher.hash(s, e))
          return { fromSize, fromRoot, toSize, path } satisfies ConsistencyProof
        })

      /**
       * Why the chain as stored does not match checkpoint `c`, or undefined when it does: every event it signed
       * is there and the root over them is its root. The root is taken through the stored subtrees, which were
       * made from the events when they were signed; only `EventService.verify` rehashes every event.
       */
      const conflictWith = (workspaceId: string, c: { readonly treeSize: number; readonly rootHash: string }) =>
        Effect.gen(function* () {
          const n = c.treeSize
          if (n === 0) return undefined
          const length = (yield* events.head(workspaceId))?.sequence ?? 0
          if (length < n)
            return {
              treeSize: n,
              firstBadSequence: length + 1,
              reason: `the chain has ${length} events, but checkpoint ${n} signed events 1..${n}`,
            }
          // The rows the root is hashed from beyond the stored subtrees (a missing one would stop the hashing).
          const from = n - (n % 256)
          const [gap] = yield* sql<{ missing: number | null }>`SELECT min(s)::int8 AS missing
              FROM generate_series(${from + 1}::int8, ${n}::int8) s
              WHERE NOT EXISTS (SELECT 1 FROM events WHERE workspace_id = ${workspaceId} AND sequence = s)`.pipe(
            Effect.orDie,
          )
          if (gap?.missing != null)
            return {
              treeSize: n,
              firstBadSequence: gap.missing,
              reason: `event ${gap.missing} is missing, but checkpoint ${n} signed events 1..${n}`,
            }
          const hasher = merkle.hasher(workspaceId)
          if ((yield* hasher.hash(0, n)) === c.rootHash) return undefined
          // The first sequence it may be: after the newest older checkpoint whose root still matches.
          const older = yield* sql<{ tree_size: number; root_hash: string }>`SELECT tree_size, root_hash
              FROM checkpoints WHERE workspace_id = ${workspaceId} AND tree_size < ${n} AND tree_size > 0
              ORDER BY tree_size DESC LIMIT ${MAX_CHECKPOINTS_TRACED}`.pipe(Effect.orDie)
          let good = 0
          for (const o of older) {
            const root = yield* Effect.exit(hasher.hash(0, o.tree_size))
            if (root._tag === "Success" && root.value === o.root_hash) {
              good = o.tree_size
              break
            }
          }
          return {
            treeSize: n,
            firstBadSequence: good + 1,
            reason: `the Merkle root of events 1..${n} is not the one signed in checkpoint ${n}: an event in ${good + 1}..${n} was replaced, or changed outside its chain hash (id, agentId, actor or occurredAt)`,
          }
        })

      /**
       * Why events `after + 1 .. head` do not chain on from `prevHash` (the hash the last checkpoint signed as its
       * head), or undefined when they do. A checkpoint is the first signature over these events: one signed over a
       * forged event would prove it to anyone given that event alone (outside review, 2026-11-29).
       */
      const unchained = (
        workspaceId: string,
        after: number,
        prevHash: string,
        head: { readonly sequence: number; readonly hash: string },
      ) =>
        Effect.gen(function* () {
          let expected = after + 1
          let prev = prevHash
          const at = (reason: string) => ({
            treeSize: after,
            firstBadSequence: expected,
            reason: `event ${expected} (after checkpoint ${after}): ${reason}; it is not signed`,
          })
          while (expected <= head.sequence) {
            const rows = yield* events.chainBatch(
              workspaceId,
              expected - 1,
              Math.min(CHAIN_PAGE, head.sequence - expected + 1),
            )
            if (rows.length === 0) return at("missing")
            for (const r of rows) {
              const problem = chainLinkProblem(r, expected, prev)
              if (problem !== undefined) return at(problem)
              prev = r.hash
              expected += 1
            }
          }
          expected = head.sequence
          return prev === head.hash ? undefined : at("its hash is not the chain head's")
        })

      /** Records and raises a conflict with a signed checkpoint, and fails with it. */
      const refuse = (actor: Actor, conflict: { treeSize: number; firstBadSequence: number; reason: string }) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          yield* alarm.record(actor, "checkpoint", {
            valid: false,
            checked: conflict.firstBadSequence - 1,
            firstBadSequence: conflict.firstBadSequence,
            reason: conflict.reason,
            verifiedAt: new Date(now).toISOString(),
          })
          return yield* new ChainInconsistent(conflict)
        })

      /**
       * A checkpoint a proof is to be made against, once the chain is known to still match it: a proof against
       * one it does not could not be made, or would not verify.
       */
      const checked = (actor: Actor, checkpoint: Checkpoint) =>
        Effect.gen(function* () {
          const conflict = yield* conflictWith(actor.workspaceId, checkpoint)
          return conflict === undefined ? checkpoint : yield* refuse(actor, conflict)
        })

      const latest = (actor: Actor) =>
        Effect.gen(function* () {
          const signed = yield* sign(actor)
          return signed.conflict !== undefined ? yield* refuse(actor, signed.conflict) : signed.checkpoint
        })

      /**
       * Signs the chain head unless the last checkpoint covers it. A new tree must extend the last signed
       * one (its size and root), which in turn extended the one before: otherwise nothing is signed.
       */
      const sign = (actor: Actor) =>
        inTransaction(
          Effect.gen(function* () {
            const workspaceId = actor.workspaceId
            yield* waitForLocks(sql)
            yield* sql`SELECT pg_advisory_xact_lock(${CHECKPOINT_LOCK}, hashtext(${workspaceId}))`
            const last = yield* newest(workspaceId)
            const head = (yield* events.head(workspaceId)) ?? { sequence: 0, hash: GENESIS_HASH }
            if (last) {
              const conflict = yield* conflictWith(workspaceId, toCheckpoint(last))
              if (conflict !== undefined) return { conflict }
              if (last.tree_size >= head.sequence) return { checkpoint: toCheckpoint(last) }
            }
            // Events past the last checkpoint must chain on from it. (A workspace's first checkpoint is not held to
            // this: a compliance report on a chain broken before any was signed pins to it, ComplianceService.pin.)
            if (last) {
              const broken = yield* unchained(workspaceId, last.tree_size, last.head_hash, head)
              if (broken !== undefined) return { conflict: broken }
            }
            yield* merkle.extend(workspaceId, head.sequence)
            const rootHash = head.sequence === 0 ? EMPTY_ROOT : yield* merkle.hasher(workspaceId).hash(0, head.sequence)
            const key = yield* keys.current
            const now = yield* Clock.currentTimeMillis
            const checkpoint = signCheckpoint(
              {
                workspaceId,
                treeSize: head.sequence,
                rootHash,
                headHash: head.hash,
                timestamp: new Date(now).toISOString(),
              },
              key.privateKey,
              key.kid,
            )
            yield* sql`INSERT INTO checkpoints (workspace_id, tree_size, root_hash, head_hash, signed_at, kid, signature)
                VALUES (${workspaceId}, ${checkpoint.treeSize}, ${checkpoint.rootHash}, ${checkpoint.headHash},
                        ${checkpoint.timestamp}::timestamptz, ${checkpoint.kid}, ${checkpoint.signature})`
            return { checkpoint }
          }),
        )

      /** The checkpoint a proof is made against: the one asked for, or the latest (which covers `atLeast`). */
      const target = (
        actor: Actor,
        treeSize: number | undefined,
        atLeast: number,
        field: string,
        sizeField = "treeSize",
      ) =>
        Effect.gen(function* () {
          let checkpoint: Checkpoint
          if (treeSize !== undefined) {
            // An inverted range is the caller's mistake whatever checkpoints exist.
            if (atLeast > treeSize) return yield* new InvalidInput({ field, message: `must not exceed ${sizeField}` })
            checkpoint = yield* checked(actor, yield* find(actor.workspaceId, treeSize, sizeField))
          } else {
            // The newest signed checkpoint when it covers the event; a new one only when none does.
            const last = yield* newest(actor.workspaceId)
            // (latest() checks the chain against it too.)
            checkpoint =
              last && last.tree_size >= atLeast ? yield* checked(actor, toCheckpoint(last)) : yield* latest(actor)
          }
          if (atLeast > checkpoint.treeSize)
            return yield* new InvalidInput({
              field,
              message:
                treeSize !== undefined
                  ? `is beyond the tree size ${checkpoint.treeSize} asked for`
                  : `is beyond the chain, which has ${checkpoint.treeSize} events`,
            })
          return checkpoint
        })

      const inclusion = Effect.fn("Checkpoints.inclusion")(function* (
        actor: Actor,
        sequence: number,
        treeSize?: number,
      ) {
        const checkpoint = yield* target(actor, treeSize, sequence, "sequence")
        // An agent key proves its own agent's events only, as it reads only those (D4): the sequence is an event's.
        if (actor.agentId !== undefined) {
          const [event] = yield* events.range(actor.workspaceId, sequence, sequence)
          if (event?.agentId !== actor.agentId)
            return yield* new PermissionDenied({
              message: `event ${sequence} is not this credential's agent's: an agent-bound credential proves its own agent's events only`,
              field: "agentId",
              issue: "outside this credential's agent",
            })
        }
        const proof = yield* inclusionProof(merkle.hasher(actor.workspaceId), sequence, checkpoint.treeSize)
        return { ...proof, attributedFrom: yield* events.attributedFrom(actor.workspaceId), checkpoint }
      })

      const consistency = Effect.fn("Checkpoints.consistency")(function* (
        actor: Actor,
        fromSize: number,
        toSize?: number,
      ) {
        const checkpoint = yield* target(actor, toSize, fromSize, "fromSize", "toSize")
        const proof = yield* consistencyProof(merkle.hasher(actor.workspaceId), fromSize, checkpoint.treeSize)
        return { ...proof, checkpoint }
      })

      /** Exports being built, per workspace and in all (this process's; each instance has its own). */
      const exporting = { all: 0, byWorkspace: new Map<string, number>() }
      /** Runs `build` in one of the export slots, or fails with `ExportBusy` at once when none is free. */
      const inExportSlot = <A, E, R>(workspaceId: string, build: Effect.Effect<A, E, R>) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.suspend((): Effect.Effect<A, E | ExportBusy, R> => {
            const mine = exporting.byWorkspace.get(workspaceId) ?? 0
            const full =
              mine >= MAX_EXPORTS_PER_WORKSPACE
                ? { per: "workspace" as const, limit: MAX_EXPORTS_PER_WORKSPACE }
                : exporting.all >= MAX_EXPORTS_IN_PROCESS
                  ? { per: "process" as const, limit: MAX_EXPORTS_IN_PROCESS }
                  : undefined
            if (full !== undefined)
              return Effect.fail(new ExportBusy({ ...full, retryAfterSeconds: EXPORT_RETRY_AFTER_SECONDS }))
            exporting.all += 1
            exporting.byWorkspace.set(workspaceId, mine + 1)
            return restore(build).pipe(
              Effect.ensuring(
                Effect.sync(() => {
                  exporting.all -= 1
                  const left = (exporting.byWorkspace.get(workspaceId) ?? 1) - 1
                  if (left === 0) exporting.byWorkspace.delete(workspaceId)
                  else exporting.byWorkspace.set(workspaceId, left)
                }),
              ),
            )
          }),
        )

      const buildBundle = Effect.fn("Checkpoints.exportBundle")(function* (
        actor: Actor,
        q: { readonly fromSequence?: number; readonly toSequence?: number; readonly sinceTreeSize?: number },
      ) {
        const checkpoint = yield* latest(actor)
        const range = exportRange(checkpoint.treeSize, q)
        if (range instanceof InvalidInput) return yield* range
        const { from, to } = range
        if (q.sinceTreeSize !== undefined && q.sinceTreeSize > checkpoint.treeSize)
          return yield* new InvalidInput({
            field: "sinceTreeSize",
            message: `is beyond the tree size ${checkpoint.treeSize}`,
          })
        const rows = yield* events.range(actor.workspaceId, from, to)
        const hasher = merkle.hasher(actor.workspaceId)
        yield* hasher.preload(from - 1, to)
        const inclusionProofs = yield* Effect.forEach(rows, (e) =>
          inclusionProof(hasher, e.sequence, checkpoint.treeSize),
        )
        const consistency =
          q.sinceTreeSize === undefined
            ? undefined
            : yield* consistencyProof(hasher, q.sinceTreeSize, checkpoint.treeSize)
        const now = yield* Clock.currentTimeMillis
        const bundle: Bundle = {
          format: BUNDLE_FORMAT,
          workspaceId: actor.workspaceId,
          attributedFrom: yield* events.attributedFrom(actor.workspaceId),
          exportedAt: new Date(now).toISOString(),
          events: rows,
          checkpoint,
          inclusionProofs,
          ...(consistency ? { consistency } : {}),
          jwks: yield* keys.jwks,
        }
        return bundle
      })

      const exportBundle = (
        actor: Actor,
        q: { readonly fromSequence?: number; readonly toSequence?: number; readonly sinceTreeSize?: number },
      ) =>
        actor.agentId !== undefined
          ? Effect.fail(
              new PermissionDenied({
                message: "an agent-bound credential cannot export the audit trail: it holds every agent's events",
                field: "agentId",
                issue: "an agent-bound credential cannot export",
              }),
            )
          : inExportSlot(actor.workspaceId, buildBundle(actor, q))

      return Checkpoints.of({ latest, inclusion, consistency, exportBundle })
    }),
  )
}
