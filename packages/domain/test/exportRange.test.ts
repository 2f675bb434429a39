import { describe, expect, it } from "vitest"
import { exportRange } from "../src/audit/Checkpoints.ts"
import { InvalidInput } from "../src/shared/errors.ts"

/** Which sequences `GET /events/export` bundles, and which end an error names (the bundle cap is 10,000). */
describe("exportRange", () => {
  const problem = (r: ReturnType<typeof exportRange>) =>
    r instanceof InvalidInput ? { field: r.field, message: r.message } : r

  it("takes the latest 10,000 by default, and everything of a shorter chain", () => {
    expect(exportRange(25_000, {})).toEqual({ from: 15_001, to: 25_000 })
    expect(exportRange(40, {})).toEqual({ from: 1, to: 40 })
  })

  it("with only fromSequence, takes up to 10,000 from it: no error about a toSequence nobody sent", () => {
    expect(exportRange(12_231, { fromSequence: 1 })).toEqual({ from: 1, to: 10_000 })
    expect(exportRange(12_231, { fromSequence: 5_000 })).toEqual({ from: 5_000, to: 12_231 })
  })

  it("with only toSequence, takes up to 10,000 ending there", () => {
    expect(exportRange(12_231, { toSequence: 12_000 })).toEqual({ from: 2_001, to: 12_000 })
    expect(exportRange(12_231, { toSequence: 40 })).toEqual({ from: 1, to: 40 })
  })

  it("names the end that is wrong", () => {
    expect(problem(exportRange(215, { fromSequence: 300 }))).toEqual({
      field: "fromSequence",
      message: "is beyond the chain, which has 215 events",
    })
    expect(problem(exportRange(215, { fromSequence: 1, toSequence: 300 }))).toMatchObject({ field: "toSequence" })
    expect(problem(exportRange(215, { fromSequence: 9, toSequence: 3 }))).toMatchObject({ field: "fromSequence" })
    expect(problem(exportRange(20_000, { fromSequence: 1, toSequence: 10_001 }))).toMatchObject({
      field: "toSequence",
      message: expect.stringContaining("at most 10000"),
    })
    expect(problem(exportRange(0, {}))).toMatchObject({ field: "fromSequence", message: "the chain has no events yet" })
  })
})
