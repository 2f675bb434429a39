import { describe, expect, it } from "vitest"
import { type Refreshable, refreshAhead } from "../src/shared/refreshAhead.ts"

describe("refreshAhead", () => {
  it("reloads a copy past 4/5 of its life once, not once per reader, and again only after the retry delay", () => {
    const entry: Refreshable = { at: 0 }
    let reloads = 0
    const read = (now: number) => refreshAhead(entry, now, 5_000, () => reloads++)
    expect(read(3_999)).toBe(false)
    expect(reloads).toBe(0)
    // 64 readers at once, as the guard's connections are: one reload.
    for (let i = 0; i < 64; i++) read(4_000)
    expect(reloads).toBe(1)
    // The reload failed or is slow: not tried again within the retry delay, then once more.
    expect(read(4_999)).toBe(false)
    expect(read(5_000)).toBe(true)
    expect(reloads).toBe(2)
  })

  it("starts nothing for a fresh copy: the reload's new entry begins a life of its own", () => {
    let reloads = 0
    const reloaded: Refreshable = { at: 4_000 }
    expect(refreshAhead(reloaded, 4_500, 5_000, () => reloads++)).toBe(false)
    expect(refreshAhead(reloaded, 8_000, 5_000, () => reloads++)).toBe(true)
    expect(reloads).toBe(1)
  })
})
