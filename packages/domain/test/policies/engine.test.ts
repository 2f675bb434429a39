import { describe, expect, it } from "vitest"
import {
  automatonRuns,
  compileGlob,
  compilePolicies,
  GLOB_SUBJECT_MAX,
  InMemoryRateCounter,
} from "../../src/policies/engine/index.ts"
import { codesOf, compile, matchedOf, run } from "./helpers.ts"

describe("globs", () => {
  it("match without backtracking blow-up on hostile patterns", () => {
    const g = compileGlob("*a*a*a*a*a*a*a*a*a*a*a*a*b")
    expect(g.test("a".repeat(20_000))).toBe(false)
    expect(g.test(`${"a".repeat(20_000)}b`)).toBe(true)
    const deep = compileGlob("**a**a**a**a**a**a**a**a**b")
    expect(deep.test("a.".repeat(10_000))).toBe(false)
  })

  it("treat every character but * literally", () => {
    expect(compileGlob("a?c").test("abc")).toBe(false)
    expect(compileGlob("a?c").test("a?c")).toBe(true)
    expect(compileGlob("[ab].x").test("a.x")).toBe(false)
    expect(compileGlob("(.*)").test("(.zzz)")).toBe(true)
  })

  it("the glob operator refuses subjects longer than its limit (fail closed)", () => {
    const set = compile([
      {
        name: "p",
        rules: [
          {
            id: "r",
            effect: "deny",
            actions: ["act"],
            when: { field: "context.url", op: "glob", value: "**.example" },
          },
        ],
      },
    ])
    const long = run(set, { action: "act", context: { url: `${"a".repeat(GLOB_SUBJECT_MAX)}.example` } })
    expect(long.decision).toBe("deny")
    expect(codesOf(long)).toEqual(["CONDITION_ERROR"])
    expect(run(set, { action: "act", context: { url: "a.example" } }).decision).toBe("deny")
    expect(run(set, { action: "act", context: { url: "a.example.org" } }).decision).toBe("allow")
  })
})

describe("the action index", () => {
  it("reports a rule once even when several of its patterns match", () => {
    const set = compile([
      {
        name: "p",
        rules: [
          { id: "r", effect: "deny", actions: ["tool.read", "tool.*", "tool.**", "*", "t*l.read"] },
          { id: "s", effect: "deny", actions: ["tool.**"] },
        ],
      },
    ])
    expect(matchedOf(run(set, { action: "tool.read" }))).toEqual(["pol_1/r/enforce", "pol_1/s/enforce"])
  })

  it("tries a new action against many patterns with stars at both ends without running their automatons", () => {
    // 1,000 rules of 50 patterns like `*3.7.12*` (a cheap set by the budget: 1,000 units): every action the index had
    // not seen ran the automaton of each, about 18 µs each on a 200-character action, over a second a call. Counted,
    // not timed: the literal checks (here the inner literal) refuse the action before any automaton runs.
    const set = compile([
      {
        name: "wide",
        rules: Array.from({ length: 1_000 }, (_, i) => ({
          id: `r${i}`,
          effect: "deny",
          actions: Array.from({ length: 50 }, (_, j) => `*${i}.${j}.x*`),
        })),
      },
    ])
    const runs = automatonRuns()
    for (let k = 0; k < 5; k++) expect(set.candidates(`${k}${"q".repeat(199)}`)).toEqual([])
    // 5 actions × 50,000 patterns tried: 250,000 automaton runs before, none now.
    expect(set.patternsTried).toBe(5 * 50_000)
    expect(automatonRuns()).toBe(runs)
    // Still matched where the pattern says, the automaton run only where the action has the literals: `*2.3.x*` and
    // `*12.3.x*`.
    expect(set.candidates("a12.3.x").map((r) => r.id)).toEqual(["r2", "r12"])
    expect(automatonRuns() - runs).toBe(2)
    // `*` stays within a segment: `a.12.3.x` matches none.
    expect(set.candidates("a.12.3.x")).toEqual([])
  })

  it("keeps policy and rule order whatever bucket a rule comes from", () => {
    const set = compile([
      {
        name: "a",
        rules: [
          { id: "general", effect: "allow", actions: ["*.read"] },
          { id: "exact", effect: "allow", actions: ["tool.read"] },
        ],
      },
      {
        name: "b",
        rules: [
          { id: "deep", effect: "allow", actions: ["tool.**"] },
          { id: "all", effect: "allow", actions: ["*"] },
        ],
      },
    ])
    const first = run(set, { action: "tool.read" })
    expect(matchedOf(first)).toEqual([
      "pol_1/general/enforce",
      "pol_1/exact/enforce",
      "pol_2/deep/enforce",
      "pol_2/all/enforce",
    ])
    // The second lookup comes from the per-action memo and must be the same.
    expect(matchedOf(run(set, { action: "tool.read" }))).toEqual(matchedOf(first))
  })
})

describe("a stored document that no longer validates", () => {
  const valid = { name: "reads", rules: [{ id: "allow-read", effect: "allow", actions: ["files.read"] }] }
  const broken = { name: "old", rules: [{ id: "r", effect: "allow", actions: ["files.*"], when: { op: "gone" } }] }

  it("denies every action of the workspace, naming the policy and the issue (fail closed)", () => {
    const set = compilePolicies([
      { id: "pol_ok", version: 1, document: valid as never },
      { id: "pol_bad", version: 3, document: broken as never },
    ])
    for (const action of ["files.read", "anything.else", "x"]) {
      const d = run(set, { action })
      expect(d.decision, action).toBe("deny")
      expect(matchedOf(d)).toContain("pol_bad/(invalid)/enforce")
      const reason = d.reasons.find((r) => r.policyId === "pol_bad")!
      expect(reason.code).toBe("CONDITION_ERROR")
      expect(reason.message).toMatch(/^policy pol_bad \(version 3\) no longer validates \(rules\[0\]\.when/)
    }
  })

  const allowAll = { name: "open", rules: [{ id: "all", effect: "allow", actions: ["*"] }] }

  it("denies only within its own target when the target still validates", () => {
    const set = compilePolicies([
      { id: "pol_ok", version: 1, document: allowAll as never },
      { id: "pol_bad", version: 2, document: { ...broken, target: { agentIds: ["agt_x"] } } as never },
    ])
    const other = run(set, { action: "files.read", agent: { id: "agt_y" } })
    expect(other.decision).toBe("allow")
    expect(matchedOf(other)).toEqual(["pol_ok/all/enforce"])
    const targeted = run(set, { action: "anything.else", agent: { id: "agt_x" } })
    expect(targeted.decision).toBe("deny")
    expect(targeted.reasons[0]!.message).toContain("every action of the agents it targets is denied")
    expect(set.policies.find((p) => p.id === "pol_bad")!.invalid?.field).toBe("rules[0].when.field")
  })

  it("denies every agent when its target does not validate either", () => {
    const set = compilePolicies([
      { id: "pol_ok", version: 1, document: allowAll as never },
      { id: "pol_bad", version: 1, document: { ...broken, target: { agentIds: "agt_x" } } as never },
    ])
    expect(run(set, { action: "files.read", agent: { id: "agt_y" } }).decision).toBe("deny")
  })

  it("in monitor mode only reports, never changing the decision", () => {
    const set = compilePolicies([
      { id: "pol_ok", version: 1, document: allowAll as never },
      { id: "pol_bad", version: 1, document: { ...broken, mode: "monitor" } as never },
    ])
    const d = run(set, { action: "files.read" })
    expect(d.decision).toBe("allow")
    expect(matchedOf(d)).toEqual(["pol_ok/all/enforce", "pol_bad/(invalid)/monitor"])
    expect(codesOf(d)).toEqual(["POLICY_ALLOWED", "POLICY_MONITORED"])
  })

  it("is left out when it still says it is disabled", () => {
    const set = compilePolicies([
      { id: "pol_ok", version: 1, document: valid as never },
      { id: "pol_bad", version: 1, document: { ...broken, enabled: false } as never },
    ])
    expect(run(set, { action: "files.read" }).decision).toBe("allow")
  })
})

describe("CEL conditions", () => {
  const celPolicy = (cel: string, effect = "deny") => [
    { name: "p", rules: [{ id: "r", effect, actions: ["act"], when: { cel } }] },
  ]

  it("see JSON numbers as doubles and the agent's fields", () => {
    const set = compile(celPolicy('agent.trustScore >= 600.0 && context.n + 1.0 == 4.0 && agent.version == "1.2.0"'))
    expect(run(set, { action: "act", context: { n: 3 } }).decision).toBe("deny")
    expect(run(set, { action: "act", context: { n: 3 }, agent: { trustScore: 10 } }).decision).toBe("allow")
    // int + double has no overload in CEL: an error, so the deny rule fails closed.
    const mixed = run(compile(celPolicy("context.n + 1 == 4")), { action: "act", context: { n: 3 } })
    expect(codesOf(mixed)).toEqual(["CONDITION_ERROR"])
  })

  it("cannot reach prototype properties", () => {
    const set = compile(celPolicy('context.constructor == "x"', "allow"))
    const d = run(set, { action: "act", context: {} }, { guardDefault: "deny" })
    expect(codesOf(d)).toEqual(["NO_MATCHING_POLICY", "CONDITION_ERROR"])
    expect(d.reasons[1]!.message).toMatch(/No such key: constructor/)
  })

  it("does not repeat the request's values in a run-time error (reasons are recorded; the context never is)", () => {
    const secret = `sk_live_${"A".repeat(20_000)}`
    for (const cel of [
      'duration(context.s) > duration("1s")',
      "bool(context.s)",
      'context.m[context.s] == "x"',
      'context.s in context.m && context.m[context.s] == "x" || bool(context.s)',
    ]) {
      const d = run(compile(celPolicy(cel)), { action: "act", context: { s: secret, m: { q: "x" } } })
      expect(d.decision).toBe("deny")
      expect(codesOf(d)).toEqual(["CONDITION_ERROR"])
      expect(d.reasons[0]!.message).not.toContain("sk_live_")
      expect(d.reasons[0]!.message.length).toBeLessThan(400)
      expect(d.reasons[0]!.message).toMatch(/CEL error: .*\(a value of the request, not shown\)/)
    }
    // A key the expression names itself is still said.
    const named = run(compile(celPolicy('context.m["nope"] == "y"')), { action: "act", context: { m: {} } })
    expect(named.reasons[0]!.message).toMatch(/No such key: nope/)
  })

  it("stops strings that double themselves at the cost limit", () => {
    // cel.bind(v1, v0 + v0, cel.bind(v2, v1 + v1, … v12.size() > 0)): 4,096 copies of context.s.
    let expr = "v12.size() > 0"
    for (let i = 12; i >= 1; i--) expr = `cel.bind(v${i}, v${i - 1} + v${i - 1}, ${expr})`
    const set = compile(celPolicy(`cel.bind(v0, context.s, ${expr})`))
    const d = run(set, { action: "act", context: { s: "x".repeat(1_000) } })
    expect(d.decision).toBe("deny")
    expect(d.reasons[0]!.message).toMatch(/CEL cost limit/)
  })

  it("charges comparisons of whole structures by their size, not per comparison", () => {
    const big = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, { v: i }]))
    const items = Array.from({ length: 100 }, (_, i) => ({ sku: `s${i}` }))
    const deep = compile(celPolicy("context.items.exists(i, context.a != context.b)"))
    const d = run(deep, { action: "act", context: { items, a: big, b: { ...big } } })
    expect(d.reasons[0]!.message).toMatch(/CEL cost limit/)
    // Comparing scalars in the same loop is cheap and simply evaluates.
    const scalar = compile(celPolicy('context.items.exists(i, i.sku == "s99")'))
    expect(codesOf(run(scalar, { action: "act", context: { items, a: big } }))).toEqual(["POLICY_DENIED"])
  })

  it("a budget exceeded inside `||` is still an error, not the other side's answer", () => {
    const set = compile(celPolicy("context.l.exists(x, x == -1) || true", "allow"))
    const d = run(
      set,
      { action: "act", context: { l: Array.from({ length: 50_000 }, (_, i) => i) } },
      { guardDefault: "deny" },
    )
    expect(d.decision).toBe("deny")
    expect(d.reasons[1]!.message).toMatch(/CEL cost limit/)
  })
})

describe("InMemoryRateCounter", () => {
  it("estimates the sliding window from the current and previous fixed windows", () => {
    const c = new InMemoryRateCounter()
    const minute = 60_000
    const t0 = 100 * minute
    for (let i = 0; i < 6; i++) c.hit("k", minute, 10, t0 + i)
    // 15 s into the next window: 6 × 45/60 + 1 = 5.5
    expect(c.hit("k", minute, 10, t0 + minute + 15_000)).toEqual({ count: 5.5, exceeded: false })
    expect(c.hit("k", minute, 5, t0 + minute + 15_000).exceeded).toBe(true)
  })

  it("forgets keys whose windows are over once it fills up", () => {
    const c = new InMemoryRateCounter({ maxKeys: 2_000 })
    for (let i = 0; i < 1_500; i++) c.hit(`old${i}`, 1_000, 5, 0)
    expect(c.size).toBe(1_500)
    for (let i = 0; i < 1_500; i++) c.hit(`new${i}`, 1_000, 5, 10_000)
    expect(c.size).toBeLessThanOrEqual(2_000)
    // The live keys kept their counts.
    expect(c.hit("new0", 1_000, 5, 10_000).count).toBe(2)
  })
})
