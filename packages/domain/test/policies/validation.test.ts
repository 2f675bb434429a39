import { Effect, Exit, Schema } from "effect"
import { describe, expect, it } from "vitest"
import {
  compilePolicies,
  decodePolicyDocument,
  PolicyDocument,
  PolicyInvalid,
  validatePolicyDocument,
} from "../../src/policies/engine/index.ts"

const base = () => ({
  name: "payments",
  rules: [{ id: "r0", effect: "deny", actions: ["payments.*"] }],
})
/** A valid document with rule 0's `when` replaced. */
const withWhen = (when: unknown) => ({ ...base(), rules: [{ id: "r0", effect: "deny", actions: ["x"], when }] })
const withRule = (rule: Record<string, unknown>) => ({
  ...base(),
  rules: [{ id: "r0", effect: "deny", actions: ["x"], ...rule }],
})
const leaf = (field: string, op: string, value?: unknown) => ({ field, op, ...(value === undefined ? {} : { value }) })
const nest = (depth: number): unknown => (depth === 1 ? leaf("action", "eq", "x") : { not: nest(depth - 1) })

const issuesOf = (doc: unknown) => {
  const r = validatePolicyDocument(doc)
  if (r.ok) throw new Error("expected the document to be refused")
  return r.issues
}

describe("policy validation names the exact field", () => {
  it.each<[string, unknown, string, RegExp]>([
    ["not an object", [1, 2], "", /must be an object, not a list/],
    ["missing name", { rules: base().rules }, "name", /required/],
    ["empty name", { ...base(), name: "" }, "name", /must not be empty/],
    ["unknown top-level field", { ...base(), owner: "me" }, "owner", /unknown field/],
    ["bad mode", { ...base(), mode: "audit" }, "mode", /enforce, monitor/],
    ["enabled not boolean", { ...base(), enabled: "yes" }, "enabled", /true or false/],
    ["no rules", { ...base(), rules: [] }, "rules", /must not be empty/],
    [
      "too many rules",
      { ...base(), rules: Array.from({ length: 1001 }, (_, i) => ({ id: `r${i}`, effect: "deny", actions: ["x"] })) },
      "rules",
      /at most 1000/,
    ],
    ["empty target", { ...base(), target: {} }, "target", /names no agent/],
    [
      "bad target label",
      { ...base(), target: { labels: ["ok", "Not A Label"] } },
      "target.labels[1]",
      /must be a label/,
    ],
    ["rule id with spaces", withRule({ id: "my rule" }), "rules[0].id", /letters, digits/],
    ["rule id too long", withRule({ id: "x".repeat(65) }), "rules[0].id", /1 to 64/],
    ["bad effect", withRule({ effect: "block" }), "rules[0].effect", /allow, deny, require_approval/],
    ["no actions", withRule({ actions: [] }), "rules[0].actions", /must not be empty/],
    ["empty glob", withRule({ actions: ["tool.*", ""] }), "rules[0].actions[1]", /must not be empty/],
    ["glob with spaces", withRule({ actions: ["tool read"] }), "rules[0].actions[0]", /whitespace/],
    ["triple star", withRule({ actions: ["tool.***"] }), "rules[0].actions[0]", /\*\*\*/],
    [
      "51 actions",
      withRule({ actions: Array.from({ length: 51 }, (_, i) => `a${i}`) }),
      "rules[0].actions",
      /at most 50/,
    ],
    [
      "approval on a deny rule",
      withRule({ approval: { timeoutSeconds: 600 } }),
      "rules[0].approval",
      /require_approval/,
    ],
    [
      "approval timeout too short",
      withRule({ effect: "require_approval", approval: { timeoutSeconds: 59 } }),
      "rules[0].approval.timeoutSeconds",
      /between 60 and 604800/,
    ],
    [
      "approval timeout not whole",
      withRule({ effect: "require_approval", approval: { timeoutSeconds: 90.5 } }),
      "rules[0].approval.timeoutSeconds",
      /whole number/,
    ],
    [
      "empty approver",
      withRule({ effect: "require_approval", approval: { approvers: ["ops", ""] } }),
      "rules[0].approval.approvers[1]",
      /must not be empty/,
    ],
    ["reason too long", withRule({ reason: "x".repeat(501) }), "rules[0].reason", /at most 500/],
    ["unknown rule field", withRule({ priority: 1 }), "rules[0].priority", /unknown field/],
    ["condition not an object", withWhen("amount > 5"), "rules[0].when", /must be a condition/],
    ["empty condition", withWhen({}), "rules[0].when", /is not a condition.*it is empty/],
    [
      "two kinds at once",
      withWhen({ all: [leaf("action", "eq", "x")], field: "action" }),
      "rules[0].when",
      /both "all" and "field"/,
    ],
    ["empty all", withWhen({ all: [] }), "rules[0].when.all", /must not be empty/],
    [
      "unknown op deep inside",
      withWhen({ all: [{ any: [leaf("action", "eq", "x"), leaf("context.a", "eqq", 1)] }] }),
      "rules[0].when.all[0].any[1].op",
      /unknown operator "eqq"/,
    ],
    ["missing op", withWhen({ field: "action", value: "x" }), "rules[0].when.op", /required/],
    ["unknown field", withWhen(leaf("agent.owner", "eq", "x")), "rules[0].when.field", /unknown field "agent.owner"/],
    ["empty context path segment", withWhen(leaf("context..a", "eq", 1)), "rules[0].when.field", /empty path segment/],
    [
      "extra key on a leaf",
      withWhen({ ...leaf("action", "eq", "x"), regex: "a+" }),
      "rules[0].when.regex",
      /unknown field/,
    ],
    ["eq needs a value", withWhen(leaf("context.a", "eq")), "rules[0].when.value", /required/],
    [
      "eq with an object",
      withWhen(leaf("context.a", "eq", { b: 1 })),
      "rules[0].when.value",
      /string, number, boolean or null/,
    ],
    [
      "eq with a number on a string field",
      withWhen(leaf("action", "eq", 5)),
      "rules[0].when.value",
      /action is a string/,
    ],
    [
      "eq on a list field",
      withWhen(leaf("agent.labels", "eq", "prod")),
      "rules[0].when.value",
      /is a list: use contains, in or nin/,
    ],
    ["gt with a boolean", withWhen(leaf("context.a", "gt", true)), "rules[0].when.value", /number or a string/],
    [
      "gt with a string on a number field",
      withWhen(leaf("agent.trustScore", "gt", "500")),
      "rules[0].when.value",
      /is a number/,
    ],
    ["between with one bound", withWhen(leaf("context.a", "between", [1])), "rules[0].when.value", /\[low, high\]/],
    [
      "between with mixed bounds",
      withWhen(leaf("context.a", "between", [1, "9"])),
      "rules[0].when.value",
      /two numbers or two strings/,
    ],
    ["between reversed", withWhen(leaf("context.a", "between", [9, 1])), "rules[0].when.value", /low ≤ high/],
    ["in with a scalar", withWhen(leaf("context.a", "in", "eu")), "rules[0].when.value", /list of values/],
    ["in with an empty list", withWhen(leaf("context.a", "in", [])), "rules[0].when.value", /at least one/],
    [
      "in with an object inside",
      withWhen(leaf("context.a", "in", ["eu", { x: 1 }])),
      "rules[0].when.value[1]",
      /string, number, boolean or null/,
    ],
    [
      "in with a number for a string field",
      withWhen(leaf("action", "in", ["a", 2])),
      "rules[0].when.value[1]",
      /must be a string/,
    ],
    [
      "contains on a number field",
      withWhen(leaf("agent.trustScore", "contains", 5)),
      "rules[0].when.value",
      /applies to lists and strings/,
    ],
    ["startsWith empty", withWhen(leaf("context.p", "startsWith", "")), "rules[0].when.value", /non-empty/],
    ["endsWith a number", withWhen(leaf("context.p", "endsWith", 5)), "rules[0].when.value", /takes a string/],
    ["glob empty", withWhen(leaf("context.host", "glob", "")), "rules[0].when.value", /glob pattern must not be empty/],
    ["exists with a string", withWhen(leaf("context.a", "exists", "yes")), "rules[0].when.value", /true or false/],
    ["too deep", withWhen(nest(17)), `rules[0].when${".not".repeat(16)}`, /at most 16 levels/],
    [
      "time: bad HH:MM",
      withWhen({ time: { from: "9:00", to: "17:00", tz: "UTC" } }),
      "rules[0].when.time.from",
      /HH:MM/,
    ],
    [
      "time: hour 24 as a start",
      withWhen({ time: { from: "24:00", to: "06:00", tz: "UTC" } }),
      "rules[0].when.time.from",
      /00:00 to 23:59/,
    ],
    [
      "time: bad zone",
      withWhen({ time: { from: "09:00", to: "17:00", tz: "Europe/Atlantis" } }),
      "rules[0].when.time.tz",
      /unknown time zone/,
    ],
    ["time: missing zone", withWhen({ time: { from: "09:00", to: "17:00" } }), "rules[0].when.time.tz", /required/],
    [
      "time: bad day",
      withWhen({ time: { days: ["mon", "funday"], from: "09:00", to: "17:00", tz: "UTC" } }),
      "rules[0].when.time.days[1]",
      /sun, mon/,
    ],
    [
      "time: equal ends",
      withWhen({ time: { from: "09:00", to: "09:00", tz: "UTC" } }),
      "rules[0].when.time.to",
      /must differ/,
    ],
    ["rate: max 0", withWhen({ rate: { max: 0, per: "minute" } }), "rules[0].when.rate.max", /1 to/],
    [
      "rate: bad period",
      withWhen({ rate: { max: 5, per: "week" } }),
      "rules[0].when.rate.per",
      /second, minute, hour, day/,
    ],
    [
      "rate: bad scope",
      withWhen({ rate: { max: 5, per: "hour", scope: "tenant" } }),
      "rules[0].when.rate.scope",
      /agent, workspace/,
    ],
    ["CEL that does not parse", withWhen({ cel: "context.amount >" }), "rules[0].when.cel", /does not parse/],
    [
      "CEL that does not type-check",
      withWhen({ cel: 'action + 1 == "x"' }),
      "rules[0].when.cel",
      /does not type-check/,
    ],
    ["CEL with an unknown variable", withWhen({ cel: "user.admin" }), "rules[0].when.cel", /does not type-check.*user/],
    ["CEL that is not a bool", withWhen({ cel: "size(action)" }), "rules[0].when.cel", /must produce a bool, not int/],
    ["CEL with a regex", withWhen({ cel: 'action.matches("^a.*")' }), "rules[0].when.cel", /regular expressions/],
    [
      "CEL with an unknown agent field",
      withWhen({ cel: 'agent.owner == "x"' }),
      "rules[0].when.cel",
      /agent has no field "owner"/,
    ],
    ["CEL too long", withWhen({ cel: `action == "${"x".repeat(2_000)}"` }), "rules[0].when.cel", /at most 2000/],
  ])("%s", (_name, doc, field, issue) => {
    const [first] = issuesOf(doc)
    expect(first!.field).toBe(field)
    expect(first!.issue).toMatch(issue)
  })

  it("names a duplicate rule id at the duplicate, pointing at the first use", () => {
    const doc = {
      ...base(),
      rules: [
        { id: "a", effect: "deny", actions: ["x"] },
        { id: "b", effect: "deny", actions: ["x"] },
        { id: "a", effect: "allow", actions: ["y"] },
      ],
    }
    expect(issuesOf(doc)).toEqual([{ field: "rules[2].id", issue: 'duplicate rule id "a" (also rules[0].id)' }])
  })

  it("reports every issue, in document order", () => {
    const doc = {
      name: "",
      rules: [
        {
          id: "ok",
          effect: "deny",
          actions: [""],
          when: { all: [leaf("context.a", "gt", "1"), { time: { from: "25:00", to: "x", tz: "UTC" } }] },
        },
        { id: "ok", effect: "nope", actions: ["a"] },
      ],
    }
    expect(issuesOf(doc).map((i) => i.field)).toEqual([
      "name",
      "rules[0].actions[0]",
      "rules[0].when.all[1].time.from",
      "rules[0].when.all[1].time.to",
      "rules[1].effect",
    ])
  })

  it("counts condition nodes over the whole policy", () => {
    const rule = (i: number) => ({
      id: `r${i}`,
      effect: "deny",
      actions: ["x"],
      when: { any: Array.from({ length: 999 }, () => leaf("context.a", "eq", 1)) },
    })
    // 10 rules × 1000 nodes = 10,000: the limit. An 11th rule passes it at its `when`.
    expect(validatePolicyDocument({ ...base(), rules: Array.from({ length: 10 }, (_, i) => rule(i)) }).ok).toBe(true)
    const [first] = issuesOf({ ...base(), rules: Array.from({ length: 11 }, (_, i) => rule(i)) })
    expect(first).toEqual({ field: "rules[10].when", issue: "the policy has more than 10000 condition nodes" })
  })

  it("applies the defaults to a valid document", () => {
    const r = validatePolicyDocument({
      name: "p",
      rules: [{ id: "r", effect: "require_approval", actions: ["x"] }],
    })
    expect(r).toEqual({
      ok: true,
      document: {
        name: "p",
        enabled: true,
        mode: "enforce",
        rules: [{ id: "r", effect: "require_approval", actions: ["x"], approval: { timeoutSeconds: 3600 } }],
      },
    })
  })
})

describe("PolicyInvalid and the schemas", () => {
  it("decodePolicyDocument fails with PolicyInvalid carrying the first issue and all of them", async () => {
    const exit = await Effect.runPromiseExit(decodePolicyDocument(withWhen(leaf("context.a", "between", [2, 1]))))
    expect(Exit.isFailure(exit)).toBe(true)
    const error = Exit.isFailure(exit) ? (exit.cause.reasons[0] as { error?: unknown }).error : undefined
    expect(error).toBeInstanceOf(PolicyInvalid)
    expect(error).toMatchObject({
      _tag: "PolicyInvalid",
      field: "rules[0].when.value",
      issue: "between needs low ≤ high",
      issues: [{ field: "rules[0].when.value", issue: "between needs low ≤ high" }],
    })
  })

  it("the input schema gives the same paths through Standard Schema, as operations validate", () => {
    const std = Schema.toStandardSchemaV1(PolicyDocument, {
      parseOptions: { errors: "all", onExcessProperty: "error" },
    })
    const bad = std["~standard"].validate(withWhen({ all: [leaf("action", "eq", "x"), leaf("context.a", "eqq", 1)] }))
    if (bad instanceof Promise) throw new Error("synchronous schema expected")
    expect(bad.issues?.[0]?.path).toEqual(["rules", 0, "when", "all", 1, "op"])
    const good = std["~standard"].validate(base())
    if (good instanceof Promise || good.issues) throw new Error("expected a valid document")
    expect(good.value).toEqual({ ...base(), enabled: true, mode: "enforce" })
  })

  it("compilePolicies turns a stored document that no longer validates into a fail-closed deny naming the field", () => {
    const broken = {
      ...base(),
      rules: [
        { id: "r", effect: "deny", actions: ["x"], when: { time: { from: "09:00", to: "10:00", tz: "Nowhere/Gone" } } },
      ],
    }
    const set = compilePolicies([{ id: "pol_9", version: 3, document: broken as never }])
    expect(set.rules).toHaveLength(1)
    expect(set.rules[0]!.effect).toBe("deny")
    expect(set.rules[0]!.reason).toMatchObject({ code: "CONDITION_ERROR", policyId: "pol_9" })
    expect(set.rules[0]!.reason.message).toContain("rules[0].when.time.tz")
  })
})
