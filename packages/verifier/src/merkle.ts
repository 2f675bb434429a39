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

const LEAF_PREFIX = Uint8Array.of(0x00)
const NODE_PREFIX = Uint8Array.of(0x01)
const HEX_HASH = /^[0-9a-f]{64}$/

/**
 * One-shot SHA-256 as a Buffer: the digest as a "binary" (latin1) string, one char a byte, copied into a Buffer.
 * Measured on Node 20 and 24, `hash(…, "buffer")` costs 1.0–1.5 µs a call against 0.4 µs for this
 * (decisions.md, 2026-11-30, eighth session).
 */
const digest = (data: Uint8Array | string): Buffer => Buffer.from(hash("sha256", data, "binary"), "latin1")

/** One-shot SHA-256 of the parts concatenated. */
const sha256 = (...parts: Uint8Array[]): Buffer => digest(parts.length === 1 ? parts[0]! : Buffer.concat(parts))

/** Whether `value` is a SHA-256 hash as this module writes it: 64 lowercase hex digits. */
export const isHashHex = (value: unknown): value is string => typeof value === "string" && HEX_HASH.test(value)

const toBytes = (hex: string): Buffer => {
  if (!isHashHex(hex)) throw new TypeError(`not a SHA-256 hash in lowercase hex: ${JSON.stringify(hex)}`)
  return Buffer.from(hex, "hex")
}

const isSize = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0

/** The largest power of two smaller than n (n ≥ 2): the size of the left subtree. */
const split = (n: number): number => {
  let k = 1
  while (k * 2 < n) k *= 2
  return k
}

const half = (n: number): number => Math.floor(n / 2)

/** 0x01 ‖ left ‖ right for two 32-byte hashes, written in place: one buffer for every node hashed. */
const NODE_INPUT = Buffer.alloc(65)
NODE_INPUT[0] = 0x01

const hashChildren = (left: Uint8Array, right: Uint8Array): Buffer => {
  if (left.length !== 32 || right.length !== 32) return sha256(NODE_PREFIX, left, right)
  NODE_INPUT.set(left, 1)
  NODE_INPUT.set(right, 33)
  return digest(NODE_INPUT)
}

/** MTH({}) = SHA-256() — the root of the empty tree. */
export const EMPTY_ROOT = sha256().toString("hex")

/** MTH({d}) = SHA-256(0x00 ‖ d). */
export const leafHash = (data: Uint8Array): string => sha256(LEAF_PREFIX, data).toString("hex")

/** SHA-256(0x01 ‖ left ‖ right). */
export const nodeHash = (leftHex: string, rightHex: string): string =>
  hashChildren(toBytes(leftHex), toBytes(rightHex)).toString("hex")

/** The leaf hash of an event before its workspace's `attributedFrom`: the leaf data is its chain hash, hex-decoded. */
export const chainLeaf = (chainHashHex: string): string => chainLeafBytes(chainHashHex).toString("hex")

/** `chainLeaf` as raw bytes (what `TreeBuilder.pushBytes` takes). */
export const chainLeafBytes = (chainHashHex: string): Buffer => sha256(LEAF_PREFIX, toBytes(chainHashHex))

/** The fields of an event its Merkle leaf covers beyond the chain hash (which covers type, data and timestamp). */
export interface LeafEvent {
  readonly hash: string
  readonly id: string
  readonly agentId: string | null
  readonly actor: { readonly type: string; readonly id: string | null }
  readonly occurredAt: string | null
}

/**
 * The leaf hash of an event from its workspace's `attributedFrom` on: the leaf data is the UTF-8 JCS of
 * `{actor: {id, type}, agentId, hash, id, occurredAt}`, so who an event is attributed to is committed by
 * every checkpoint that covers it, while the chain hash (D8) stays as it is. Such leaf data is never 32
 * bytes long, so no event has the same leaf in both forms.
 */
export const attributedLeaf = (e: LeafEvent): string => attributedLeafBytes(e).toString("hex")

const json = JSON.stringify
/**
 * `attributedLeaf` as raw bytes. The leaf data is written out directly: its keys are fixed and already in JCS
 * order, and JCS serialises strings and null as `JSON.stringify` does, so this is the JCS of the object
 * (a test checks it against `canonicalize`), without building and sorting an object per event.
 */
export const attributedLeafBytes = (e: LeafEvent): Buffer => {
  if (!isHashHex(e.hash)) throw new TypeError(`not a SHA-256 hash in lowercase hex: ${JSON.stringify(e.hash)}`)
  // "\u0000" is the leaf prefix byte 0x00 in UTF-8.
  const data = `\u0000{"actor":{"id":${json(e.actor.id ?? null)},"type":${json(e.actor.type)}},"agentId":${json(e.agentId ?? null)},"hash":"${e.hash}","id":${json(e.id)},"occurredAt":${json(e.occurredAt ?? null)}}`
  return digest(data)
}

/** The leaf hash of event `sequence` in a workspace whose leaves cover attribution from `attributedFrom` on. */
export const eventLeaf = (e: LeafEvent & { readonly sequence: number }, attributedFrom: number): string =>
  e.sequence >= attributedFrom ? attributedLeaf(e) : chainLeaf(e.hash)

/** `eventLeaf` as raw bytes (what `TreeBuilder.pushBytes` takes). */
export const eventLeafBytes = (e: LeafEvent & { readonly sequence: number }, attributedFrom: number): Buffer =>
  e.sequence >= attributedFrom ? attributedLeafBytes(e) : chainLeafBytes(e.hash)

const mth = (leaves: readonly Buffer[], start: number, end: number): Buffer => {
  const n = end - start
  if (n === 0) return sha256()
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
  /** Perfect subtree roots, largest (leftmost) first, with their sizes. */
  private readonly peaks: Array<{ size: number; hash: Buffer }> = []
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
    this.pushBytes(toBytes(leafHashHex))
  }

  /** `push` of a leaf hash as its 32 raw bytes (no hex round trip: what verifying a whole chain pushes). */
  pushBytes(leafHash: Uint8Array): void {
    if (leafHash.length !== 32) throw new TypeError(`a leaf hash is 32 bytes, not ${leafHash.length}`)
    let node = { size: 1, hash: Buffer.isBuffer(leafHash) ? leafHash : Buffer.from(leafHash) }
    let top = this.peaks.at(-1)
    while (top !== undefined && top.size === node.size) {
      this.peaks.pop()
      node = { size: top.size * 2, hash: hashChildren(top.hash, node.hash) }
      // It covers the leaves [count + 1 - size, count + 1): index (count + 1) / size - 1 at its level.
      if (this.onSubtree !== undefined && node.size >= this.minSubtree)
        this.onSubtree(Math.log2(node.size), (this.count + 1) / node.size - 1, node.hash.toString("hex"))
      top = this.peaks.at(-1)
    }
    this.peaks.push(node)
    this.count += 1
  }

  /** MTH of the leaves pushed so far (EMPTY_ROOT for none). */
  root(): string {
    let acc: Buffer | undefined
    for (let i = this.peaks.length - 1; i >= 0; i--) {
      const peak = this.peaks[i]!.hash
      acc = acc === undefined ? peak : hashChildren(peak, acc)
    }
    return (acc ?? sha256()).toString("hex")
  }
}

/** MTH(D[start:end]) of the given leaf hashes. */
export const hashRange = (leafHashes: readonly string[], start: number, end: number): string => {
  checkRange(leafHashes.length, start, end)
  return mth(leafHashes.slice(start, end).map(toBytes), 0, end - start).toString("hex")
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
  const leaves = leafHashes.map(toBytes)
  return ranges.map(([start, end]) => mth(leaves, start, end).toString("hex"))
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

const pathBytes = (path: unknown): Buffer[] | undefined =>
  Array.isArray(path) && path.every(isHashHex) ? path.map((p) => Buffer.from(p, "hex")) : undefined

/** RFC 9162 §2.1.3.2: whether `path` proves leaf `index` of a tree of `size` leaves with root `rootHex`. */
export const verifyInclusion = (
  leafHashHex: string,
  index: number,
  size: number,
  path: readonly string[],
  rootHex: string,
): boolean => {
  const proof = pathBytes(path)
  if (!proof || !isHashHex(leafHashHex) || !isHashHex(rootHex) || !isSize(index) || !isSize(size)) return false
  if (index >= size) return false
  let fn = index
  let sn = size - 1
  let r = toBytes(leafHashHex)
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
  return sn === 0 && r.equals(toBytes(rootHex))
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
  const given = pathBytes(path)
  if (!given || !isHashHex(rootM) || !isHashHex(rootN) || !isSize(m) || !isSize(n)) return false
  if (m < 1 || m > n) return false
  if (m === n) return given.length === 0 && rootM === rootN
  if (given.length === 0) return false
  const proof = isPowerOfTwo(m) ? [toBytes(rootM), ...given] : given
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
  return sn === 0 && fr.equals(toBytes(rootM)) && sr.equals(toBytes(rootN))
}
