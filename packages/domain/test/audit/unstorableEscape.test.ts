import { canonicalize } from "@agentgov/verifier"
import { describe, expect, it } from "vitest"
import { holdsUnstorableEscape, prepareAppend } from "../../src/audit/AuditLog.ts"
import { systemActor } from "../../src/auth/Actor.ts"
import { SCOPES } from "../../src/index.ts"

// Through the group commit (one bad append fails alone): services.test.ts, "group-commit appender".
describe("escapes PostgreSQL's json readers refuse", () => {
  it("are found in canonical text, and only where they are escapes", () => {
    for (const text of ['{"s":"\\u0000"}', '["a\\ud800"]', '{"\\udfff":1}', '"\\\\\\u0000"', "\\u0000"])
      expect(holdsUnstorableEscape(text), text).toBe(true)
    // An escaped backslash before "u0000" is text; an astral character is raw in canonical JSON; other escapes pass.
    for (const text of ['{"s":"\\\\u0000"}', '{"s":"\\\\ud800"}', '{"s":"😀"}', '{"s":"\\u0001\\n"}', "{}"])
      expect(holdsUnstorableEscape(text), text).toBe(false)
    // What canonicalize writes, after runs of 0 to 4 backslashes: a NUL or a lone surrogate is an escape, the
    // characters "u0000" are text.
    for (let k = 0; k <= 4; k++) {
      const run = "\\".repeat(k)
      for (const bad of [`${run}\u0000`, `${run}${String.fromCharCode(0xdc00)}x`])
        expect(holdsUnstorableEscape(canonicalize({ s: bad })), JSON.stringify(bad)).toBe(true)
      for (const fine of [`${run}u0000`, `${run}ud800`, `${run}😀`])
        expect(holdsUnstorableEscape(canonicalize({ [fine]: fine })), JSON.stringify(fine)).toBe(false)
    }
  })

  it("are refused by prepareAppend", () => {
    const head = { sequence: 1, hash: "0".repeat(64) }
    const actor = systemActor("ws_any", "live", new Set(SCOPES))
    for (const data of [{ s: "a\u0000b" }, { [String.fromCharCode(0xd800)]: 1 }])
      expect(() => prepareAppend("ws_any", [{ actor, events: [{ type: "probe.bad", data }] }], head, 0)).toThrow(
        /cannot keep/,
      )
    expect(() =>
      prepareAppend("ws_any", [{ actor, events: [{ type: "probe.ok", data: { s: "\\u0000 as text" } }] }], head, 0),
    ).not.toThrow()
  })
})
