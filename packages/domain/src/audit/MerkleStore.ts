import { waitForLocks } from "@agentgov/db"
import { hashRange, nodeHash } from "@agentgov/verifier"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { transactional } from "../shared/transaction.ts"
import { type LeafRow, leafColumns, leafOfRow } from "./EventRepo.ts"

/** Subtrees of 2^8 leaves and larger are stored; smaller ones are hashed from the events when needed. */
export const STORED_LEVEL = 8
/**
 * Serialises checkpointing per workspace across instances (transaction-scoped advisory lock, with
 * `hashtext(workspaceId)`); `store` takes it too, so that its rows never interleave with a checkpoint's.
 */
export const CHECKPOINT_LOCK = 72_410_004
const BLOCK = 1 << STORED_LEVEL
/** Blocks hashed per round trip while catching up. */
const EXTEND_CHUNK_BLOCKS = 64

const isPowerOfTwo = (n: number) => n > 0 && (n & (n - 1)) === 0
const largestPowerOfTwoBelow = (n: number) => 2 ** Math.floor(Math.log2(n - 1))

/** Hashes of leaf ranges of one workspace's tree, memoised for one computation (a proof, a bundle). */
export interface RangeHasher {
  readonly hash: (start: number, end: number) => Effect.Effect<string>
  /** Leaf hashes of [start, end), read from the events (one query), kept for later ranges. */
  readonly preload: (start: number, end: number) => Effect.Effect<void>
}

/**
 * The RFC 6962 Merkle tree over a workspace's events (leaf i = `eventLeaf` of
 * event i + 1: its chain hash and attribution). Perfect aligned subtrees of 256 leaves and up are stored
 * in `merkle_nodes` as the tree grows (by the checkpointer, off the hot
 * path); any range hash then takes O(log n) stored nodes plus at most a block
 * of leaves per range.
 */
export class MerkleStore extends Context.Service<
  MerkleStore,
  {
    /** Stores the subtrees of every complete block of the first `size` leaves. Call inside a transaction. */
    readonly extend: (workspaceId: string, size: number) => Effect.Effect<void>
    readonly hasher: (workspaceId: string) => RangeHasher
    /**
     * Stores subtree hashes computed elsewhere from the same events (a chain verification's `TreeBuilder`):
     * aligned perfect subtrees of level `STORED_LEVEL` and up, each block's before any block after it, as
     * `extend` goes on from the first block not stored.
     */
    readonly store: (
      workspaceId: string,
      nodes: ReadonlyArray<{ readonly level: number; readonly idx: number; readonly hash: string }>,
    ) => Effect.Effect<void>
  }
>()("@agentgov/domain/audit/MerkleStore") {
  static readonly layer = Layer.effect(
    MerkleStore,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const leaves = (workspaceId: string, start: number, end: number) =>
        Effect.gen(function* () {
          const rows = yield* sql<LeafRow & { attributed_from: number }>`SELECT ${leafColumns(sql)},
                (SELECT attributed_from FROM chain_heads WHERE workspace_id = ${workspaceId}) AS attributed_from
              FROM events
              WHERE workspace_id = ${workspaceId} AND sequence > ${start} AND sequence <= ${end} ORDER BY sequence`
          if (rows.length !== end - start || rows.some((r, i) => r.sequence !== start + i + 1))
            return yield* Effect.die(new Error(`events ${start + 1}..${end} of ${workspaceId} are not all present`))
          return rows.map((r) => leafOfRow(r, r.attributed_from))
        }).pipe(Effect.orDie)

      const node = (workspaceId: string, level: number, idx: number) =>
        sql<{ hash: string }>`SELECT hash FROM merkle_nodes
            WHERE workspace_id = ${workspaceId} AND level = ${level} AND idx = ${idx}`.pipe(
          Effect.flatMap((rows) =>
            rows[0]
              ? Effect.succeed(rows[0].hash)
              : Effect.die(new Error(`merkle node ${level}/${idx} of ${workspaceId} is not stored`)),
          ),
          Effect.orDie,
        )

      const storedBlocks = (workspaceId: string) =>
        sql<{ blocks: number }>`SELECT coalesce(max(idx) + 1, 0)::int8 AS blocks FROM merkle_nodes
            WHERE workspace_id = ${workspaceId} AND level = ${STORED_LEVEL}`.pipe(
          Effect.map((rows) => rows[0]?.blocks ?? 0),
          Effect.orDie,
        )

      const extend = Effect.fn("MerkleStore.extend")(function* (workspaceId: string, size: number) {
        const want = Math.floor(size / BLOCK)
        let have = yield* storedBlocks(workspaceId)
        while (have < want) {
          const upto = Math.min(want, have + EXTEND_CHUNK_BLOCKS)
          const leafHashes = yield* leaves(workspaceId, have * BLOCK, upto * BLOCK)
          const fresh: Array<{ level: number; idx: number; hash: string }> = []
          let level = STORED_LEVEL
          let from = have
          let to = upto
          let below = new Map<number, string>()
          for (let b = have; b < upto; b++) {
            const base = (b - have) * BLOCK
            below.set(b, hashRange(leafHashes, base, base + BLOCK))
          }
          for (const [idx, hash] of below) fresh.push({ level, idx, hash })
          // Each level up, the parents of the new nodes: [from/2, to/2) have both children now.
          while (Math.floor(from / 2) < Math.floor(to / 2)) {
            const first = Math.floor(from / 2)
            const last = Math.floor(to / 2)
            const above = new Map<number, string>()
            for (let i = first; i < last; i++) {
              const left = below.get(2 * i) ?? (yield* node(workspaceId, level, 2 * i))
              const right = below.get(2 * i + 1) ?? (yield* node(workspaceId, level, 2 * i + 1))
              above.set(i, nodeHash(left, right))
            }
            level += 1
            for (const [idx, hash] of above) fresh.push({ level, idx, hash })
            below = above
            from = first
            to = last
          }
          yield* sql`INSERT INTO merkle_nodes (workspace_id, level, idx, hash)
              VALUES ${sql.csv(fresh.map((n) => sql`(${workspaceId}, ${n.level}, ${n.idx}, ${n.hash})`))}
              ON CONFLICT DO NOTHING`.pipe(Effect.orDie)
          have = upto
        }
      })

      const hasher = (workspaceId: string): RangeHasher => {
        const memo = new Map<string, string>()
        const leafCache = new Map<number, string>()

        const preload = (start: number, end: number) =>
          Effect.gen(function* () {
            const hashes = yield* leaves(workspaceId, start, end)
            for (const [i, h] of hashes.entries()) leafCache.set(start + i, h)
          })

        const hash = (start: number, end: number): Effect.Effect<string> =>
          Effect.gen(function* () {
            const key = `${start}:${end}`
            const known = memo.get(key)
            if (known !== undefined) return known
            const size = end - start
            let result: string
            if (isPowerOfTwo(size) && size >= BLOCK) {
              result = yield* node(workspaceId, Math.log2(size), start / size)
            } else if (size <= BLOCK) {
              let cached = true
              for (let i = start; i < end && cached; i++) cached = leafCache.has(i)
              if (!cached) yield* preload(start, end)
              const hashes: Array<string> = []
              for (let i = start; i < end; i++) hashes.push(leafCache.get(i)!)
              result = hashRange(hashes, 0, size)
            } else {
              const k = largestPowerOfTwoBelow(size)
              result = nodeHash(yield* hash(start, start + k), yield* hash(start + k, end))
            }
            memo.set(key, result)
            return result
          })

        return { hash, preload }
      }

      const store = (
        workspaceId: string,
        nodes: ReadonlyArray<{ readonly level: number; readonly idx: number; readonly hash: string }>,
      ) =>
        nodes.length === 0
          ? Effect.void
          : transactional(sql)(
              Effect.gen(function* () {
                yield* waitForLocks(sql)
                yield* sql`SELECT pg_advisory_xact_lock(${CHECKPOINT_LOCK}, hashtext(${workspaceId}))`
                yield* sql`INSERT INTO merkle_nodes (workspace_id, level, idx, hash)
                    VALUES ${sql.csv(nodes.map((n) => sql`(${workspaceId}, ${n.level}, ${n.idx}, ${n.hash})`))}
                    ON CONFLICT DO NOTHING`
              }),
            )

      return MerkleStore.of({ extend, hasher, store })
    }),
  )
}
