import type {
  AgentDeregistered,
  AgentNameTaken,
  AgentNotFound,
  AgentVersionExists,
  ApiKeyNotFound,
  ApiKeyNotRotatable,
  ApprovalNotFound,
  ApprovalNotPending,
  ApproverNotListed,
  BadgeNotFound,
  CertificationNotFound,
  CertificationRefused,
  ChainInconsistent,
  CheckpointNotFound,
  ContentNotFound,
  EnforcementAlreadyAppealed,
  EnforcementClosed,
  EnforcementNotFound,
  EventNotFound,
  ExportBusy,
  GuardBusy,
  IdempotencyKeyReused,
  InvalidCursor,
  InvalidInput,
  InvitationLimitReached,
  InvitationNotFound,
  InvitationTokenUnknown,
  MemberNotFound,
  OAuthClientNotFound,
  OAuthGrantNotFound,
  PermissionDenied,
  PolicyInvalid,
  PolicyNameTaken,
  PolicyNotFound,
  ReportNotFound,
  SignInRefused,
  StateConflict,
  TakedownLimitReached,
  Unauthenticated,
  UserNotFound,
  WebhookNotFound,
  WorkspaceNotFound,
} from "@agentgov/domain"

/** The error envelope's `error` member, with the HTTP status it travels with. */
export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly details: { readonly field: string; readonly issue: string } | undefined
  readonly headers: Readonly<Record<string, string>> | undefined

  constructor(
    status: number,
    code: string,
    message: string,
    details?: { field: string; issue: string },
    headers?: Record<string, string>,
  ) {
    super(message)
    this.status = status
    this.code = code
    this.details = details
    this.headers = headers
  }

  toJSON() {
    return { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) }
  }
}

/** Every error a domain operation may fail with. A new one must be mapped below, or this file stops compiling. */
export type DomainError =
  | AgentDeregistered
  | AgentNameTaken
  | AgentNotFound
  | AgentVersionExists
  | ApiKeyNotFound
  | ApiKeyNotRotatable
  | ApprovalNotFound
  | ApprovalNotPending
  | ApproverNotListed
  | BadgeNotFound
  | ChainInconsistent
  | ContentNotFound
  | TakedownLimitReached
  | CheckpointNotFound
  | EnforcementAlreadyAppealed
  | EnforcementClosed
  | EnforcementNotFound
  | EventNotFound
  | ExportBusy
  | CertificationNotFound
  | CertificationRefused
  | GuardBusy
  | IdempotencyKeyReused
  | InvalidCursor
  | InvalidInput
  | InvitationLimitReached
  | InvitationNotFound
  | InvitationTokenUnknown
  | MemberNotFound
  | OAuthClientNotFound
  | OAuthGrantNotFound
  | PermissionDenied
  | PolicyInvalid
  | PolicyNameTaken
  | PolicyNotFound
  | ReportNotFound
  | SignInRefused
  | StateConflict
  | UserNotFound
  | Unauthenticated
  | WebhookNotFound
  | WorkspaceNotFound

type Mapping = { readonly [K in DomainError["_tag"]]: (e: Extract<DomainError, { _tag: K }>) => ApiError }

const mapping: Mapping = {
  AgentNotFound: (e) => new ApiError(404, "AGENT_NOT_FOUND", `agent ${e.agentId} not found`),
  AgentNameTaken: (e) =>
    new ApiError(409, "CONFLICT", `an agent named "${e.name}" is already registered`, {
      field: "name",
      issue: "already taken",
    }),
  AgentVersionExists: (e) =>
    new ApiError(409, "CONFLICT", `version "${e.version}" of agent ${e.agentId} already exists`, {
      field: "version",
      issue: "already exists",
    }),
  AgentDeregistered: (e) => new ApiError(409, "AGENT_DEREGISTERED", `agent ${e.agentId} is deregistered`),
  ApiKeyNotFound: (e) => new ApiError(404, "API_KEY_NOT_FOUND", `API key ${e.keyId} not found`),
  ApiKeyNotRotatable: (e) =>
    new ApiError(409, "API_KEY_NOT_ROTATABLE", `API key ${e.keyId} cannot be rotated: ${e.reason}`),
  ApprovalNotFound: (e) => new ApiError(404, "APPROVAL_NOT_FOUND", `approval ${e.approvalId} not found`),
  ApprovalNotPending: (e) =>
    new ApiError(
      409,
      "APPROVAL_NOT_PENDING",
      e.status === "expired"
        ? `approval ${e.approvalId} expired undecided (it counts as denied)`
        : `approval ${e.approvalId} was already ${e.status}`,
    ),
  ApproverNotListed: (e) =>
    new ApiError(403, "FORBIDDEN", `approval ${e.approvalId} can be decided only by the approvers it names`, {
      field: "approvers",
      issue: "this credential is not one of the approvers",
    }),
  BadgeNotFound: (e) => new ApiError(404, "BADGE_NOT_FOUND", `agent ${e.agentId} holds no badge`),
  EnforcementNotFound: (e) => new ApiError(404, "ENFORCEMENT_NOT_FOUND", `enforcement ${e.enforcementId} not found`),
  EnforcementClosed: (e) => new ApiError(409, "ENFORCEMENT_CLOSED", e.message),
  EnforcementAlreadyAppealed: (e) =>
    new ApiError(409, "ENFORCEMENT_ALREADY_APPEALED", `enforcement ${e.enforcementId} was already appealed`),
  CheckpointNotFound: (e) =>
    new ApiError(404, "CHECKPOINT_NOT_FOUND", `no checkpoint of tree size ${e.treeSize}`, {
      field: e.field ?? "treeSize",
      issue: "no checkpoint of this size",
    }),
  ChainInconsistent: (e) =>
    new ApiError(
      409,
      "CHAIN_INCONSISTENT",
      `the audit chain no longer matches signed checkpoint ${e.treeSize} (from sequence ${e.firstBadSequence}): ${e.reason}. Nothing is signed or proven over it; the conflict is recorded (POST /events/verify reports it)`,
    ),
  ContentNotFound: (e) => new ApiError(404, "CONTENT_NOT_FOUND", `content ${e.contentId} not found`),
  TakedownLimitReached: (e) =>
    new ApiError(
      429,
      "RATE_LIMITED",
      `this workspace has submitted ${e.limit} takedown notices in the last 24 hours, its limit; retry after ` +
        `${e.retryAfterSeconds} s (nothing was recorded or sent)`,
      undefined,
      { "retry-after": String(e.retryAfterSeconds) },
    ),
  InvitationLimitReached: (e) =>
    new ApiError(
      429,
      "RATE_LIMITED",
      `this workspace has sent ${e.limit} invitations in the last 24 hours, its limit; retry after ` +
        `${e.retryAfterSeconds} s (nothing was recorded or sent)`,
      undefined,
      { "retry-after": String(e.retryAfterSeconds) },
    ),
  ReportNotFound: (e) => new ApiError(404, "REPORT_NOT_FOUND", `compliance report ${e.reportId} not found`),
  CertificationNotFound: (e) =>
    new ApiError(404, "CERTIFICATION_NOT_FOUND", `certification ${e.certificationId} not found`),
  CertificationRefused: (e) =>
    new ApiError(
      409,
      "CERTIFICATION_REFUSED",
      e.message,
      e.unmetControls.length > 0 ? { field: "reportId", issue: `unmet: ${e.unmetControls.join(", ")}` } : undefined,
    ),
  EventNotFound: (e) => new ApiError(404, "EVENT_NOT_FOUND", `event ${e.eventId} not found`),
  ExportBusy: (e) =>
    new ApiError(
      429,
      "RATE_LIMITED",
      `${e.per === "workspace" ? "this workspace" : "the server"} is already building ${e.limit} audit exports, its ` +
        `limit; retry after ${e.retryAfterSeconds} s`,
      undefined,
      { "retry-after": String(e.retryAfterSeconds) },
    ),
  GuardBusy: (e) =>
    new ApiError(
      429,
      "RATE_LIMITED",
      `this workspace already has ${e.waiting} costly guard calls waiting to be evaluated; retry after ` +
        `${e.retryAfterSeconds} s (nothing was evaluated or recorded)`,
      undefined,
      { "retry-after": String(e.retryAfterSeconds) },
    ),
  IdempotencyKeyReused: () =>
    new ApiError(
      409,
      "IDEMPOTENCY_KEY_REUSED",
      "this Idempotency-Key was used with a different request or credential",
      {
        field: "Idempotency-Key",
        issue: "reused with a different request or credential",
      },
    ),
  WebhookNotFound: (e) => new ApiError(404, "WEBHOOK_NOT_FOUND", `webhook ${e.webhookId} not found`),
  WorkspaceNotFound: (e) => new ApiError(404, "WORKSPACE_NOT_FOUND", `workspace ${e.workspaceId} not found`),
  InvalidCursor: () =>
    new ApiError(400, "BAD_REQUEST", "cursor is not valid", { field: "cursor", issue: "not a cursor of this list" }),
  InvalidInput: (e) =>
    new ApiError(422, "VALIDATION_ERROR", `${e.field}: ${e.message}`, { field: e.field, issue: e.message }),
  PermissionDenied: (e) =>
    new ApiError(
      403,
      "FORBIDDEN",
      e.message,
      e.field !== undefined
        ? { field: e.field, issue: e.issue ?? e.message }
        : e.scope
          ? { field: "scope", issue: `requires ${e.scope}` }
          : { field: "agentId", issue: "outside this credential's agent" },
    ),
  PolicyInvalid: (e) =>
    new ApiError(
      422,
      "VALIDATION_ERROR",
      e.issues.length > 1
        ? `${e.field}: ${e.issue} (and ${e.issues.length - 1} more: ${e.issues
            .slice(1, 6)
            .map((i) => `${i.field}: ${i.issue}`)
            .join("; ")})`
        : `${e.field}: ${e.issue}`,
      { field: e.field, issue: e.issue },
    ),
  PolicyNameTaken: (e) =>
    new ApiError(409, "POLICY_NAME_TAKEN", `a policy named "${e.name}" already exists`, {
      field: "name",
      issue: "already taken",
    }),
  PolicyNotFound: (e) => new ApiError(404, "POLICY_NOT_FOUND", `policy ${e.policyId} not found`),
  StateConflict: (e) => new ApiError(409, e.code, e.message),
  MemberNotFound: (e) => new ApiError(404, "MEMBER_NOT_FOUND", `member ${e.userId} not found`),
  InvitationNotFound: (e) => new ApiError(404, "INVITATION_NOT_FOUND", `invitation ${e.invitationId} not found`),
  SignInRefused: (e) => new ApiError(403, e.code, e.message),
  InvitationTokenUnknown: () => new ApiError(404, "INVITATION_NOT_FOUND", "no invitation has this token"),
  UserNotFound: () =>
    new ApiError(
      404,
      "USER_NOT_FOUND",
      "no person behind this credential: an API key acts for a workspace, not a user",
    ),
  OAuthClientNotFound: (e) => new ApiError(404, "OAUTH_CLIENT_NOT_FOUND", `OAuth client ${e.clientId} not found`),
  OAuthGrantNotFound: (e) => new ApiError(404, "OAUTH_GRANT_NOT_FOUND", `OAuth grant ${e.grantId} not found`),
  Unauthenticated: (e) => new ApiError(401, "UNAUTHORIZED", e.message),
}

export const toApiError = (e: DomainError): ApiError => (mapping[e._tag] as (e: DomainError) => ApiError)(e)

export const internalError = () => new ApiError(500, "INTERNAL_ERROR", "internal error")

/**
 * The database could not be reached (down, restarting, the connection lost), or a lock the request needed was held
 * elsewhere for longer than the store's lock time-out: retried by the client after a moment. Whether a write that was
 * under way when the connection went was stored is not known: retried with the same Idempotency-Key (as the SDK
 * sends), it is stored once.
 */
export const storeUnavailable = () =>
  new ApiError(
    503,
    "STORE_UNAVAILABLE",
    "the database cannot serve this now; try again in a moment (a write with the same Idempotency-Key)",
    undefined,
    { "retry-after": "1" },
  )

/** A write that raced its workspace's deletion: it wrote nothing, and the workspace's credentials are 401 from then on. */
export const workspaceDeleted = () =>
  new ApiError(401, "UNAUTHORIZED", "the credential's workspace was deleted; nothing was recorded")

/** `rules[2].when.all[0].op` from ["rules", 2, "when", "all", 0, "op"]. */
export const formatPath = (path: ReadonlyArray<PropertyKey | { key: PropertyKey }>): string => {
  let out = ""
  for (const seg of path) {
    const key = typeof seg === "object" && seg !== null ? seg.key : seg
    if (typeof key === "number") out += `[${key}]`
    else out += out === "" ? String(key) : `.${String(key)}`
  }
  return out
}
