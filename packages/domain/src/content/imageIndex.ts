import { Effect, Semaphore } from "effect"
import { BLOCKS, hashColumn, IMAGE_RADIUS, probedValues } from "./imageHash.ts"

/**
 * The image multi-index in the process (decision D15, migration 0024): each workspace's indexed pHashes
 * (`content_image_hashes`, an item's pHash and its mirror's), held as four 16-bit blocks in counting-sorted
 * arrays, probed as the SQL multi-index was (428 buckets, BLOCK_RADII) with each entry's whole hash checked
 * within IMAGE_RADIUS. The table stays the truth; the copy is kept in step with it at every scan, so several
 * server instances on one database each see every registration:
 *
 * - Each row carries the id of the transaction that wrote it (`xid`, `pg_current_xact_id()`) and a `seq`. A
 *   scan's one statement (IMAGE_LOOKUP_SQL) reads, with its own snapshot, the rows the previous statement's
 *   snapshot could not see: those written by a transaction running then (its `xip`) or started since (`xid` ≥
 *   its `xmax`), through (tag, xid), and adds them to the copy. The first scan of a workspace in a process
 *   first reads all the tag's rows in `seq` chunks (IMAGE_LOAD_SQL); a row met twice is recognised by its `seq`.
 * - What the copy finds is only a candidate: the same statement reads the rows found back by `seq` with their
 *   item, whose workspace is checked (the tag is a 32-bit hash of the workspace id, not unique) and whose
 *   existence is: a deleted item's rows (ON DELETE CASCADE) are gone from the table, so they are never answered,
 *   though their entries stay in the copy until the process drops it. The rows the copy did not have yet are
 *   checked against the probe there, in SQL.
 *
 * Memory: 64 bytes an indexed hash (128 MB for a workspace of 1,000,000 images); the workspaces scanned least
 * recently are dropped once the copies together pass MAX_ENTRIES (and read again at their next scan).
 */

/** A statement run on the database: the service's SqlClient, or the benchmark's client. */
export type ImageQuery = (
  statement: string,
  params: ReadonlyArray<unknown>,
) => Effect.Effect<ReadonlyArray<Record<string, unknown>>>

/** Rows a chunk of the first sync reads (16 bytes each packed). */
const CHUNK = 250_000
/** Entries added since the sorted arrays were built that are checked one by one before they are rebuilt. */
const TAIL_MAX = 8_192
/** Indexed hashes kept in the process across workspaces (64 bytes each) before the least recently scanned go. */
const MAX_ENTRIES = 4_000_000

/** What a sync statement answers: its snapshot, and the rows it read packed, `seq` and `hash` 8 bytes each. */
const SNAPSHOT_AND_ROWS = `SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
    ARRAY(SELECT pg_snapshot_xip(pg_current_snapshot())::text) AS xip, a.count, a.last, a.packed`
const FROM_ROWS = `FROM (SELECT count(*)::int AS count, max(seq)::text AS last,
    coalesce(string_agg(int8send(seq) || int8send(hash), ''::bytea), ''::bytea) AS packed FROM fresh) AS a`

/**
 * A chunk of the first sync of a workspace's copy (`$1` the workspace, `$2` the last `seq` read so far, `$3` the
 * chunk's size), through (tag, seq): the rows of its tag, and the statement's snapshot. The rows come packed (a
 * million rows as one value, not a million rows).
 */
export const IMAGE_LOAD_SQL = `WITH fresh AS (SELECT seq, hash FROM content_image_hashes
    WHERE tag = hashtext($1) AND seq > $2::bigint ORDER BY seq LIMIT $3::int)
  ${SNAPSHOT_AND_ROWS} ${FROM_ROWS}`

/**
 * The lookup, in one statement (`$1` the workspace, `$2` the previous sync's snapshot's xmax, `$3` its running
 * transactions, `$4` the `seq`s the copy found within IMAGE_RADIUS of the probe, `$5` the probe as
 * `hashColumn`): the rows of the tag that snapshot could not see, through (tag, xid), packed as the load's,
 * with this statement's snapshot; and, as JSON, the rows found, the copy's and those among the unseen rows
 * within IMAGE_RADIUS, read back through (tag, seq) with their item, in this workspace and still there.
 */
export const IMAGE_LOOKUP_SQL = `WITH fresh AS (SELECT seq, hash, content_id, mirror FROM content_image_hashes
    WHERE tag = hashtext($1) AND (xid >= $2::text::xid8 OR xid = ANY($3::text[]::xid8[]))),
  found AS (SELECT h.seq::text AS seq, h.content_id, h.mirror, h.hash::text AS hash
      FROM content_image_hashes h JOIN content_items c ON c.id = h.content_id AND c.workspace_id = $1
      WHERE h.tag = hashtext($1) AND h.seq = ANY($4::bigint[])
    UNION
    SELECT f.seq::text, f.content_id, f.mirror, f.hash::text
      FROM fresh f JOIN content_items c ON c.id = f.content_id AND c.workspace_id = $1
      WHERE bit_count((f.hash # $5::bigint)::bit(64)) <= ${IMAGE_RADIUS})
  ${SNAPSHOT_AND_ROWS}, (SELECT coalesce(json_agg(found), '[]') FROM found) AS found ${FROM_ROWS}`

const popcount = (x: number) => {
  x -= (x >>> 1) & 0x55555555
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333)
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) as number
}

/** One workspace's copy. */
class Copy {
  hi = new Uint32Array(1024)
  lo = new Uint32Array(1024)
  seq = new Float64Array(1024)
  size = 0
  /** Entries [0, built) are in the sorted arrays; the rest (the tail) are checked one by one. */
  built = 0
  /**
   * Per block: where each 16-bit value's bucket starts, and the bucket's entries as their whole hash (high and
   * low 32 bits) and entry number, side by side so that a probe reads each bucket in one sweep.
   */
  starts: Array<Int32Array> = []
  order: Array<Int32Array> = []
  sortedHi: Array<Uint32Array> = []
  sortedLo: Array<Uint32Array> = []
  /** The previous sync's snapshot: null before the first has finished. */
  xmax: string | null = null
  xip: ReadonlyArray<string> = []
  /** The first sync's chunks: the last `seq` read. */
  loadedTo = "0"
  /** The first chunk's snapshot, until the first sync has read every chunk. */
  loadingXmax: string | null = null
  usedAt = 0
  readonly lock = Semaphore.makeUnsafe(1)

  add(seq: number, hi: number, lo: number, checkRepeat: boolean) {
    if (checkRepeat && this.has(seq, hi)) return
    if (this.size === this.hi.length) {
      const grow = <T extends Uint32Array | Float64Array>(a: T, make: (n: number) => T) => {
        const b = make(a.length * 2)
        b.set(a)
        return b
      }
      this.hi = grow(this.hi, (n) => new Uint32Array(n))
      this.lo = grow(this.lo, (n) => new Uint32Array(n))
      this.seq = grow(this.seq, (n) => new Float64Array(n))
    }
    this.hi[this.size] = hi
    this.lo[this.size] = lo
    this.seq[this.size] = seq
    this.size++
    if (checkRepeat) this.tailSeqs.add(seq)
  }

  /** The `seq`s of the tail. */
  tailSeqs = new Set<number>()

  /** Is this row here already: among the sorted entries (its block 0's bucket), or in the tail. */
  private has(seq: number, hi: number) {
    if (this.tailSeqs.has(seq)) return true
    if (this.built === 0) return false
    const v = hi >>> 16
    for (let k = this.starts[0]![v]!; k < this.starts[0]![v + 1]!; k++)
      if (this.seq[this.order[0]![k]!] === seq) return true
    return false
  }

  /** Counting sort of the entries by each block's value. */
  rebuild() {
    const n = this.size
    this.starts = []
    this.order = []
    this.sortedHi = []
    this.sortedLo = []
    for (let b = 0; b < BLOCKS; b++) {
      const value = (i: number) =>
        (b < 2 ? this.hi[i]! >>> (b === 0 ? 16 : 0) : this.lo[i]! >>> (b === 2 ? 16 : 0)) & 0xffff
      const starts = new Int32Array(65_537)
      for (let i = 0; i < n; i++) starts[value(i) + 1]!++
      for (let v = 0; v < 65_536; v++) starts[v + 1]! += starts[v]!
      const next = starts.slice(0, 65_536)
      const order = new Int32Array(n)
      const sortedHi = new Uint32Array(n)
      const sortedLo = new Uint32Array(n)
      for (let i = 0; i < n; i++) {
        const k = next[value(i)]!++
        order[k] = i
        sortedHi[k] = this.hi[i]!
        sortedLo[k] = this.lo[i]!
      }
      this.starts.push(starts)
      this.order.push(order)
      this.sortedHi.push(sortedHi)
      this.sortedLo.push(sortedLo)
    }
    this.built = n
    this.tailSeqs.clear()
  }

  /** The `seq` of every entry within IMAGE_RADIUS of the probe, each once. */
  near(probe: string): Array<number> {
    if (this.size - this.built > TAIL_MAX) this.rebuild()
    const phi = Number.parseInt(probe.slice(0, 8), 16) >>> 0
    const plo = Number.parseInt(probe.slice(8, 16), 16) >>> 0
    const hits = new Set<number>()
    if (this.built > 0) {
      const probed = probedValues(probe)
      for (let b = 0; b < BLOCKS; b++) {
        const starts = this.starts[b]!
        const order = this.order[b]!
        const hi = this.sortedHi[b]!
        const lo = this.sortedLo[b]!
        for (const v of probed[b]!)
          for (let k = starts[v]!, end = starts[v + 1]!; k < end; k++)
            if (popcount((hi[k]! ^ phi) >>> 0) + popcount((lo[k]! ^ plo) >>> 0) <= IMAGE_RADIUS)
              hits.add(this.seq[order[k]!]!)
      }
    }
    for (let i = this.built; i < this.size; i++)
      if (popcount((this.hi[i]! ^ phi) >>> 0) + popcount((this.lo[i]! ^ plo) >>> 0) <= IMAGE_RADIUS)
        hits.add(this.seq[i]!)
    return [...hits]
  }
}

const copies = new Map<string, Copy>()

const entries = () => {
  let n = 0
  for (const c of copies.values()) n += c.size
  return n
}

/** Adds the packed rows of a sync to the copy. */
const addPacked = (copy: Copy, packed: Uint8Array, checkRepeat: boolean) => {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength)
  for (let at = 0; at + 16 <= packed.byteLength; at += 16)
    copy.add(Number(view.getBigInt64(at)), view.getUint32(at + 8), view.getUint32(at + 12), checkRepeat)
}

interface SyncRow {
  readonly xmax: string
  readonly xip: ReadonlyArray<string>
  readonly count: number
  readonly last: string | null
  readonly packed: Uint8Array
}

/** The first sync of a workspace's copy in this process: every row of its tag, `chunk` a statement. */
const load = (query: ImageQuery, workspaceId: string, copy: Copy, chunk: number) =>
  Effect.gen(function* () {
    while (copy.xmax === null) {
      const [row] = yield* query(IMAGE_LOAD_SQL, [workspaceId, copy.loadedTo, chunk])
      const r = row as unknown as SyncRow
      addPacked(copy, r.packed, false)
      // The first chunk's snapshot is the one the next sync looks past: a row a later chunk saw as well is
      // read again then, and recognised by its `seq`.
      if (copy.loadingXmax === null) {
        copy.loadingXmax = r.xmax
        copy.xip = r.xip
      }
      if (r.count === chunk && r.last !== null) {
        copy.loadedTo = r.last
        continue
      }
      copy.xmax = copy.loadingXmax
      copy.loadingXmax = null
      copy.rebuild()
    }
  })

/** The copy of a workspace, made on its first scan in this process. */
const copyOf = (workspaceId: string) => {
  let copy = copies.get(workspaceId)
  if (!copy) {
    copy = new Copy()
    copies.set(workspaceId, copy)
  }
  copy.usedAt = Date.now()
  if (entries() > MAX_ENTRIES) {
    const others = [...copies.entries()].filter(([id]) => id !== workspaceId).sort((a, b) => a[1].usedAt - b[1].usedAt)
    for (const [id] of others) {
      if (entries() <= MAX_ENTRIES) break
      copies.delete(id)
    }
  }
  return copy
}

export interface ImageHit {
  readonly contentId: string
  readonly mirror: boolean
  readonly distance: number
}

/**
 * Every indexed hash of the workspace within IMAGE_RADIUS of `phash` (16 hex digits), with its item and
 * distance: the copy synced, probed, and what it found read back from the table. What the scan runs, and what
 * the benchmark times. `chunk`: rows a statement of the first sync reads at most.
 */
export const lookupImage = (query: ImageQuery, workspaceId: string, phash: string, chunk = CHUNK) =>
  Effect.gen(function* () {
    const copy = copyOf(workspaceId)
    const rows = yield* copy.lock.withPermits(1)(
      Effect.gen(function* () {
        yield* load(query, workspaceId, copy, chunk)
        const [row] = yield* query(IMAGE_LOOKUP_SQL, [
          workspaceId,
          copy.xmax,
          copy.xip,
          copy.near(phash).map(String),
          hashColumn(phash),
        ])
        const r = row as unknown as SyncRow & { found: ReadonlyArray<Record<string, unknown>> }
        // A row met again (one a later chunk of the first sync read, or one whose `xid` is ahead of this
        // cluster's, restored from another) is recognised by its `seq`.
        addPacked(copy, r.packed, true)
        copy.xmax = r.xmax
        copy.xip = r.xip
        return r.found
      }),
    )
    const probe = BigInt(hashColumn(phash))
    return rows.map((r): ImageHit => {
      let x = BigInt.asUintN(64, BigInt(r.hash as string) ^ probe)
      let distance = 0
      while (x) {
        x &= x - 1n
        distance++
      }
      return { contentId: r.content_id as string, mirror: r.mirror as boolean, distance }
    })
  })

/** Entries in the workspace's copy in this process (0 without one). */
export const imageCopySize = (workspaceId: string) => copies.get(workspaceId)?.size ?? 0
