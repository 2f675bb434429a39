import { tierOf } from "../trust/Tier.ts"

/**
 * Whether an agent's trust has fallen below `bronze` (D11), which ends its certifications (D14). The one
 * place certifications read trust: when the trust module owns scores and tiers, point this at it.
 */
export const belowBronze = (trustScore: number): boolean => {
  const tier = tierOf(trustScore)
  return tier === "untrusted" || tier === "probation"
}

export const trustTierOf = tierOf
