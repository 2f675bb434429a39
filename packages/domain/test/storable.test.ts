import { describe, expect, it } from "vitest"
import { findUnstorable } from "../src/index.ts"

const nested = (depth: number): unknown => (depth === 0 ? 1 : { a: nested(depth - 1) })

describe("findUnstorable", () => {
  it.each([
    [{ a: [1, { b: "x\u0000" }] }, ["a", 1, "b"], "contains a NUL character or an unpaired surrogate"],
    [{ a: { "k\ud800": 1 } }, ["a", "k\ud800"], "key contains a NUL character or an unpaired surrogate"],
    [[0, [1, Number.POSITIVE_INFINITY]], [1, 1], "number out of range"],
    [
      { ok: "😀", list: [{}, { bad: "\udfff" }] },
      ["list", 1, "bad"],
      "contains a NUL character or an unpaired surrogate",
    ],
  ])("names the first unstorable part: %j", (value, path, issue) => {
    expect(findUnstorable(value)).toEqual({ path, issue })
  })

  it("prefixes the given path and leaves it untouched", () => {
    const base = ["events", 3, "data"]
    expect(findUnstorable({ x: "\u0000" }, base)).toEqual({
      path: ["events", 3, "data", "x"],
      issue: expect.any(String),
    })
    expect(base).toEqual(["events", 3, "data"])
  })

  it("accepts storable values, paired surrogates included, up to 32 levels deep", () => {
    expect(findUnstorable({ s: "é😀", n: -1.5e300, b: [true, null, { k: "v" }] })).toBeUndefined()
    expect(findUnstorable(nested(32))).toBeUndefined()
    const deep = findUnstorable(nested(34))
    expect(deep?.issue).toBe("nested deeper than 32 levels")
    expect(deep?.path).toHaveLength(33)
  })
})
