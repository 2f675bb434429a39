import {
  type AgentFacts,
  type CompiledPolicySet,
  compilePolicies,
  type Decision,
  type EvaluationEnv,
  evaluate,
  InMemoryRateCounter,
  type RateCounter,
  validatePolicyDocument,
} from "../../src/policies/engine/index.ts"

export const agent = (overrides: Partial<AgentFacts> = {}): AgentFacts => ({
  id: "agt_1",
  name: "billing-bot",
  status: "active",
  labels: ["prod", "finance"],
  version: "1.2.0",
  trustScore: 650,
  trustTier: "trusted",
  ...overrides,
})

/** Compiles raw documents as a client would send them; ids are pol_1, pol_2, … */
export const compile = (documents: ReadonlyArray<unknown>): CompiledPolicySet =>
  compilePolicies(
    documents.map((raw, i) => {
      const result = validatePolicyDocument(raw)
      if (!result.ok) throw new Error(`test policy ${i} is invalid: ${JSON.stringify(result.issues)}`)
      return { id: `pol_${i + 1}`, version: 1, document: result.document }
    }),
  )

export const NOW = Date.parse("2026-11-20T12:00:00Z")

export const run = (
  set: CompiledPolicySet,
  request: { action: string; context?: Record<string, unknown>; agent?: Partial<AgentFacts> },
  env: Partial<EvaluationEnv> & { rate?: RateCounter } = {},
): Decision =>
  evaluate(
    set,
    { action: request.action, context: request.context ?? {}, agent: agent(request.agent) },
    { now: env.now ?? NOW, guardDefault: env.guardDefault ?? "allow", rate: env.rate ?? new InMemoryRateCounter() },
  )

/** `pol_1/deny-big/enforce`: a compact form of `matched` for assertions. */
export const matchedOf = (d: Decision) => d.matched.map((m) => `${m.policyId}/${m.ruleId}/${m.mode}`)
export const codesOf = (d: Decision) => d.reasons.map((r) => r.code)
