import { describe, expect, it } from "vitest"
import { touchThrottle } from "../src/auth/Authenticator.ts"

/**
 * `lastUsedAt` is written at most once a minute per key and instance (decisions.md, API keys). What the
 * Authenticator remembers for that must not grow with every key it ever saw: an entry older than the interval
 * decides nothing (the next use writes anyway), so it is dropped.
 */
describe("touchThrottle", () => {
  it("lets a key's use through once per interval", () => {
    const throttle = touchThrottle(60_000)
    expect(throttle.due("key_a", 1_000_000)).toBe(true)
    expect(throttle.due("key_a", 1_000_001)).toBe(false)
    expect(throttle.due("key_b", 1_030_000)).toBe(true)
    expect(throttle.due("key_a", 1_059_999)).toBe(false)
    expect(throttle.due("key_a", 1_060_000)).toBe(true)
    expect(throttle.due("key_b", 1_060_000)).toBe(false)
    expect(throttle.due("key_b", 1_090_000)).toBe(true)
  })

  it("remembers only the keys used within the interval, however many it has seen", () => {
    const throttle = touchThrottle(60_000)
    let now = 1_000_000
    // 20,000 keys, one every 10 ms: 6,000 of them fall within any minute.
    let due = 0
    for (let i = 0; i < 20_000; i++, now += 10) if (throttle.due(`key_${i}`, now)) due++
    expect(due).toBe(20_000)
    expect(throttle.size()).toBe(6_000)
    // A minute later with no use in between, a single use leaves only itself.
    expect(throttle.due("key_19999", now + 60_000)).toBe(true)
    expect(throttle.size()).toBe(1)
    // And what is kept still decides: a recent key is not written twice.
    expect(throttle.due("key_19999", now + 60_001)).toBe(false)
  })

  it("decides by the latest write even when the clock steps back", () => {
    const throttle = touchThrottle(60_000)
    expect(throttle.due("key_a", 2_000_000)).toBe(true)
    expect(throttle.due("key_b", 1_990_000)).toBe(true)
    expect(throttle.due("key_a", 2_000_500)).toBe(false)
    expect(throttle.due("key_b", 2_049_000)).toBe(false)
    expect(throttle.due("key_b", 2_050_000)).toBe(true)
  })
})
