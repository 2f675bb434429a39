/**
 * The policy engine (decision D6): the policy language, its validation, compilation into an
 * action index, and evaluation of guard requests. Pure: no I/O, no clock but the one passed in.
 */
export { CEL_MAX_COST, INPUT_SIZE_BOUND } from "./cel.ts"
export {
  ACTION_CACHE_SIZE,
  budgetIssues,
  CompiledPolicySet,
  compilePolicies,
  type PolicyCompilation,
  type PolicyInput,
  type WorstCase,
} from "./compile.ts"
export { type AgentFacts, EVALUATION_BUDGET, GLOB_SUBJECT_MAX } from "./conditions.ts"
export {
  ApprovalRequirement,
  DECISIONS,
  Decision,
  type DecisionKind,
  DecisionReason,
  MatchedRule,
  REASON_CODES,
  ReasonCode,
} from "./Decision.ts"
export { type EvaluationEnv, evaluate, evaluationCostSpent, type GuardRequest } from "./evaluate.ts"
export { automatonRuns, compileGlob, GLOB_MAX_LENGTH, GLOB_MAX_STARS, type Glob, globProblem } from "./glob.ts"
export {
  AGENT_FIELDS,
  type AgentField,
  type AllCondition,
  type AnyCondition,
  type Approval,
  type CelCondition,
  type Condition,
  EFFECTS,
  GUARD_ACTION_MAX_LENGTH,
  type LeafCondition,
  LIMITS,
  MODES,
  type Mode,
  type NotCondition,
  OPERATORS,
  type Operator,
  RATE_PERIOD_MS,
  RATE_PERIODS,
  RATE_SCOPES,
  type RateCondition,
  type RateLimit,
  type RatePeriod,
  type RateScope,
  type Rule,
  type RuleEffect,
  type RuleEnforcement,
  type Target,
  type TimeCondition,
  type TimeWindow,
  WEEKDAYS,
  type Weekday,
} from "./language.ts"
export {
  decodePolicyDocument,
  documentedAs,
  PolicyCondition,
  PolicyDocument,
  PolicyDocumentShape,
  PolicyRule,
} from "./PolicyDocument.ts"
export { PolicyInvalid, PolicyIssueSchema, policyInvalid } from "./PolicyInvalid.ts"
export { InMemoryRateCounter, type RateCounter, type RateHit } from "./RateCounter.ts"
export { type PolicyIssue, type PolicyValidation, validatePolicyDocument } from "./validate.ts"
