import { describe, expect, it } from "vitest"
import { type IdPrefix, newId } from "../src/shared/ids.ts"

const PREFIXES: ReadonlyArray<IdPrefix> = [
  "ws",
  "agt",
  "ver",
  "pol",
  "evt",
  "enf",
  "apr",
  "cnt",
  "whk",
  "dlv",
  "key",
  "rpt",
  "crt",
]

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
/** 10 characters of milliseconds and 16 of randomness: a ULID, lowercase. */
const BODY = /^[0-9abcdefghjkmnpqrstvwxyz]{26}$/

const decodeTime = (id: string): number => {
  const body = id.slice(id.indexOf("_") + 1)
  let ms = 0
  for (const c of body.slice(0, 10)) ms = ms * 32 + CROCKFORD.indexOf(c)
  return ms
}

describe("newId (D3)", () => {
  it("has every D3 prefix followed by lowercase Crockford base32 of fixed length", () => {
    for (const prefix of PREFIXES) {
      for (let i = 0; i < 50; i++) {
        const id = newId(prefix)
        expect(id.startsWith(`${prefix}_`)).toBe(true)
        const body = id.slice(prefix.length + 1)
        expect(body).toMatch(BODY)
        // Crockford excludes i, l, o and u; no upper case either
        expect(body).not.toMatch(/[ilouA-Z]/)
        expect(id).toHaveLength(prefix.length + 1 + 26)
      }
    }
  })

  it("encodes the current time in milliseconds in its first 10 characters", () => {
    const before = Date.now()
    const id = newId("agt")
    const after = Date.now()
    const t = decodeTime(id)
    expect(t).toBeGreaterThanOrEqual(before)
    // a clock that stepped back leaves the time part at the last one used, never ahead of it by much
    expect(t).toBeLessThanOrEqual(after + 1)
  })

  it("ids minted in a tight loop are unique and strictly increasing", () => {
    const ids: Array<string> = []
    for (let i = 0; i < 10_000; i++) ids.push(newId("evt"))
    expect(new Set(ids).size).toBe(ids.length)
    for (let i = 1; i < ids.length; i++) {
      if (!(ids[i - 1]! < ids[i]!)) throw new Error(`not increasing at ${i}: ${ids[i - 1]} !< ${ids[i]}`)
    }
    // many of them share a millisecond: the ordering within one comes from incrementing the random part
    const times = new Set(ids.map(decodeTime))
    expect(times.size).toBeLessThan(ids.length)
  })

  it("stays increasing across prefixes and for explicit, repeated or backwards timestamps", () => {
    const now = Date.now() + 1_000
    const bodies = [
      newId("ws", now),
      newId("agt", now),
      newId("key", now),
      newId("evt", now - 500), // clock stepped back
      newId("evt", now - 500),
      newId("pol", now + 1),
      newId("pol", now + 1),
    ].map((id) => id.slice(id.indexOf("_") + 1))
    for (let i = 1; i < bodies.length; i++) expect(bodies[i - 1]! < bodies[i]!).toBe(true)
    expect(decodeTime(`x_${bodies[0]}`)).toBe(now)
    expect(decodeTime(`x_${bodies[3]}`)).toBe(now)
    expect(decodeTime(`x_${bodies[5]}`)).toBe(now + 1)
  })

  it("sorts by time when the milliseconds differ, whatever the random part", () => {
    const base = Date.now() + 10_000
    const earlier = newId("agt", base)
    const later = newId("agt", base + 1)
    expect(earlier < later).toBe(true)
    expect(decodeTime(later) - decodeTime(earlier)).toBe(1)
  })

  it("is not predictable from the previous id across milliseconds", () => {
    const base = Date.now() + 20_000
    const randoms = new Set<string>()
    for (let i = 0; i < 200; i++) randoms.add(newId("ws", base + i).slice(3 + 10))
    expect(randoms.size).toBe(200)
  })
})
