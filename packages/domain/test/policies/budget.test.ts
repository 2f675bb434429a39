import { describe, expect, it } from "vitest"
import {
  budgetIssues,
  CEL_MAX_COST,
  compilePolicies,
  EVALUATION_BUDGET,
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
    // An upper bound: every general rule, and the exact action's own rule.
    expect(worst.cost).toBe(201)
    expect(
      budgetIssues([{ id: "pol_a", version: 1, document: many("e", (i, j) => `tool.${i}.${j}`) }], {
        id: "pol_b",
        version: 1,
        document: many("g", (i, j) => `*${i}.${j}.x*`),
      }),
    ).toEqual([])
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
