/**
 * RFC 6962 / RFC 9162 §2.1 Merkle tree over the audit trail. Hashes cross the
 * public API as lowercase hex strings; leaf data is raw bytes.
 *
 * Leaf index s − 1 holds event s. Its leaf data covers what the chain hash does
 * not: from the workspace's `attributedFrom` on, the JCS of the event's hash,
 * id, agentId, actor and occurredAt (`attributedLeaf`); before it (events
 * signed before attribution was covered), the 32 raw bytes of its chain hash
 * (`chainLeaf`). See `eventLeaf`.
 */
import { hash } from "node:crypto"

/** A half-open range [start, end) of leaf indices. */
export type LeafRange = [start: number, end: number]

const HEX_HASH = /^[0-9a-f]{64}$/

/**
 * A SHA-256 hash as the 32-character string `crypto.hash(…, "binary")` returns: one character (0–255) a byte.
 * Every hash in this module is one of these until it leaves as hex: no Buffer is made a leaf or a node.
 * Measured on Node 20 and 24, `hash(…, "buffer")` costs 1.0–1.5 µs a call against 0.4 µs for a string, and a
 * verification of the whole chain spent about a fifth of its CPU on Buffers and collecting them
 * (decisions.md, 2026-11-30 eighth session and 2026-12-01 eleventh session).
 */
type Digest = string

const digest = (data: Uint8Array | string): Digest => hash("sha256", data, "binary")

const LEAF_PREFIX = Uint8Array.of(0x00)

/** SHA-256(0x00 ‖ data). */
const leafDigest = (data: Uint8Array): Digest => digest(Buffer.concat([LEAF_PREFIX, data]))

/** Whether `value` is a SHA-256 hash as this module writes it: 64 lowercase hex digits. */
export const isHashHex = (value: unknown): value is string => typeof value === "string" && HEX_HASH.test(value)

const fromHex = (hex: string): Digest => {
  if (!isHashHex(hex)) throw new TypeError(`not a SHA-256 hash in lowercase hex: ${JSON.stringify(hex)}`)
  return Buffer.from(hex, "hex").toString("latin1")
}

const toHex = (d: Digest): string => Buffer.from(d, "latin1").toString("hex")

const isSize = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0

/** The largest power of two smaller than n (n ≥ 2): the size of the left subtree. */
const split = (n: number): number => {
  let k = 1
  while (k * 2 < n) k *= 2
  return k
}

const half = (n: number): number => Math.floor(n / 2)

/** 0x01 ‖ left ‖ right, written in place: one buffer for every node hashed (synchronous, so never shared). */
const NODE_INPUT = Buffer.alloc(65)
NODE_INPUT[0] = 0x01

/** SHA-256(0x01 ‖ left ‖ right) of two digests (32 characters each, as every digest here is). */
const hashChildren = (left: Digest, right: Digest): Digest => {
  NODE_INPUT.write(left, 1, 32, "latin1")
  NODE_INPUT.write(right, 33, 32, "latin1")
  return digest(NODE_INPUT)
}

const EMPTY: Digest = digest(new Uint8Array())

/** MTH({}) = SHA-256() — the root of the empty tree. */
export const EMPTY_ROOT = toHex(EMPTY)

/** MTH({d}) = SHA-256(0x00 ‖ d). */
export const leafHash = (data: Uint8Array): string => toHex(leafDigest(data))

/** SHA-256(0x01 ‖ left ‖ right). */
export const nodeHash = (leftHex: string, rightHex: string): string =>
  toHex(hashChildren(fromHex(leftHex), fromHex(rightHex)))

/** The leaf of an event before its workspace's `attributedFrom`: SHA-256(0x00 ‖ its chain hash's 32 bytes). */
const chainLeafDigest = (chainHashHex: string): Digest => {
  if (!isHashHex(chainHashHex))
    throw new TypeError(`not a SHA-256 hash in lowercase hex: ${JSON.stringify(chainHashHex)}`)
  return leafDigest(Buffer.from(chainHashHex, "hex"))
}

/** The leaf hash of an event before its workspace's `attributedFrom`: the leaf data is its chain hash, hex-decoded. */
export const chainLeaf = (chainHashHex: string): string => toHex(chainLeafDigest(chainHashHex))

/** The fields of an event its Merkle leaf covers beyond the chain hash (which covers type, data and timestamp). */
export interface LeafEvent {
  readonly hash: string
  readonly id: string
  readonly agentId: string | null
  readonly actor: { readonly type: string; readonly id: string | null }
  readonly occurredAt: string | null
}

const json = JSON.stringify
/**
 * SHA-256(0x00 ‖ UTF-8 of the leaf data), the data written out directly: its keys are fixed and already in JCS
 * order, and JCS serialises strings and null as `JSON.stringify` does, so this is the JCS of the object (a test
 * checks it against `canonicalize`), without building and sorting an object per event. Every field is written by
 * `JSON.stringify`, the hash too: whatever it holds, it is one JSON string.
 */
const attributedLeafDigest = (e: LeafEvent): Digest =>
  // "\u0000" is the leaf prefix byte 0x00 in UTF-8.
  digest(
    `\u0000{"actor":{"id":${json(e.actor.id ?? null)},"type":${json(e.actor.type)}},"agentId":${json(e.agentId ?? null)},"hash":${json(e.hash)},"id":${json(e.id)},"occurredAt":${json(e.occurredAt ?? null)}}`,
  )

const checkedAttributedLeafDigest = (e: LeafEvent): Digest => {
  if (!isHashHex(e.hash)) throw new TypeError(`not a SHA-256 hash in lowercase hex: ${JSON.stringify(e.hash)}`)
  return attributedLeafDigest(e)
}

/**
 * The leaf hash of an event from its workspace's `attributedFrom` on: the leaf data is the UTF-8 JCS of
 * `{actor: {id, type}, agentId, hash, id, occurredAt}`, so who an event is attributed to is committed by
 * every checkpoint that covers it, while the chain hash (D8) stays as it is. Such leaf data is never 32
 * bytes long, so no event has the same leaf in both forms.
 */
export const attributedLeaf = (e: LeafEvent): string => toHex(checkedAttributedLeafDigest(e))

/** The leaf hash of event `sequence` in a workspace whose leaves cover attribution from `attributedFrom` on. */
export const eventLeaf = (e: LeafEvent & { readonly sequence: number }, attributedFrom: number): string =>
  toHex(e.sequence >= attributedFrom ? checkedAttributedLeafDigest(e) : chainLeafDigest(e.hash))

const mth = (leaves: readonly Digest[], start: number, end: number): Digest => {
  const n = end - start
  if (n === 0) return EMPTY
  if (n === 1) return leaves[start]!
  const k = split(n)
  return hashChildren(mth(leaves, start, start + k), mth(leaves, start + k, end))
}

const checkRange = (length: number, start: number, end: number): void => {
  if (!isSize(start) || !isSize(end) || start > end || end > length) {
    throw new RangeError(`leaf range [${start}, ${end}) is not within 0..${length}`)
  }
}

/**
 * The Merkle tree hash of a growing list of leaves, one leaf at a time, in O(log n) memory: the roots of
 * the perfect subtrees the leaves so far decompose into (RFC 6962's split makes MTH their right-to-left
 * fold). What verifies a whole chain against every checkpoint signed over it in one pass.
 */
export class TreeBuilder {
  /** Perfect subtree roots, largest (leftmost) first, and their sizes. */
  private readonly peaks: Array<Digest> = []
  private readonly sizes: Array<number> = []
  private count = 0
  private readonly minSubtree: number
  private readonly onSubtree: ((level: number, index: number, hashHex: string) => void) | undefined

  /**
   * `onSubtree` is told of every aligned perfect subtree of at least 2^`minLevel` leaves as it is completed:
   * its level (log2 of its size), its index at that level and its hash. What a store of subtree hashes
   * (a Merkle node cache) needs, at no further hashing.
   */
  constructor(onSubtree?: (level: number, index: number, hashHex: string) => void, minLevel = 0) {
    this.onSubtree = onSubtree
    this.minSubtree = 2 ** minLevel
  }

  /** Leaves pushed so far. */
  get size(): number {
    return this.count
  }

  push(leafHashHex: string): void {
    this.pushDigest(fromHex(leafHashHex))
  }

  /**
   * `push(eventLeaf(event, attributedFrom))` without the hex round trip: what verifying a whole chain pushes.
   * The event's hash is written into the leaf data as a JSON string without checking it is hex first (its chain
   * link has been checked); any other hash gives a leaf that no checkpoint signed.
   */
  pushEvent(event: LeafEvent & { readonly sequence: number }, attributedFrom: number): void {
    this.pushDigest(event.sequence >= attributedFrom ? attributedLeafDigest(event) : chainLeafDigest(event.hash))
  }

  private pushDigest(leaf: Digest): void {
    let node = leaf
    let size = 1
    let top = this.sizes.length - 1
    while (top >= 0 && this.sizes[top] === size) {
      node = hashChildren(this.peaks[top]!, node)
      size *= 2
      this.peaks.pop()
      this.sizes.pop()
      top -= 1
      // It covers the leaves [count + 1 - size, count + 1): index (count + 1) / size - 1 at its level.
      if (this.onSubtree !== undefined && size >= this.minSubtree)
        this.onSubtree(Math.log2(size), (this.count + 1) / size - 1, toHex(node))
    }
    this.peaks.push(node)
    this.sizes.push(size)
    this.count += 1
  }

  /** MTH of the leaves pushed so far (EMPTY_ROOT for none). */
  root(): string {
    let acc: Digest | undefined
    for (let i = this.peaks.length - 1; i >= 0; i--) {
      const peak = this.peaks[i]!
      acc = acc === undefined ? peak : hashChildren(peak, acc)
    }
    return toHex(acc ?? EMPTY)
  }
}

/** MTH(D[start:end]) of the given leaf hashes. */
export const hashRange = (leafHashes: readonly string[], start: number, end: number): string => {
  checkRange(leafHashes.length, start, end)
  return toHex(mth(leafHashes.slice(start, end).map(fromHex), 0, end - start))
}

/** MTH of all the given leaf hashes (EMPTY_ROOT for none). */
export const rootOf = (leafHashes: readonly string[]): string => hashRange(leafHashes, 0, leafHashes.length)

/**
 * The leaf ranges whose hashes form the audit path PATH(index, D[size])
 * (RFC 6962 §2.1.1), ordered from the leaf up to the root.
 */
export const inclusionProofRanges = (index: number, size: number): LeafRange[] => {
  if (!isSize(index) || !isSize(size) || index >= size) {
    throw new RangeError(`leaf index ${index} is not within a tree of size ${size}`)
  }
  const fromRoot: LeafRange[] = []
  let start = 0
  let end = size
  while (end - start > 1) {
    const k = split(end - start)
    if (index < start + k) {
      fromRoot.push([start + k, end])
      end = start + k
    } else {
      fromRoot.push([start, start + k])
      start += k
    }
  }
  return fromRoot.reverse()
}

/**
 * The leaf ranges whose hashes form the consistency proof PROOF(m, D[n])
 * (RFC 6962 §2.1.2, SUBPROOF), in the RFC's order. Defined for 1 ≤ m ≤ n;
 * m = n gives the empty proof.
 */
export const consistencyProofRanges = (m: number, n: number): LeafRange[] => {
  if (!isSize(m) || !isSize(n) || m < 1 || m > n) {
    throw new RangeError(`no consistency proof from tree size ${m} to ${n}`)
  }
  const fromRoot: LeafRange[] = []
  let start = 0
  let end = n
  // SUBPROOF(m − start, D[start:end], b); b stays true while the old tree is a prefix of the subtree.
  let b = true
  while (m - start !== end - start) {
    const k = split(end - start)
    if (m - start <= k) {
      fromRoot.push([start + k, end])
      end = start + k
    } else {
      fromRoot.push([start, start + k])
      start += k
      b = false
    }
  }
  if (!b) fromRoot.push([start, end])
  return fromRoot.reverse()
}

const rangeHashes = (leafHashes: readonly string[], ranges: LeafRange[]): string[] => {
  const leaves = leafHashes.map(fromHex)
  return ranges.map(([start, end]) => toHex(mth(leaves, start, end)))
}

/** The audit path of leaf `index` in the tree of the first `size` leaf hashes. */
export const inclusionProof = (leafHashes: readonly string[], index: number, size: number): string[] => {
  checkRange(leafHashes.length, 0, size)
  return rangeHashes(leafHashes, inclusionProofRanges(index, size))
}

/** The consistency proof from the tree of the first m leaf hashes to that of the first n. */
export const consistencyProof = (leafHashes: readonly string[], m: number, n: number): string[] => {
  checkRange(leafHashes.length, 0, n)
  return rangeHashes(leafHashes, consistencyProofRanges(m, n))
}

const pathDigests = (path: unknown): Digest[] | undefined =>
  Array.isArray(path) && path.every(isHashHex) ? path.map(fromHex) : undefined

/** RFC 9162 §2.1.3.2: whether `path` proves leaf `index` of a tree of `size` leaves with root `rootHex`. */
export const verifyInclusion = (
  leafHashHex: string,
  index: number,
  size: number,
  path: readonly string[],
  rootHex: string,
): boolean => {
  const proof = pathDigests(path)
  if (!proof || !isHashHex(leafHashHex) || !isHashHex(rootHex) || !isSize(index) || !isSize(size)) return false
  if (index >= size) return false
  let fn = index
  let sn = size - 1
  let r = fromHex(leafHashHex)
  for (const p of proof) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      r = hashChildren(p, r)
      while (fn % 2 === 0 && fn !== 0) {
        fn = half(fn)
        sn = half(sn)
      }
    } else {
      r = hashChildren(r, p)
    }
    fn = half(fn)
    sn = half(sn)
  }
  return sn === 0 && r === fromHex(rootHex)
}

const isPowerOfTwo = (n: number): boolean => n === split(n + 1)

/**
 * RFC 9162 §2.1.4.2: whether `path` proves the tree of size m with root `rootM`
 * is a prefix of the tree of size n with root `rootN`. Defined for 1 ≤ m ≤ n;
 * m = n holds with an empty path and equal roots.
 */
export const verifyConsistency = (
  m: number,
  n: number,
  rootM: string,
  rootN: string,
  path: readonly string[],
): boolean => {
  const given = pathDigests(path)
  if (!given || !isHashHex(rootM) || !isHashHex(rootN) || !isSize(m) || !isSize(n)) return false
  if (m < 1 || m > n) return false
  if (m === n) return given.length === 0 && rootM === rootN
  if (given.length === 0) return false
  const proof = isPowerOfTwo(m) ? [fromHex(rootM), ...given] : given
  let fn = m - 1
  let sn = n - 1
  while (fn % 2 === 1) {
    fn = half(fn)
    sn = half(sn)
  }
  let fr = proof[0]!
  let sr = proof[0]!
  for (const c of proof.slice(1)) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      fr = hashChildren(c, fr)
      sr = hashChildren(c, sr)
      while (fn % 2 === 0 && fn !== 0) {
        fn = half(fn)
        sn = half(sn)
      }
    } else {
      sr = hashChildren(sr, c)
    }
    fn = half(fn)
    sn = half(sn)
  }
  return sn === 0 && fr === fromHex(rootM) && sr === fromHex(rootN)
}
