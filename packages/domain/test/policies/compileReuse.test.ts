import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Authenticator, PolicyService, PolicySets, WorkspaceService } from "../../src/index.ts"
import { compilePolicies, validatePolicyDocument } from "../../src/policies/engine/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

/**
 * A workspace's policies are compiled again at every load (a change, the 30 s refresh, a save's budget check).
 * CEL is parsed and checked once per policy version, not at every load: the process-wide CEL cache holds fewer
 * expressions than one workspace may have, and thousands of distinct ones took seconds of blocked event loop to
 * compile again. Calls that miss the compiled set together share one load.
 */

const celPolicy = (name: string, n: number) => {
  const v = validatePolicyDocument({
    name,
    rules: Array.from({ length: n }, (_, i) => ({
      id: `r${i}`,
      effect: "deny",
      actions: [`act.${i}`],
      when: { cel: `context.amount > ${i}.5 && context.who == "${name}-${i}"` },
    })),
  })
  if (!v.ok) throw new Error(JSON.stringify(v.issues))
  return v.document
}

describe("compiling a workspace again", () => {
  it("reuses each unchanged policy version's compiled conditions", () => {
    const a = { id: "pol_a", version: 1, document: celPolicy("a", 50) }
    const b = { id: "pol_b", version: 1, document: celPolicy("b", 50) }
    const first = compilePolicies([a, b])
    // pol_b changes (a new version); pol_a does not.
    const b2 = { id: "pol_b", version: 2, document: celPolicy("b2", 50) }
    const second = compilePolicies([a, b2], first.compilations)
    const conditionOf = (set: typeof first, policyId: string, ruleId: string) =>
      set.rules.find((r) => r.policy.id === policyId && r.id === ruleId)!.condition
    for (let i = 0; i < 50; i++) {
      expect(conditionOf(second, "pol_a", `r${i}`)).toBe(conditionOf(first, "pol_a", `r${i}`))
      expect(conditionOf(second, "pol_b", `r${i}`)).not.toBe(conditionOf(first, "pol_b", `r${i}`))
    }
    // A row edited in place at the same version is compiled again.
    const edited = { ...a, document: { ...a.document, rules: a.document.rules.slice(1) } }
    const third = compilePolicies([edited, b2], second.compilations)
    expect(third.rules.filter((r) => r.policy.id === "pol_a")).toHaveLength(49)
  })
})

describe("PolicySets", () => {
  let env: DomainTestRuntime
  beforeAll(async () => {
    env = await makeDomainRuntime()
  })
  afterAll(async () => env?.dispose())

  it("shares one load among the calls that miss together", async () => {
    const { workspace, apiKey } = await env.run(
      WorkspaceService.use((s) => s.create(null, { name: "shared-load", environment: "live" })),
    )
    const actor = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    await env.run(PolicyService.use((s) => s.create(actor, { ...celPolicy("p", 20) })))
    const states = await env.run(
      PolicySets.use((s) =>
        Effect.andThen(
          s.forget(workspace.id),
          Effect.all(
            Array.from({ length: 20 }, () => s.get(workspace.id)),
            { concurrency: "unbounded" },
          ),
        ),
      ),
    )
    for (const state of states) expect(state).toBe(states[0])
    expect(states[0]!.set.rules).toHaveLength(20)
  })
})
