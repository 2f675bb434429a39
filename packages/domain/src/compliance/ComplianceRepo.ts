import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { NewEvent } from "../audit/AuditEvent.ts"
import type { ComplianceReport } from "./Compliance.ts"
import type { Framework } from "./controls/Control.ts"

export interface ReportRow {
  readonly id: string
  readonly workspace_id: string
  readonly framework: Framework
  readonly agent_id: string | null
  readonly period_from: Date
  readonly period_to: Date
  readonly status: "generating" | "ready" | "failed"
  readonly requested_by: string
  readonly summary: ComplianceReport["summary"]
  readonly document: string | null
  readonly error: string | null
  readonly attempts: number
  readonly created_at: Date
  readonly completed_at: Date | null
}

export interface CertificationRow {
  readonly id: string
  readonly workspace_id: string
  readonly agent_id: string
  readonly framework: Framework
  readonly report_id: string
  readonly status: "active" | "revoked"
  readonly issued_at: Date
  readonly expires_at: Date
  readonly revoked_at: Date | null
  readonly revoked_reason: "agent_suspended" | "agent_revoked" | "trust_below_bronze" | "revoked_by_operator" | null
  readonly revoked_by: string | null
  readonly revocation_note: string | null
  readonly signature: string
}

/** Why certifications end without an operator: a suspension, a revocation, a fall below bronze. */
export type RevocationReason = Exclude<NonNullable<CertificationRow["revoked_reason"]>, "revoked_by_operator">

/** Report and certification rows; every query is scoped by workspace. */
export class ComplianceRepo extends Context.Service<
  ComplianceRepo,
  {
    readonly findReport: (workspaceId: string, id: string) => Effect.Effect<ReportRow | undefined>
    /**
     * The frameworks the agent holds a certification of in force at `at`, sorted (the badge shows them), each with
     * the end of its latest certification in force (epoch ms): a badge naming them is signed to expire by then.
     */
    readonly activeFrameworks: (
      workspaceId: string,
      agentId: string,
      at: string,
    ) => Effect.Effect<ReadonlyArray<{ readonly framework: Framework; readonly until: number }>>
    /**
     * Revokes the agent's certifications still in force at `at` (in the caller's transaction) and answers
     * the `certification.revoked` events to append with the change.
     */
    readonly revokeCertifications: (
      workspaceId: string,
      agentId: string,
      reason: RevocationReason,
      at: string,
    ) => Effect.Effect<ReadonlyArray<NewEvent>>
  }
>()("@agentgov/domain/compliance/ComplianceRepo") {
  static readonly layer = Layer.effect(
    ComplianceRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const findReport = (workspaceId: string, id: string) =>
        sql<ReportRow>`SELECT * FROM compliance_reports WHERE workspace_id = ${workspaceId} AND id = ${id}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie,
        )

      // The agent's row lock first: a certification being issued holds it from its checks to its commit
      // (`issueCertification`), so this waits for that one and its UPDATE then sees (and revokes) it. Without the
      // lock, the trust worker's pass revoked before such an issue committed and the certification outlived the
      // fall below bronze it was racing (outside review, 2026-11-29). The enforcement service holds it already.
      const revokeCertifications = (workspaceId: string, agentId: string, reason: RevocationReason, at: string) =>
        sql`SELECT id FROM agents WHERE workspace_id = ${workspaceId} AND id = ${agentId} FOR UPDATE`.pipe(
          Effect.andThen(
            sql<CertificationRow>`UPDATE certifications SET status = 'revoked', revoked_at = ${at}::timestamptz,
              revoked_reason = ${reason}
            WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId} AND status = 'active'
              AND expires_at > ${at}::timestamptz
            RETURNING *`,
          ),
          Effect.map((rows) =>
            rows.map(
              (c): NewEvent => ({
                type: "certification.revoked",
                agentId,
                data: { certificationId: c.id, agentId, framework: c.framework, reportId: c.report_id, reason },
              }),
            ),
          ),
          Effect.orDie,
        )

      const activeFrameworks = (workspaceId: string, agentId: string, at: string) =>
        sql<{ framework: Framework; until: Date }>`SELECT framework, max(expires_at) AS until FROM certifications
            WHERE workspace_id = ${workspaceId} AND agent_id = ${agentId} AND status = 'active'
              AND expires_at > ${at}::timestamptz
            GROUP BY framework ORDER BY framework`.pipe(
          Effect.map((rows) => rows.map((r) => ({ framework: r.framework, until: new Date(r.until).getTime() }))),
          Effect.orDie,
        )

      return ComplianceRepo.of({ findReport, activeFrameworks, revokeCertifications })
    }),
  )
}
