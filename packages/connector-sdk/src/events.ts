/**
 * The webhook body (the spec's event envelope) and the `data` of every system event, written by
 * hand from the service's event catalog (`docs/events.md`). A test compares these types and the
 * names with the catalog, so they cannot drift silently.
 *
 * The data is typed, not validated: the SDK trusts what a correctly signed delivery carries.
 * Fields may be added to any event; ignore the ones you do not know.
 */

// ---------------------------------------------------------------------------------------------
// Shared pieces

/** The guard's outcome (D6). */
export type GuardDecision = "allow" | "deny" | "require_approval"
/** A policy rule's effect (D6). */
export type RuleEffect = "allow" | "deny" | "require_approval"
/** `monitor` policies never change the decision; their matches are recorded (D6). */
export type PolicyMode = "enforce" | "monitor"
/** Trust tiers, lowest first (D11). */
export type TrustTier = "untrusted" | "probation" | "bronze" | "silver" | "gold" | "platinum"
/** Tiers that carry a badge (D11). */
export type BadgeTier = "bronze" | "silver" | "gold" | "platinum"
/** Enforcement types (D7): a suspension suspends the agent; a revocation also revokes its keys. */
export type EnforcementType = "warning" | "throttle" | "suspension" | "revocation"
/** A workspace's environment (D4). */
export type WorkspaceEnvironment = "live" | "test"
/** A workspace's plan (D10). */
export type WorkspacePlan = "free" | "pro" | "enterprise"

/** One matched rule, as in the guard's response. */
export interface PolicyMatch {
  readonly policyId: string
  readonly ruleId: string
  readonly effect: RuleEffect
  /** The version of the policy that matched. */
  readonly policyVersion?: number
  readonly mode?: PolicyMode
}

/** One reason of a guard decision, as in the guard's response. */
export interface GuardReason {
  /** UPPER_SNAKE reason code, e.g. `NO_MATCHING_POLICY`, `AGENT_SUSPENDED`. */
  readonly code: string
  readonly message: string
  readonly policyId?: string
  readonly ruleId?: string
}

/** One violated rule of a `policy.violated` event. */
export interface PolicyViolation {
  readonly code: string
  readonly message: string
  readonly policyId?: string
  readonly ruleId?: string
  readonly effect?: RuleEffect
  /** `monitor`: recorded only, the decision did not change. */
  readonly mode?: PolicyMode
}

// ---------------------------------------------------------------------------------------------
// Agents

/** `agent.registered`: a new agent was registered. */
export interface AgentRegisteredData {
  readonly agentId: string
  readonly agentName: string
  /** The initial trust score, 0..1000. */
  readonly trustScore: number
}

/** `agent.updated`: agent metadata or configuration changed, or a new version was created. */
export interface AgentUpdatedData {
  readonly agentId: string
  /** The agent's name after the change. */
  readonly agentName: string
  /** The fields that changed; `["currentVersion"]` for a new version. */
  readonly changes: ReadonlyArray<"name" | "description" | "labels" | "metadata" | "currentVersion">
  /** The new version; for a new version only. */
  readonly version?: string
  /** The new version's id (`ver_…`); for a new version only. */
  readonly versionId?: string
  /** The version it replaced, null for the first; for a new version only. */
  readonly previousVersion?: string | null
}

/** `agent.deregistered`: the agent was deregistered (soft); its keys are revoked. */
export interface AgentDeregisteredData {
  readonly agentId: string
  readonly agentName: string
}

/** `agent.suspended`: the agent was suspended by an enforcement. */
export interface AgentSuspendedData {
  readonly agentId: string
  readonly agentName: string
  /** The suspension that suspended it (`enf_…`). */
  readonly enforcementId: string
  readonly reason: string
  /** When the suspension ends, if it does. */
  readonly expiresAt?: string
}

// ---------------------------------------------------------------------------------------------
// Policies

/** `policy.evaluated`: a guard call (policy check) completed. */
export interface PolicyEvaluatedData {
  readonly agentId: string
  readonly action: string
  readonly decision: GuardDecision
  /** Whether the action may proceed now. */
  readonly allowed: boolean
  /** Every matched rule, `monitor` policies included. */
  readonly matched: ReadonlyArray<PolicyMatch>
  readonly reasons: ReadonlyArray<GuardReason>
  /** The approval created (`require_approval`) or consumed by this call (`apr_…`). */
  readonly approvalId?: string
  /** Evaluation time in milliseconds. */
  readonly durationMs?: number
}

/** `policy.created` and `policy.deleted`: a policy saved for the first time, or deleted (its versions stay on record). */
export interface PolicyChangedData {
  readonly policyId: string
  readonly name: string
  /** The version saved (1 at creation); for a deletion, the last one. */
  readonly version: number
  readonly mode: PolicyMode
  readonly enabled: boolean
  /** How many rules it has. */
  readonly rules: number
}

/** `policy.updated`: a policy changed, saved as a new version. */
export interface PolicyUpdatedData extends PolicyChangedData {
  readonly previousVersion: number
  /** The document fields the update named. */
  readonly changes: ReadonlyArray<string>
}

/** `policy.denied`: an action was blocked by policy. */
export interface PolicyDeniedData {
  readonly agentId: string
  readonly action: string
  /** The matched rules; empty when the workspace default or the agent's status denied. */
  readonly matched: ReadonlyArray<PolicyMatch>
  readonly reasons: ReadonlyArray<GuardReason>
}

/** `policy.violated`: an agent action violated a policy rule (a deny, or a `monitor` match). */
export interface PolicyViolatedData {
  readonly agentId: string
  readonly action: string
  /** The guard's decision; a violation of `monitor` policies alone leaves it unchanged. */
  readonly decision: GuardDecision
  readonly violations: ReadonlyArray<PolicyViolation>
}

// ---------------------------------------------------------------------------------------------
// Enforcement (D7)

/** `enforcement.created` (alias `enforcement.issued`): an enforcement action was applied. */
export interface EnforcementCreatedData {
  readonly enforcementId: string
  readonly agentId: string
  readonly type: EnforcementType
  readonly status: "active"
  readonly reason: string
  /** The policy that led to it, if any. */
  readonly policyId?: string
  /** The rule that led to it, if any. */
  readonly ruleId?: string
  /** A throttle's requests per minute. */
  readonly limitPerMinute?: number
  /** When it expires, if it does. */
  readonly expiresAt?: string
}

/** `enforcement.updated`: an enforcement's reason or expiry changed. */
export interface EnforcementUpdatedData {
  readonly enforcementId: string
  readonly agentId: string
  readonly type: EnforcementType
  /** The fields that changed; each also appears with its new value. */
  readonly changes: ReadonlyArray<"reason" | "expiresAt">
  /** The new reason, when changed. */
  readonly reason?: string
  /** The new expiry, when changed; null: until resolved. */
  readonly expiresAt?: string | null
}

/** `enforcement.appealed`: an enforcement was appealed. */
export interface EnforcementAppealedData {
  readonly enforcementId: string
  readonly agentId: string
  readonly type: EnforcementType
  readonly status: "appealed"
  /** The grounds of the appeal. */
  readonly reason: string
}

/** `enforcement.resolved`: an enforcement was resolved by an operator or expired. */
export interface EnforcementResolvedData {
  readonly enforcementId: string
  readonly agentId: string
  readonly type: EnforcementType
  readonly status: "resolved" | "expired"
  /** Present when resolved by an operator; `overturned` lifts it at once. */
  readonly resolution?: "upheld" | "overturned"
  /** The operator's note. */
  readonly reason?: string
  /** Whether the agent went back to `active` because of this (the last suspension or revocation in force was lifted). */
  readonly reinstated: boolean
}

// ---------------------------------------------------------------------------------------------
// Approvals (D7)

/** `approval.requested`: an operator's approval is needed. */
export interface ApprovalRequestedData {
  readonly approvalId: string
  readonly agentId: string
  readonly action: string
  readonly status: "pending"
  /** Undecided by then, it is denied (default 1 h). */
  readonly expiresAt: string
  readonly policyId?: string
  readonly ruleId?: string
  readonly reason?: string
  /** Who may decide, as the rule names them. */
  readonly approvers?: ReadonlyArray<string>
}

/** `approval.decided`: an approval was approved or denied (or expired, as denied). */
export interface ApprovalDecidedData {
  readonly approvalId: string
  readonly agentId: string
  readonly action: string
  readonly decision: "approved" | "denied"
  /** Nobody decided in time, so it was denied. */
  readonly expired: boolean
  /** The credential that decided; absent on expiry. */
  readonly decidedBy?: string
  readonly reason?: string
}

// ---------------------------------------------------------------------------------------------
// Trust (D11)

/** `trust.score.changed`: an agent's trust score was updated. */
export interface TrustScoreChangedData {
  readonly agentId: string
  readonly agentName: string
  readonly previousScore: number
  readonly newScore: number
  /** `newScore − previousScore`. */
  readonly delta: number
  /** What moved the score. */
  readonly reason: string
  readonly newTier: TrustTier
}

/** `trust.score.adjusted`: an operator adjusted an agent's trust score. */
export interface TrustScoreAdjustedData {
  readonly adjustmentId: string
  readonly agentId: string
  readonly agentName: string
  /** Points added (negative: taken away). */
  readonly delta: number
  readonly reason: string
}

/** `trust.tier.upgraded` / `trust.tier.downgraded`: an agent crossed a tier threshold. */
export interface TrustTierChangedData {
  readonly agentId: string
  readonly agentName: string
  readonly previousTier: TrustTier
  readonly newTier: TrustTier
  /** The score that crossed the threshold. */
  readonly score: number
}

/** `badge.earned`: a trust badge was awarded. */
export interface BadgeEarnedData {
  readonly agentId: string
  readonly agentName: string
  readonly tier: BadgeTier
  readonly score: number
}

/** `badge.revoked`: a trust badge was removed. */
export interface BadgeRevokedData {
  readonly agentId: string
  readonly agentName: string
  /** The tier of the badge removed. */
  readonly tier: BadgeTier
  readonly reason: "tier_below_bronze" | "agent_suspended" | "agent_deregistered"
}

// ---------------------------------------------------------------------------------------------
// Content

/** `content.registered`: content was registered for protection. */
export interface ContentRegisteredData {
  readonly contentId: string
  /** MIME type, e.g. `image/png`. */
  readonly mediaType: string
  /** `<algorithm>:<hex>`. */
  readonly fingerprint: string
  readonly watermarked: boolean
  /** Whether C2PA provenance data was registered. */
  readonly c2pa: boolean
  /** The agent that produced it, if any. */
  readonly agentId?: string
}

/** `content.match.detected`: a potential infringement was detected. */
export interface ContentMatchDetectedData {
  /** The registered content that was matched (`cnt_…`). */
  readonly contentId: string
  readonly matchId: string
  /** 0..1. */
  readonly similarity: number
  /** Where the match was found. */
  readonly url?: string
  /** The other registered content it matched, if any. */
  readonly matchedContentId?: string
  /** How it was found. */
  readonly method?: "text-winnowing" | "text-minhash" | "phash" | "phash-mirror" | "watermark"
}

/** `content.takedown.submitted`: a takedown notice was sent. */
export interface ContentTakedownSubmittedData {
  readonly contentId: string
  readonly takedownId: string
  /** The infringing location. */
  readonly url: string
  /** The match it answers, if any. */
  readonly matchId?: string
}

// ---------------------------------------------------------------------------------------------
// Workspaces and API keys (the project's additions to the spec's catalog)

/** `workspace.created`. */
export interface WorkspaceCreatedData {
  readonly workspaceId: string
  readonly name: string
  readonly environment: WorkspaceEnvironment
  readonly plan: WorkspacePlan
}

/** `workspace.updated`: each changed field also appears with its new value. */
export interface WorkspaceUpdatedData {
  readonly workspaceId: string
  readonly changes: ReadonlyArray<"name" | "plan" | "guardDefault">
  readonly name?: string
  readonly plan?: WorkspacePlan
  readonly guardDefault?: "allow" | "deny"
}

/** `workspace.deleted`: deleted (soft); its keys are revoked. */
export interface WorkspaceDeletedData {
  readonly workspaceId: string
  readonly name: string
  /** How many active keys were revoked (no `apikey.revoked` for each). */
  readonly revokedKeys: number
}

/** `apikey.created`. */
export interface ApiKeyCreatedData {
  readonly keyId: string
  readonly name: string
  readonly type: "workspace" | "agent"
  /** The 6-character lookup prefix. */
  readonly prefix: string
  readonly scopes: ReadonlyArray<string>
}

/** `apikey.revoked`. */
export interface ApiKeyRevokedData {
  readonly keyId: string
  readonly name: string
  readonly prefix: string
  readonly reason: "revoked" | "expired" | "rotated" | "agent_deregistered" | "agent_revoked" | "member_removed"
}

/** `apikey.rotated`: a key was replaced by a new one. */
export interface ApiKeyRotatedData {
  /** The old key. */
  readonly keyId: string
  /** The replacement. */
  readonly newKeyId: string
  /** How long the old key keeps working; 0 revoked it at once. */
  readonly overlapSeconds: number
}

/** `chain.invalid`: the workspace's audit chain failed verification or conflicts with a signed checkpoint. */
export interface ChainInvalidData {
  /** What found it: `POST /events/verify`, the 6-hourly verification, the checkpointer, or a compliance report. */
  readonly trigger: "api" | "scheduled" | "checkpoint" | "report"
  /** Events that verified before the break. */
  readonly checked: number
  /** The first sequence that does not verify (or the first of the range a signed root no longer matches). */
  readonly firstBadSequence: number
  readonly reason: string
}

// ---------------------------------------------------------------------------------------------
// Compliance (D14)

/** The frameworks of compliance reports. */
export type ComplianceFramework = "eu-ai-act" | "gdpr" | "soc2"

/** `compliance.report.generated`: a report was generated, signed and pinned to a checkpoint. */
export interface ComplianceReportGeneratedData {
  readonly reportId: string
  readonly framework: ComplianceFramework
  /** The agent reported on; absent for the workspace. */
  readonly agentId?: string
  readonly from: string
  readonly to: string
  readonly result: "compliant" | "partially_compliant" | "non_compliant"
  /** The tree size of the signed checkpoint the report is pinned to. */
  readonly treeSize: number
  /** Events counted. */
  readonly counted: number
}

/** `certification.issued`: an agent was certified for a framework (valid one year). */
export interface CertificationIssuedData {
  readonly certificationId: string
  readonly agentId: string
  readonly framework: ComplianceFramework
  readonly reportId: string
  readonly expiresAt: string
}

/** `certification.revoked`: a suspension, a revocation, a fall below bronze or an operator ended a certification. */
export interface CertificationRevokedData {
  readonly certificationId: string
  readonly agentId: string
  readonly framework: ComplianceFramework
  readonly reportId: string
  readonly reason: "agent_suspended" | "agent_revoked" | "trust_below_bronze" | "revoked_by_operator"
  /** The operator's reason, when `reason` is `revoked_by_operator`. */
  readonly note?: string
}

// ---------------------------------------------------------------------------------------------
// People (D16): memberships and invitations

/** A member's role in a workspace. */
export type MemberRole = "owner" | "admin" | "member" | "viewer"

/** `member.invited`: a person invited by e-mail (the link itself is never in an event). */
export interface MemberInvitedData {
  readonly invitationId: string
  readonly email: string
  readonly role: MemberRole
  readonly expiresAt: string
}

/** `invitation.revoked`: a pending invitation withdrawn. */
export interface InvitationRevokedData {
  readonly invitationId: string
  readonly email: string
  readonly role: MemberRole
}

/** `member.joined`: an invited person accepted. */
export interface MemberJoinedData {
  readonly userId: string
  readonly email: string
  readonly role: MemberRole
  readonly invitationId: string
}

/** `member.role_changed`. */
export interface MemberRoleChangedData {
  readonly userId: string
  readonly email: string
  readonly from: MemberRole
  readonly to: MemberRole
}

/** `member.signin_link_created`: the operator made a one-time sign-in link for an owner (never the token). */
export interface MemberSigninLinkCreatedData {
  readonly userId: string
  readonly email: string
  readonly expiresAt: string
}

/** `oauth.client.created`: a third-party app registered (never its secret). */
export interface OAuthClientCreatedData {
  readonly clientId: string
  readonly name: string
  readonly type: "confidential" | "public"
  readonly redirectUris: ReadonlyArray<string>
  readonly scopes: ReadonlyArray<string>
}

/** `oauth.client.deleted`: an app deleted, with how many of its grants that revoked. */
export interface OAuthClientDeletedData {
  readonly clientId: string
  readonly name: string
  readonly revokedGrants: number
}

/** `oauth.grant.created`: a member authorised an app (the consent screen). */
export interface OAuthGrantCreatedData {
  readonly grantId: string
  readonly clientId: string
  readonly clientName: string
  readonly userId: string
  readonly scopes: ReadonlyArray<string>
}

/** `oauth.grant.revoked`: an app's grant ended; `code_reused` and `refresh_token_reused` are replays. */
export interface OAuthGrantRevokedData {
  readonly grantId: string
  readonly clientId: string
  readonly userId: string
  readonly reason: "revoked" | "revoked_by_client" | "code_reused" | "refresh_token_reused"
}

/** `member.removed`: removed, or left (`left`). */
export interface MemberRemovedData {
  readonly userId: string
  readonly email: string
  readonly role: MemberRole
  readonly left: boolean
}

// ---------------------------------------------------------------------------------------------
// MCP gateway (@agentgov/mcp-gateway): reported under the agent's key

/** What the gateway's sanitiser removed from a tool result. */
export interface McpRedaction {
  readonly kind: "credential" | "url"
  /** The pattern that matched (`aws_access_key`, `github_token`, …) or the URL's host. */
  readonly rule: string
  readonly count: number
}

/** `mcp.tool.called`: an MCP tool call was allowed, forwarded to its server, and answered. */
export interface McpToolCalledData {
  readonly agentId: string
  readonly server: string
  readonly tool: string
  /** `mcp.<server>.<tool>`. */
  readonly action: string
  /** The `policy.evaluated` event of the decision; null when the gateway decided alone (fail open). */
  readonly guardEventId: string | null
  readonly approvalId?: string
  readonly durationMs: number
  readonly isError: boolean
  readonly contentItems: number
  readonly resultBytes: number
  readonly redactions: ReadonlyArray<McpRedaction>
}

/** `mcp.tool.denied`: an MCP tool call was refused by the gateway and never reached its server. */
export interface McpToolDeniedData {
  readonly agentId: string
  readonly server: string
  readonly tool: string
  readonly action: string
  readonly reason: "policy_denied" | "approval_denied" | "approval_timeout" | "service_unavailable"
  readonly reasons: ReadonlyArray<GuardReason>
  readonly guardEventId: string | null
  readonly approvalId?: string
}

/** `mcp.definition.flagged`: an MCP tool definition failed the gateway's scan. */
export interface McpDefinitionFlaggedData {
  readonly agentId: string
  readonly server: string
  readonly tool: string
  readonly findings: ReadonlyArray<{
    readonly kind: "instructions" | "hidden_unicode" | "definition_changed" | "duplicate_name" | "too_deep"
    readonly detail: string
  }>
  readonly definitionHash: string
  /** The definition first seen, when it changed (a rug pull). */
  readonly firstSeenHash?: string
}

/** `mcp.result.redacted`: the sanitiser removed credentials or URLs from a tool result. */
export interface McpResultRedactedData {
  readonly agentId: string
  readonly server: string
  readonly tool: string
  readonly action: string
  readonly redactions: ReadonlyArray<McpRedaction>
}

// ---------------------------------------------------------------------------------------------
// Webhooks (never the secret; of the URL only its origin)

/** `webhook.created`. */
export interface WebhookCreatedData {
  readonly webhookId: string
  /** The scheme, host and port of the URL; its path and query are left out. */
  readonly origin: string
  readonly events: ReadonlyArray<string>
  readonly retryPolicy: "exponential" | "extended"
  readonly enabled: boolean
}

/** `webhook.updated`: each changed field also appears with its new value (`url` as `origin`). */
export interface WebhookUpdatedData {
  readonly webhookId: string
  readonly changes: ReadonlyArray<"url" | "events" | "description" | "retryPolicy" | "enabled">
  readonly origin?: string
  readonly events?: ReadonlyArray<string>
  readonly description?: string | null
  readonly retryPolicy?: "exponential" | "extended"
  readonly enabled?: boolean
}

/** `webhook.secret.rotated`: the signing secret was replaced (the secret itself is never recorded). */
export interface WebhookSecretRotatedData {
  readonly webhookId: string
  /** How long deliveries are signed with the old secret too; 0 dropped it at once. */
  readonly overlapSeconds: number
}

/** `webhook.deleted`. */
export interface WebhookDeletedData {
  readonly webhookId: string
  readonly origin: string
}

/** `webhook.redelivered`: failed deliveries queued again. */
export interface WebhookRedeliveredData {
  readonly webhookId: string
  /** How many deliveries were queued again (at least 1). */
  readonly queued: number
}

/** `webhook.disabled`: by the delivery engine, after a delivery's every attempt failed or a 410. */
export interface WebhookDisabledData {
  readonly webhookId: string
  readonly reason: "all_attempts_failed" | "endpoint_gone"
  readonly deliveryId: string
  readonly eventId: string
}

// ---------------------------------------------------------------------------------------------
// The catalog

/**
 * Every system event name and the type of its `data`.
 *
 * @example
 * ```ts
 * import type { SystemEventDataMap } from "@agentgov/connector-sdk"
 *
 * type Requested = SystemEventDataMap["approval.requested"] // { approvalId, agentId, action, … }
 * ```
 */
export interface SystemEventDataMap {
  "agent.registered": AgentRegisteredData
  "agent.updated": AgentUpdatedData
  "agent.deregistered": AgentDeregisteredData
  "agent.suspended": AgentSuspendedData
  "policy.evaluated": PolicyEvaluatedData
  "policy.created": PolicyChangedData
  "policy.updated": PolicyUpdatedData
  "policy.deleted": PolicyChangedData
  "policy.denied": PolicyDeniedData
  "policy.violated": PolicyViolatedData
  "enforcement.created": EnforcementCreatedData
  "enforcement.updated": EnforcementUpdatedData
  "enforcement.appealed": EnforcementAppealedData
  "enforcement.resolved": EnforcementResolvedData
  "approval.requested": ApprovalRequestedData
  "approval.decided": ApprovalDecidedData
  "trust.score.changed": TrustScoreChangedData
  "trust.score.adjusted": TrustScoreAdjustedData
  "trust.tier.upgraded": TrustTierChangedData
  "trust.tier.downgraded": TrustTierChangedData
  "content.registered": ContentRegisteredData
  "content.match.detected": ContentMatchDetectedData
  "content.takedown.submitted": ContentTakedownSubmittedData
  "badge.earned": BadgeEarnedData
  "badge.revoked": BadgeRevokedData
  "workspace.created": WorkspaceCreatedData
  "workspace.updated": WorkspaceUpdatedData
  "workspace.deleted": WorkspaceDeletedData
  "apikey.created": ApiKeyCreatedData
  "apikey.revoked": ApiKeyRevokedData
  "apikey.rotated": ApiKeyRotatedData
  "member.invited": MemberInvitedData
  "invitation.revoked": InvitationRevokedData
  "member.joined": MemberJoinedData
  "member.role_changed": MemberRoleChangedData
  "member.signin_link_created": MemberSigninLinkCreatedData
  "member.removed": MemberRemovedData
  "oauth.client.created": OAuthClientCreatedData
  "oauth.client.deleted": OAuthClientDeletedData
  "oauth.grant.created": OAuthGrantCreatedData
  "oauth.grant.revoked": OAuthGrantRevokedData
  "webhook.created": WebhookCreatedData
  "webhook.updated": WebhookUpdatedData
  "webhook.secret.rotated": WebhookSecretRotatedData
  "webhook.deleted": WebhookDeletedData
  "webhook.redelivered": WebhookRedeliveredData
  "webhook.disabled": WebhookDisabledData
  "chain.invalid": ChainInvalidData
  "compliance.report.generated": ComplianceReportGeneratedData
  "certification.issued": CertificationIssuedData
  "certification.revoked": CertificationRevokedData
  "mcp.tool.called": McpToolCalledData
  "mcp.tool.denied": McpToolDeniedData
  "mcp.definition.flagged": McpDefinitionFlaggedData
  "mcp.result.redacted": McpResultRedactedData
}

/**
 * A name of the service's own events.
 *
 * @example
 * ```ts
 * import type { SystemEventName } from "@agentgov/connector-sdk"
 *
 * const paged: SystemEventName[] = ["enforcement.created", "trust.tier.downgraded"]
 * ```
 */
export type SystemEventName = keyof SystemEventDataMap

/**
 * Every system event name, in catalog order.
 *
 * @example
 * ```ts
 * import { SYSTEM_EVENT_NAMES } from "@agentgov/connector-sdk"
 *
 * SYSTEM_EVENT_NAMES.includes("approval.requested") // true
 * ```
 */
export const SYSTEM_EVENT_NAMES: ReadonlyArray<SystemEventName> = Object.freeze([
  "agent.registered",
  "agent.updated",
  "agent.deregistered",
  "agent.suspended",
  "policy.evaluated",
  "policy.created",
  "policy.updated",
  "policy.deleted",
  "policy.denied",
  "policy.violated",
  "enforcement.created",
  "enforcement.updated",
  "enforcement.appealed",
  "enforcement.resolved",
  "approval.requested",
  "approval.decided",
  "trust.score.changed",
  "trust.score.adjusted",
  "trust.tier.upgraded",
  "trust.tier.downgraded",
  "content.registered",
  "content.match.detected",
  "content.takedown.submitted",
  "badge.earned",
  "badge.revoked",
  "workspace.created",
  "workspace.updated",
  "workspace.deleted",
  "apikey.created",
  "apikey.revoked",
  "apikey.rotated",
  "member.invited",
  "invitation.revoked",
  "member.joined",
  "member.role_changed",
  "member.signin_link_created",
  "member.removed",
  "oauth.client.created",
  "oauth.client.deleted",
  "oauth.grant.created",
  "oauth.grant.revoked",
  "webhook.created",
  "webhook.updated",
  "webhook.secret.rotated",
  "webhook.deleted",
  "webhook.redelivered",
  "webhook.disabled",
  "chain.invalid",
  "compliance.report.generated",
  "certification.issued",
  "certification.revoked",
  "mcp.tool.called",
  "mcp.tool.denied",
  "mcp.definition.flagged",
  "mcp.result.redacted",
] as const satisfies ReadonlyArray<SystemEventName>)

/**
 * Alternative names of system events (D7): `enforcement.issued` is `enforcement.created`. An alias
 * can be used wherever a name is given (`app.on("enforcement.issued", …)`); deliveries carry the
 * canonical name.
 *
 * @example
 * ```ts
 * import { EVENT_ALIASES } from "@agentgov/connector-sdk"
 *
 * EVENT_ALIASES["enforcement.issued"] // "enforcement.created"
 * ```
 */
export const EVENT_ALIASES = Object.freeze({ "enforcement.issued": "enforcement.created" } as const)

/**
 * An alias of a system event name.
 *
 * @example
 * ```ts
 * import type { EventAlias } from "@agentgov/connector-sdk"
 *
 * const alias: EventAlias = "enforcement.issued"
 * ```
 */
export type EventAlias = keyof typeof EVENT_ALIASES

/**
 * The system event name an alias stands for; any other name unchanged.
 *
 * @example
 * ```ts
 * import { canonicalEventName } from "@agentgov/connector-sdk"
 *
 * canonicalEventName("enforcement.issued") // "enforcement.created"
 * canonicalEventName("deploy.finished")    // "deploy.finished"
 * ```
 */
export const canonicalEventName = (name: string): string =>
  Object.hasOwn(EVENT_ALIASES, name) ? EVENT_ALIASES[name as EventAlias] : name

const systemNames: ReadonlySet<string> = new Set(SYSTEM_EVENT_NAMES)

/**
 * Whether `name` is one of the service's own event names (an alias counts).
 *
 * @example
 * ```ts
 * import { isSystemEventName } from "@agentgov/connector-sdk"
 *
 * isSystemEventName("badge.earned")    // true
 * isSystemEventName("deploy.finished") // false: an ingested, custom event type
 * ```
 */
export const isSystemEventName = (name: string): name is SystemEventName | EventAlias =>
  systemNames.has(canonicalEventName(name))

// ---------------------------------------------------------------------------------------------
// The envelope

/**
 * `metadata` of a webhook body: which delivery of which webhook this is.
 *
 * @example
 * ```ts
 * import type { DeliveryMetadata } from "@agentgov/connector-sdk"
 *
 * const m: DeliveryMetadata = { deliveryId: "dlv_01j…", webhookId: "whk_01j…", attempt: 1 }
 * ```
 */
export interface DeliveryMetadata {
  /** The delivery id (`dlv_…`), also in the `X-SVC-Webhook-Id` header. */
  readonly deliveryId: string
  /** The webhook subscription (`whk_…`). */
  readonly webhookId: string
  /** The server's attempt number for this delivery, starting at 1. */
  readonly attempt: number
}

/**
 * A webhook body: the spec's event envelope, with the `data` of its type.
 *
 * @example
 * ```ts
 * import type { WebhookEvent } from "@agentgov/connector-sdk"
 *
 * const notify = (event: WebhookEvent<"badge.earned">) =>
 *   `${event.data.agentName} earned a ${event.data.tier} badge`
 * ```
 */
export interface WebhookEvent<
  T extends string = string,
  D = T extends SystemEventName ? SystemEventDataMap[T] : CustomEventData,
> {
  /** The event id (`evt_…`): de-duplicate by it (D9). */
  readonly id: string
  /** The event name. */
  readonly type: T
  /** When the event was recorded, ISO 8601 UTC with milliseconds. */
  readonly timestamp: string
  readonly workspaceId: string
  readonly data: D
  readonly metadata: DeliveryMetadata
}

/**
 * The `data` of an event type the SDK does not know: one ingested by a client (D8).
 *
 * @example
 * ```ts
 * import type { CustomEventData } from "@agentgov/connector-sdk"
 *
 * const data: CustomEventData = { build: 42, ok: true }
 * ```
 */
export type CustomEventData = Readonly<Record<string, unknown>>

/**
 * The event delivered for a system event name or alias.
 *
 * @example
 * ```ts
 * import type { SystemWebhookEvent } from "@agentgov/connector-sdk"
 *
 * type Issued = SystemWebhookEvent<"enforcement.issued"> // WebhookEvent<"enforcement.created">
 * ```
 */
export type SystemWebhookEvent<N extends SystemEventName | EventAlias = SystemEventName> = {
  [K in CanonicalOf<N>]: WebhookEvent<K, SystemEventDataMap[K]>
}[CanonicalOf<N>]

type CanonicalOf<N extends SystemEventName | EventAlias> = N extends EventAlias ? (typeof EVENT_ALIASES)[N] : N

/**
 * An event of a custom (ingested) type.
 *
 * @example
 * ```ts
 * import type { CustomWebhookEvent } from "@agentgov/connector-sdk"
 *
 * const build = (event: CustomWebhookEvent) => event.data["build"]
 * ```
 */
export type CustomWebhookEvent = WebhookEvent<string, CustomEventData>

/**
 * Any event a webhook can deliver: a system event (a discriminated union on `type`) or a custom one.
 *
 * @example
 * ```ts
 * import { type AnyWebhookEvent, isEventType } from "@agentgov/connector-sdk"
 *
 * const line = (event: AnyWebhookEvent) =>
 *   isEventType(event, "trust.score.changed") ? `score ${event.data.newScore}` : event.type
 * ```
 */
export type AnyWebhookEvent = SystemWebhookEvent | CustomWebhookEvent

/**
 * A subscription pattern: an exact name (alias allowed), `prefix.*`, or `*` (D9).
 *
 * @example
 * ```ts
 * import type { EventPattern } from "@agentgov/connector-sdk"
 *
 * const patterns: EventPattern[] = ["approval.requested", "enforcement.*", "*"]
 * ```
 */
export type EventPattern = SystemEventName | EventAlias | "*" | `${string}.*` | (string & {})

/**
 * The event a handler of `pattern` receives. A custom event may match any pattern but an exact
 * system name, so `prefix.*` handlers receive the matching system events or a custom event: narrow
 * with {@link isEventType}.
 *
 * @example
 * ```ts
 * import type { EventForPattern } from "@agentgov/connector-sdk"
 *
 * type E = EventForPattern<"approval.*"> // approval.requested | approval.decided | custom
 * ```
 */
export type EventForPattern<P extends string> = P extends "*"
  ? AnyWebhookEvent
  : P extends SystemEventName | EventAlias
    ? SystemWebhookEvent<P>
    : P extends `${infer Prefix}.*`
      ? SystemWebhookEvent<Extract<SystemEventName, `${Prefix}.${string}`>> | CustomWebhookEvent
      : CustomWebhookEvent

/**
 * Whether `type` matches `pattern`: equal names (aliases resolved), `prefix.*` for every name under
 * `prefix.`, or `*` for all.
 *
 * @example
 * ```ts
 * import { matchesEventPattern } from "@agentgov/connector-sdk"
 *
 * matchesEventPattern("enforcement.*", "enforcement.created") // true
 * matchesEventPattern("enforcement.issued", "enforcement.created") // true (alias)
 * matchesEventPattern("trust.*", "trustworthy.thing") // false
 * ```
 */
export const matchesEventPattern = (pattern: string, type: string): boolean => {
  if (pattern === "*") return true
  if (pattern.endsWith(".*")) return type.startsWith(pattern.slice(0, -1))
  return canonicalEventName(pattern) === canonicalEventName(type)
}

/**
 * Narrows an event to the system event of `name` (an alias counts).
 *
 * @example
 * ```ts
 * import { isEventType } from "@agentgov/connector-sdk"
 *
 * app.on("*", (event) => {
 *   if (isEventType(event, "approval.requested")) console.log(event.data.approvalId)
 * })
 * ```
 */
export const isEventType = <N extends SystemEventName | EventAlias>(
  event: { readonly type: string },
  name: N,
): event is SystemWebhookEvent<N> => canonicalEventName(event.type) === canonicalEventName(name)
