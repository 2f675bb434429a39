import { describe, expect, it } from "vitest"
import {
  budgetIssues,
  CEL_MAX_COST,
  compileGlob,
  compilePolicies,
  EVALUATION_BUDGET,
  GUARD_ACTION_MAX_LENGTH,
  type PolicyDocument,
  validatePolicyDocument,
} from "../../src/policies/engine/index.ts"
import { codesOf, compile, run } from "./helpers.ts"

/**
 * One evaluation's work is bounded (issue 24, finding 2): statically at save, where a set whose
 * costliest action is over EVALUATION_BUDGET is refused naming the rules, and at run time, where
 * an evaluation past it is denied (fail closed). Deterministic: counts, never timings.
 */

const range = (n: number) => `[${Array.from({ length: n }, (_, i) => i + 1).join(",")}]`
/** The reviewer's shape: nested `all` over ranges, under one expression's own limit. */
const NESTED = `${range(12)}.all(x, ${range(12)}.all(y, ${range(12)}.all(z, x + y + z > 0)))`

const doc = (rules: ReadonlyArray<Record<string, unknown>>): PolicyDocument => {
  const v = validatePolicyDocument({ name: "p", rules })
  if (!v.ok) throw new Error(JSON.stringify(v.issues))
  return v.document
}

describe("the evaluation budget", () => {
  it("one reviewer-shaped expression runs within its own limit", () => {
    const set = compile([{ name: "p", rules: [{ id: "r", effect: "deny", actions: ["*"], when: { cel: NESTED } }] }])
    expect(codesOf(run(set, { action: "act" }))).toEqual(["POLICY_DENIED"])
  })

  it("estimates a set of many exact actions and many general globs without trying every pair", () => {
    // 10,000 exact actions × 10,000 general globs: each pair was tested, ~8 s of blocked event loop at a save's
    // budget check and at the first guard call after each load (50,000 × 50,000: minutes).
    const many = (name: string, pattern: (i: number, j: number) => string) =>
      doc(
        Array.from({ length: 200 }, (_, i) => ({
          id: `${name}${i}`,
          effect: "deny",
          actions: Array.from({ length: 50 }, (_, j) => pattern(i, j)),
        })),
      )
    const set = compilePolicies([
      { id: "pol_a", version: 1, document: many("e", (i, j) => `tool.${i}.${j}`) },
      { id: "pol_b", version: 1, document: many("g", (i, j) => `*${i}.${j}.x*`) },
    ])
    const started = performance.now()
    const worst = set.worstCost()
    expect(performance.now() - started).toBeLessThan(1_000)
    // An upper bound: every general rule, and the exact action's own rule; and the scan of the 10,000 globs.
    expect(worst.scan).toBe(set.scanCost)
    expect(worst.cost).toBe(201 + set.scanCost)
    // That scan alone is over the budget: the globs' policy is refused, naming its first patterns.
    const issues = budgetIssues([{ id: "pol_a", version: 1, document: many("e", (i, j) => `tool.${i}.${j}`) }], {
      id: "pol_b",
      version: 1,
      document: many("g", (i, j) => `*${i}.${j}.x*`),
    })
    expect(issues.slice(0, 2).map((i) => i.field)).toEqual(["rules[0].actions[0]", "rules[0].actions[1]"])
  })

  it("counts the scan of the patterns the index tries one by one, which a new action pays (issue 24)", () => {
    // Distinct 16-star patterns that an action of 200 a's passes the literal checks of: each runs the automaton over
    // every character with every state active. The rules cost 1 each: before the scan was counted, 5,000 of them
    // (265 ms per new action, measured) passed the check.
    const pattern = (n: number) => {
      let p = "*"
      for (let d = 0; d < 15; d++) p += `${"a".repeat(1 + (Math.floor(n / 3 ** d) % 3))}*`
      return p
    }
    const patterns = (n: number) =>
      doc([{ id: "r", effect: "deny", actions: Array.from({ length: n }, (_, j) => pattern(j)) }])
    const perPattern = compileGlob(pattern(0)).cost(GUARD_ACTION_MAX_LENGTH)
    // As many as fit with their rule (1 unit).
    let fit = 0
    for (let total = 1; total + compileGlob(pattern(fit)).cost(GUARD_ACTION_MAX_LENGTH) <= EVALUATION_BUDGET; fit++)
      total += compileGlob(pattern(fit)).cost(GUARD_ACTION_MAX_LENGTH)
    expect(fit).toBeGreaterThan(1)
    expect(budgetIssues([], { id: "pol_s", version: 1, document: patterns(fit) })).toEqual([])
    const issues = budgetIssues([], { id: "pol_s", version: 1, document: patterns(fit + 1) })
    // The patterns first (the scan is most of the cost), then the rule.
    expect(issues.map((i) => i.field)).toEqual([
      ...Array.from({ length: fit + 1 }, (_, j) => `rules[0].actions[${j}]`),
      "rules[0]",
    ])
    expect(issues[0]!.issue).toMatch(/over the budget of 150000 per evaluation, of which \d+ for trying an action/)
    // The scan counts across the workspace: the same patterns split over two policies are over as well.
    const half = Math.ceil((fit + 1) / 2)
    const first = doc([{ id: "a", effect: "deny", actions: Array.from({ length: half }, (_, j) => pattern(j)) }])
    const second = doc([
      { id: "b", effect: "deny", actions: Array.from({ length: fit + 1 - half }, (_, j) => pattern(half + j)) },
    ])
    expect(
      budgetIssues([{ id: "pol_1", version: 1, document: first }], { id: "pol_2", version: 1, document: second })
        .length,
    ).toBeGreaterThan(0)
    // A pattern named by many rules is tried once; patterns of one star, and `P.*` / `P.**`, cost their literal checks.
    const same = doc(Array.from({ length: 1_000 }, (_, i) => ({ id: `r${i}`, effect: "deny", actions: [pattern(0)] })))
    expect(compilePolicies([{ id: "pol_s", version: 1, document: same }]).scanCost).toBe(perPattern)
    expect(compileGlob("*.delete").cost(200)).toBe(14)
    expect(compileGlob("db.**.drop").cost(200)).toBe(14)
    expect(compileGlob("tool.*").cost(200)).toBe(14)
    expect(compileGlob("*a*a*").cost(200)).toBeGreaterThan(compileGlob("*ab*").cost(200))
    // The set a new action reaches is still found: every pattern matches it.
    const set = compilePolicies([{ id: "pol_s", version: 1, document: patterns(fit) }])
    expect(set.candidates("a".repeat(200)).map((r) => r.id)).toEqual(["r"])
    expect(set.costOf("a".repeat(199))).toBe(1 + set.scanCost)
    expect(set.costOf("a".repeat(199))).toBe(1)
  })

  it("refuses a set of 1,000 such rules at save, naming the rules", () => {
    const saved = doc(
      Array.from({ length: 1_000 }, (_, i) => ({ id: `r${i}`, effect: "deny", actions: ["*"], when: { cel: NESTED } })),
    )
    const issues = budgetIssues([], { id: "pol_new", version: 1, document: saved })
    expect(issues.length).toBe(100)
    expect(issues[0]!.field).toBe("rules[0].when")
    expect(issues[3]!.field).toBe("rules[3].when")
    expect(issues[0]!.issue).toMatch(/over the budget of 150000 per evaluation/)
  })

  it("counts the workspace's other policies on the same action, and only the rules an action reaches", () => {
    const one = (id: string, actions: ReadonlyArray<string>) => ({
      id: "pol_x",
      version: 1,
      document: doc([{ id, effect: "deny", actions, when: { cel: "context.l.exists(x, x == 1.0)" } }]),
    })
    const expensive = compilePolicies([one("r", ["a.b"])]).worstCost().cost
    expect(expensive).toBeGreaterThan(EVALUATION_BUDGET / 2)
    const other = { ...one("o", ["a.b"]), id: "pol_other" }
    // On the same action, the two are over; on different actions, each call reaches one.
    expect(budgetIssues([other], one("r", ["a.b"])).map((i) => i.field)).toEqual(["rules[0].when"])
    expect(budgetIssues([other], one("r", ["c.d"]))).toEqual([])
    // A glob reaches the exact action under it.
    expect(budgetIssues([other], one("r", ["a.*"])).map((i) => i.field)).toEqual(["rules[0].when"])
    expect(budgetIssues([other], one("r", ["b.*"]))).toEqual([])
    // Cheap rules fit however many there are.
    const cheap = doc(
      Array.from({ length: 1_000 }, (_, i) => ({
        id: `r${i}`,
        effect: "deny",
        actions: ["*"],
        when: { all: [{ field: "context.n", op: "gt", value: i }, { cel: "context.amount > 100.0" }] },
      })),
    )
    expect(budgetIssues([], { id: "pol_c", version: 1, document: cheap })).toEqual([])
  })

  it("denies an evaluation that goes past the budget, even when each rule stays under its own limit", () => {
    // Allow rules: without the budget, each expression finishes under its limit and allows.
    const rules = Array.from({ length: 3 }, (_, i) => ({
      id: `r${i}`,
      effect: "allow",
      actions: ["act"],
      when: { cel: `context.l.all(x, x >= 0.0) || ${i}.0 < 0.0` },
    }))
    const set = compile([{ name: "p", rules }])
    const l = Array.from({ length: 20_000 }, (_, i) => i)
    const small = run(set, { action: "act", context: { l: l.slice(0, 100) } }, { guardDefault: "deny" })
    expect(small.decision).toBe("allow")
    const d = run(set, { action: "act", context: { l } }, { guardDefault: "deny" })
    expect(d.decision).toBe("deny")
    expect(codesOf(d)).toEqual(["CONDITION_ERROR"])
    expect(d.reasons[0]!.message).toMatch(/evaluation budget exceeded/)
    expect(d.reasons[0]!.ruleId).toBe("r1")
  })

  it("charges the lists leaves scan, so many cheap leaves cannot add up past the budget", () => {
    const rules = Array.from({ length: 200 }, (_, i) => ({
      id: `r${i}`,
      effect: "allow",
      actions: ["act"],
      when: { field: "context.tags", op: "in", value: [`t${i}`] },
    }))
    const set = compile([{ name: "p", rules }])
    const tags = Array.from({ length: 1_000 }, (_, i) => `u${i}`)
    const d = run(set, { action: "act", context: { tags } }, { guardDefault: "allow" })
    expect(d.decision).toBe("deny")
    expect(d.reasons[0]!.message).toMatch(/evaluation budget exceeded/)
    expect(CEL_MAX_COST).toBeLessThan(EVALUATION_BUDGET)
  })
})
