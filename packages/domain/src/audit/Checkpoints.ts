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
import { EventRepo } from "./EventRepo.ts"
import { MerkleStore, type RangeHasher } from "./MerkleStore.ts"

/** At most this many events per export bundle (each carries its inclusion proof). */
export const MAX_EXPORT_EVENTS = 10_000

/** No checkpoint of that tree size (checkpoints are made as the chain grows, and on demand). */
export class CheckpointNotFound extends Schema.TaggedError<CheckpointNotFound>()("CheckpointNotFound", {
  treeSize: Schema.Number,
  /** The request's parameter that named the size (`treeSize`, or `toSize` of a consistency proof). */
  field: Schema.optional(Schema.String),
}) {}

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

/** Serialises checkpointing per workspace across instances (transaction-scoped advisory lock). */
const CHECKPOINT_LOCK = 72_410_004

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
    readonly latest: (actor: Actor) => Effect.Effect<Checkpoint>
    /** The audit path of event `sequence` in the tree of a checkpoint (the latest covering it by default). */
    readonly inclusion: (
      actor: Actor,
      sequence: number,
      treeSize?: number,
    ) => Effect.Effect<InclusionProof & { readonly checkpoint: Checkpoint }, CheckpointNotFound | InvalidInput>
    /** Proof that the tree of `fromSize` leaves is a prefix of a checkpoint's tree (the latest by default). */
    readonly consistency: (
      actor: Actor,
      fromSize: number,
      toSize?: number,
    ) => Effect.Effect<ConsistencyProof & { readonly checkpoint: Checkpoint }, CheckpointNotFound | InvalidInput>
    /** Events `from..to` with a checkpoint covering them, their inclusion proofs and the JWKS. */
    readonly exportBundle: (
      actor: Actor,
      q: { readonly fromSequence?: number; readonly toSequence?: number; readonly sinceTreeSize?: number },
    ) => Effect.Effect<Bundle, CheckpointNotFound | InvalidInput | PermissionDenied>
  }
>()("@agentgov/domain/audit/Checkpoints") {
  static readonly layer = Layer.effect(
    Checkpoints,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const merkle = yield* MerkleStore
      const keys = yield* SigningKeys
      const events = yield* EventRepo
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

      const latest = (actor: Actor) =>
        inTransaction(
          Effect.gen(function* () {
            const workspaceId = actor.workspaceId
            yield* sql`SELECT pg_advisory_xact_lock(${CHECKPOINT_LOCK}, hashtext(${workspaceId}))`
            const last = yield* newest(workspaceId)
            const head = (yield* events.head(workspaceId)) ?? { sequence: 0, hash: GENESIS_HASH }
            if (last && last.tree_size >= head.sequence) return toCheckpoint(last)
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
            return checkpoint
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
            checkpoint = yield* find(actor.workspaceId, treeSize, sizeField)
          } else {
            // The newest signed checkpoint when it covers the event; a new one only when none does.
            const last = yield* newest(actor.workspaceId)
            checkpoint = last && last.tree_size >= atLeast ? toCheckpoint(last) : yield* latest(actor)
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
        const proof = yield* inclusionProof(merkle.hasher(actor.workspaceId), sequence, checkpoint.treeSize)
        return { ...proof, checkpoint }
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

      const exportBundle = Effect.fn("Checkpoints.exportBundle")(function* (
        actor: Actor,
        q: { readonly fromSequence?: number; readonly toSequence?: number; readonly sinceTreeSize?: number },
      ) {
        if (actor.agentId !== undefined)
          return yield* new PermissionDenied({ message: "an agent-bound credential cannot export the audit trail" })
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
          exportedAt: new Date(now).toISOString(),
          events: rows,
          checkpoint,
          inclusionProofs,
          ...(consistency ? { consistency } : {}),
          jwks: yield* keys.jwks,
        }
        return bundle
      })

      return Checkpoints.of({ latest, inclusion, consistency, exportBundle })
    }),
  )
}
