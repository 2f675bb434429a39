import { Layer } from "effect"
import { AgentRepo } from "./agents/AgentRepo.ts"
import { AgentService } from "./agents/AgentService.ts"
import { ApiKeyRepo } from "./apikeys/ApiKeyRepo.ts"
import { ApiKeyService } from "./apikeys/ApiKeyService.ts"
import { ApprovalRepo } from "./approvals/ApprovalRepo.ts"
import { ApprovalService } from "./approvals/ApprovalService.ts"
import { AuditLog } from "./audit/AuditLog.ts"
import { ChainAlarm } from "./audit/ChainAlarm.ts"
import { Checkpoints } from "./audit/Checkpoints.ts"
import { EventAppender } from "./audit/EventAppender.ts"
import { EventFeed } from "./audit/EventFeed.ts"
import { EventRepo } from "./audit/EventRepo.ts"
import { EventService } from "./audit/EventService.ts"
import { MerkleStore } from "./audit/MerkleStore.ts"
import { Authenticator } from "./auth/Authenticator.ts"
import { CredentialWatch } from "./auth/CredentialWatch.ts"
import { SdkTokens } from "./auth/SdkTokens.ts"
import { ComplianceRepo } from "./compliance/ComplianceRepo.ts"
import { ComplianceService } from "./compliance/ComplianceService.ts"
import { C2paSigner } from "./content/C2paSigner.ts"
import { ContentService } from "./content/ContentService.ts"
import { EnforcementRepo } from "./enforcement/EnforcementRepo.ts"
import { EnforcementService } from "./enforcement/EnforcementService.ts"
import { Idempotency } from "./idempotency/Idempotency.ts"
import { SigningKeys } from "./keys/SigningKeys.ts"
import { OAuthService } from "./oauth/OAuthService.ts"
import { OverviewService } from "./overview/Overview.ts"
import { PeopleRepo } from "./people/PeopleRepo.ts"
import { PeopleService } from "./people/PeopleService.ts"
import { Sessions } from "./people/Sessions.ts"
import { GuardService } from "./policies/GuardService.ts"
import { PolicyRepo } from "./policies/PolicyRepo.ts"
import { PolicyService } from "./policies/PolicyService.ts"
import { PolicySets } from "./policies/PolicySets.ts"
import { RateLimiter } from "./ratelimits/RateLimiter.ts"
import { StreamSlots } from "./ratelimits/StreamSlots.ts"
import { TrustRecompute } from "./trust/TrustRecompute.ts"
import { TrustService } from "./trust/TrustService.ts"
import { DeliveryQueue } from "./webhooks/DeliveryQueue.ts"
import { WebhookClient } from "./webhooks/WebhookClient.ts"
import { WebhookRepo } from "./webhooks/WebhookRepo.ts"
import { WebhookService } from "./webhooks/WebhookService.ts"
import { WorkspaceRepo } from "./workspaces/WorkspaceRepo.ts"
import { WorkspaceService } from "./workspaces/WorkspaceService.ts"

/** The store out of reach (down, restarting, the connection lost): the API answers 503 STORE_UNAVAILABLE. */
export { storeUnreachable } from "@agentgov/db"
export { BADGE_TYP, canonicalize, chainHash, GENESIS_HASH } from "@agentgov/verifier"
export * from "./agents/Agent.ts"
export * from "./agents/AgentErrors.ts"
export { type AgentListFilter, AgentService } from "./agents/AgentService.ts"
export * from "./apikeys/ApiKey.ts"
export * from "./apikeys/ApiKeyErrors.ts"
export { ApiKeyService, DEFAULT_ROTATION_OVERLAP_SECONDS, type KeyListFilter } from "./apikeys/ApiKeyService.ts"
export { hashKey, isSecretOf, mintKey, mintSecret, parseKey } from "./apikeys/keyFormat.ts"
export * from "./approvals/Approval.ts"
// The approval record, not the engine's rule-level `approval` settings (exported as RuleApproval).
export { Approval } from "./approvals/Approval.ts"
export * from "./approvals/ApprovalErrors.ts"
export {
  type ApprovalRefusal,
  ApprovalService,
  type ApprovalUse,
  approvalBindingHash,
  type GuardApprovalRequest,
  type GuardApprovalUse,
} from "./approvals/ApprovalService.ts"
export * from "./audit/AuditEvent.ts"
export {
  ANNOUNCE_GAP_MS,
  AnnounceGap,
  type AppendGroup,
  AuditLog,
  type ChainHead,
  EVENTS_CHANNEL,
  type PreparedAppend,
  prepareAppend,
} from "./audit/AuditLog.ts"
export * from "./audit/batchHook.ts"
export { ChainAlarm, type ChainCheckTrigger } from "./audit/ChainAlarm.ts"
export {
  ChainInconsistent,
  CheckpointNotFound,
  Checkpoints,
  ExportBusy,
  MAX_EXPORT_EVENTS,
  MAX_EXPORTS_IN_PROCESS,
  MAX_EXPORTS_PER_WORKSPACE,
} from "./audit/Checkpoints.ts"
export * from "./audit/Event.ts"
export { type AppendOutcome, type AppendRequest, EventAppender } from "./audit/EventAppender.ts"
export * from "./audit/EventErrors.ts"
export { EventFeed, FEED_SWEEP_MS, FeedSweep, type Subscription } from "./audit/EventFeed.ts"
export { firstChainProblem, type RawQuery } from "./audit/EventRepo.ts"
export { EventService } from "./audit/EventService.ts"
export {
  EVENT_ALIASES,
  type EventDataSchema,
  type EventDefinition,
  eventDataSchema,
  isSystemEvent,
  SYSTEM_EVENTS,
  SYSTEM_NAMESPACES,
  type SystemEventData,
  type SystemEventName,
  systemNamespaceOf,
} from "./audit/eventCatalog.ts"
export { compileFilters, eventFilterIssue, matchesFilters } from "./audit/eventFilters.ts"
export { activeTraceparent, traceparentOf } from "./audit/traceContext.ts"
export { type Actor, systemActor } from "./auth/Actor.ts"
export { Authenticator } from "./auth/Authenticator.ts"
export {
  type CredentialEnd,
  type CredentialListener,
  CredentialWatch,
  type CredentialWatchHandle,
} from "./auth/CredentialWatch.ts"
export { SdkTokens, type TokenClaims, TokenSettings } from "./auth/SdkTokens.ts"
export { AGENT_KEY_SCOPES, canonicalScope, SCOPE_ALIASES, SCOPES, type Scope } from "./auth/scopes.ts"
export * from "./compliance/index.ts"
export * from "./content/index.ts"
export * from "./enforcement/Enforcement.ts"
export * from "./enforcement/EnforcementErrors.ts"
export { type AutoEnforcement, EnforcementService } from "./enforcement/EnforcementService.ts"
export * from "./idempotency/Idempotency.ts"
export { sealedNotOpening } from "./keys/masterKeyCheck.ts"
export {
  MasterKey,
  type PublicJwk,
  type SigningKey,
  type SigningKeyInfo,
  SigningKeys,
} from "./keys/SigningKeys.ts"
export * from "./oauth/index.ts"
export { OVERVIEW_HOURS, OVERVIEW_PENDING, Overview, OverviewService } from "./overview/Overview.ts"
export * from "./people/index.ts"
export type { Approval as RuleApproval } from "./policies/engine/index.ts"
export * from "./policies/engine/index.ts"
export * from "./policies/Guard.ts"
export { GuardService } from "./policies/GuardService.ts"
export * from "./policies/Policy.ts"
export * from "./policies/PolicyErrors.ts"
export { POLICIES_CHANNEL } from "./policies/PolicyRepo.ts"
export { type PolicyListFilter, PolicyService } from "./policies/PolicyService.ts"
export { PolicySets, type WorkspaceGuardState } from "./policies/PolicySets.ts"
export {
  Counters,
  type Counts,
  type HitResult,
  type LimitKey,
  RedisUnreachable,
  redisHitStore,
  redisRateStore,
} from "./ratelimits/Counters.ts"
export {
  type HitOp,
  type HitReply,
  type HitStore,
  LEASE_SHARE,
  LeasedHits,
  type LeasedHitsOptions,
} from "./ratelimits/LeasedHits.ts"
export {
  DEFAULT_RATE_LIMITS,
  type RateLimitConfig,
  RateLimiter,
  RateLimitSettings,
  type RateLimitVerdict,
} from "./ratelimits/RateLimiter.ts"
export {
  DEFAULT_STREAM_LIMITS,
  type StreamLimitConfig,
  StreamLimitSettings,
  type StreamSlot,
  StreamSlots,
} from "./ratelimits/StreamSlots.ts"
export {
  type SyncCounts,
  type SyncEntry,
  SyncedRateCounter,
  type SyncedRateCounterOptions,
  type SyncStore,
} from "./ratelimits/SyncedRateCounter.ts"
export * from "./ratelimits/slidingWindow.ts"
export * from "./shared/errors.ts"
export { newId } from "./shared/ids.ts"
export { DEFAULT_LIMIT, MAX_LIMIT, type Page, type PageRequest } from "./shared/pagination.ts"
export { InvalidCursor } from "./shared/paginationErrors.ts"
export { randomId } from "./shared/random.ts"
export * from "./shared/schemas.ts"
export { settledWithin } from "./shared/settledWithin.ts"
export { findUnstorable, requireStorable } from "./shared/storable.ts"
export { escapeXml, NOT_VERIFIED_SVG, renderBadgeSvg, TIER_COLOURS } from "./trust/badgeSvg.ts"
export { BADGE_TIERS, type BadgeTier as BadgeTierName, badgeOf, TIERS, type Tier, tierOf } from "./trust/Tier.ts"
export * from "./trust/Trust.ts"
export * from "./trust/TrustErrors.ts"
export * as TrustModel from "./trust/TrustModel.ts"
export { ANNOUNCE_DELTA, MODEL_VERSION, type PassResult, TrustRecompute } from "./trust/TrustRecompute.ts"
export { BADGE_LIFETIME_MS, TrustService } from "./trust/TrustService.ts"
export {
  type AttemptResult,
  type ClaimedDelivery,
  DeliveryQueue,
  type NextStep,
  nextStep,
  PURGE_LOCK,
} from "./webhooks/DeliveryQueue.ts"
export { sampleEvent } from "./webhooks/samples.ts"
export { leaseMs, SCHEDULES, type Schedule, scaledSchedule } from "./webhooks/schedules.ts"
export { envelopeBody, signatureHeaders } from "./webhooks/signing.ts"
export {
  classifyAddress,
  parseAllowlist,
  type Resolver,
  systemResolver,
  type TargetPolicy,
} from "./webhooks/targets.ts"
export * from "./webhooks/Webhook.ts"
export { type AttemptOutcome, connectionFailed, USER_AGENT, WebhookClient } from "./webhooks/WebhookClient.ts"
export * from "./webhooks/WebhookErrors.ts"
export { WEBHOOKS_CHANNEL } from "./webhooks/WebhookRepo.ts"
export { MAX_WEBHOOKS_PER_WORKSPACE, WebhookService } from "./webhooks/WebhookService.ts"
export { WebhookSettings, type WebhookSettingsShape } from "./webhooks/WebhookSettings.ts"
export * from "./workspaces/Workspace.ts"
export * from "./workspaces/WorkspaceErrors.ts"
export { WorkspaceService } from "./workspaces/WorkspaceService.ts"

const repos = Layer.mergeAll(
  WorkspaceRepo.layer,
  AgentRepo.layer,
  ApiKeyRepo.layer,
  AuditLog.layer,
  EventRepo.layer,
  Idempotency.layer,
  MerkleStore.layer,
  SigningKeys.layer,
  ApprovalRepo.layer,
  EnforcementRepo.layer,
  ComplianceRepo.layer,
  WebhookRepo.layer,
  WebhookClient.layer,
  PeopleRepo.layer,
  Sessions.layer,
)
/** The appender, and the alarm a broken chain raises through it. */
const writers = ChainAlarm.layer.pipe(Layer.provideMerge(EventAppender.layer.pipe(Layer.provideMerge(repos))))
const apiKeys = Layer.merge(ApiKeyService.layer, SdkTokens.layer).pipe(Layer.provideMerge(writers))
/** Each workspace's compiled policies and guardDefault: the policy and the workspace writes both drop them. */
const guardState = PolicySets.layer.pipe(Layer.provideMerge(PolicyRepo.layer))
/** Policies, the guard and the approvals it creates and uses. */
const governance = GuardService.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(ApprovalService.layer, EnforcementService.layer, PolicyService.layer)),
)

/** People and the OAuth server that acts for them; the authenticator resolves OAuth tokens through it. */
const people = OAuthService.layer.pipe(Layer.provideMerge(PeopleService.layer), Layer.provideMerge(writers))

/** Every domain service but compliance, which reads the audit trail through them. */
const core = Layer.mergeAll(
  WorkspaceService.layer,
  AgentService.layer,
  Authenticator.layer,
  CredentialWatch.layer,
  EventService.layer,
  EventFeed.layer,
  Checkpoints.layer,
  governance,
  RateLimiter.layer,
  StreamSlots.layer,
  WebhookService.layer,
  DeliveryQueue.layer,
  TrustService.layer,
  TrustRecompute.layer,
  OverviewService.layer,
).pipe(Layer.provideMerge(guardState), Layer.provideMerge(people), Layer.provideMerge(apiKeys))

/**
 * Every domain service. Needs the store (SqlClient, Database), the master key,
 * the token and rate-limit settings from the operator's configuration, and the
 * rate-limit Counters (in-process, or Redis when several instances share them).
 */
export const DomainLayer = Layer.merge(
  ComplianceService.layer,
  ContentService.layer.pipe(Layer.provideMerge(C2paSigner.layer)),
).pipe(Layer.provideMerge(core))

export type DomainServices =
  | PeopleRepo
  | PeopleService
  | OAuthService
  | Sessions
  | WorkspaceService
  | AgentService
  | ApiKeyService
  | Authenticator
  | CredentialWatch
  | AuditLog
  | EventAppender
  | ChainAlarm
  | Idempotency
  | EventService
  | EventFeed
  | Checkpoints
  | ApprovalRepo
  | ApprovalService
  | PolicyService
  | PolicySets
  | GuardService
  | EnforcementService
  | ComplianceService
  | ComplianceRepo
  | ContentService
  | C2paSigner
  | SigningKeys
  | SdkTokens
  | RateLimiter
  | StreamSlots
  | WebhookService
  | DeliveryQueue
  | TrustService
  | TrustRecompute
  | OverviewService
