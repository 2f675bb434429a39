import { describe, expect, it } from "vitest"
import { BLOCK_RADII, BLOCKS, blocksOf, hamming, IMAGE_RADIUS, probedValues } from "../../src/content/imageHash.ts"

/** A hash of 16 hex digits from a seeded generator. */
const rng = (seed: number) => {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

describe("the image multi-index's probe", () => {
  it("every way of spreading up to IMAGE_RADIUS differing bits over the blocks leaves one block within its radius", () => {
    /** The per-block distances (0..16 each) summing to at most IMAGE_RADIUS that no block's radius covers. */
    const missed = (radii: ReadonlyArray<number>) => {
      const out: Array<string> = []
      const walk = (block: number, left: number, distances: Array<number>) => {
        if (block === BLOCKS) {
          if (!distances.some((d, i) => d <= radii[i]!)) out.push(distances.join(","))
          return
        }
        for (let d = 0; d <= Math.min(16, left); d++) walk(block + 1, left - d, [...distances, d])
      }
      walk(0, IMAGE_RADIUS, [])
      return out
    }
    expect(missed(BLOCK_RADII)).toEqual([])
    // No radius is larger than it must be: one less in any block misses some spread.
    for (let i = 0; i < BLOCKS; i++)
      expect(missed(BLOCK_RADII.map((r, j) => (j === i ? r - 1 : r))).length, `block ${i}`).toBeGreaterThan(0)
  })

  it("a stored hash within IMAGE_RADIUS of the probe is among the values probed, and the probe is 428 lookups", () => {
    const r = rng(31)
    const hex = () => Array.from({ length: 16 }, () => Math.floor(r() * 16).toString(16)).join("")
    for (let n = 0; n < 2000; n++) {
      const stored = hex()
      // Flip up to IMAGE_RADIUS bits, concentrated in few blocks half the time (the hard cases).
      let bits = BigInt(`0x${stored}`)
      const flips = Math.floor(r() * (IMAGE_RADIUS + 1))
      const focus = Math.floor(r() * 4)
      for (let f = 0; f < flips; f++) {
        const bit = r() < 0.5 ? focus * 16 + Math.floor(r() * 16) : Math.floor(r() * 64)
        bits ^= 1n << BigInt(63 - bit)
      }
      const probe = bits.toString(16).padStart(16, "0")
      const distance = hamming(stored, probe)
      const probed = probedValues(probe)
      expect(probed.map((p) => p.length)).toEqual([137, 137, 137, 17])
      const found = blocksOf(stored).some((v, i) => probed[i]!.includes(v))
      if (distance <= IMAGE_RADIUS) expect(found, `${stored} ${probe} at ${distance}`).toBe(true)
    }
  })
})
