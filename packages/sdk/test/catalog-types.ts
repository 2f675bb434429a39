/**
 * Compile-time comparison of the SDK's hand-written records and inputs with the service's schemas
 * (`tsc --noEmit -p packages/sdk` fails on a difference, naming the type). Records must match
 * both ways; an SDK input must be accepted by the service's schema and the reverse.
 */
import type * as D from "@agentgov/domain"
import type { Schema } from "effect"
import type * as S from "../src/index.ts"

/** Each assignable to the other: same fields, same types (optional keys may differ in `undefined`). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
type T<S extends Schema.Top> = S["Type"]

type Checks = {
  Workspace: Same<S.Workspace, D.Workspace>
  WorkspaceCreateParams: Same<S.WorkspaceCreateParams, D.CreateWorkspace>
  WorkspaceUpdateParams: Same<S.WorkspaceUpdateParams, D.UpdateWorkspace>
  Agent: Same<S.Agent, D.Agent>
  AgentCreateParams: Same<S.AgentCreateParams, D.RegisterAgent>
  AgentUpdateParams: Same<S.AgentUpdateParams, D.UpdateAgent>
  AgentVersion: Same<S.AgentVersion, D.AgentVersion>
  AgentVersionCreateParams: Same<S.AgentVersionCreateParams, D.CreateAgentVersion>
  ApiKey: Same<S.ApiKey, D.ApiKey>
  ApiKeyWithSecret: Same<S.ApiKeyWithSecret, D.ApiKeyWithSecret>
  ApiKeyCreateParams: Same<S.ApiKeyCreateParams, D.CreateApiKey>
  ApiKeyRotateParams: Same<S.ApiKeyRotateParams, T<typeof D.RotateApiKey>>
  AuditEvent: Same<S.AuditEvent, D.AuditEvent>
  IngestEvent: Same<S.IngestEvent, D.IngestEvent>
  IngestResult: Same<S.IngestResult, D.IngestResult>
  ChainVerification: Same<S.ChainVerification, D.Verification>
  Checkpoint: Same<S.Checkpoint, T<typeof D.Checkpoint>>
  InclusionProof: Same<S.InclusionProof, T<typeof D.InclusionProofResult>>
  ConsistencyProof: Same<S.ConsistencyProof, T<typeof D.ConsistencyProofResult>>
  AuditBundle: Same<S.AuditBundle, T<typeof D.ExportBundle>>
  Policy: Same<S.Policy, D.Policy>
  GuardRequest: Same<S.GuardRequest, D.GuardRequestInput>
  GuardResult: Same<S.GuardResult, D.GuardResult>
  Approval: Same<S.Approval, D.Approval>
  ApprovalCreateParams: Same<S.ApprovalCreateParams, D.CreateApproval>
  ApprovalDecideParams: Same<S.ApprovalDecideParams, D.DecideApproval>
  Enforcement: Same<S.Enforcement, D.Enforcement>
  EnforcementCreateParams: Same<S.EnforcementCreateParams, D.CreateEnforcement>
  EnforcementUpdateParams: Same<S.EnforcementUpdateParams, D.UpdateEnforcement>
  EnforcementAppealParams: Same<S.EnforcementAppealParams, D.AppealEnforcement>
  TrustScore: Same<S.TrustScore, D.TrustScore>
  Reputation: Same<S.Reputation, D.Reputation>
  ReputationParams: Same<S.ReputationParams, Omit<T<typeof D.ReputationQuery>, "id">>
  AdjustmentCreateParams: Same<S.AdjustmentCreateParams, D.CreateAdjustment>
  Adjustment: Same<S.Adjustment, D.Adjustment>
  Badge: Same<S.Badge, D.Badge>
  BadgeVerification: Same<S.BadgeVerification, D.BadgeVerification>
  Webhook: Same<S.Webhook, D.Webhook>
  WebhookWithSecret: Same<S.WebhookWithSecret, D.WebhookWithSecret>
  WebhookCreateParams: Same<S.WebhookCreateParams, D.CreateWebhook>
  WebhookUpdateParams: Same<S.WebhookUpdateParams, D.UpdateWebhook>
  WebhookRotateParams: Same<S.WebhookRotateParams, D.RotateWebhookSecret>
  WebhookTestResult: Same<S.WebhookTestResult, D.TestResult>
  WebhookRedeliverParams: Same<S.WebhookRedeliverParams, D.Redeliver>
  WebhookRedeliverResult: Same<S.WebhookRedeliverResult, D.RedeliverResult>
  ComplianceReport: Same<S.ComplianceReport, D.ComplianceReport>
  ComplianceReportCreateParams: Same<S.ComplianceReportCreateParams, D.CreateReport>
  ComplianceReportListParams: Same<S.ComplianceReportListParams, D.ReportListQuery>
  Certification: Same<S.Certification, D.Certification>
  CertificationCreateParams: Same<S.CertificationCreateParams, D.IssueCertification>
  ContentItem: Same<S.ContentItem, D.ContentItem>
  ContentMatch: Same<S.ContentMatch, D.ContentMatch>
  ContentRegisterParams: Same<S.ContentRegisterParams, D.RegisterContent>
  ContentListParams: Same<S.ContentListParams, D.ContentListQuery>
  ContentScanParams: Same<S.ContentScanParams, D.ScanContent>
  ContentScanResult: Same<S.ContentScanResult, D.ScanResult>
  WatermarkDetection: Same<S.WatermarkDetection, T<typeof D.WatermarkDetection>>
  TakedownCreateParams: Same<S.TakedownCreateParams, D.CreateTakedown>
  Takedown: Same<S.Takedown, D.Takedown>
  User: Same<S.User, D.User>
  Me: Same<S.Me, D.Me>
  Member: Same<S.Member, D.Member>
  MemberUpdateParams: Same<S.MemberUpdateParams, D.UpdateMember>
  Invitation: Same<S.Invitation, D.Invitation>
  InvitationCreateParams: Same<S.InvitationCreateParams, D.CreateInvitation>
  CreatedInvitation: Same<S.CreatedInvitation, D.CreatedInvitation>
  OAuthClient: Same<S.OAuthClient, D.OAuthClient>
  CreatedOAuthClient: Same<S.CreatedOAuthClient, D.CreatedOAuthClient>
  OAuthGrant: Same<S.OAuthGrant, D.OAuthGrant>
}

type Differing = { [K in keyof Checks]: Checks[K] extends true ? never : K }[keyof Checks]
export const sameShapes: [Differing] extends [never] ? true : `differs from the service: ${Differing}` = true
