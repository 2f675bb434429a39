import type { Catalogue, Framework } from "./Control.ts"
import { euAiAct } from "./euAiAct.ts"
import { gdpr } from "./gdpr.ts"
import { soc2 } from "./soc2.ts"

export * from "./Control.ts"

/** The control catalogue of each framework. */
export const CATALOGUES: Readonly<Record<Framework, Catalogue>> = { "eu-ai-act": euAiAct, gdpr, soc2 }
