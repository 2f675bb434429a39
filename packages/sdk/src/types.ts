/**
 * The records and inputs of the REST API, written out by hand so that the SDK depends on nothing
 * of the server. Field names and meanings are those of the API reference
 * (`GET /api/v1/openapi.json`); timestamps are ISO 8601 UTC strings with milliseconds.
 */

/**
 * A JSON object, as sent in `context`, `data` and `metadata`.
 *
 * @example
 * ```ts
 * import type { JsonObject } from "@agentgov/sdk"
 *
 * const context: JsonObject = { table: "users", rows: 12, dryRun: false }
 * ```
 */
export type JsonObject = { readonly [key: string]: unknown }

/**
 * What the agent runtime takes where it sends a JSON object (a guard `context`, an event's `data`):
 * any object type, your own `interface`s included (TypeScript lets no interface meet the index
 * signature of {@link JsonObject}). It must still encode as a JSON object: `track()` throws a
 * `TypeError` for one that does not, and the service refuses a guard context that is not one (422).
 *
 * @example
 * ```ts
 * import type { JsonObjectInput } from "@agentgov/sdk"
 *
 * interface Mail { to: string; body: string }
 * const mail: Mail = { to: "cfo@example.com", body: "Q3" }
 * const context: JsonObjectInput = mail
 * ```
 */
export type JsonObjectInput = object

// ---------------------------------------------------------------------------------------------
// Pagination

/**
 * Query fields every list takes.
 *
 * @example
 * ```ts
 * import type { ListParams } from "@agentgov/sdk"
 *
 * const params: ListParams = { limit: 100 } // then continue with `cursor: page.cursor`
 * ```
 */
export interface ListParams {
  /** Page size, 1..100; default 25. */
  readonly limit?: number
  /** `cursor` of the previous page, to continue after it. */
  readonly cursor?: string
}

// ---------------------------------------------------------------------------------------------
// Workspaces

/**
 * A workspace: owns agents, policies, keys, webhooks and one audit chain.
 *
 * @example
 * ```ts
 * import type { Workspace } from "@agentgov/sdk"
 *
 * const isLive = (w: Workspace) => w.environment === "live"
 * ```
 */
export interface Workspace {
  readonly id: string
  readonly name: string
  readonly environment: "live" | "test"
  readonly plan: "free" | "pro" | "enterprise"
  /** The guard's decision when no policy matches. */
  readonly guardDefault: "allow" | "deny"
  readonly createdAt: string
  readonly updatedAt: string
}

/**
 * Input of `workspaces.create` (needs `workspaces:admin`).
 *
 * @example
 * ```ts
 * import type { WorkspaceCreateParams } from "@agentgov/sdk"
 *
 * const params: WorkspaceCreateParams = { name: "staging", environment: "test", guardDefault: "deny" }
 * ```
 */
export interface WorkspaceCreateParams {
  readonly name: string
  /** Fixed at creation; default `live`. */
  readonly environment?: "live" | "test"
  readonly plan?: "free" | "pro" | "enterprise"
  readonly guardDefault?: "allow" | "deny"
}

/**
 * Input of `workspaces.update`.
 *
 * @example
 * ```ts
 * import type { WorkspaceUpdateParams } from "@agentgov/sdk"
 *
 * const params: WorkspaceUpdateParams = { guardDefault: "deny" }
 * ```
 */
export interface WorkspaceUpdateParams {
  readonly name?: string
  /** Needs `workspaces:admin`. */
  readonly plan?: "free" | "pro" | "enterprise"
  readonly guardDefault?: "allow" | "deny"
}

/**
 * What `workspaces.create` returns: the workspace and its first all-scope key, shown once.
 *
 * @example
 * ```ts
 * import type { CreatedWorkspace } from "@agentgov/sdk"
 *
 * const keyOf = (created: CreatedWorkspace) => created.apiKey.apiKey
 * ```
 */
export interface CreatedWorkspace {
  readonly workspace: Workspace
  readonly apiKey: ApiKeyWithSecret
}

// ---------------------------------------------------------------------------------------------
// Agents

/**
 * An agent's status: `suspended` by an enforcement; `deregistered` is final.
 *
 * @example
 * ```ts
 * import type { AgentStatus } from "@agentgov/sdk"
 *
 * const canAct = (status: AgentStatus) => status === "active"
 * ```
 */
export type AgentStatus = "active" | "suspended" | "deregistered"

/**
 * A registered agent.
 *
 * @example
 * ```ts
 * import type { Agent } from "@agentgov/sdk"
 *
 * const label = (a: Agent) => `${a.name} (${a.status}, trust ${a.trustScore})`
 * ```
 */
export interface Agent {
  readonly id: string
  readonly workspaceId: string
  readonly name: string
  readonly description: string | null
  readonly labels: ReadonlyArray<string>
  readonly metadata: JsonObject
  readonly status: AgentStatus
  readonly currentVersion: string | null
  /** 0..1000; new agents start at 400 (`probation`). */
  readonly trustScore: number
  readonly createdAt: string
  readonly updatedAt: string
  readonly deregisteredAt: string | null
}

/**
 * Input of `agents.create`.
 *
 * @example
 * ```ts
 * import type { AgentCreateParams } from "@agentgov/sdk"
 *
 * const params: AgentCreateParams = { name: "billing-bot", labels: ["finance"], metadata: { team: "payments" } }
 * ```
 */
export interface AgentCreateParams {
  /** Unique among the workspace's registered agents; 1..200 characters. */
  readonly name: string
  readonly description?: string
  /** Lowercase `[a-z0-9][a-z0-9_.:/-]{0,62}`, at most 50. */
  readonly labels?: ReadonlyArray<string>
  /** Free-form JSON object, at most 16 KiB encoded. */
  readonly metadata?: JsonObject
}

/**
 * Input of `agents.update`: any of the fields; `description: null` removes it.
 *
 * @example
 * ```ts
 * import type { AgentUpdateParams } from "@agentgov/sdk"
 *
 * const params: AgentUpdateParams = { labels: ["finance", "eu"], description: null }
 * ```
 */
export interface AgentUpdateParams {
  readonly name?: string
  readonly description?: string | null
  readonly labels?: ReadonlyArray<string>
  readonly metadata?: JsonObject
}

/**
 * Filters of `agents.list`.
 *
 * @example
 * ```ts
 * import type { AgentListParams } from "@agentgov/sdk"
 *
 * const params: AgentListParams = { label: "finance", limit: 100 }
 * ```
 */
export interface AgentListParams extends ListParams {
  /** Deregistered agents are listed only when asked for. */
  readonly status?: AgentStatus
  readonly label?: string
  readonly namePrefix?: string
}

/**
 * A version of an agent; the newest becomes its `currentVersion`.
 *
 * @example
 * ```ts
 * import type { AgentVersion } from "@agentgov/sdk"
 *
 * const describe = (v: AgentVersion) => `${v.version} at ${v.createdAt}`
 * ```
 */
export interface AgentVersion {
  readonly id: string
  readonly agentId: string
  readonly version: string
  readonly description: string | null
  readonly metadata: JsonObject
  readonly createdAt: string
}

/**
 * Input of `agents.versions.create`.
 *
 * @example
 * ```ts
 * import type { AgentVersionCreateParams } from "@agentgov/sdk"
 *
 * const params: AgentVersionCreateParams = { version: "1.4.0", metadata: { model: "gpt-x" } }
 * ```
 */
export interface AgentVersionCreateParams {
  /** Unique per agent; 1..100 characters. */
  readonly version: string
  readonly description?: string
  readonly metadata?: JsonObject
}

// ---------------------------------------------------------------------------------------------
// API keys and tokens

/**
 * An API key as listed: never its value.
 *
 * @example
 * ```ts
 * import type { ApiKey } from "@agentgov/sdk"
 *
 * const usable = (k: ApiKey) => k.status === "active"
 * ```
 */
export interface ApiKey {
  readonly id: string
  readonly name: string
  readonly type: "workspace" | "agent"
  readonly agentId: string | null
  readonly environment: "live" | "test"
  readonly scopes: ReadonlyArray<string>
  /** The first 6 characters of the secret, to recognise a key. */
  readonly prefix: string
  readonly status: "active" | "revoked"
  readonly expiresAt: string | null
  readonly revokedAt: string | null
  readonly revokedReason:
    | "revoked"
    | "expired"
    | "rotated"
    | "agent_deregistered"
    | "agent_revoked"
    | "workspace_deleted"
    | "member_removed"
    | null
  /** The key that replaced this one by rotation. */
  readonly rotatedTo: string | null
  readonly lastUsedAt: string | null
  readonly createdAt: string
}

/**
 * A key with its full value, returned once by create and rotate. Store `apiKey` now: it is never
 * shown again (a replay of the same Idempotency-Key answers it redacted).
 *
 * @example
 * ```ts
 * import type { ApiKeyWithSecret } from "@agentgov/sdk"
 *
 * const secretOf = (k: ApiKeyWithSecret) => k.apiKey // "svc_ag_sk_live_…"
 * ```
 */
export interface ApiKeyWithSecret extends ApiKey {
  readonly apiKey: string
}

/**
 * Input of `apiKeys.create`. A key can only be given scopes the calling credential holds.
 *
 * @example
 * ```ts
 * import type { ApiKeyCreateParams } from "@agentgov/sdk"
 *
 * const params: ApiKeyCreateParams = {
 *   name: "billing-bot production",
 *   type: "agent",
 *   agentId: "agt_…",
 *   scopes: ["guard:evaluate", "events:write", "events:read", "approvals:read"],
 * }
 * ```
 */
export interface ApiKeyCreateParams {
  readonly name: string
  readonly type: "workspace" | "agent"
  /** Required for agent keys. */
  readonly agentId?: string
  readonly scopes: ReadonlyArray<string>
  /** In the future; the key is revoked then. */
  readonly expiresAt?: string
}

/**
 * Filters of `apiKeys.list`.
 *
 * @example
 * ```ts
 * import type { ApiKeyListParams } from "@agentgov/sdk"
 *
 * const params: ApiKeyListParams = { status: "active", agentId: "agt_…" }
 * ```
 */
export interface ApiKeyListParams extends ListParams {
  readonly agentId?: string
  readonly status?: "active" | "revoked"
}

/**
 * Input of `apiKeys.rotate`.
 *
 * @example
 * ```ts
 * import type { ApiKeyRotateParams } from "@agentgov/sdk"
 *
 * const params: ApiKeyRotateParams = { overlapSeconds: 3600 } // the old key works one more hour
 * ```
 */
export interface ApiKeyRotateParams {
  /** How long the old key keeps working, 0..2,592,000; default 86,400; 0 revokes it now. */
  readonly overlapSeconds?: number
}

/**
 * An SDK token (D5): an Ed25519 JWT to send as `Authorization: Bearer <token>`.
 *
 * @example
 * ```ts
 * import type { SdkToken } from "@agentgov/sdk"
 *
 * const refreshAfterMs = (t: SdkToken) => t.expiresIn * 750 // at 75 % of its lifetime
 * ```
 */
export interface SdkToken {
  readonly token: string
  /** ISO 8601, the service's clock (as the HTTP response states it). */
  readonly expiresAt: string
  /**
   * Seconds the token lives from its issue: 900 unless the operator set otherwise. From the token's own
   * `exp − iat`, so it does not depend on this machine's clock agreeing with the service's.
   */
  readonly expiresIn: number
}

// ---------------------------------------------------------------------------------------------
// Events

/**
 * Who caused an event. Not part of the chain hash.
 *
 * @example
 * ```ts
 * import type { EventActor } from "@agentgov/sdk"
 *
 * const bySystem = (a: EventActor) => a.type === "system"
 * ```
 */
export interface EventActor {
  readonly type: "api_key" | "sdk_token" | "oauth" | "user" | "system"
  readonly id: string | null
}

/**
 * An event of the audit trail, with the fields its hash is computed from:
 * `hash = hex(SHA-256(prevHash ‖ type ‖ JCS(data) ‖ timestamp))`.
 *
 * @example
 * ```ts
 * import type { AuditEvent } from "@agentgov/sdk"
 *
 * const line = (e: AuditEvent) => `#${e.sequence} ${e.type} ${e.timestamp}`
 * ```
 */
export interface AuditEvent {
  readonly id: string
  readonly type: string
  /** The server's time of recording; hashed exactly as returned. */
  readonly timestamp: string
  readonly workspaceId: string
  readonly agentId: string | null
  /** The client's own time of an ingested event; not hashed. */
  readonly occurredAt: string | null
  readonly actor: EventActor
  readonly data: JsonObject
  readonly sequence: number
  readonly prevHash: string
  readonly hash: string
}

/**
 * One event to ingest. `type` is `lowercase.dotted` (2–8 segments of `[a-z][a-z0-9_]*`) and may
 * not be one of the system's own names.
 *
 * @example
 * ```ts
 * import type { IngestEvent } from "@agentgov/sdk"
 *
 * const event: IngestEvent = { type: "invoice.sent", data: { invoiceId: "inv_42", amount: 120 } }
 * ```
 */
export interface IngestEvent {
  readonly type: string
  /** Defaults to the agent of an agent-bound credential. */
  readonly agentId?: string
  /** A JSON object, at most 32 KiB encoded. */
  readonly data: JsonObject
  /** When it happened, by the client's clock; stored, not hashed. */
  readonly occurredAt?: string
}

/**
 * Where an ingested event landed in the chain.
 *
 * @example
 * ```ts
 * import type { IngestedEvent } from "@agentgov/sdk"
 *
 * const where = (e: IngestedEvent) => `${e.id} at #${e.sequence}`
 * ```
 */
export interface IngestedEvent {
  readonly id: string
  readonly sequence: number
  readonly hash: string
  readonly timestamp: string
}

/**
 * What `events.ingest` returns: one entry per event, in order.
 *
 * @example
 * ```ts
 * import type { IngestResult } from "@agentgov/sdk"
 *
 * const last = (r: IngestResult) => r.events.at(-1)?.sequence
 * ```
 */
export interface IngestResult {
  readonly events: ReadonlyArray<IngestedEvent>
}

/**
 * Filters of `events.list`: newest first by sequence.
 *
 * @example
 * ```ts
 * import type { EventListParams } from "@agentgov/sdk"
 *
 * const params: EventListParams = { type: ["policy.*"], since: "2026-11-20T00:00:00.000Z" }
 * ```
 */
export interface EventListParams extends ListParams {
  /** Event names, exact or `prefix.*`. */
  readonly type?: ReadonlyArray<string> | string
  readonly agentId?: string
  /** At or after this time. */
  readonly since?: string
  /** Before this time. */
  readonly until?: string
  readonly fromSequence?: number
  readonly toSequence?: number
}

/**
 * The result of a chain verification (D8).
 *
 * @example
 * ```ts
 * import type { ChainVerification } from "@agentgov/sdk"
 *
 * const report = (v: ChainVerification) => (v.valid ? `ok (${v.checked})` : `broken at #${v.firstBadSequence}`)
 * ```
 */
export interface ChainVerification {
  readonly valid: boolean
  readonly checked: number
  readonly firstBadSequence?: number
  readonly reason?: string
  readonly verifiedAt: string
}

/**
 * A signed checkpoint of a workspace's Merkle tree.
 *
 * @example
 * ```ts
 * import type { Checkpoint } from "@agentgov/sdk"
 *
 * const covers = (c: Checkpoint, sequence: number) => sequence <= c.treeSize
 * ```
 */
export interface Checkpoint {
  readonly workspaceId: string
  readonly treeSize: number
  readonly rootHash: string
  readonly headHash: string
  readonly timestamp: string
  /** The signing key in `/.well-known/jwks.json`. */
  readonly kid: string
  /** base64url Ed25519 over `"agentgov-checkpoint/v1\n" + JCS({workspaceId, treeSize, rootHash, headHash, timestamp})`. */
  readonly signature: string
}

/**
 * An RFC 9162 inclusion proof of one event, with the checkpoint it is made against.
 *
 * @example
 * ```ts
 * import type { InclusionProof } from "@agentgov/sdk"
 *
 * const depth = (p: InclusionProof) => p.path.length
 * ```
 */
export interface InclusionProof {
  readonly sequence: number
  readonly leafIndex: number
  readonly treeSize: number
  readonly path: ReadonlyArray<string>
  /** Events from this sequence on have Merkle leaves that cover id, agentId, actor and occurredAt too. */
  readonly attributedFrom: number
  readonly checkpoint: Checkpoint
}

/**
 * An RFC 9162 consistency proof: the older tree is a prefix of the newer one.
 *
 * @example
 * ```ts
 * import type { ConsistencyProof } from "@agentgov/sdk"
 *
 * const grew = (p: ConsistencyProof) => p.toSize - p.fromSize
 * ```
 */
export interface ConsistencyProof {
  readonly fromSize: number
  readonly fromRoot: string
  readonly toSize: number
  readonly path: ReadonlyArray<string>
  readonly checkpoint: Checkpoint
}

/**
 * An event with, on request, its inclusion proof.
 *
 * @example
 * ```ts
 * import type { EventWithProof } from "@agentgov/sdk"
 *
 * const proven = (e: EventWithProof) => e.proof !== undefined
 * ```
 */
export interface EventWithProof extends AuditEvent {
  readonly proof?: InclusionProof
}

/**
 * An offline-verifiable export (`npx agentgov-verify bundle.json`).
 *
 * @example
 * ```ts
 * import type { AuditBundle } from "@agentgov/sdk"
 *
 * const size = (b: AuditBundle) => b.events.length
 * ```
 */
export interface AuditBundle {
  readonly format: "agentgov.audit-bundle/v2"
  readonly workspaceId: string
  /** Events from this sequence on have Merkle leaves that cover id, agentId, actor and occurredAt too. */
  readonly attributedFrom: number
  readonly exportedAt: string
  readonly events: ReadonlyArray<AuditEvent>
  readonly checkpoint: Checkpoint
  readonly inclusionProofs: ReadonlyArray<Omit<InclusionProof, "checkpoint" | "attributedFrom">>
  readonly consistency?: {
    readonly fromSize: number
    readonly fromRoot: string
    readonly toSize: number
    readonly path: ReadonlyArray<string>
  }
  readonly jwks: { readonly keys: ReadonlyArray<JsonObject> }
}

/**
 * Range of `events.export`: at most 10,000 events, the latest by default.
 *
 * @example
 * ```ts
 * import type { EventExportParams } from "@agentgov/sdk"
 *
 * const params: EventExportParams = { fromSequence: 1, toSequence: 5000 }
 * ```
 */
export interface EventExportParams {
  readonly fromSequence?: number
  readonly toSequence?: number
  /** Adds a consistency proof from this older tree size. */
  readonly sinceTreeSize?: number
}

/**
 * One message of the live stream (D9): `id` is the event id, for resuming.
 *
 * @example
 * ```ts
 * import type { StreamEvent } from "@agentgov/sdk"
 *
 * const show = (m: StreamEvent) => `${m.type}: ${JSON.stringify(m.payload.data)}`
 * ```
 */
export interface StreamEvent {
  readonly id: string
  readonly type: string
  readonly payload: AuditEvent
}

// ---------------------------------------------------------------------------------------------
// Policies and the guard (D6)

/**
 * A condition of a policy rule: `all` / `any` / `not`, a leaf `{field, op, value}` over
 * `action`, `context.*` and `agent.*`, a time window, a rate, or a CEL expression.
 *
 * @example
 * ```ts
 * import type { PolicyCondition } from "@agentgov/sdk"
 *
 * const bigPayment: PolicyCondition = { all: [{ field: "context.amount", op: "gt", value: 1000 }] }
 * ```
 */
export type PolicyCondition =
  | { readonly all: ReadonlyArray<PolicyCondition> }
  | { readonly any: ReadonlyArray<PolicyCondition> }
  | { readonly not: PolicyCondition }
  | {
      readonly field: string
      readonly op:
        | "eq"
        | "ne"
        | "gt"
        | "gte"
        | "lt"
        | "lte"
        | "in"
        | "nin"
        | "contains"
        | "startsWith"
        | "endsWith"
        | "glob"
        | "exists"
        | "between"
      readonly value?: unknown
    }
  | {
      readonly time: {
        readonly days?: ReadonlyArray<"sun" | "mon" | "tue" | "wed" | "thu" | "fri" | "sat">
        /** HH:MM, inclusive. */
        readonly from: string
        /** HH:MM, exclusive. */
        readonly to: string
        /** IANA time zone. */
        readonly tz: string
      }
    }
  | {
      readonly rate: {
        readonly max: number
        readonly per: "second" | "minute" | "hour" | "day"
        readonly scope?: "agent" | "workspace"
      }
    }
  | { readonly cel: string }

/**
 * A rule of a policy.
 *
 * @example
 * ```ts
 * import type { PolicyRule } from "@agentgov/sdk"
 *
 * const rule: PolicyRule = {
 *   id: "big-payments",
 *   effect: "require_approval",
 *   actions: ["payment.*"],
 *   when: { field: "context.amount", op: "gt", value: 1000 },
 *   approval: { timeoutSeconds: 900 },
 * }
 * ```
 */
export interface PolicyRule {
  readonly id: string
  readonly effect: "allow" | "deny" | "require_approval"
  /** Action globs. */
  readonly actions: ReadonlyArray<string>
  readonly when?: PolicyCondition
  readonly reason?: string
  readonly approval?: { readonly timeoutSeconds?: number; readonly approvers?: ReadonlyArray<string> }
}

/**
 * A policy document, as created.
 *
 * @example
 * ```ts
 * import type { PolicyCreateParams } from "@agentgov/sdk"
 *
 * const policy: PolicyCreateParams = {
 *   name: "no deletes",
 *   rules: [{ id: "deny-delete", effect: "deny", actions: ["*.delete"], reason: "deletes need a human" }],
 * }
 * ```
 */
export interface PolicyCreateParams {
  readonly name: string
  readonly description?: string
  /** Default true. */
  readonly enabled?: boolean
  /** `monitor` policies record their matches and never change a decision. Default `enforce`. */
  readonly mode?: "enforce" | "monitor"
  readonly target?: { readonly agentIds?: ReadonlyArray<string>; readonly labels?: ReadonlyArray<string> }
  readonly rules: ReadonlyArray<PolicyRule>
}

/**
 * Input of `policies.update`: any of the document's fields; `description` and `target` take null
 * to remove them.
 *
 * @example
 * ```ts
 * import type { PolicyUpdateParams } from "@agentgov/sdk"
 *
 * const params: PolicyUpdateParams = { mode: "monitor" }
 * ```
 */
export interface PolicyUpdateParams {
  readonly name?: string
  readonly description?: string | null
  readonly enabled?: boolean
  readonly mode?: "enforce" | "monitor"
  readonly target?: PolicyCreateParams["target"] | null
  readonly rules?: ReadonlyArray<PolicyRule>
  /**
   * The version the change was made against: when the policy was saved meanwhile at another one, the update
   * is refused (409 `VERSION_CONFLICT`) rather than saved over that change.
   */
  readonly expectedVersion?: number
}

/**
 * A stored policy, at its current version.
 *
 * @example
 * ```ts
 * import type { Policy } from "@agentgov/sdk"
 *
 * const summary = (p: Policy) => `${p.name} v${p.version}: ${p.rules.length} rules`
 * ```
 */
export interface Policy {
  readonly id: string
  readonly workspaceId: string
  readonly version: number
  readonly name: string
  readonly description?: string
  readonly enabled: boolean
  readonly mode: "enforce" | "monitor"
  readonly target?: PolicyCreateParams["target"]
  /** As saved: a `require_approval` rule's `approval.timeoutSeconds` is filled in (default 3,600). */
  readonly rules: ReadonlyArray<
    PolicyRule & {
      readonly approval?: { readonly timeoutSeconds: number; readonly approvers?: ReadonlyArray<string> }
    }
  >
  readonly createdAt: string
  readonly updatedAt: string
}

/** One stored version of a policy (`policies.versions.list`): its document as saved then. */
export interface PolicyVersion extends Omit<Policy, "id" | "workspaceId" | "createdAt" | "updatedAt"> {
  readonly policyId: string
  /** When this version was saved. */
  readonly createdAt: string
}

/**
 * Filters of `policies.list`.
 *
 * @example
 * ```ts
 * import type { PolicyListParams } from "@agentgov/sdk"
 *
 * const params: PolicyListParams = { enabled: true }
 * ```
 */
export interface PolicyListParams extends ListParams {
  readonly enabled?: boolean
}

/**
 * The body of `POST /guard` (D6).
 *
 * @example
 * ```ts
 * import type { GuardRequest } from "@agentgov/sdk"
 *
 * const request: GuardRequest = { action: "payment.send", context: { amount: 50 }, agentId: "agt_…" }
 * ```
 */
export interface GuardRequest {
  /** The action name, 1..200 characters. */
  readonly action: string
  /** What the action would do, a JSON object of at most 32 KiB; rules read it as `context.*`. */
  readonly context?: JsonObject
  /** Required with a workspace credential; implied by an agent-bound one. */
  readonly agentId?: string
  /** An approved approval for this very agent, action and context: lets exactly one call through. */
  readonly approvalId?: string
}

/**
 * Why the guard decided as it did. Codes: `POLICY_DENIED`, `APPROVAL_REQUIRED`,
 * `POLICY_ALLOWED`, `NO_MATCHING_POLICY`, `CONDITION_ERROR`, `POLICY_MONITORED`,
 * `AGENT_SUSPENDED`, `AGENT_DEREGISTERED`, `AGENT_THROTTLED` (a throttle enforcement's limit of guard
 * calls a minute is spent: a `deny`, try again later), the approval's `APPROVAL_GRANTED`,
 * `APPROVAL_PENDING`, `APPROVAL_DENIED`, `APPROVAL_EXPIRED`, `APPROVAL_USED`,
 * `APPROVAL_MISMATCH`, `APPROVAL_NOT_APPROVER`, `APPROVAL_NOT_FOUND`, `APPROVAL_QUEUE_FULL` (the agent has 100
 * approvals awaiting a decision), and the SDK's own
 * `SERVICE_UNAVAILABLE`.
 *
 * @example
 * ```ts
 * import type { GuardReason } from "@agentgov/sdk"
 *
 * const fromPolicy = (r: GuardReason) => r.policyId !== undefined
 * ```
 */
export interface GuardReason {
  readonly code: string
  readonly message: string
  readonly policyId?: string
  readonly ruleId?: string
}

/**
 * A rule that matched, monitor ones included.
 *
 * @example
 * ```ts
 * import type { MatchedRule } from "@agentgov/sdk"
 *
 * const enforced = (m: MatchedRule) => m.mode === "enforce"
 * ```
 */
export interface MatchedRule {
  readonly policyId: string
  readonly policyVersion: number
  readonly ruleId: string
  readonly effect: "allow" | "deny" | "require_approval"
  readonly mode: "enforce" | "monitor"
}

/**
 * The guard's answer (D6), as the service sends it.
 *
 * @example
 * ```ts
 * import type { GuardResult } from "@agentgov/sdk"
 *
 * const needsHuman = (r: GuardResult) => r.decision === "require_approval" && r.approvalId !== undefined
 * ```
 */
export interface GuardResult {
  readonly decision: "allow" | "deny" | "require_approval"
  readonly allowed: boolean
  readonly reasons: ReadonlyArray<GuardReason>
  readonly matched: ReadonlyArray<MatchedRule>
  /** The approval created (`require_approval`) or used (allowed) by this call. */
  readonly approvalId?: string
  /** The `policy.evaluated` event that records this decision. */
  readonly eventId: string
}

/**
 * What `policies.simulate` asks: the guard's request without an approval.
 *
 * @example
 * ```ts
 * import type { PolicySimulationRequest } from "@agentgov/sdk"
 *
 * const ask: PolicySimulationRequest = { agentId: "agt_…", action: "db.delete", context: { env: "prod" } }
 * ```
 */
export interface PolicySimulationRequest {
  /** The action name, 1..200 characters. */
  readonly action: string
  /** What the action would do, a JSON object of at most 32 KiB; rules read it as `context.*`. */
  readonly context?: JsonObject
  /** Required with a workspace credential; implied by an agent-bound one. */
  readonly agentId?: string
}

/**
 * What the saved policies would decide (`policies.simulate`): the guard's answer without an approval or an
 * event, since nothing is recorded.
 *
 * @example
 * ```ts
 * import type { PolicySimulation } from "@agentgov/sdk"
 *
 * const denied = (s: PolicySimulation) => s.decision === "deny"
 * ```
 */
export interface PolicySimulation {
  readonly decision: "allow" | "deny" | "require_approval"
  readonly allowed: boolean
  readonly reasons: ReadonlyArray<GuardReason>
  readonly matched: ReadonlyArray<MatchedRule>
}

// ---------------------------------------------------------------------------------------------
// Approvals (D7)

/**
 * An approval's status; `expired` counts as denied.
 *
 * @example
 * ```ts
 * import type { ApprovalStatus } from "@agentgov/sdk"
 *
 * const decided = (s: ApprovalStatus) => s !== "pending"
 * ```
 */
export type ApprovalStatus = "pending" | "approved" | "denied" | "expired"

/**
 * An approval request, bound to one agent, action and context.
 *
 * @example
 * ```ts
 * import type { Approval } from "@agentgov/sdk"
 *
 * const usable = (a: Approval) => a.status === "approved" && a.usedAt === null
 * ```
 */
export interface Approval {
  readonly id: string
  readonly workspaceId: string
  readonly agentId: string
  readonly action: string
  readonly context: JsonObject
  readonly status: ApprovalStatus
  readonly reason: string | null
  readonly policyId: string | null
  readonly ruleId: string | null
  /** Credential ids that may decide; empty: any credential with `approvals:manage`. */
  readonly approvers: ReadonlyArray<string>
  /** hex SHA-256 of JCS({agentId, action, context}). */
  readonly bindingHash: string
  readonly decidedBy: string | null
  readonly decisionReason: string | null
  readonly decidedAt: string | null
  /** Undecided by then, it is denied; approved, it must be used by then. */
  readonly expiresAt: string
  /** When a guard call used it (it allows one call). */
  readonly usedAt: string | null
  readonly createdAt: string
}

/**
 * Input of `approvals.create` (needs `approvals:write`; agents ask through the guard).
 *
 * @example
 * ```ts
 * import type { ApprovalCreateParams } from "@agentgov/sdk"
 *
 * const params: ApprovalCreateParams = { agentId: "agt_…", action: "db.drop", context: { table: "users" } }
 * ```
 */
export interface ApprovalCreateParams {
  readonly agentId: string
  readonly action: string
  /** Default `{}`; the guard call that uses the approval must send the same. */
  readonly context?: JsonObject
  readonly reason?: string
  /** 1..2,592,000; default 3,600. */
  readonly timeoutSeconds?: number
}

/**
 * Filters of `approvals.list`: pending ones unless `status` says otherwise.
 *
 * @example
 * ```ts
 * import type { ApprovalListParams } from "@agentgov/sdk"
 *
 * const params: ApprovalListParams = { status: ["approved", "denied"], agentId: "agt_…" }
 * ```
 */
export interface ApprovalListParams extends ListParams {
  readonly status?: ReadonlyArray<ApprovalStatus | "all"> | ApprovalStatus | "all"
  readonly agentId?: string
  readonly action?: string
}

/**
 * Input of `approvals.decide` (needs `approvals:manage`).
 *
 * @example
 * ```ts
 * import type { ApprovalDecideParams } from "@agentgov/sdk"
 *
 * const params: ApprovalDecideParams = { decision: "approved", reason: "checked with finance" }
 * ```
 */
export interface ApprovalDecideParams {
  readonly decision: "approved" | "denied"
  readonly reason?: string
}

// ---------------------------------------------------------------------------------------------
// Enforcement (D7)

/**
 * Kinds of enforcement.
 *
 * @example
 * ```ts
 * import type { EnforcementType } from "@agentgov/sdk"
 *
 * const suspends = (t: EnforcementType) => t === "suspension" || t === "revocation"
 * ```
 */
export type EnforcementType = "warning" | "throttle" | "suspension" | "revocation"

/**
 * An enforcement action against an agent.
 *
 * @example
 * ```ts
 * import type { Enforcement } from "@agentgov/sdk"
 *
 * const appealable = (e: Enforcement) => e.status === "active"
 * ```
 */
export interface Enforcement {
  readonly id: string
  readonly workspaceId: string
  readonly agentId: string
  readonly type: EnforcementType
  readonly status: "active" | "appealed" | "resolved" | "expired"
  /** Whether it applies now. */
  readonly inForce: boolean
  readonly reason: string
  readonly policyId: string | null
  readonly ruleId: string | null
  readonly limitPerMinute: number | null
  readonly expiresAt: string | null
  readonly appealReason: string | null
  readonly appealedAt: string | null
  readonly resolution: "upheld" | "overturned" | null
  readonly resolutionNote: string | null
  readonly resolvedAt: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

/**
 * Input of `enforcement.create`.
 *
 * @example
 * ```ts
 * import type { EnforcementCreateParams } from "@agentgov/sdk"
 *
 * const params: EnforcementCreateParams = { agentId: "agt_…", type: "suspension", reason: "spam", durationSeconds: 3600 }
 * ```
 */
export interface EnforcementCreateParams {
  readonly agentId: string
  readonly type: EnforcementType
  readonly reason: string
  /** Not with `durationSeconds`. */
  readonly expiresAt?: string
  readonly durationSeconds?: number
  /** Throttles only, and required for them. */
  readonly limitPerMinute?: number
}

/**
 * Input of `enforcement.update`: either change `reason` and the expiry, or resolve with
 * `resolution` (and an optional `note`).
 *
 * @example
 * ```ts
 * import type { EnforcementUpdateParams } from "@agentgov/sdk"
 *
 * const params: EnforcementUpdateParams = { resolution: "overturned", note: "false positive" }
 * ```
 */
export interface EnforcementUpdateParams {
  readonly reason?: string
  readonly expiresAt?: string | null
  readonly durationSeconds?: number
  readonly resolution?: "upheld" | "overturned"
  readonly note?: string
}

/**
 * Filters of `enforcement.list`: those in force unless `status` says otherwise.
 *
 * @example
 * ```ts
 * import type { EnforcementListParams } from "@agentgov/sdk"
 *
 * const params: EnforcementListParams = { status: "all", type: ["suspension"] }
 * ```
 */
export interface EnforcementListParams extends ListParams {
  readonly status?:
    | ReadonlyArray<"active" | "appealed" | "resolved" | "expired" | "all">
    | "active"
    | "appealed"
    | "resolved"
    | "expired"
    | "all"
  readonly agentId?: string
  readonly type?: ReadonlyArray<EnforcementType> | EnforcementType
}

/**
 * Input of `enforcement.appeal`.
 *
 * @example
 * ```ts
 * import type { EnforcementAppealParams } from "@agentgov/sdk"
 *
 * const params: EnforcementAppealParams = { reason: "the flagged messages were customer-requested" }
 * ```
 */
export interface EnforcementAppealParams {
  readonly reason: string
}

// ---------------------------------------------------------------------------------------------
// Webhooks (D9)

/**
 * Delivery statistics of a webhook.
 *
 * @example
 * ```ts
 * import type { WebhookStats } from "@agentgov/sdk"
 *
 * const healthy = (s: WebhookStats) => s.total === 0 || s.successRate > 0.95
 * ```
 */
export interface WebhookStats {
  readonly total: number
  readonly successful: number
  readonly failed: number
  /** 0..1. */
  readonly successRate: number
}

/**
 * One attempt to deliver one event.
 *
 * @example
 * ```ts
 * import type { WebhookDelivery } from "@agentgov/sdk"
 *
 * const retrying = (d: WebhookDelivery) => d.status === "failed" && d.nextRetryAt !== undefined
 * ```
 */
export interface WebhookDelivery {
  readonly id: string
  readonly eventId: string
  readonly eventType: string
  readonly status: "success" | "failed"
  readonly statusCode?: number
  readonly responseTimeMs: number
  readonly attempt: number
  readonly nextRetryAt?: string
  readonly attemptedAt: string
  readonly error?: string
}

/**
 * A registered webhook.
 *
 * @example
 * ```ts
 * import type { Webhook } from "@agentgov/sdk"
 *
 * const broken = (w: Webhook) => !w.enabled && w.disabledReason !== "disabled_by_user"
 * ```
 */
export interface Webhook {
  readonly id: string
  readonly url: string
  /** Event filters: exact names, `prefix.*`, `*`. */
  readonly events: ReadonlyArray<string>
  readonly description: string | null
  readonly retryPolicy: "exponential" | "extended"
  readonly enabled: boolean
  readonly disabledReason: "disabled_by_user" | "all_attempts_failed" | "endpoint_gone" | null
  readonly disabledAt: string | null
  /** The secret's last 4 characters. */
  readonly secretHint: string
  readonly previousSecretExpiresAt: string | null
  readonly createdAt: string
  readonly updatedAt: string
  readonly stats: WebhookStats
  /** Only with `includeDeliveries: true`. */
  readonly deliveries?: ReadonlyArray<WebhookDelivery>
}

/**
 * A webhook with its signing secret: returned once, by create and rotate.
 *
 * @example
 * ```ts
 * import type { WebhookWithSecret } from "@agentgov/sdk"
 *
 * const secretOf = (w: WebhookWithSecret) => w.secret // "whsec_…"
 * ```
 */
export interface WebhookWithSecret extends Webhook {
  readonly secret: string
}

/**
 * Input of `webhooks.create`.
 *
 * @example
 * ```ts
 * import type { WebhookCreateParams } from "@agentgov/sdk"
 *
 * const params: WebhookCreateParams = { url: "https://example.com/hooks/agentgov", events: ["approval.*", "enforcement.*"] }
 * ```
 */
export interface WebhookCreateParams {
  readonly url: string
  readonly events: ReadonlyArray<string>
  /** 16..256 printable ASCII characters; generated when omitted. */
  readonly secret?: string
  readonly retryPolicy?: "exponential" | "extended"
  readonly description?: string
  readonly enabled?: boolean
}

/**
 * Input of `webhooks.update`.
 *
 * @example
 * ```ts
 * import type { WebhookUpdateParams } from "@agentgov/sdk"
 *
 * const params: WebhookUpdateParams = { enabled: true } // re-enable after fixing the endpoint
 * ```
 */
export interface WebhookUpdateParams {
  readonly url?: string
  readonly events?: ReadonlyArray<string>
  readonly retryPolicy?: "exponential" | "extended"
  readonly description?: string | null
  readonly enabled?: boolean
}

/**
 * Options of `webhooks.get`.
 *
 * @example
 * ```ts
 * import type { WebhookGetParams } from "@agentgov/sdk"
 *
 * const params: WebhookGetParams = { includeDeliveries: true, limit: 50 }
 * ```
 */
export interface WebhookGetParams {
  readonly includeDeliveries?: boolean
  /** How many attempts with `includeDeliveries`, default 25. */
  readonly limit?: number
}

/**
 * Filters of `webhooks.list`.
 *
 * @example
 * ```ts
 * import type { WebhookListParams } from "@agentgov/sdk"
 *
 * const params: WebhookListParams = { enabled: false }
 * ```
 */
export interface WebhookListParams extends ListParams {
  readonly enabled?: boolean
}

/**
 * Input of `webhooks.rotate`.
 *
 * @example
 * ```ts
 * import type { WebhookRotateParams } from "@agentgov/sdk"
 *
 * const params: WebhookRotateParams = { overlapSeconds: 3600 }
 * ```
 */
export interface WebhookRotateParams {
  readonly secret?: string
  /** How long deliveries also carry the old secret's signature; default 86,400. */
  readonly overlapSeconds?: number
}

/**
 * Input of `webhooks.test`.
 *
 * @example
 * ```ts
 * import type { WebhookTestParams } from "@agentgov/sdk"
 *
 * const params: WebhookTestParams = { eventType: "approval.requested" }
 * ```
 */
export interface WebhookTestParams {
  /** A system event name (or alias); a sample event of that type is sent. */
  readonly eventType: string
}

/**
 * What `webhooks.test` returns.
 *
 * @example
 * ```ts
 * import type { WebhookTestResult } from "@agentgov/sdk"
 *
 * const explain = (r: WebhookTestResult) => (r.delivered ? "ok" : `failed: ${r.delivery.error ?? r.delivery.statusCode}`)
 * ```
 */
export interface WebhookTestResult {
  readonly delivered: boolean
  readonly delivery: Omit<WebhookDelivery, "nextRetryAt">
}

/**
 * Input of `webhooks.redeliver`: at least one of the fields.
 *
 * @example
 * ```ts
 * import type { WebhookRedeliverParams } from "@agentgov/sdk"
 *
 * const params: WebhookRedeliverParams = { since: "2026-11-20T00:00:00.000Z" }
 * ```
 */
export interface WebhookRedeliverParams {
  readonly deliveryIds?: ReadonlyArray<string>
  readonly since?: string
  readonly until?: string
}

/**
 * What `webhooks.redeliver` returns.
 *
 * @example
 * ```ts
 * import type { WebhookRedeliverResult } from "@agentgov/sdk"
 *
 * const count = (r: WebhookRedeliverResult) => r.queued.length
 * ```
 */
export interface WebhookRedeliverResult {
  readonly queued: ReadonlyArray<{
    readonly id: string
    readonly eventId: string
    readonly eventType: string
    readonly attempt: number
  }>
  readonly skipped: ReadonlyArray<{ readonly id: string; readonly status: "pending" | "paused" | "success" }>
  /** More failed deliveries match than one call queues; call again. */
  readonly hasMore: boolean
}

/**
 * The frameworks of compliance reports (D14).
 *
 * @example
 * ```ts
 * import type { ComplianceFramework } from "@agentgov/sdk"
 *
 * const frameworks: ComplianceFramework[] = ["eu-ai-act", "gdpr", "soc2"]
 * ```
 */
export type ComplianceFramework = "eu-ai-act" | "gdpr" | "soc2"

/**
 * One piece of evidence of a control: a value from the records; `metric` when it is a count of the
 * audit trail that `agentgov-verify report` recounts from a bundle.
 *
 * @example
 * ```ts
 * import type { ComplianceEvidence } from "@agentgov/sdk"
 *
 * const recountable = (e: ComplianceEvidence) => e.metric !== undefined
 * ```
 */
export interface ComplianceEvidence {
  readonly label: string
  readonly value: number | string | boolean
  readonly metric?: string
  readonly ids?: ReadonlyArray<string>
}

/**
 * A control of the framework's catalogue, as the report judged it.
 *
 * @example
 * ```ts
 * import type { ComplianceControl } from "@agentgov/sdk"
 *
 * const blocking = (c: ComplianceControl) => c.required && c.status !== "met"
 * ```
 */
export interface ComplianceControl {
  readonly id: string
  readonly title: string
  readonly reference: string
  /** Must be `met` for a certification. */
  readonly required: boolean
  readonly status: "met" | "partial" | "not_met" | "not_applicable"
  readonly evidence: ReadonlyArray<ComplianceEvidence>
  /** What the records cannot show: the operator supplies it. */
  readonly gaps: ReadonlyArray<string>
}

/**
 * A report's overall result and its counts of controls by status.
 *
 * @example
 * ```ts
 * import type { ComplianceSummary } from "@agentgov/sdk"
 *
 * const ok = (s: ComplianceSummary) => s.result === "compliant"
 * ```
 */
export interface ComplianceSummary {
  readonly result: "compliant" | "partially_compliant" | "non_compliant"
  readonly met: number
  readonly partial: number
  readonly notMet: number
  readonly notApplicable: number
}

/**
 * The signed report: pinned to a signed checkpoint, listing what it counted; `signature` is a detached
 * JWS over the JCS of the other fields. Check it offline with `agentgov-verify report`.
 *
 * @example
 * ```ts
 * import type { ComplianceReportDocument } from "@agentgov/sdk"
 *
 * const exportUrl = (d: ComplianceReportDocument) =>
 *   `/api/v1/events/export?fromSequence=${d.counted.sequences[0]?.[0]}&sinceTreeSize=${d.checkpoint.treeSize}`
 * ```
 */
export interface ComplianceReportDocument {
  readonly format: "agentgov.compliance-report/v1"
  readonly id: string
  readonly workspaceId: string
  readonly framework: ComplianceFramework
  readonly catalogueVersion: string
  readonly agentId: string | null
  readonly period: { readonly from: string; readonly to: string }
  readonly generatedAt: string
  readonly checkpoint: Checkpoint
  readonly chain: {
    readonly valid: boolean
    readonly checked: number
    readonly firstBadSequence?: number
    readonly reason?: string
  }
  readonly counted: {
    readonly count: number
    readonly sequences: ReadonlyArray<readonly [number, number]>
    readonly idsDigest: string
    readonly ids?: ReadonlyArray<string>
  }
  readonly metrics: { readonly [name: string]: number }
  readonly activity: ReadonlyArray<{
    readonly at: string
    readonly evaluations: number
    readonly denials: number
    readonly enforcements: number
  }>
  readonly controls: ReadonlyArray<ComplianceControl>
  readonly summary: ComplianceSummary
  readonly signature: string
}

/**
 * A compliance report record: `generating` until the worker has made it, then `ready` with the signed
 * `report` (single reads only) or `failed`.
 *
 * @example
 * ```ts
 * import type { ComplianceReport } from "@agentgov/sdk"
 *
 * const done = (r: ComplianceReport) => r.status !== "generating"
 * ```
 */
export interface ComplianceReport {
  readonly id: string
  readonly workspaceId: string
  readonly framework: ComplianceFramework
  readonly agentId: string | null
  readonly from: string
  readonly to: string
  readonly status: "generating" | "ready" | "failed"
  readonly summary: ComplianceSummary | null
  readonly error: string | null
  readonly createdAt: string
  readonly completedAt: string | null
  readonly report?: ComplianceReportDocument
}

/**
 * Input of `compliance.reports.create`.
 *
 * @example
 * ```ts
 * import type { ComplianceReportCreateParams } from "@agentgov/sdk"
 *
 * const params: ComplianceReportCreateParams = { framework: "soc2", from: "2026-10-01T00:00:00.000Z", to: "2026-11-01T00:00:00.000Z" }
 * ```
 */
export interface ComplianceReportCreateParams {
  readonly framework: ComplianceFramework
  /** Report on one agent: its events and the workspace-wide ones. */
  readonly agentId?: string
  readonly from: string
  /** Not in the future. */
  readonly to: string
}

/**
 * Filters of `compliance.reports.list`.
 *
 * @example
 * ```ts
 * import type { ComplianceReportListParams } from "@agentgov/sdk"
 *
 * const params: ComplianceReportListParams = { framework: "gdpr", status: "ready" }
 * ```
 */
export interface ComplianceReportListParams extends ListParams {
  readonly framework?: ComplianceFramework
  readonly agentId?: string
  readonly status?: "generating" | "ready" | "failed"
}

/**
 * An agent's certification for a framework: a year from issue unless revoked.
 *
 * @example
 * ```ts
 * import type { Certification } from "@agentgov/sdk"
 *
 * const current = (c: Certification) => c.status === "active"
 * ```
 */
export interface Certification {
  readonly id: string
  readonly workspaceId: string
  readonly agentId: string
  readonly framework: ComplianceFramework
  readonly reportId: string
  readonly issuedAt: string
  readonly expiresAt: string
  readonly status: "active" | "expired" | "revoked"
  readonly revokedAt: string | null
  readonly revokedReason: "agent_suspended" | "agent_revoked" | "trust_below_bronze" | "revoked_by_operator" | null
  /** The operator's reason, when one revoked it (`revoked_by_operator`). */
  readonly revocationNote: string | null
  /** Detached JWS over the JCS of {id, workspaceId, agentId, framework, reportId, issuedAt, expiresAt}. */
  readonly signature: string
}

/**
 * Input of `compliance.certifications.create`.
 *
 * @example
 * ```ts
 * import type { CertificationCreateParams } from "@agentgov/sdk"
 *
 * const params: CertificationCreateParams = { agentId: "agt_…", reportId: "rpt_…" }
 * ```
 */
export interface CertificationCreateParams {
  readonly agentId: string
  readonly reportId: string
}

/**
 * Input of `compliance.certifications.revoke`.
 *
 * @example
 * ```ts
 * import type { CertificationRevokeParams } from "@agentgov/sdk"
 *
 * const params: CertificationRevokeParams = { reason: "the audit found the approval records incomplete" }
 * ```
 */
export interface CertificationRevokeParams {
  /** Why, in the operator's words (1–500 characters). */
  readonly reason: string
}

// ---------------------------------------------------------------------------------------------
// Trust (D11–D13)

/**
 * D11's tiers: `untrusted` < 300 ≤ `probation` < 500 ≤ `bronze` < 700 ≤ `silver` < 850 ≤ `gold` < 950 ≤ `platinum`.
 *
 * @example
 * ```ts
 * import type { TrustTier } from "@agentgov/sdk"
 *
 * const badged = (t: TrustTier) => t !== "untrusted" && t !== "probation"
 * ```
 */
export type TrustTier = "untrusted" | "probation" | "bronze" | "silver" | "gold" | "platinum"

/**
 * The tiers that hold a badge (D13).
 *
 * @example
 * ```ts
 * import type { BadgeTier } from "@agentgov/sdk"
 *
 * const top = (t: BadgeTier) => t === "platinum"
 * ```
 */
export type BadgeTier = "bronze" | "silver" | "gold" | "platinum"

/**
 * One component of a trust score: 0–1000, its weight, and the numbers it used.
 *
 * @example
 * ```ts
 * import type { TrustComponent } from "@agentgov/sdk"
 *
 * const points = (c: TrustComponent) => c.score * c.weight
 * ```
 */
export interface TrustComponent {
  readonly name: string
  readonly score: number
  readonly weight: number
  readonly detail: { readonly [key: string]: unknown }
}

/**
 * An agent's trust score (D12).
 *
 * @example
 * ```ts
 * import type { TrustScore } from "@agentgov/sdk"
 *
 * const weakest = (s: TrustScore) => [...s.components].sort((a, b) => a.score - b.score)[0]?.name
 * ```
 */
export interface TrustScore {
  readonly agentId: string
  readonly score: number
  readonly tier: TrustTier
  readonly components: ReadonlyArray<TrustComponent>
  readonly computedAt: string
  readonly policyVersion: string
}

/**
 * An agent's reputation: the score, the evidence counts behind it, and its history for charts.
 *
 * @example
 * ```ts
 * import type { Reputation } from "@agentgov/sdk"
 *
 * const points = (r: Reputation) => r.history.map((p) => [Date.parse(p.at), p.score] as const)
 * ```
 */
export interface Reputation {
  readonly agentId: string
  readonly score: number
  readonly tier: TrustTier
  readonly counts: { readonly [key: string]: number }
  readonly history: ReadonlyArray<{ readonly at: string; readonly score: number; readonly tier: TrustTier }>
}

/**
 * Options of `trust.reputation`.
 *
 * @example
 * ```ts
 * import type { ReputationParams } from "@agentgov/sdk"
 *
 * const params: ReputationParams = { limit: 500 }
 * ```
 */
export interface ReputationParams {
  /** How many of the latest points, 1..1000 (default 200). */
  readonly limit?: number
}

/**
 * Input of `trust.adjust`: points to add (negative to take away), −1000..1000, not 0.
 *
 * @example
 * ```ts
 * import type { AdjustmentCreateParams } from "@agentgov/sdk"
 *
 * const params: AdjustmentCreateParams = { delta: 50, reason: "passed a manual audit" }
 * ```
 */
export interface AdjustmentCreateParams {
  readonly delta: number
  readonly reason: string
}

/**
 * An operator's adjustment of a trust score.
 *
 * @example
 * ```ts
 * import type { Adjustment } from "@agentgov/sdk"
 *
 * const raised = (a: Adjustment) => a.delta > 0
 * ```
 */
export interface Adjustment {
  readonly id: string
  readonly agentId: string
  readonly delta: number
  readonly reason: string
  readonly createdAt: string
}

/**
 * A trust badge (D13): `signature` is a compact JWS that verifies against the service's JWKS.
 *
 * @example
 * ```ts
 * import type { Badge } from "@agentgov/sdk"
 *
 * const label = (b: Badge) => `${b.agentName}: ${b.tier} (${b.score})`
 * ```
 */
export interface Badge {
  readonly agentId: string
  readonly agentName: string
  readonly tier: BadgeTier
  readonly score: number
  readonly issuedAt: string
  readonly expiresAt: string
  readonly issuer: string
  /** The compliance frameworks the agent holds a certification of in force (D14), sorted. */
  readonly certifications: ReadonlyArray<ComplianceFramework>
  readonly signature: string
}

/**
 * The answer of a badge check.
 *
 * @example
 * ```ts
 * import type { BadgeVerification } from "@agentgov/sdk"
 *
 * const trusted = (v: BadgeVerification) => v.valid && v.current
 * ```
 */
export interface BadgeVerification {
  readonly valid: boolean
  readonly reason?: "malformed" | "unknown_key" | "bad_signature" | "expired" | "other_agent" | "no_badge"
  readonly agentId: string
  readonly tier: BadgeTier | null
  readonly score: number | null
  readonly issuedAt: string | null
  readonly expiresAt: string | null
  readonly current: boolean
}

/**
 * Input of `content.register` (D15): a text, or an image as base64 (JPEG, PNG or WebP, at most 20 MB
 * encoded and 40 megapixels).
 *
 * @example
 * ```ts
 * import type { ContentRegisterParams } from "@agentgov/sdk"
 *
 * const params: ContentRegisterParams = { kind: "image", title: "Hero image", data: "<base64>", watermark: true }
 * ```
 */
export interface ContentRegisterParams {
  readonly kind: "text" | "image"
  readonly title: string
  /** The text, for `kind: "text"`. */
  readonly text?: string
  /** The image, base64, for `kind: "image"`. */
  readonly data?: string
  readonly metadata?: JsonObject
  /** Embed an invisible watermark carrying the content id (still images of at least 256×256; a 422 when it does not read back). */
  readonly watermark?: boolean
  /** Sign a C2PA manifest into the asset (images). */
  readonly c2pa?: boolean
  /** The agent that produced it. */
  readonly agentId?: string
}

/**
 * How a scan found a copy.
 *
 * @example
 * ```ts
 * import type { ContentMatchMethod } from "@agentgov/sdk"
 *
 * const visual = (m: ContentMatchMethod) => m === "phash" || m === "phash-mirror"
 * ```
 */
export type ContentMatchMethod = "text-winnowing" | "text-minhash" | "phash" | "phash-mirror" | "watermark"

/**
 * A copied run of words, as UTF-16 offsets in the scanned text and in the registered one.
 *
 * @example
 * ```ts
 * import type { ContentSpan } from "@agentgov/sdk"
 *
 * const quote = (candidate: string, s: ContentSpan) => candidate.slice(s.candidate.start, s.candidate.end)
 * ```
 */
export interface ContentSpan {
  readonly candidate: { readonly start: number; readonly end: number }
  readonly registered: { readonly start: number; readonly end: number }
  readonly words: number
}

/**
 * A match of a scan; `id` is set when it was recorded (at or above threshold).
 *
 * @example
 * ```ts
 * import type { ContentMatch } from "@agentgov/sdk"
 *
 * const recorded = (m: ContentMatch) => m.id !== undefined
 * ```
 */
export interface ContentMatch {
  readonly id?: string
  readonly contentId: string
  /** 0..1: share of the registered text found, 1 − distance/64 for images, the watermark's confidence. */
  readonly similarity: number
  readonly method: ContentMatchMethod
  readonly spans?: ReadonlyArray<ContentSpan>
  /** pHash Hamming distance (images). */
  readonly distance?: number
  readonly watermark?: { readonly contentId: string; readonly confidence: number }
  readonly url?: string
  readonly createdAt?: string
}

/**
 * A registered text or image, with its fingerprint summary and (from `get`) its match history.
 *
 * @example
 * ```ts
 * import type { ContentItem } from "@agentgov/sdk"
 *
 * const marked = (c: ContentItem) => c.watermark.embedded
 * ```
 */
export interface ContentItem {
  readonly id: string
  readonly workspaceId: string
  readonly kind: "text" | "image"
  readonly title: string
  readonly mediaType: string
  /** SHA-256 of the protected asset, hex. */
  readonly sha256: string
  readonly metadata: { readonly [key: string]: unknown }
  readonly agentId: string | null
  readonly fingerprint:
    | {
        /** Window 8; "winnow-5w4-minhash64" for texts registered until 2026-11-27. */
        readonly algorithm: "winnow-5w8-minhash64" | "winnow-5w4-minhash64"
        readonly words: number
        readonly fingerprints: number
      }
    | {
        readonly algorithm: "phash64+dhash64"
        readonly phash: string
        readonly dhash: string
        readonly mirrorPhash: string
        readonly mirrorDhash: string
        readonly width: number
        readonly height: number
      }
  readonly watermark: { readonly embedded: boolean; readonly psnr?: number }
  /** `source`: the service's own credential (`issued`) or the operator's (AGENTGOV_C2PA_CERT). */
  readonly c2pa: { readonly signed: boolean; readonly source?: "issued" | "operator" }
  readonly matches?: ReadonlyArray<ContentMatch>
  readonly createdAt: string
}

/**
 * Query of `content.list`.
 *
 * @example
 * ```ts
 * import type { ContentListParams } from "@agentgov/sdk"
 *
 * const params: ContentListParams = { kind: "image", limit: 50 }
 * ```
 */
export interface ContentListParams extends ListParams {
  readonly kind?: "text" | "image"
}

/**
 * Input of `content.scan`: a candidate text or image (base64), and where it was found.
 *
 * @example
 * ```ts
 * import type { ContentScanParams } from "@agentgov/sdk"
 *
 * const params: ContentScanParams = { text: "…", url: "https://example.com/post" }
 * ```
 */
export interface ContentScanParams {
  readonly text?: string
  readonly data?: string
  readonly url?: string
}

/**
 * A scan's answer: matches best first, and whether the candidate carries a C2PA manifest.
 *
 * @example
 * ```ts
 * import type { ContentScanResult } from "@agentgov/sdk"
 *
 * const best = (r: ContentScanResult) => r.matches[0]
 * ```
 */
export interface ContentScanResult {
  readonly matches: ReadonlyArray<ContentMatch>
  /** `state`: c2pa-rs's `Invalid`, `Valid` or `Trusted`; `failures`: its codes (`assertion.dataHash.mismatch`, …). */
  readonly c2pa: {
    readonly present: boolean
    readonly valid?: boolean
    readonly state?: string
    readonly failures?: ReadonlyArray<string>
  }
}

/**
 * What `content.detectWatermark` read.
 *
 * @example
 * ```ts
 * import type { WatermarkDetection } from "@agentgov/sdk"
 *
 * const ours = (d: WatermarkDetection) => d.found && d.registered === true
 * ```
 */
export interface WatermarkDetection {
  readonly found: boolean
  readonly contentId?: string
  /** Share of the payload's blocks that agree, 0.7..1. */
  readonly confidence?: number
  /** Whether the id is an item of this workspace. */
  readonly registered?: boolean
}

/**
 * Input of `content.takedowns.create`.
 *
 * @example
 * ```ts
 * import type { TakedownCreateParams } from "@agentgov/sdk"
 *
 * const params: TakedownCreateParams = { matchId: "mch_…", targetUrl: "https://copy.example/x", recipient: "abuse@copy.example" }
 * ```
 */
export interface TakedownCreateParams {
  readonly matchId?: string
  readonly targetUrl: string
  readonly recipient: string
  readonly note?: string
}

/**
 * A takedown notice: `sent` by SMTP, `pending` when the server has no SMTP_URL (or its sending was cut short), `failed` when refused or not taken within the time-out.
 *
 * @example
 * ```ts
 * import type { Takedown } from "@agentgov/sdk"
 *
 * const delivered = (t: Takedown) => t.status === "sent"
 * ```
 */
export interface Takedown {
  readonly id: string
  readonly contentId: string
  readonly matchId: string | null
  readonly targetUrl: string
  readonly recipient: string
  readonly note: string | null
  readonly notice: string
  readonly status: "pending" | "sent" | "failed"
  readonly error: string | null
  readonly createdAt: string
  readonly sentAt: string | null
}

// ---------------------------------------------------------------------------------------------
// People (D16): users, members, invitations

/** A member's role in a workspace, each a fixed set of scopes. */
export type MemberRole = "owner" | "admin" | "member" | "viewer"

/** A person (`usr_…`). */
export interface User {
  readonly id: string
  readonly email: string
  readonly emailVerified: boolean
  readonly name: string | null
  readonly createdAt: string
}

/** `GET /users/me`: the person behind a dashboard session or an OAuth access token. */
export interface Me {
  readonly user: User
  readonly memberships: ReadonlyArray<{
    readonly workspaceId: string
    readonly workspaceName: string
    readonly plan: string
    readonly role: MemberRole
  }>
}

export interface Member {
  readonly workspaceId: string
  readonly userId: string
  readonly email: string
  readonly name: string | null
  readonly role: MemberRole
  readonly createdAt: string
  readonly updatedAt: string
}

export interface MemberUpdateParams {
  readonly role: MemberRole
}

export interface Invitation {
  readonly id: string
  readonly workspaceId: string
  readonly email: string
  readonly role: MemberRole
  readonly status: "pending" | "accepted" | "revoked" | "expired"
  readonly invitedBy: string
  readonly expiresAt: string
  readonly createdAt: string
  readonly acceptedBy: string | null
  readonly acceptedAt: string | null
}

export interface InvitationCreateParams {
  readonly email: string
  readonly role: MemberRole
}

/** `delivery: "link"`: no SMTP is configured; `link` is shown this once, pass it on yourself. */
export interface CreatedInvitation {
  readonly invitation: Invitation
  readonly delivery: "email" | "link"
  readonly link?: string
}

// ---------------------------------------------------------------------------------------------
// OAuth (D16): third-party apps and the grants people gave them

export interface OAuthClient {
  readonly id: string
  readonly workspaceId: string
  readonly name: string
  readonly type: "confidential" | "public"
  readonly redirectUris: ReadonlyArray<string>
  readonly scopes: ReadonlyArray<string>
  readonly createdAt: string
}

export interface OAuthClientCreateParams {
  readonly name: string
  /** Matched exactly at authorization and token time. */
  readonly redirectUris: ReadonlyArray<string>
  readonly type?: "confidential" | "public"
  /** Scope names the app may ask for at most (never `workspaces:admin`); default all others. */
  readonly scopes?: ReadonlyArray<string>
}

/** `clientSecret`: confidential clients only, shown this once. */
export interface CreatedOAuthClient {
  readonly client: OAuthClient
  readonly clientSecret?: string
}

export interface OAuthGrant {
  readonly id: string
  readonly clientId: string
  readonly clientName: string
  readonly userId: string
  readonly workspaceId: string
  readonly scopes: ReadonlyArray<string>
  readonly createdAt: string
}

/** A workspace at a glance, counted workspace-wide (`GET /overview`): what the dashboard's overview shows. */
export interface WorkspaceOverview {
  /** Null without `agents:read`. */
  readonly agents: {
    readonly total: number
    /** Every tier, lowest first. */
    readonly byTier: ReadonlyArray<{ readonly tier: TrustTier; readonly count: number }>
  } | null
  /** The last 24 hours, oldest first; `denied` counts denials and decisions held for approval. */
  readonly decisions: {
    readonly hours: ReadonlyArray<{ readonly hour: string; readonly allowed: number; readonly denied: number }>
  }
  /** Null without `approvals:read`. */
  readonly approvals: {
    readonly pending: number
    readonly latest: ReadonlyArray<{
      readonly id: string
      readonly action: string
      readonly agentId: string
      readonly createdAt: string
    }>
  } | null
  readonly chain: {
    readonly events: number
    readonly checkpoint: {
      readonly treeSize: number
      readonly rootHash: string
      readonly kid: string
      readonly timestamp: string
    } | null
    readonly lastVerification: {
      readonly valid: boolean
      readonly checked: number
      readonly firstBadSequence: number | null
      readonly reason: string | null
      readonly verifiedAt: string
    } | null
  }
}
