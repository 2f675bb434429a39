import { createHash } from "node:crypto"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { canonicalize } from "../src/jcs.ts"
import {
  attributedLeaf,
  chainLeaf,
  consistencyProof,
  consistencyProofRanges,
  EMPTY_ROOT,
  eventLeaf,
  hashRange,
  inclusionProof,
  inclusionProofRanges,
  leafHash,
  nodeHash,
  rootOf,
  TreeBuilder,
  verifyConsistency,
  verifyInclusion,
} from "../src/merkle.ts"

// ---------------------------------------------------------------------------
// Reference implementation, straight from the definitions of RFC 6962 §2.1
// over arrays of leaf byte strings; shares no code with src/merkle.ts.
// ---------------------------------------------------------------------------

const sha256 = (...parts: Uint8Array[]): Buffer => createHash("sha256").update(Buffer.concat(parts)).digest()
const hex = (b: Buffer): string => b.toString("hex")
const refLeaf = (d: Uint8Array): Buffer => sha256(Buffer.of(0x00), d)
const refNode = (l: Buffer, r: Buffer): Buffer => sha256(Buffer.of(0x01), l, r)
/** k: the largest power of two smaller than n (n > 1). */
const refK = (n: number): number => 2 ** (Math.ceil(Math.log2(n)) - 1)

/** MTH(D[n]). */
const MTH = (D: readonly Buffer[]): Buffer => {
  const n = D.length
  if (n === 0) return sha256()
  if (n === 1) return refLeaf(D[0]!)
  const k = refK(n)
  return refNode(MTH(D.slice(0, k)), MTH(D.slice(k)))
}

/** MTH over leaf hashes given directly: the tree above its leaves. */
const refRoot = (H: readonly Buffer[]): Buffer => {
  const n = H.length
  if (n === 0) return sha256()
  if (n === 1) return H[0]!
  const k = refK(n)
  return refNode(refRoot(H.slice(0, k)), refRoot(H.slice(k)))
}

/** PATH(m, D[n]) (§2.1.1). */
const PATH = (m: number, D: readonly Buffer[]): Buffer[] => {
  const n = D.length
  if (n === 1) return []
  const k = refK(n)
  return m < k ? [...PATH(m, D.slice(0, k)), MTH(D.slice(k))] : [...PATH(m - k, D.slice(k)), MTH(D.slice(0, k))]
}

/** SUBPROOF(m, D[n], b) (§2.1.2). */
const SUBPROOF = (m: number, D: readonly Buffer[], b: boolean): Buffer[] => {
  const n = D.length
  if (m === n) return b ? [] : [MTH(D)]
  const k = refK(n)
  return m <= k
    ? [...SUBPROOF(m, D.slice(0, k), b), MTH(D.slice(k))]
    : [...SUBPROOF(m - k, D.slice(k), false), MTH(D.slice(0, k))]
}

/** PROOF(m, D[n]) (§2.1.2). */
const PROOF = (m: number, D: readonly Buffer[]): Buffer[] => SUBPROOF(m, D, true)

/** The root PATH(m, D[n]) leads to from `leaf`, undoing the recursion of PATH; undefined if the path does not fit. */
const rebuildFromPath = (leaf: Buffer, m: number, n: number, path: readonly Buffer[]): Buffer | undefined => {
  if (n === 1) return path.length === 0 ? leaf : undefined
  if (path.length === 0) return undefined
  const k = refK(n)
  const sibling = path.at(-1)!
  const rest = path.slice(0, -1)
  if (m < k) {
    const left = rebuildFromPath(leaf, m, k, rest)
    return left && refNode(left, sibling)
  }
  const right = rebuildFromPath(leaf, m - k, n - k, rest)
  return right && refNode(sibling, right)
}

const refVerifyInclusion = (leaf: Buffer, m: number, n: number, path: readonly Buffer[], root: Buffer): boolean =>
  Number.isInteger(m) && m >= 0 && m < n && (rebuildFromPath(leaf, m, n, path)?.equals(root) ?? false)

/** The [old, new] roots SUBPROOF(m, D[n], b) leads to, undoing its recursion; undefined if the proof does not fit. */
const rebuildFromSubproof = (
  m: number,
  n: number,
  proof: readonly Buffer[],
  b: boolean,
  rootM: Buffer,
): [Buffer, Buffer] | undefined => {
  if (m === n) {
    if (b) return proof.length === 0 ? [rootM, rootM] : undefined
    return proof.length === 1 ? [proof[0]!, proof[0]!] : undefined
  }
  if (proof.length === 0) return undefined
  const k = refK(n)
  const sibling = proof.at(-1)!
  const rest = proof.slice(0, -1)
  if (m <= k) {
    const sub = rebuildFromSubproof(m, k, rest, b, rootM)
    return sub && [sub[0], refNode(sub[1], sibling)]
  }
  const sub = rebuildFromSubproof(m - k, n - k, rest, false, rootM)
  return sub && [refNode(sibling, sub[0]), refNode(sibling, sub[1])]
}

const refVerifyConsistency = (
  m: number,
  n: number,
  rootM: Buffer,
  rootN: Buffer,
  proof: readonly Buffer[],
): boolean => {
  if (!(m >= 1 && m <= n)) return false
  const roots = rebuildFromSubproof(m, n, proof, true, rootM)
  if (!roots) return false
  return roots[0].equals(rootM) && roots[1].equals(rootN)
}

// ---------------------------------------------------------------------------

const MAX = 64
/** 65 distinct 32-byte leaves, like event chain hashes. */
const DATA = Array.from({ length: MAX + 1 }, (_, i) => sha256(Buffer.from(`leaf ${i}`)))
const LEAVES = DATA.map((d) => leafHash(d))
const ROOTS = Array.from({ length: MAX + 2 }, (_, n) => MTH(DATA.slice(0, n)))
const SIZES = Array.from({ length: MAX }, (_, i) => i + 1)

const buf = (h: string): Buffer => Buffer.from(h, "hex")
/** `h` with one bit flipped. */
const flip = (h: string, bit: number): string => {
  const b = buf(h)
  b[(bit >> 3) % 32]! ^= 1 << (bit & 7)
  return hex(b)
}

describe("hashes", () => {
  it("has the RFC 6962 empty-tree root", () => {
    expect(EMPTY_ROOT).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect(rootOf([])).toBe(EMPTY_ROOT)
  })

  it("hashes leaves and nodes with the 0x00 and 0x01 prefixes", () => {
    expect(leafHash(DATA[0]!)).toBe(hex(refLeaf(DATA[0]!)))
    expect(leafHash(new Uint8Array())).toBe(hex(refLeaf(Buffer.alloc(0))))
    expect(nodeHash(LEAVES[0]!, LEAVES[1]!)).toBe(hex(refNode(buf(LEAVES[0]!), buf(LEAVES[1]!))))
    const chainHash = hex(DATA[3]!)
    expect(chainLeaf(chainHash)).toBe(hex(refLeaf(DATA[3]!)))
  })

  it("hashes an attributed leaf over the JCS of hash, id, agentId, actor and occurredAt", () => {
    const event = {
      sequence: 7,
      hash: hex(DATA[3]!),
      id: "evt_1",
      agentId: "agt_é",
      actor: { type: "api_key", id: "key_1" },
      occurredAt: null,
    }
    // Written out by hand: keys sorted, no spaces, UTF-8.
    const text = `{"actor":{"id":"key_1","type":"api_key"},"agentId":"agt_é","hash":"${event.hash}","id":"evt_1","occurredAt":null}`
    const expected = hex(refLeaf(Buffer.from(text, "utf8")))
    expect(attributedLeaf(event)).toBe(expected)
    expect(eventLeaf(event, 1)).toBe(expected)
    expect(eventLeaf(event, 7)).toBe(expected)
    expect(eventLeaf(event, 8), "before attributedFrom: the chain hash alone").toBe(chainLeaf(event.hash))
    // Each attributed field moves the leaf.
    for (const changed of [
      { ...event, agentId: "agt_other" },
      { ...event, agentId: null },
      { ...event, actor: { type: "api_key", id: "key_2" } },
      { ...event, actor: { type: "system", id: "key_1" } },
      { ...event, id: "evt_2" },
      { ...event, occurredAt: "2025-01-01T00:00:00.000Z" },
    ])
      expect(attributedLeaf(changed), JSON.stringify(changed)).not.toBe(expected)
  })

  it("writes the attributed leaf data as the JCS of its object, whatever the strings hold", () => {
    // Any text: quotes, backslashes, control characters, lone surrogates, astral characters.
    const text = fc.string({ unit: "binary", maxLength: 12 })
    const maybe = fc.option(text, { nil: null })
    fc.assert(
      fc.property(
        text,
        text,
        maybe,
        maybe,
        maybe,
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        (id, type, actorId, agentId, occurredAt, h) => {
          const event = { hash: hex(Buffer.from(h)), id, agentId, actor: { type, id: actorId }, occurredAt }
          const jcs = canonicalize({ actor: { id: actorId, type }, agentId, hash: event.hash, id, occurredAt })
          const expected = hex(refLeaf(Buffer.from(jcs, "utf8")))
          expect(attributedLeaf(event)).toBe(expected)
          // The tree's own path to the same leaf: a tree of one leaf has that leaf as its root.
          const tree = new TreeBuilder()
          tree.pushEvent({ ...event, sequence: 1 }, 1)
          expect(tree.root()).toBe(expected)
        },
      ),
      { numRuns: 500 },
    )
    expect(() =>
      attributedLeaf({
        hash: "AB",
        id: "e",
        agentId: null,
        actor: { type: "system", id: null },
        occurredAt: null,
      }),
    ).toThrow(TypeError)
  })

  it("takes events with the same roots as their leaves in hex, on either side of attributedFrom", () => {
    const hexTree = new TreeBuilder()
    const eventTree = new TreeBuilder()
    const leaves: Buffer[] = []
    // Hashes whose bytes span 0x00–0xff, so a digest written into the node's input as anything but one byte a
    // character would change a root.
    for (let n = 1; n <= 40; n++) {
      const event = {
        sequence: n,
        hash: hex(sha256(Buffer.of(n), Buffer.from(`event ${n}`))),
        id: `evt_${n}`,
        agentId: n % 3 === 0 ? null : "agt_é",
        actor: { type: "api_key", id: n % 2 === 0 ? null : `key_${n}` },
        occurredAt: n % 5 === 0 ? "2026-12-01T00:00:00.000Z" : null,
      }
      const leaf = eventLeaf(event, 11)
      hexTree.push(leaf)
      eventTree.pushEvent(event, 11)
      leaves.push(Buffer.from(leaf, "hex"))
      expect(eventTree.root(), String(n)).toBe(hexTree.root())
      // Against the reference built from the leaf hashes alone (MTH over leaf data would hash them again).
      expect(eventTree.root(), String(n)).toBe(hex(refRoot(leaves)))
    }
    expect(() =>
      eventTree.pushEvent(
        { sequence: 1, hash: "AB", id: "e", agentId: null, actor: { type: "system", id: null }, occurredAt: null },
        2,
      ),
    ).toThrow(TypeError)
  })

  it("writes an attributed leaf's data exactly as canonicalize does, whatever the strings hold", () => {
    // attributedLeaf writes the JCS of its fixed shape out by hand: it must be canonicalize's text, byte for byte.
    const awkward = ['a"b\\c', "line\nbreak\ttab\u0000nul\u001f", "\u2028\u2029", "\ud800 lone", "😀 astral", "é", ""]
    const viaJcs = (e: {
      hash: string
      id: string
      agentId: string | null
      actor: { type: string; id: string | null }
      occurredAt: string | null
    }) =>
      hex(
        refLeaf(
          Buffer.from(
            canonicalize({
              actor: { id: e.actor.id, type: e.actor.type },
              agentId: e.agentId,
              hash: e.hash,
              id: e.id,
              occurredAt: e.occurredAt,
            }),
            "utf8",
          ),
        ),
      )
    for (const [i, s] of awkward.entries())
      for (const e of [
        { hash: hex(DATA[i % DATA.length]!), id: s, agentId: s, actor: { type: s, id: s }, occurredAt: s },
        { hash: hex(DATA[0]!), id: `evt_${s}`, agentId: null, actor: { type: "system", id: null }, occurredAt: null },
      ])
        expect(attributedLeaf(e), JSON.stringify(e)).toBe(viaJcs(e))
    expect(() =>
      attributedLeaf({ hash: "ABC", id: "x", agentId: null, actor: { type: "system", id: null }, occurredAt: null }),
    ).toThrow(TypeError)
  })

  it("builds the root one leaf at a time, equal to MTH at every size", () => {
    const tree = new TreeBuilder()
    expect(tree.root()).toBe(EMPTY_ROOT)
    const leaves: string[] = []
    for (let n = 1; n <= 70; n++) {
      const leaf = hex(refLeaf(Buffer.from(`leaf ${n}`)))
      leaves.push(leaf)
      tree.push(leaf)
      expect(tree.size).toBe(n)
      expect(tree.root(), String(n)).toBe(hex(MTH(leaves.map((_, i) => Buffer.from(`leaf ${i + 1}`)))))
    }
  })

  it("tells of every aligned perfect subtree of the minimum size and up as it completes, with its hash", () => {
    const seen: Array<[number, number, string]> = []
    const tree = new TreeBuilder((level, index, h) => seen.push([level, index, h]), 2)
    const leaves = Array.from({ length: 37 }, (_, i) => hex(refLeaf(Buffer.from(`leaf ${i + 1}`))))
    for (const leaf of leaves) tree.push(leaf)
    // Every subtree of 4, 8, 16 and 32 leaves aligned to its size within the first 37 leaves, and no other.
    const expected: Array<[number, number, string]> = []
    for (let level = 2; 2 ** level <= 37; level++)
      for (let index = 0; (index + 1) * 2 ** level <= 37; index++)
        expected.push([level, index, hashRange(leaves, index * 2 ** level, (index + 1) * 2 ** level)])
    const order = (a: [number, number, string], b: [number, number, string]) => a[0] - b[0] || a[1] - b[1]
    expect(seen.sort(order)).toEqual(expected.sort(order))
    expect(tree.root()).toBe(rootOf(leaves))
  })

  it("refuses hashes that are not 64 lowercase hex digits", () => {
    expect(() => chainLeaf("abc")).toThrow(TypeError)
    expect(() => nodeHash(LEAVES[0]!.toUpperCase(), LEAVES[1]!)).toThrow(TypeError)
    expect(() => rootOf(["zz"])).toThrow(TypeError)
  })

  it("matches the certificate-transparency test vectors", () => {
    // The 8 leaves and tree heads of the CT reference implementation's merkle tree tests.
    const data = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
    const roots = [
      "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
      "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
      "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
      "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
      "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
    const leaves = data.map((d) => leafHash(buf(d)))
    expect(roots.map((_, i) => rootOf(leaves.slice(0, i + 1)))).toEqual(roots)
  })

  it("computes MTH like the reference for every size 0..64", () => {
    for (let n = 0; n <= MAX; n++) expect(rootOf(LEAVES.slice(0, n))).toBe(hex(ROOTS[n]!))
  })

  it("hashes any leaf range like the reference", () => {
    for (let start = 0; start <= 20; start++) {
      for (let end = start; end <= 20; end++) {
        expect(hashRange(LEAVES, start, end)).toBe(hex(MTH(DATA.slice(start, end))))
      }
    }
    expect(() => hashRange(LEAVES, 3, 2)).toThrow(RangeError)
    expect(() => hashRange(LEAVES, 0, MAX + 2)).toThrow(RangeError)
  })
})

describe("inclusion proofs", () => {
  it.each(SIZES)("tree size %i: every leaf's proof is PATH and verifies; corruptions fail", (n) => {
    const root = hex(ROOTS[n]!)
    for (let i = 0; i < n; i++) {
      const leaf = LEAVES[i]!
      const path = inclusionProof(LEAVES, i, n)
      expect(path).toEqual(PATH(i, DATA.slice(0, n)).map(hex))
      expect(inclusionProofRanges(i, n).map(([s, e]) => hashRange(LEAVES, s, e))).toEqual(path)
      expect(verifyInclusion(leaf, i, n, path, root)).toBe(true)

      // A flipped bit anywhere: in each path element, the leaf, the root.
      path.forEach((_, j) => {
        const bad = path.with(j, flip(path[j]!, 31 * i + 7 * j))
        expect(verifyInclusion(leaf, i, n, bad, root)).toBe(false)
      })
      expect(verifyInclusion(flip(leaf, i), i, n, path, root)).toBe(false)
      expect(verifyInclusion(leaf, i, n, path, flip(root, n))).toBe(false)

      // Missing and extra path elements.
      if (path.length > 0) {
        expect(verifyInclusion(leaf, i, n, path.slice(1), root)).toBe(false)
        expect(verifyInclusion(leaf, i, n, path.slice(0, -1), root)).toBe(false)
      }
      expect(verifyInclusion(leaf, i, n, [...path, LEAVES[n]!], root)).toBe(false)
      expect(verifyInclusion(leaf, i, n, [LEAVES[n]!, ...path], root)).toBe(false)

      // The root of another size.
      expect(verifyInclusion(leaf, i, n, path, hex(ROOTS[n + 1]!))).toBe(false)

      // Every other index, including index = size.
      for (let j = 0; j <= n; j++) if (j !== i) expect(verifyInclusion(leaf, j, n, path, root)).toBe(false)
      expect(verifyInclusion(leaf, -1, n, path, root)).toBe(false)
      expect(verifyInclusion(leaf, i + 0.5, n, path, root)).toBe(false)

      // Another size n ± 1 against the same root. The audit path does not commit
      // to the size (the signed root does), so when the path of leaf i has the
      // same shape in both trees the RFC algorithm accepts it, exactly as the
      // reference does; with the other tree's own root it always fails.
      for (const size of [n - 1, n + 1]) {
        const accepted = verifyInclusion(leaf, i, size, path, root)
        expect(accepted).toBe(refVerifyInclusion(buf(leaf), i, size, path.map(buf), ROOTS[n]!))
        if (accepted) expect(PATH(i, DATA.slice(0, size)).length).toBe(path.length)
        expect(verifyInclusion(leaf, i, size, path, hex(ROOTS[size]!))).toBe(false)
      }
    }
  })

  it("rejects indices outside the tree and malformed input", () => {
    const path = inclusionProof(LEAVES, 2, 5)
    expect(verifyInclusion(LEAVES[2]!, 5, 5, path, hex(ROOTS[5]!))).toBe(false)
    expect(verifyInclusion(LEAVES[2]!, 2, 0, [], EMPTY_ROOT)).toBe(false)
    expect(verifyInclusion(LEAVES[2]!, 2, 5, [...path.slice(0, -1), "xyz"], hex(ROOTS[5]!))).toBe(false)
    expect(verifyInclusion(LEAVES[2]!, 2, 5, "nope" as unknown as string[], hex(ROOTS[5]!))).toBe(false)
    expect(() => inclusionProofRanges(5, 5)).toThrow(RangeError)
    expect(() => inclusionProofRanges(0, 0)).toThrow(RangeError)
    expect(() => inclusionProof(LEAVES, 0, MAX + 2)).toThrow(RangeError)
  })

  it("computes the ranges of large trees without touching leaves", () => {
    const size = 2 ** 40 + 3
    const ranges = inclusionProofRanges(2 ** 40 + 1, size)
    expect(ranges).toEqual([
      [2 ** 40, 2 ** 40 + 1],
      [2 ** 40 + 2, 2 ** 40 + 3],
      [0, 2 ** 40],
    ])
  })
})

describe("consistency proofs", () => {
  it.each(SIZES)("tree size %i: the proof from every m ≤ n is PROOF and verifies; corruptions fail", (n) => {
    const rootN = hex(ROOTS[n]!)
    for (let m = 1; m <= n; m++) {
      const rootM = hex(ROOTS[m]!)
      const path = consistencyProof(LEAVES, m, n)
      expect(path).toEqual(PROOF(m, DATA.slice(0, n)).map(hex))
      expect(consistencyProofRanges(m, n).map(([s, e]) => hashRange(LEAVES, s, e))).toEqual(path)
      expect(verifyConsistency(m, n, rootM, rootN, path)).toBe(true)
      expect(refVerifyConsistency(m, n, ROOTS[m]!, ROOTS[n]!, path.map(buf))).toBe(true)

      path.forEach((_, j) => {
        const bad = path.with(j, flip(path[j]!, 13 * m + 5 * j))
        expect(verifyConsistency(m, n, rootM, rootN, bad)).toBe(false)
      })
      expect(verifyConsistency(m, n, flip(rootM, m), rootN, path)).toBe(false)
      expect(verifyConsistency(m, n, rootM, flip(rootN, n), path)).toBe(false)
      if (m < n) expect(verifyConsistency(m, n, rootN, rootM, path)).toBe(false)

      if (path.length > 0) {
        expect(verifyConsistency(m, n, rootM, rootN, path.slice(1))).toBe(false)
        expect(verifyConsistency(m, n, rootM, rootN, path.slice(0, -1))).toBe(false)
      }
      expect(verifyConsistency(m, n, rootM, rootN, [...path, LEAVES[n]!])).toBe(false)
      expect(verifyConsistency(m, n, rootM, rootN, [LEAVES[n]!, ...path])).toBe(false)

      // Other sizes with the same roots: as with inclusion, the sizes are bound by
      // the signed roots, so the package must agree with the reference; with the
      // roots of the claimed sizes the proof always fails.
      for (const [m2, n2] of [
        [m - 1, n],
        [m + 1, n],
        [m, n - 1],
        [m, n + 1],
      ] as const) {
        const accepted = verifyConsistency(m2, n2, rootM, rootN, path)
        expect(accepted).toBe(refVerifyConsistency(m2, n2, ROOTS[m]!, ROOTS[n]!, path.map(buf)))
        if (m2 >= 1 && m2 <= n2 && (m2 !== m || n2 !== n)) {
          expect(verifyConsistency(m2, n2, hex(ROOTS[m2]!), hex(ROOTS[n2]!), path)).toBe(false)
        }
      }
    }
  })

  it("treats m = n as the empty proof between equal roots", () => {
    const root = hex(ROOTS[7]!)
    expect(consistencyProofRanges(7, 7)).toEqual([])
    expect(verifyConsistency(7, 7, root, root, [])).toBe(true)
    expect(verifyConsistency(7, 7, root, hex(ROOTS[8]!), [])).toBe(false)
    expect(verifyConsistency(7, 7, root, root, [root])).toBe(false)
  })

  it("rejects m = 0, m > n and malformed input", () => {
    expect(verifyConsistency(0, 5, EMPTY_ROOT, hex(ROOTS[5]!), [])).toBe(false)
    expect(verifyConsistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])).toBe(false)
    expect(verifyConsistency(6, 5, hex(ROOTS[6]!), hex(ROOTS[5]!), consistencyProof(LEAVES, 5, 6))).toBe(false)
    expect(verifyConsistency(3, 5, hex(ROOTS[3]!), hex(ROOTS[5]!), [])).toBe(false)
    expect(verifyConsistency(3, 5, hex(ROOTS[3]!), "nope", consistencyProof(LEAVES, 3, 5))).toBe(false)
    expect(() => consistencyProofRanges(0, 5)).toThrow(RangeError)
    expect(() => consistencyProofRanges(6, 5)).toThrow(RangeError)
  })
})
