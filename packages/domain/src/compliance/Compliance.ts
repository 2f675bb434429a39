import { Schema } from "effect"
import { Cursor, DateTime, Id, isReadable, Limit, Timestamp } from "../shared/schemas.ts"

export const FrameworkName = Schema.Literals(["eu-ai-act", "gdpr", "soc2"]).annotate({
  description: "the framework whose control catalogue the report applies",
})

export const ReportStatus = Schema.Literals(["generating", "ready", "failed"])
export type ReportStatus = typeof ReportStatus.Type

export const ControlStatus = Schema.Literals(["met", "partial", "not_met", "not_applicable"])

export const EvidenceItem = Schema.Struct({
  label: Schema.String,
  value: Schema.Union([Schema.Finite, Schema.String, Schema.Boolean]),
  metric: Schema.optionalKey(
    Schema.String.annotate({ description: "the event metric this value is: recountable from an export bundle" }),
  ),
  ids: Schema.optionalKey(Schema.Array(Schema.String).annotate({ description: "the records this evidence names" })),
}).annotate({ identifier: "ComplianceEvidence" })

export const ControlResult = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  reference: Schema.String.annotate({ description: "the article, paragraph or criterion" }),
  required: Schema.Boolean.annotate({ description: "must be `met` for a certification" }),
  status: ControlStatus,
  evidence: Schema.Array(EvidenceItem),
  gaps: Schema.Array(Schema.String).annotate({ description: "what the records cannot show; the operator supplies it" }),
}).annotate({ identifier: "ComplianceControl" })

export const ReportSummary = Schema.Struct({
  result: Schema.Literals(["compliant", "partially_compliant", "non_compliant"]).annotate({
    description:
      "`compliant`: every required control met; `non_compliant`: a required control not met; otherwise partially",
  }),
  met: Schema.Int,
  partial: Schema.Int,
  notMet: Schema.Int,
  notApplicable: Schema.Int,
}).annotate({ identifier: "ComplianceSummary" })

const CheckpointSchema = Schema.Struct({
  workspaceId: Schema.String,
  treeSize: Schema.Int,
  rootHash: Schema.String,
  headHash: Schema.String,
  timestamp: Schema.String,
  kid: Schema.String,
  signature: Schema.String,
})

/** The signed document (format `agentgov.compliance-report/v1`); `agentgov-verify report` checks it. */
export const ReportDocumentSchema = Schema.Struct({
  format: Schema.Literal("agentgov.compliance-report/v1"),
  id: Schema.String,
  workspaceId: Schema.String,
  framework: FrameworkName,
  catalogueVersion: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  period: Schema.Struct({ from: Schema.String, to: Schema.String }),
  generatedAt: Schema.String,
  checkpoint: CheckpointSchema.annotate({ description: "the signed checkpoint taken at generation" }),
  chain: Schema.Struct({
    valid: Schema.Boolean,
    checked: Schema.Int,
    firstBadSequence: Schema.optionalKey(Schema.Int),
    reason: Schema.optionalKey(Schema.String),
  }),
  counted: Schema.Struct({
    count: Schema.Int,
    sequences: Schema.Array(Schema.Tuple([Schema.Int, Schema.Int])).annotate({
      description: "the counted sequences as inclusive ranges",
    }),
    idsDigest: Schema.String.annotate({
      description: 'hex SHA-256 over `"<sequence> <id>\\n"` of every counted event in sequence order',
    }),
    ids: Schema.optionalKey(Schema.Array(Schema.String).annotate({ description: "listed when at most 10,000" })),
  }),
  metrics: Schema.Record(Schema.String, Schema.Int),
  activity: Schema.Array(
    Schema.Struct({ at: Schema.String, evaluations: Schema.Int, denials: Schema.Int, enforcements: Schema.Int }),
  ),
  controls: Schema.Array(ControlResult),
  summary: ReportSummary,
  signature: Schema.String.annotate({
    description: "detached compact JWS (EdDSA, `typ: agentgov-report+jcs`) over the JCS of every other field",
  }),
}).annotate({ identifier: "ComplianceReportDocument" })

export const ComplianceReport = Schema.Struct({
  id: Id("rpt"),
  workspaceId: Schema.String,
  framework: FrameworkName,
  agentId: Schema.NullOr(Schema.String),
  from: Timestamp,
  to: Timestamp,
  status: ReportStatus,
  summary: Schema.NullOr(ReportSummary).annotate({ description: "once ready" }),
  error: Schema.NullOr(Schema.String).annotate({ description: "why generation failed" }),
  createdAt: Timestamp,
  completedAt: Schema.NullOr(Timestamp),
  report: Schema.optionalKey(ReportDocumentSchema).annotate({
    description: "the signed report, once ready (single reads)",
  }),
}).annotate({ identifier: "ComplianceReport" })
export type ComplianceReport = typeof ComplianceReport.Type

export const CreateReport = Schema.Struct({
  framework: FrameworkName,
  agentId: Schema.optionalKey(
    Schema.String.annotate({ description: "report on one agent (its events and the workspace's)" }),
  ),
  from: DateTime("start of the period (inclusive)", ["2026-10-01T00:00:00.000Z"]),
  to: DateTime("end of the period (exclusive), not in the future; at most 366 days after `from`", [
    "2026-11-01T00:00:00.000Z",
  ]),
}).annotate({ identifier: "CreateComplianceReport" })
export type CreateReport = typeof CreateReport.Type

export const ReportListQuery = Schema.Struct({
  limit: Schema.optionalKey(Limit),
  cursor: Schema.optionalKey(Cursor),
  framework: Schema.optionalKey(FrameworkName),
  agentId: Schema.optionalKey(Schema.String),
  status: Schema.optionalKey(ReportStatus),
}).annotate({ identifier: "ComplianceReportListQuery" })
export type ReportListQuery = typeof ReportListQuery.Type

export const ReportFormat = Schema.Literals(["json", "pdf", "html"])
export type ReportFormat = typeof ReportFormat.Type

export const CertificationStatus = Schema.Literals(["active", "expired", "revoked"])

export const Certification = Schema.Struct({
  id: Id("crt"),
  workspaceId: Schema.String,
  agentId: Schema.String,
  framework: FrameworkName,
  reportId: Schema.String,
  issuedAt: Timestamp,
  expiresAt: Timestamp.annotate({ description: "a year after issue" }),
  status: CertificationStatus,
  revokedAt: Schema.NullOr(Timestamp),
  revokedReason: Schema.NullOr(
    Schema.Literals(["agent_suspended", "agent_revoked", "trust_below_bronze", "revoked_by_operator"]),
  ).annotate({
    description:
      "a suspension or revocation enforcement, a fall below `bronze`, or an operator (`POST /compliance/certifications/:id/revoke`)",
  }),
  revocationNote: Schema.NullOr(Schema.String).annotate({ description: "the operator's reason, when one revoked it" }),
  signature: Schema.String.annotate({
    description:
      "detached compact JWS (EdDSA, `typ: agentgov-certification+jcs`) over the JCS of {id, workspaceId, agentId, framework, reportId, issuedAt, expiresAt}",
  }),
}).annotate({ identifier: "Certification" })
export type Certification = typeof Certification.Type

export const IssueCertification = Schema.Struct({
  agentId: Schema.String,
  reportId: Schema.String.annotate({
    description:
      "a ready report of this agent (`rpt_…`) whose period ended at most 24 hours ago and covers at least the 90 days before its end, or the agent's whole life since its registration (else 422 `VALIDATION_ERROR` on `reportId`)",
  }),
}).annotate({ identifier: "IssueCertification" })
export type IssueCertification = typeof IssueCertification.Type

export const RevokeCertification = Schema.Struct({
  reason: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(500), isReadable).annotate({
    description:
      "why, in the operator's words (1–500 characters, not only whitespace or invisible characters); recorded in `certification.revoked`",
    examples: ["the audit found the approval records incomplete"],
  }),
}).annotate({ identifier: "RevokeCertification" })
export type RevokeCertification = typeof RevokeCertification.Type

/** A certification is valid this long from issue. */
export const CERTIFICATION_VALIDITY_MS = 365 * 86_400_000
/** The longest period one report covers. */
export const MAX_REPORT_PERIOD_MS = 366 * 86_400_000
/** A certification's report covers at least this long before its end, or the agent's whole life when shorter. */
export const CERTIFICATION_MIN_PERIOD_MS = 90 * 86_400_000
/** A certification's report ends at most this long before the certification is issued. */
export const CERTIFICATION_MAX_REPORT_AGE_MS = 86_400_000

/** A duration in words, rounded down to its largest unit: "89 days", "5 minutes", "2 seconds". */
const span = (ms: number): string => {
  const [n, unit] =
    ms >= 86_400_000
      ? [Math.floor(ms / 86_400_000), "day"]
      : ms >= 3_600_000
        ? [Math.floor(ms / 3_600_000), "hour"]
        : ms >= 60_000
          ? [Math.floor(ms / 60_000), "minute"]
          : [Math.floor(ms / 1000), "second"]
  return `${n} ${unit}${n === 1 ? "" : "s"}`
}

/**
 * Why a report's period cannot back a certification issued at `now` for an agent registered at `registeredAt`, or
 * undefined when it can (fifth pass). The period must end at most {@link CERTIFICATION_MAX_REPORT_AGE_MS} before
 * the issue, and start no later than {@link CERTIFICATION_MIN_PERIOD_MS} before its end or the agent's registration,
 * whichever is later: at most the last day of the agent's life before the issue escapes the report, and of the rest
 * the report covers 90 days or all of it. A short period with no incidents picked to flatter the agent cannot
 * certify it.
 */
export const certificationPeriodProblem = (
  period: { readonly from: number; readonly to: number },
  registeredAt: number,
  now: number,
): string | undefined => {
  const at = (ms: number) => new Date(ms).toISOString()
  if (now - period.to > CERTIFICATION_MAX_REPORT_AGE_MS)
    return (
      `is a report of a period that ended at ${at(period.to)}, ${span(now - period.to)} ago: a certification needs ` +
      "a report whose period ends at most 24 hours before it is issued; request a report up to now"
    )
  const latestStart = Math.max(period.to - CERTIFICATION_MIN_PERIOD_MS, registeredAt)
  if (period.from > latestStart)
    return (
      `is a report of ${span(period.to - period.from)} (${at(period.from)} to ${at(period.to)}): a certification ` +
      "needs a report of at least the 90 days before its end or, for an agent registered since, of its whole life " +
      `since its registration (${at(registeredAt)}); request a report from ${at(latestStart)} or earlier`
    )
  return undefined
}
