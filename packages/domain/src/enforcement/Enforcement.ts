import { Schema } from "effect"
import { Cursor, Description, Id, isReadable, Limit, Timestamp } from "../shared/schemas.ts"

/** D7's types; also what a policy rule's `enforce` may issue. */
export const ENFORCEMENT_TYPES = ["warning", "throttle", "suspension", "revocation"] as const

export const EnforcementType = Schema.Literals(ENFORCEMENT_TYPES).annotate({
  description:
    "`suspension` suspends the agent; `revocation` suspends it and revokes its API keys; `throttle` caps its requests per minute",
})
export type EnforcementType = typeof EnforcementType.Type

export const EnforcementStatus = Schema.Literals(["active", "appealed", "resolved", "expired"])
export type EnforcementStatus = typeof EnforcementStatus.Type

export const Resolution = Schema.Literals(["upheld", "overturned"])
export type Resolution = typeof Resolution.Type

/** Types that take the agent out of service while in force. */
export const SUSPENDING_TYPES: ReadonlySet<EnforcementType> = new Set(["suspension", "revocation"])

/** Ten years: the longest fixed duration; longer sanctions are open-ended (no expiry). */
export const MAX_ENFORCEMENT_DURATION_SECONDS = 10 * 365 * 86_400
export const MAX_THROTTLE_LIMIT_PER_MINUTE = 1_000_000

const Reason = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(2000), isReadable)
const Duration = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_ENFORCEMENT_DURATION_SECONDS })).annotate(
  { description: `seconds from now until it expires, 1..${MAX_ENFORCEMENT_DURATION_SECONDS}` },
)
const LimitPerMinute = Schema.Int.check(
  Schema.isBetween({ minimum: 1, maximum: MAX_THROTTLE_LIMIT_PER_MINUTE }),
).annotate({ description: "throttles only (and required for them): requests per minute the agent may make" })

export const Enforcement = Schema.Struct({
  id: Id("enf"),
  workspaceId: Schema.String,
  agentId: Schema.String,
  type: EnforcementType,
  status: EnforcementStatus.annotate({
    description:
      "`active` → `appealed` (POST …/appeal) → `resolved` (PATCH with `resolution`); `expired` once `expiresAt` passes while in force",
  }),
  inForce: Schema.Boolean.annotate({
    description: "whether it applies now: `active`, `appealed`, or `resolved` as `upheld`, and not past `expiresAt`",
  }),
  reason: Schema.String,
  policyId: Schema.NullOr(Schema.String).annotate({ description: "the policy whose rule issued it automatically" }),
  ruleId: Schema.NullOr(Schema.String),
  limitPerMinute: Schema.NullOr(Schema.Int).annotate({ description: "throttles: requests per minute allowed" }),
  expiresAt: Schema.NullOr(Timestamp).annotate({ description: "null: until resolved" }),
  appealReason: Schema.NullOr(Schema.String),
  appealedAt: Schema.NullOr(Timestamp),
  resolution: Schema.NullOr(Resolution).annotate({
    description: "`upheld` keeps it in force until `expiresAt`; `overturned` lifts it and reinstates the agent",
  }),
  resolutionNote: Schema.NullOr(Schema.String),
  resolvedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
}).annotate({ identifier: "Enforcement" })
export type Enforcement = typeof Enforcement.Type

/** An enforcement as stored: `status` as last written; `inForce` and expiry are judged at read time. */
export type StoredEnforcement = Omit<Enforcement, "inForce">

export const CreateEnforcement = Schema.Struct({
  agentId: Schema.String,
  type: EnforcementType,
  reason: Reason,
  expiresAt: Schema.optionalKey(
    Timestamp.annotate({
      description: "when it ends, in the future and at most ten years away; not with `durationSeconds`",
    }),
  ),
  durationSeconds: Schema.optionalKey(Duration),
  limitPerMinute: Schema.optionalKey(LimitPerMinute),
}).annotate({ identifier: "CreateEnforcement" })
export type CreateEnforcement = typeof CreateEnforcement.Type

export const UpdateEnforcement = Schema.Struct({
  reason: Schema.optionalKey(Reason),
  expiresAt: Schema.optionalKey(
    Schema.NullOr(Timestamp).annotate({
      description: "a new end, in the future and at most ten years away; null: until resolved",
    }),
  ),
  durationSeconds: Schema.optionalKey(Duration),
  resolution: Schema.optionalKey(Resolution.annotate({ description: "resolves it; not combined with other changes" })),
  note: Schema.optionalKey(
    Description.check(isReadable).annotate({
      description: "the operator's note on the resolution; leave it out for none (a blank one is refused)",
    }),
  ),
}).annotate({ identifier: "UpdateEnforcement" })
export type UpdateEnforcement = typeof UpdateEnforcement.Type

export const AppealEnforcement = Schema.Struct({
  reason: Reason.annotate({ description: "the grounds of the appeal" }),
}).annotate({ identifier: "AppealEnforcement" })
export type AppealEnforcement = typeof AppealEnforcement.Type

export const EnforcementListQuery = Schema.Struct({
  limit: Schema.optionalKey(Limit),
  cursor: Schema.optionalKey(Cursor),
  status: Schema.optionalKey(
    Schema.Array(Schema.Literals(["active", "appealed", "resolved", "expired", "all"])).annotate({
      description: "one or more statuses, comma-separated or repeated, or `all`; default: those in force",
    }),
  ),
  agentId: Schema.optionalKey(Schema.String),
  type: Schema.optionalKey(
    Schema.Array(EnforcementType).annotate({ description: "one or more types, comma-separated or repeated" }),
  ),
}).annotate({ identifier: "EnforcementListQuery" })
export type EnforcementListQuery = typeof EnforcementListQuery.Type
