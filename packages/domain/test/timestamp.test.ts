import { describe, expect, it } from "vitest"
import { isTimestamp } from "../src/shared/schemas.ts"

describe("isTimestamp", () => {
  it.each([
    "2026-11-20T23:59:59.123Z",
    "2026-11-20T23:59Z",
    "2028-02-29T00:00:00+05:30",
    "1970-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999Z",
    "9999-12-31T23:59:59+01:00",
  ])("accepts %s", (s) => expect(isTimestamp(s)).toBe(true))

  it.each([
    ["no zone", "2026-11-20T23:59:59"],
    ["a day that does not exist", "2030-02-30T00:00:00Z"],
    ["hour 24", "2026-11-20T24:00:00Z"],
    ["offset hour 24", "2026-11-20T10:00:00+24:00"],
    ["year 10000 in UTC through the offset", "9999-12-31T23:59:59-01:00"],
    ["1969 in UTC through the offset", "1970-01-01T00:00:00+01:00"],
    ["before 1970", "1969-12-31T23:59:59Z"],
    ["a date only", "2026-11-20"],
  ])("refuses %s", (_why, s) => expect(isTimestamp(s)).toBe(false))
})
