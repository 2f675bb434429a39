import {
  type EnforcementType,
  MAX_ENFORCEMENT_DURATION_SECONDS,
  MAX_THROTTLE_LIMIT_PER_MINUTE,
} from "../../enforcement/Enforcement.ts"

/**
 * The policy language (decision D6; the details are in docs/decisions.md, "Policy language"):
 * the types of a policy document after validation, and the language's fixed vocabularies and
 * limits. Plain data, no behaviour.
 */

export const EFFECTS = ["allow", "deny", "require_approval"] as const
export type RuleEffect = (typeof EFFECTS)[number]

export const MODES = ["enforce", "monitor"] as const
export type Mode = (typeof MODES)[number]

export const OPERATORS = [
  "eq",
  "ne",
  "gt",
  "gte",
  "lt",
  "lte",
  "in",
  "nin",
  "contains",
  "startsWith",
  "endsWith",
  "glob",
  "exists",
  "between",
] as const
export type Operator = (typeof OPERATORS)[number]

/** Index = `Date.getUTCDay()` numbering: 0 is Sunday. */
export const WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] as const
export type Weekday = (typeof WEEKDAYS)[number]

export const RATE_PERIODS = ["second", "minute", "hour", "day"] as const
export type RatePeriod = (typeof RATE_PERIODS)[number]
export const RATE_PERIOD_MS: Readonly<Record<RatePeriod, number>> = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
}

export const RATE_SCOPES = ["agent", "workspace"] as const
export type RateScope = (typeof RATE_SCOPES)[number]

/** Fields a leaf condition may name besides `context.<path>`, with the JSON type each holds. */
export const AGENT_FIELDS = {
  "agent.id": "string",
  "agent.name": "string",
  "agent.status": "string",
  "agent.labels": "array",
  "agent.version": "string",
  "agent.trustScore": "number",
  "agent.trustTier": "string",
  // D6/D12's names; the camel-case ones above are kept for policies written before them.
  "agent.trust.score": "number",
  "agent.trust.tier": "string",
} as const
export type AgentField = keyof typeof AGENT_FIELDS

/**
 * The longest action a guard call may name, and an approval request: the one definition of it (approvals'
 * `ActionName` reads it). What a scan of the action index's patterns, and a `glob` condition on the action, are
 * costed at.
 */
export const GUARD_ACTION_MAX_LENGTH = 200

export const LIMITS = {
  nameLength: 200,
  descriptionLength: 2_000,
  rules: 1_000,
  ruleIdPattern: /^[A-Za-z0-9_.-]{1,64}$/,
  actionsPerRule: 50,
  reasonLength: 500,
  targetEntries: 100,
  approvers: 20,
  approverLength: 200,
  /** `when` is depth 1; each `all` / `any` / `not` adds one. */
  conditionDepth: 16,
  /** Condition nodes (every combinator and leaf) summed over all rules of one policy. */
  conditionNodes: 10_000,
  /** Segments of a `context.<path>` field. */
  contextPathSegments: 16,
  /** Elements of an `in` / `nin` list. */
  listValues: 1_000,
  stringValueLength: 1_000,
  celLength: 2_000,
  rateMax: 1_000_000,
  approvalTimeoutSeconds: { min: 60, max: 604_800, default: 3_600 },
  /** A rule's `enforce`: violations counted, over a window of seconds, and the sanction's own bounds. */
  enforceAfter: { min: 1, max: 10_000, default: 1 },
  enforceWithinSeconds: { min: 1, max: 2_592_000, default: 3_600 },
  enforceDurationSeconds: { min: 1, max: MAX_ENFORCEMENT_DURATION_SECONDS },
  enforceLimitPerMinute: { min: 1, max: MAX_THROTTLE_LIMIT_PER_MINUTE },
  /** Issues reported for one document; the rest are dropped. */
  issues: 100,
} as const

export interface LeafCondition {
  readonly field: string
  readonly op: Operator
  readonly value?: unknown
}
export interface AllCondition {
  readonly all: ReadonlyArray<Condition>
}
export interface AnyCondition {
  readonly any: ReadonlyArray<Condition>
}
export interface NotCondition {
  readonly not: Condition
}
export interface TimeWindow {
  /** The days a window starts on (every day when absent). */
  readonly days?: ReadonlyArray<Weekday>
  /** `HH:MM`, 00:00..23:59, inclusive. */
  readonly from: string
  /** `HH:MM`, 00:01..24:00, exclusive; earlier than `from` means the window runs past midnight. */
  readonly to: string
  /** IANA time zone, e.g. `America/New_York` or `UTC`. */
  readonly tz: string
}
export interface TimeCondition {
  readonly time: TimeWindow
}
export interface RateLimit {
  readonly max: number
  readonly per: RatePeriod
  /** `agent` (default): one counter per agent; `workspace`: one shared by every agent. */
  readonly scope?: RateScope
}
export interface RateCondition {
  readonly rate: RateLimit
}
export interface CelCondition {
  readonly cel: string
}
export type Condition =
  | AllCondition
  | AnyCondition
  | NotCondition
  | LeafCondition
  | TimeCondition
  | RateCondition
  | CelCondition

export interface Approval {
  readonly timeoutSeconds: number
  readonly approvers?: ReadonlyArray<string>
}

/**
 * A `deny` rule's automatic enforcement: issued against the agent when the rule has denied it
 * `after` times within `withinSeconds` (counting from the end of its previous enforcement by this
 * rule, if later), while no earlier one by this rule is in force. Inert while the policy is in
 * `monitor` mode.
 */
export interface RuleEnforcement {
  readonly type: EnforcementType
  readonly after: number
  readonly withinSeconds: number
  /** Absent: until an operator resolves it. Not for a revocation. */
  readonly durationSeconds?: number
  /** Required for `throttle`, refused otherwise. */
  readonly limitPerMinute?: number
  readonly reason?: string
}

export interface Rule {
  readonly id: string
  readonly effect: RuleEffect
  readonly actions: ReadonlyArray<string>
  readonly when?: Condition
  readonly reason?: string
  /** Only on `require_approval` rules, where it defaults to `{timeoutSeconds: 3600}`. */
  readonly approval?: Approval
  /** Only on `deny` rules. */
  readonly enforce?: RuleEnforcement
}

export interface Target {
  readonly agentIds?: ReadonlyArray<string>
  readonly labels?: ReadonlyArray<string>
}

/** A validated policy document, defaults applied. */
export interface PolicyDocument {
  readonly name: string
  readonly description?: string
  readonly enabled: boolean
  readonly mode: Mode
  readonly target?: Target
  readonly rules: ReadonlyArray<Rule>
}
