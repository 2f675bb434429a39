import { Layer } from "effect"
import { AgentRepo } from "./agents/AgentRepo.ts"
import { AgentService } from "./agents/AgentService.ts"
import { ApiKeyRepo } from "./apikeys/ApiKeyRepo.ts"
import { ApiKeyService } from "./apikeys/ApiKeyService.ts"
import { AuditLog } from "./audit/AuditLog.ts"
import { Checkpoints } from "./audit/Checkpoints.ts"
import { EventAppender } from "./audit/EventAppender.ts"
import { EventFeed } from "./audit/EventFeed.ts"
import { EventRepo } from "./audit/EventRepo.ts"
import { EventService } from "./audit/EventService.ts"
import { MerkleStore } from "./audit/MerkleStore.ts"
import { Authenticator } from "./auth/Authenticator.ts"
import { SdkTokens } from "./auth/SdkTokens.ts"
import { Idempotency } from "./idempotency/Idempotency.ts"
import { SigningKeys } from "./keys/SigningKeys.ts"
import { WorkspaceRepo } from "./workspaces/WorkspaceRepo.ts"
import { WorkspaceService } from "./workspaces/WorkspaceService.ts"

export { canonicalize, chainHash, GENESIS_HASH } from "@agentgov/verifier"
export * from "./agents/Agent.ts"
export * from "./agents/AgentErrors.ts"
export { type AgentListFilter, AgentService } from "./agents/AgentService.ts"
export * from "./apikeys/ApiKey.ts"
export * from "./apikeys/ApiKeyErrors.ts"
export { ApiKeyService, DEFAULT_ROTATION_OVERLAP_SECONDS, type KeyListFilter } from "./apikeys/ApiKeyService.ts"
export { hashKey, mintKey, parseKey } from "./apikeys/keyFormat.ts"
export * from "./audit/AuditEvent.ts"
export { type AppendGroup, AuditLog, EVENTS_CHANNEL } from "./audit/AuditLog.ts"
export { CheckpointNotFound, Checkpoints, MAX_EXPORT_EVENTS } from "./audit/Checkpoints.ts"
export * from "./audit/Event.ts"
export { type AppendOutcome, type AppendRequest, EventAppender } from "./audit/EventAppender.ts"
export * from "./audit/EventErrors.ts"
export { EventFeed, type Subscription } from "./audit/EventFeed.ts"
export { EventService } from "./audit/EventService.ts"
export {
  EVENT_ALIASES,
  type EventDataSchema,
  type EventDefinition,
  eventDataSchema,
  isSystemEvent,
  SYSTEM_EVENTS,
  type SystemEventData,
  type SystemEventName,
} from "./audit/eventCatalog.ts"
export { type Actor, systemActor } from "./auth/Actor.ts"
export { Authenticator } from "./auth/Authenticator.ts"
export { looksLikeJwt, SdkTokens, type TokenClaims, TokenSettings } from "./auth/SdkTokens.ts"
export { AGENT_KEY_SCOPES, canonicalScope, SCOPE_ALIASES, SCOPES, type Scope } from "./auth/scopes.ts"
export * from "./idempotency/Idempotency.ts"
export { MasterKey, type PublicJwk, type SigningKey, SigningKeys } from "./keys/SigningKeys.ts"
export * from "./shared/errors.ts"
export { newId } from "./shared/ids.ts"
export { DEFAULT_LIMIT, MAX_LIMIT, type Page, type PageRequest } from "./shared/pagination.ts"
export { InvalidCursor } from "./shared/paginationErrors.ts"
export * from "./shared/schemas.ts"
export { findUnstorable, requireStorable } from "./shared/storable.ts"
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
)
const writers = EventAppender.layer.pipe(Layer.provideMerge(repos))
const apiKeys = Layer.merge(ApiKeyService.layer, SdkTokens.layer).pipe(Layer.provideMerge(writers))

/**
 * Every domain service. Needs the store (SqlClient, Database), the master key
 * and the token settings from the operator's configuration.
 */
export const DomainLayer = Layer.mergeAll(
  WorkspaceService.layer,
  AgentService.layer,
  Authenticator.layer,
  EventService.layer,
  EventFeed.layer,
  Checkpoints.layer,
).pipe(Layer.provideMerge(apiKeys))

export type DomainServices =
  | WorkspaceService
  | AgentService
  | ApiKeyService
  | Authenticator
  | AuditLog
  | EventAppender
  | Idempotency
  | EventService
  | EventFeed
  | Checkpoints
  | SigningKeys
  | SdkTokens
