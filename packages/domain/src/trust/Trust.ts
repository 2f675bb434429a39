import { Schema, SchemaTransformation } from "effect"
import { FrameworkName } from "../compliance/Compliance.ts"
import { Id, Timestamp } from "../shared/schemas.ts"
import { BADGE_TIERS, TIERS } from "./Tier.ts"

export const TrustTier = Schema.Literals(TIERS).annotate({
  description:
    "D11: `untrusted` < 300 ≤ `probation` < 500 ≤ `bronze` < 700 ≤ `silver` < 850 ≤ `gold` < 950 ≤ `platinum`",
})
export const BadgeTier = Schema.Literals(BADGE_TIERS)

const Score = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1000 }))

export const TrustComponent = Schema.Struct({
  name: Schema.String.annotate({
    description:
      "`policy_compliance`, `enforcement_history`, `human_oversight`, `tenure_activity`, `identity_keys`, `operator_adjustment`",
  }),
  score: Score,
  weight: Schema.Finite.annotate({ description: "0..1; the weights of the five computed components sum to 1" }),
  detail: Schema.Record(Schema.String, Schema.Unknown).annotate({
    description: "the numbers the component used (decayed counts), and its formula",
  }),
}).annotate({ identifier: "TrustComponent" })

export const TrustScore = Schema.Struct({
  agentId: Schema.String,
  score: Score.annotate({ description: "weighted sum of the components, plus the operator adjustment, 0..1000" }),
  tier: TrustTier,
  components: Schema.Array(TrustComponent),
  computedAt: Timestamp,
  policyVersion: Schema.String.annotate({
    description: "the version of the scoring model (docs/trust.md) that computed it",
  }),
}).annotate({ identifier: "TrustScore" })
export type TrustScore = typeof TrustScore.Type

export const ReputationPoint = Schema.Struct({ at: Timestamp, score: Score, tier: TrustTier }).annotate({
  identifier: "ReputationPoint",
})

export const Reputation = Schema.Struct({
  agentId: Schema.String,
  score: Score,
  tier: TrustTier,
  counts: Schema.Record(Schema.String, Schema.Int).annotate({
    description: "plain totals of the evidence read since registration (evaluations, denied, enforcements, …)",
  }),
  history: Schema.Array(ReputationPoint).annotate({ description: "announced scores, oldest first" }),
}).annotate({ identifier: "Reputation" })
export type Reputation = typeof Reputation.Type

export const ReputationQuery = Schema.Struct({
  id: Schema.String.annotate({ description: "the agent's id (path parameter)" }),
  limit: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1000 })).annotate({
      description: "how many of the latest points, 1..1000, default 200",
    }),
  ),
}).annotate({ identifier: "ReputationQuery" })

export const CreateAdjustment = Schema.Struct({
  delta: Schema.Int.check(Schema.isBetween({ minimum: -1000, maximum: 1000 })).annotate({
    description: "points to add (negative: to take away), -1000..1000, not 0",
  }),
  reason: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(500)),
}).annotate({ identifier: "CreateAdjustment" })
export type CreateAdjustment = typeof CreateAdjustment.Type

export const Adjustment = Schema.Struct({
  id: Id("adj"),
  agentId: Schema.String,
  delta: Schema.Int,
  reason: Schema.String,
  createdAt: Timestamp,
}).annotate({ identifier: "Adjustment" })
export type Adjustment = typeof Adjustment.Type

/** D13's badge, as JSON. */
export const Badge = Schema.Struct({
  agentId: Schema.String,
  agentName: Schema.String,
  tier: BadgeTier,
  score: Score,
  issuedAt: Timestamp,
  expiresAt: Timestamp,
  issuer: Schema.String.annotate({ description: "the service's public URL; the JWS's `iss`" }),
  certifications: Schema.Array(FrameworkName).annotate({
    description: "the compliance frameworks the agent holds a certification of in force (D14), sorted",
  }),
  signature: Schema.String.annotate({
    description:
      "compact JWS (EdDSA, `typ: agentgov-badge+jwt`, `kid` in /.well-known/jwks.json) whose payload carries these fields",
  }),
}).annotate({ identifier: "Badge" })
export type Badge = typeof Badge.Type

export const BADGE_FAILURES = [
  "malformed",
  "unknown_key",
  "bad_signature",
  "expired",
  "other_agent",
  "no_badge",
] as const

export const BadgeVerification = Schema.Struct({
  valid: Schema.Boolean.annotate({ description: "signature good, not expired, for this agent" }),
  reason: Schema.optionalKey(Schema.Literals(BADGE_FAILURES)),
  agentId: Schema.String.annotate({ description: "the agent of the path" }),
  tier: Schema.NullOr(BadgeTier).annotate({ description: "the badge's tier; null when none could be read" }),
  score: Schema.NullOr(Score),
  issuedAt: Schema.NullOr(Timestamp),
  expiresAt: Schema.NullOr(Timestamp),
  current: Schema.Boolean.annotate({
    description:
      "what the badge shows holds now: the agent holds that tier, and every certification it names is in force",
  }),
}).annotate({ identifier: "BadgeVerification" })
export type BadgeVerification = typeof BadgeVerification.Type

export const AgentIdParam = Schema.Struct({
  agentId: Schema.String.annotate({ description: "the agent's id (path parameter)" }),
})

export const BadgeQuery = Schema.Struct({
  agentId: Schema.String.annotate({ description: "the agent's id (path parameter)" }),
  format: Schema.optionalKey(
    Schema.Literals(["json", "svg"]).annotate({
      description: "REST only: `svg` (the default for browsers) or `json`; `Accept: application/json` also picks JSON",
    }),
  ),
}).annotate({ identifier: "BadgeQuery" })

/** The longest badge a stranger may present: a badge is under 2 KiB, its SVG under 4 KiB. */
const MAX_PRESENTED = 65_536

/** What documents a presented badge: its text, or its JSON as an object. */
const PresentedShape = Schema.Union([
  Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_PRESENTED)),
  Schema.Record(Schema.String, Schema.Unknown).annotate({
    description: "the badge's JSON as an object, or the `{ok, data}` envelope that holds it",
  }),
]).annotate({
  description:
    "the badge as presented: its JSON (the object `GET /badge/:agentId?format=json` answers, with or without the `{ok, data}` envelope, or that JSON as text), its SVG, or the compact JWS alone",
})

type Presented = string | { readonly [key: string]: unknown }

/**
 * A presented badge: text (its JSON, its SVG or its JWS), or its JSON as an object, as `GET /badge/:agentId?format=json`
 * answers it (the badge, or the `{ok, data}` envelope): what a client naturally posts back. The object is checked as
 * exactly as its text (every field shown must be the signed one, else `bad_signature`). One declared schema rather
 * than a union, so that a value of neither kind is told what to send.
 */
const PresentedBadge = Schema.declare(
  (u: unknown): u is Presented => typeof u === "string" || (typeof u === "object" && u !== null && !Array.isArray(u)),
  {
    expected: "a badge: its JSON (an object, or as text), its SVG or its JWS",
    toCodecJson: () => Schema.link<Presented>()(PresentedShape, SchemaTransformation.passthrough()),
  },
).check(
  Schema.makeFilter((p: Presented) => {
    const length = typeof p === "string" ? p.length : JSON.stringify(p).length
    if (length === 0) return "an empty badge: send its JSON, its SVG or its JWS"
    return length <= MAX_PRESENTED || `a badge is at most ${MAX_PRESENTED} characters (as JSON for an object)`
  }),
)

export const VerifyBadge = Schema.Struct({
  badge: PresentedBadge,
}).annotate({ identifier: "VerifyBadge" })
