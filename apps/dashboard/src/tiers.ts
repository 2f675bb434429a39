/** D11's tiers and thresholds, as the trust score's reader sees them (the service computes them the same way). */
export const TIERS = ["untrusted", "probation", "bronze", "silver", "gold", "platinum"] as const
export type Tier = (typeof TIERS)[number]
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
