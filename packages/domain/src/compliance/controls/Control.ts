import type { ControlStatus, Evidence, Metrics } from "@agentgov/verifier"

export type Framework = "eu-ai-act" | "gdpr" | "soc2"
export const FRAMEWORKS: ReadonlyArray<Framework> = ["eu-ai-act", "gdpr", "soc2"]

/**
 * What a report knows when it judges the controls: the counts taken from the audit trail over the period
 * (recountable from a bundle), the chain's verification, and the state of the workspace's records at
 * generation (keys, enforcements, settings), which a bundle cannot show.
 */
export interface Facts {
  readonly scope: "workspace" | "agent"
  readonly metrics: Metrics
  readonly chain: {
    readonly valid: boolean
    readonly checked: number
    readonly firstBadSequence?: number
    readonly reason?: string
  }
  readonly checkpoint: { readonly treeSize: number; readonly rootHash: string }
  /** Active API keys in scope (the agent's own for an agent report). */
  readonly keys: {
    readonly active: number
    readonly withoutExpiry: ReadonlyArray<string>
    /** Active keys holding every workspace scope: the least-privilege gaps. */
    readonly allScopes: ReadonlyArray<string>
    /** Active keys of suspended or deregistered agents. */
    readonly ofInactiveAgents: ReadonlyArray<string>
  }
  /** Enforcements issued in the period, as recorded now. */
  readonly enforcements: {
    /** Suspensions and revocations: the incidents. */
    readonly incidents: number
    /** Incidents resolved, expired or overturned within 72 hours of issue. */
    readonly incidentsClosedWithin72h: number
    /** Enforcements still open (active, appealed) more than 7 days after issue. */
    readonly openOver7d: ReadonlyArray<string>
    /** Median hours from issue to resolution or expiry of those closed; null when none closed. */
    readonly medianHoursToClose: number | null
  }
  readonly guardDefault: "allow" | "deny"
  /** Enabled policies in force (enforce mode) at generation. */
  readonly enforcingPolicies: number
}

export interface Judgement {
  readonly status: ControlStatus
  readonly evidence: ReadonlyArray<Evidence>
  readonly gaps: ReadonlyArray<string>
}

export interface Control {
  /** Stable within the framework, e.g. `AIA-12`. */
  readonly id: string
  readonly title: string
  /** The exact article, paragraph or criterion. */
  readonly reference: string
  /** The text of the reference the control relies on (quoted or closely paraphrased), for the auditor. */
  readonly citation: string
  /** What evidence satisfies it, partly or fully, from this service's records. */
  readonly satisfiedBy: string
  /** Must be `met` for a certification. Only controls the records can fully evidence are required. */
  readonly required: boolean
  readonly judge: (f: Facts) => Judgement
}

export interface Catalogue {
  readonly framework: Framework
  /** Bumped whenever a control, its rule or its citation changes; reports name the version they used. */
  readonly version: string
  readonly title: string
  readonly source: string
  readonly controls: ReadonlyArray<Control>
}

// Evidence helpers shared by the catalogues: one wording per fact.

export const metric = (m: keyof Metrics, label: string, f: Facts): Evidence => ({
  label,
  value: f.metrics[m],
  metric: m,
})

export const chainEvidence = (f: Facts): ReadonlyArray<Evidence> => [
  {
    label: f.chain.valid
      ? `the audit chain verified end to end (${f.chain.checked} events, hash links and signed roots)`
      : `the audit chain fails verification from sequence ${f.chain.firstBadSequence}: ${f.chain.reason}`,
    value: f.chain.valid,
  },
  {
    label: "signed checkpoint the counts are pinned to (tree size, root)",
    value: `${f.checkpoint.treeSize}:${f.checkpoint.rootHash}`,
  },
]

/** The chain's failure, as the gap it leaves. */
export const chainGap = (f: Facts): ReadonlyArray<string> =>
  f.chain.valid
    ? []
    : [
        `the audit trail was altered or lost from sequence ${f.chain.firstBadSequence}: investigate, and restore it from a verified export bundle`,
      ]
