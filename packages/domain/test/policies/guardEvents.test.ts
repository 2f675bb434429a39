import { canonicalize } from "@agentgov/verifier"
import { describe, expect, it } from "vitest"
import { compilePolicies, type Decision } from "../../src/policies/engine/index.ts"
import { eventsOf } from "../../src/policies/GuardService.ts"
import { compile, run } from "./helpers.ts"

/**
 * The guard writes one to three events a call, and the chain hashes each one's canonical text. When every object of
 * an event's data lists its keys in code-unit order, `canonicalize` takes JSON.stringify's path (about a third of
 * the general path's cost), so the guard and the engine build them in that order. An object built otherwise is
 * still canonicalized right, only slower: this test is what notices.
 */

const verdict = (decided: Decision, approvalId?: string) => ({
  decided,
  decision: decided.decision,
  reasons: [...decided.reasons],
  ...(approvalId !== undefined ? { approvalId } : {}),
})

/** Every event's data is already in canonical order: JSON.stringify writes exactly its canonical text. */
const expectInOrder = (decided: Decision, approvalId?: string) => {
  const events = eventsOf("agt_1", "files.delete", verdict(decided, approvalId))
  for (const event of events) expect(JSON.stringify(event.data), event.type).toBe(canonicalize(event.data))
  return events.map((e) => e.type)
}

describe("the guard's events", () => {
  const set = compile([
    {
      name: "enforced",
      rules: [
        { id: "deny-delete", effect: "deny", actions: ["files.delete"] },
        { id: "allow-read", effect: "allow", actions: ["files.read"] },
        { id: "ask-pay", effect: "require_approval", actions: ["pay.*"] },
      ],
    },
    { name: "watched", mode: "monitor", rules: [{ id: "watch-all", effect: "deny", actions: ["*"] }] },
  ])

  it("list their data's keys in code-unit order, for each kind of decision", () => {
    // A deny with a monitor match: policy.evaluated, policy.denied, policy.violated.
    expect(expectInOrder(run(set, { action: "files.delete" }))).toEqual([
      "policy.evaluated",
      "policy.denied",
      "policy.violated",
    ])
    // An allow with a monitor match: its violation is the monitor note.
    expect(expectInOrder(run(set, { action: "files.read" }))).toEqual(["policy.evaluated", "policy.violated"])
    // An approval asked for, and the id of the approval it waits on.
    expect(expectInOrder(run(set, { action: "pay.card" }), "apr_1")).toEqual(["policy.evaluated", "policy.violated"])
    // No rule of an enforced policy matched: the workspace default (deny here), with the monitor match.
    expect(expectInOrder(run(set, { action: "x.y" }, { guardDefault: "deny" }))).toContain("policy.evaluated")
  })

  it("list them in order for conditions that cannot be evaluated", () => {
    const conditional = compile([
      {
        name: "c",
        rules: [
          {
            id: "deny-big",
            effect: "deny",
            actions: ["pay.*"],
            when: { field: "context.amount", op: "gt", value: 100 },
          },
          {
            id: "allow-some",
            effect: "allow",
            actions: ["pay.*"],
            when: { field: "context.amount", op: "gt", value: 5 },
          },
        ],
      },
    ])
    // A string where a number is compared: the deny rule counts as matched (fail closed), the allow rule does not.
    const decided = run(conditional, { action: "pay.card", context: { amount: "lots" } })
    expect(decided.reasons.map((r) => r.code)).toEqual(["CONDITION_ERROR", "CONDITION_ERROR"])
    expect(expectInOrder(decided)).toContain("policy.denied")
  })

  it("list them in order for a policy that no longer validates too", () => {
    const broken = { name: "old", rules: [{ id: "r", effect: "allow", actions: ["files.*"], when: { op: "gone" } }] }
    const invalid = compilePolicies([{ id: "pol_bad", version: 3, document: broken as never }])
    expect(expectInOrder(run(invalid, { action: "files.read" }))).toContain("policy.denied")
  })
})
