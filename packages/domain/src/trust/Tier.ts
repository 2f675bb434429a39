/** D11's tiers, lowest first, with the score each starts at. */
export const TIERS = ["untrusted", "probation", "bronze", "silver", "gold", "platinum"] as const
export type Tier = (typeof TIERS)[number]

/** D11: a badge exists from `bronze` up. */
export const BADGE_TIERS = ["bronze", "silver", "gold", "platinum"] as const
export type BadgeTier = (typeof BADGE_TIERS)[number]

/**
 * The tier of a score 0–1000 (D11: `untrusted` < 300 ≤ `probation` < 500 ≤ `bronze` < 700 ≤ `silver` < 850 ≤
 * `gold` < 950 ≤ `platinum`). The guard calls it on every decision: comparisons, no loop.
 */
export const tierOf = (score: number): Tier =>
  score >= 950
    ? "platinum"
    : score >= 850
      ? "gold"
      : score >= 700
        ? "silver"
        : score >= 500
          ? "bronze"
          : score >= 300
            ? "probation"
            : "untrusted"

/** Position of a tier, for comparisons (`untrusted` is 0). */
export const tierRank = (tier: Tier): number => TIERS.indexOf(tier)

/** D13: the badge an agent of this tier and status holds, or undefined for none. */
export const badgeOf = (tier: Tier, status: string): BadgeTier | undefined =>
  status === "active" && tierRank(tier) >= tierRank("bronze") ? (tier as BadgeTier) : undefined
