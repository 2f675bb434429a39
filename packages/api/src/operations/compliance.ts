import {
  Certification,
  ComplianceReport,
  ComplianceService,
  CreateReport,
  IssueCertification,
  PageOf,
  ReportFormat,
  ReportListQuery,
  RevokeCertification,
  renderReportHtml,
  renderReportPdf,
  StateConflict,
} from "@agentgov/domain"
import { Effect, Schema } from "effect"
import { defineOperation, RenderedDocument } from "../Operation.ts"
import { idAnd, idField } from "./common.ts"

const tag = "Compliance"

export const complianceOperations = [
  defineOperation({
    name: "compliance.reports.create",
    method: "POST",
    path: "/compliance/reports",
    scope: "compliance:write",
    tag,
    summary: "Request a compliance report",
    description:
      "Answers 202 at once with the report `generating`; a worker generates it: it takes a signed checkpoint of the audit trail, verifies the chain, counts the period's events (the agent's and the workspace-wide ones for `agentId`), judges the framework's control catalogue and signs the report (a JWS over its JCS). Poll `GET /compliance/reports/:id` until `ready`. Emits `compliance.report.generated`.",
    successStatus: 202,
    errors: ["AGENT_NOT_FOUND"],
    input: CreateReport,
    output: ComplianceReport,
    handler: (input, actor) => ComplianceService.use((s) => s.requestReport(actor, input)),
  }),
  defineOperation({
    name: "compliance.reports.list",
    method: "GET",
    path: "/compliance/reports",
    scope: "compliance:read",
    tag,
    summary: "List compliance reports",
    description: "Newest first, without the signed documents. An agent key sees its own agent's.",
    paginated: true,
    input: ReportListQuery,
    output: PageOf(ComplianceReport),
    handler: (input, actor) => ComplianceService.use((s) => s.listReports(actor, input)),
  }),
  defineOperation({
    name: "compliance.reports.get",
    method: "GET",
    path: "/compliance/reports/:id",
    scope: "compliance:read",
    tag,
    summary: "Get a compliance report",
    description:
      "The record, with the signed report once `ready`. Over REST, `format=pdf` renders it as a PDF for auditors and `format=html` as a page (409 `REPORT_NOT_READY` before it is ready); over tRPC and the SDK those answer `{contentType, base64}`. Check it offline with `agentgov-verify report report.json bundle.json` against an export bundle (`GET /events/export?sinceTreeSize=<the report's checkpoint tree size>`).",
    errors: ["REPORT_NOT_FOUND", "REPORT_NOT_READY"],
    input: Schema.Struct({
      ...idField,
      format: Schema.optionalKey(ReportFormat.annotate({ description: "`json` (default), `pdf` or `html`" })),
    }),
    output: ComplianceReport,
    alternateContent: { "application/pdf": "the report as a PDF", "text/html": "the report as an HTML page" },
    handler: ({ id, format }, actor) =>
      ComplianceService.use((s) => s.getReport(actor, id)).pipe(
        Effect.flatMap((report) => {
          if (format === undefined || format === "json") return Effect.succeed(report as unknown)
          if (report.report === undefined)
            return Effect.fail(
              new StateConflict({ code: "REPORT_NOT_READY", message: `report ${id} is ${report.status}, not ready` }),
            )
          const doc = report.report
          return format === "pdf"
            ? Effect.promise(() => renderReportPdf(doc)).pipe(
                Effect.map((body) => new RenderedDocument("application/pdf", body, `${id}.pdf`)),
              )
            : Effect.succeed(new RenderedDocument("text/html; charset=utf-8", Buffer.from(renderReportHtml(doc))))
        }),
      ),
  }),
  defineOperation({
    name: "compliance.certifications.create",
    method: "POST",
    path: "/compliance/certifications",
    scope: "compliance:write",
    tag,
    summary: "Certify an agent",
    description:
      "Issues a certification of the agent for the report's framework when every required control of the agent's report is `met` (else 409 `CERTIFICATION_REFUSED` naming the unmet controls), the agent is active and its trust tier is `bronze` or above. A report backs one certification: a second from it (whatever became of the first) is 409 `CERTIFICATION_REFUSED` naming the first. Valid one year; revoked automatically by a suspension or revocation enforcement or a fall below `bronze`. Signed (a JWS over the JCS of its fields). Emits `certification.issued`.",
    successStatus: 201,
    errors: ["REPORT_NOT_FOUND", "AGENT_NOT_FOUND", "AGENT_DEREGISTERED", "CERTIFICATION_REFUSED"],
    input: IssueCertification,
    output: Certification,
    handler: (input, actor) => ComplianceService.use((s) => s.issueCertification(actor, input)),
  }),
  defineOperation({
    name: "compliance.certifications.revoke",
    method: "POST",
    path: "/compliance/certifications/:id/revoke",
    scope: "compliance:write",
    tag,
    summary: "Revoke a certification",
    description:
      "An operator ends a certification in force before it expires (say, an audit found what the records did not show), with the reason in their words: `revokedReason` becomes `revoked_by_operator` and `revocationNote` the reason. Emits `certification.revoked` (`reason: revoked_by_operator`, `note`); from then on the agent's badge no longer names the framework. One already revoked or expired is 409 `CERTIFICATION_NOT_ACTIVE`; agent keys cannot revoke. To certify again, issue a new one from a new report.",
    errors: ["CERTIFICATION_NOT_FOUND", "CERTIFICATION_NOT_ACTIVE"],
    input: idAnd(RevokeCertification),
    output: Certification,
    handler: ({ id, ...input }, actor) => ComplianceService.use((s) => s.revokeCertification(actor, id, input)),
  }),
  defineOperation({
    name: "compliance.certifications.list",
    method: "GET",
    path: "/compliance/certifications/:agentId",
    scope: "compliance:read",
    tag,
    summary: "List an agent's certifications in force",
    description: "Those neither expired nor revoked. An agent key sees its own agent's only.",
    errors: ["AGENT_NOT_FOUND"],
    input: Schema.Struct({ agentId: Schema.String.annotate({ description: "the agent (path parameter)" }) }),
    output: Schema.Array(Certification),
    handler: ({ agentId }, actor) => ComplianceService.use((s) => s.listCertifications(actor, agentId)),
  }),
]
