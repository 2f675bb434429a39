import { Schema } from "effect"
import type { RevokeReason } from "../apikeys/ApiKeyRepo.ts"
import { Role as MemberRole } from "../people/roles.ts"
import { DateTime } from "../shared/schemas.ts"
import { RetryPolicy, UPDATABLE_WEBHOOK_FIELDS } from "../webhooks/Webhook.ts"
import { Environment, GuardDefault, Plan } from "../workspaces/Workspace.ts"

/**
 * The system's own event names: the spec's catalog plus the project's
 * additions (docs/decisions.md). Clients cannot ingest these names (D8). Each
 * says which operation emits it and, as a schema, what its `data` holds: the
 * contract of the event stream, the webhooks and the connectors. Events of
 * features not built yet carry the data those features must emit.
 *
 * The schemas describe exactly what is emitted; receivers should still ignore
 * fields they do not know, as fields may be added.
 */
export interface EventDefinition {
  readonly description: string
  readonly emittedBy: string
  /** The schema of the event's `data`: a struct, JSON-Schema-able, needing no services. */
  readonly data: EventDataSchema
  /**
   * `agent`: an agent-bound credential may ingest it, for its own agent only, with `data` that matches the
   * schema (`data.agentId` naming that agent). The MCP gateway reports what it did this way: the service
   * did not see the tool call, the event is the gateway's word, attributed to the agent's key.
   */
  readonly reportedBy?: "agent"
}

/** A `data` schema of the catalog. */
export type EventDataSchema = Schema.Codec<any, any>

// ---------------------------------------------------------------------------------------------
// Shared pieces

const AgentId = Schema.String.annotate({ description: "the agent's id (`agt_…`)" })
const AgentName = Schema.String.annotate({ description: "the agent's name at the time of the event" })
const Action = Schema.String.annotate({ description: "the action name evaluated, as the agent sent it" })
const Score = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1000 }))
/** A timestamp field shown as `format: date-time` with its description. */
const At = (description: string) => DateTime(description)

/** D14: the frameworks of compliance reports. */
const ComplianceFramework = Schema.Literals(["eu-ai-act", "gdpr", "soc2"])

/** D6: the guard's outcome. */
const Decision = Schema.Literals(["allow", "deny", "require_approval"])
/** D6: a rule's effect. */
const RuleEffect = Schema.Literals(["allow", "deny", "require_approval"])
/** D6: `monitor` policies never change the decision; their matches are recorded. */
const PolicyMode = Schema.Literals(["enforce", "monitor"])

/** D6: one matched rule, as in the guard's response. */
const PolicyMatch = Schema.Struct({
  policyId: Schema.String.annotate({ description: "`pol_…`" }),
  ruleId: Schema.String.annotate({ description: "the rule's id within its policy" }),
  effect: RuleEffect,
  policyVersion: Schema.optionalKey(Schema.Int.annotate({ description: "the version of the policy that matched" })),
  mode: Schema.optionalKey(PolicyMode),
})

/** Policies (D6): what a saved version looks like in the audit trail. */
const PolicySummary = {
  policyId: Schema.String.annotate({ description: "`pol_…`" }),
  name: Schema.String,
  version: Schema.Int.annotate({ description: "the version saved (1 at creation); for a deletion, the last one" }),
  mode: PolicyMode,
  enabled: Schema.Boolean,
  rules: Schema.Int.annotate({ description: "how many rules it has" }),
}

/** D6: one reason of a decision, as in the guard's response. */
const GuardReason = Schema.Struct({
  code: Schema.String.annotate({
    description: "UPPER_SNAKE reason code, e.g. `NO_MATCHING_POLICY`, `AGENT_SUSPENDED`, `AGENT_DEREGISTERED`",
  }),
  message: Schema.String,
  policyId: Schema.optionalKey(Schema.String),
  ruleId: Schema.optionalKey(Schema.String),
})

/** D7. */
const EnforcementId = Schema.String.annotate({ description: "the enforcement's id (`enf_…`)" })
const EnforcementType = Schema.Literals(["warning", "throttle", "suspension", "revocation"]).annotate({
  description: "a suspension suspends the agent; a revocation also revokes its keys",
})
const ApprovalId = Schema.String.annotate({ description: "the approval's id (`apr_…`)" })

/** D11: 0–1000 in six tiers. */
const TrustTier = Schema.Literals(["untrusted", "probation", "bronze", "silver", "gold", "platinum"])
/** D11: a badge exists from `bronze` up. */
const BadgeTier = Schema.Literals(["bronze", "silver", "gold", "platinum"])

const ContentId = Schema.String.annotate({ description: "the content item's id (`cnt_…`)" })

const AGENT_CHANGES = ["name", "description", "labels", "metadata", "currentVersion"] as const
const WORKSPACE_CHANGES = ["name", "plan", "guardDefault"] as const
/** Why `oauth.grant.revoked` was recorded (a deleted client, a removed member: their own events say so). */
export const OAUTH_GRANT_REVOKE_REASONS = [
  "revoked",
  "revoked_by_client",
  "code_reused",
  "refresh_token_reused",
] as const

/** What `apikey.revoked` can say; a deleted workspace records `workspace.deleted` with a count instead. */
const EVENT_REVOKE_REASONS = [
  "revoked",
  "expired",
  "rotated",
  "agent_deregistered",
  "agent_revoked",
  "member_removed",
] as const satisfies ReadonlyArray<RevokeReason>

/** Webhooks (D9): never the secret, and of the URL only its origin. */
const WebhookId = Schema.String.annotate({ description: "the webhook's id (`whk_…`)" })
const WebhookOrigin = Schema.String.annotate({
  description:
    "the scheme, host and port of the webhook's URL; its path and query are left out, as they often carry the receiver's own credentials",
})
const WebhookFilters = Schema.Array(Schema.String).annotate({ description: "the event filters, as registered" })

/** MCP gateway (@agentgov/mcp-gateway): what it reports, under the agent's key. */
const McpServer = Schema.String.annotate({
  description: "the MCP server's name, as in the action `mcp.<server>.<tool>`",
})
const McpTool = Schema.String.annotate({ description: "the tool's name on that server" })
const McpAction = Schema.String.annotate({ description: "`mcp.<server>.<tool>`: the action the guard evaluated" })
const McpFindingKind = Schema.Literals([
  "instructions",
  "hidden_unicode",
  "definition_changed",
  "duplicate_name",
  "too_deep",
]).annotate({
  description:
    "`instructions`: the definition addresses the model; `hidden_unicode`: invisible or bidirectional characters; `definition_changed`: not the definition first seen (a rug pull); `duplicate_name`: the server lists the tool more than once; `too_deep`: nested deeper than the scanner reads",
})
const McpRedaction = Schema.Struct({
  kind: Schema.Literals(["credential", "url"]),
  rule: Schema.String.annotate({
    description: "the pattern that matched (`aws_access_key`, `github_token`, …) or the URL's host",
  }),
  count: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
})
/** Which call an MCP event is about. */
const McpCall = { agentId: AgentId, server: McpServer, tool: McpTool, action: McpAction }
const NonNegative = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

// ---------------------------------------------------------------------------------------------

export const SYSTEM_EVENTS = {
  "agent.registered": {
    description: "new agent registered",
    emittedBy: "POST /agents",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName,
      trustScore: Score.annotate({ description: "the initial trust score, 0..1000" }),
    }),
  },
  "agent.updated": {
    description: "agent metadata or configuration changed",
    emittedBy: "PATCH /agents/:id, POST /agents/:id/versions",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName.annotate({ description: "the agent's name after the change" }),
      changes: Schema.Array(Schema.Literals(AGENT_CHANGES)).annotate({
        description: "the fields that changed; `[currentVersion]` for a new version",
      }),
      version: Schema.optionalKey(Schema.String).annotate({ description: "the new version; for a new version only" }),
      versionId: Schema.optionalKey(Schema.String).annotate({
        description: "the new version's id (`ver_…`); for a new version only",
      }),
      previousVersion: Schema.optionalKey(Schema.NullOr(Schema.String)).annotate({
        description: "the version it replaced, null for the first; for a new version only",
      }),
    }),
  },
  "agent.deregistered": {
    description: "agent deregistered (soft); its keys are revoked",
    emittedBy: "DELETE /agents/:id, DELETE /workspaces/:id (each of its agents)",
    data: Schema.Struct({ agentId: AgentId, agentName: AgentName }),
  },
  "agent.suspended": {
    description: "agent suspended due to enforcement",
    emittedBy: "POST /enforcement (suspension or revocation of an active agent), automatic enforcement",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName,
      enforcementId: EnforcementId.annotate({ description: "the suspension that suspended it (`enf_…`)" }),
      reason: Schema.String.annotate({ description: "the enforcement's reason" }),
      expiresAt: Schema.optionalKey(At("when the suspension ends, if it does")),
    }),
  },
  "policy.evaluated": {
    description: "policy check completed",
    emittedBy: "POST /guard, POST /policies/evaluate",
    data: Schema.Struct({
      agentId: AgentId,
      action: Action,
      decision: Decision,
      allowed: Schema.Boolean.annotate({ description: "whether the action may proceed now" }),
      matched: Schema.Array(PolicyMatch).annotate({
        description: "every matched rule, `monitor` policies included",
      }),
      reasons: Schema.Array(GuardReason).annotate({ description: "why, as in the guard's response" }),
      approvalId: Schema.optionalKey(ApprovalId).annotate({
        description: "the approval created (`require_approval`) or consumed by this call (`apr_…`)",
      }),
      durationMs: Schema.optionalKey(
        Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)).annotate({ description: "evaluation time" }),
      ),
    }),
  },
  "policy.created": {
    description: "policy created (a project addition to the spec's catalog: every state change is recorded, D8)",
    emittedBy: "POST /policies",
    data: Schema.Struct(PolicySummary),
  },
  "policy.updated": {
    description: "policy changed: a new version (project addition)",
    emittedBy: "PATCH /policies/:id",
    data: Schema.Struct({
      ...PolicySummary,
      previousVersion: Schema.Int,
      changes: Schema.Array(Schema.String).annotate({ description: "the document fields the update named" }),
    }),
  },
  "policy.deleted": {
    description: "policy deleted; its versions stay on record (project addition)",
    emittedBy: "DELETE /policies/:id",
    data: Schema.Struct(PolicySummary),
  },
  "policy.denied": {
    description: "action blocked by policy",
    emittedBy: "POST /guard, POST /policies/evaluate",
    data: Schema.Struct({
      agentId: AgentId,
      action: Action,
      matched: Schema.Array(PolicyMatch).annotate({
        description: "the matched rules; empty when the workspace default or the agent's status denied",
      }),
      reasons: Schema.Array(GuardReason).annotate({ description: "why it was denied" }),
    }),
  },
  "policy.violated": {
    description: "agent action violated a policy rule",
    emittedBy: "POST /guard, POST /policies/evaluate (a deny, or a matched rule of a monitor policy)",
    data: Schema.Struct({
      agentId: AgentId,
      action: Action,
      decision: Decision.annotate({
        description: "the guard's decision; a violation of `monitor` policies alone leaves it unchanged",
      }),
      violations: Schema.Array(
        Schema.Struct({
          code: Schema.String.annotate({ description: "reason code, as in the guard's `reasons`" }),
          message: Schema.String,
          policyId: Schema.optionalKey(Schema.String),
          ruleId: Schema.optionalKey(Schema.String),
          effect: Schema.optionalKey(RuleEffect),
          mode: Schema.optionalKey(PolicyMode).annotate({
            description: "`monitor`: recorded only, the decision did not change",
          }),
        }),
      ).annotate({ description: "one entry per violated rule (or the deny without a rule)" }),
    }),
  },
  "enforcement.created": {
    description: "enforcement action applied",
    emittedBy: "POST /enforcement, automatic enforcement by a policy rule",
    data: Schema.Struct({
      enforcementId: EnforcementId,
      agentId: AgentId,
      type: EnforcementType,
      status: Schema.Literal("active"),
      reason: Schema.String.annotate({ description: "why the enforcement was applied" }),
      policyId: Schema.optionalKey(Schema.String).annotate({ description: "the policy that led to it, if any" }),
      ruleId: Schema.optionalKey(Schema.String).annotate({ description: "the rule that led to it, if any" }),
      limitPerMinute: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))).annotate({
        description: "a throttle's requests per minute",
      }),
      expiresAt: Schema.optionalKey(At("when it expires, if it does")),
    }),
  },
  "enforcement.updated": {
    description: "enforcement's reason or expiry changed",
    emittedBy: "PATCH /enforcement/:id (reason, expiresAt, durationSeconds)",
    data: Schema.Struct({
      enforcementId: EnforcementId,
      agentId: AgentId,
      type: EnforcementType,
      changes: Schema.Array(Schema.Literals(["reason", "expiresAt"])).annotate({
        description: "the fields that changed; each also appears with its new value",
      }),
      reason: Schema.optionalKey(Schema.String).annotate({ description: "the new reason, when changed" }),
      expiresAt: Schema.optionalKey(Schema.NullOr(At("the new expiry, when changed"))).annotate({
        description: "the new expiry, when changed; null: until resolved",
      }),
    }),
  },
  "enforcement.appealed": {
    description: "agent appealed an enforcement",
    emittedBy: "POST /enforcement/:id/appeal",
    data: Schema.Struct({
      enforcementId: EnforcementId,
      agentId: AgentId,
      type: EnforcementType,
      status: Schema.Literal("appealed"),
      reason: Schema.String.annotate({ description: "the grounds of the appeal" }),
    }),
  },
  "enforcement.resolved": {
    description: "enforcement resolved or expired",
    emittedBy: "PATCH /enforcement/:id (resolution), expiry",
    data: Schema.Struct({
      enforcementId: EnforcementId,
      agentId: AgentId,
      type: EnforcementType,
      status: Schema.Literals(["resolved", "expired"]),
      resolution: Schema.optionalKey(Schema.Literals(["upheld", "overturned"])).annotate({
        description: "present when resolved by an operator; `overturned` lifts it at once",
      }),
      reason: Schema.optionalKey(Schema.String).annotate({ description: "the operator's note" }),
      reinstated: Schema.Boolean.annotate({
        description:
          "whether the agent went back to `active` because of this (the last suspension or revocation in force was lifted)",
      }),
    }),
  },
  "approval.requested": {
    description: "operator approval needed",
    emittedBy: "POST /guard, POST /approvals",
    data: Schema.Struct({
      approvalId: ApprovalId,
      agentId: AgentId,
      action: Action,
      status: Schema.Literal("pending"),
      expiresAt: At("undecided by then, it is denied (default 1 h)"),
      policyId: Schema.optionalKey(Schema.String).annotate({ description: "the rule's policy, from a guard call" }),
      ruleId: Schema.optionalKey(Schema.String).annotate({ description: "the `require_approval` rule" }),
      reason: Schema.optionalKey(Schema.String).annotate({ description: "the rule's or the requester's reason" }),
      approvers: Schema.optionalKey(Schema.Array(Schema.String)).annotate({
        description: "who may decide, as the rule names them",
      }),
    }),
  },
  "approval.decided": {
    description: "approval approved or denied",
    emittedBy: "POST /approvals/:id/decide, expiry",
    data: Schema.Struct({
      approvalId: ApprovalId,
      agentId: AgentId,
      action: Action,
      decision: Schema.Literals(["approved", "denied"]),
      expired: Schema.Boolean.annotate({ description: "nobody decided in time, so it was denied" }),
      decidedBy: Schema.optionalKey(Schema.String).annotate({
        description: "the credential that decided; absent on expiry",
      }),
      reason: Schema.optionalKey(Schema.String).annotate({ description: "the decider's reason" }),
    }),
  },
  "trust.score.changed": {
    description: "trust score updated",
    emittedBy: "trust scoring",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName,
      previousScore: Score,
      newScore: Score,
      delta: Schema.Int.annotate({ description: "newScore − previousScore" }),
      reason: Schema.String.annotate({ description: "what moved the score" }),
      newTier: TrustTier,
    }),
  },
  "trust.score.adjusted": {
    description: "an operator adjusted an agent's trust score (a project addition: D12 audits adjustments)",
    emittedBy: "POST /trust/score/:agentId/adjustments",
    data: Schema.Struct({
      adjustmentId: Schema.String.annotate({ description: "the adjustment's id (`adj_…`)" }),
      agentId: AgentId,
      agentName: AgentName,
      delta: Schema.Int.annotate({ description: "points added to the score (negative: taken away)" }),
      reason: Schema.String.annotate({ description: "the operator's reason" }),
    }),
  },
  "trust.tier.upgraded": {
    description: "promoted to a higher badge tier",
    emittedBy: "trust scoring",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName,
      previousTier: TrustTier,
      newTier: TrustTier,
      score: Score.annotate({ description: "the score that crossed the threshold" }),
    }),
  },
  "trust.tier.downgraded": {
    description: "demoted to a lower badge tier",
    emittedBy: "trust scoring",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName,
      previousTier: TrustTier,
      newTier: TrustTier,
      score: Score.annotate({ description: "the score that crossed the threshold" }),
    }),
  },
  "content.registered": {
    description: "content registered for protection",
    emittedBy: "POST /content",
    data: Schema.Struct({
      contentId: ContentId,
      mediaType: Schema.String.annotate({ description: "MIME type, e.g. `image/png`" }),
      fingerprint: Schema.String.annotate({ description: "`<algorithm>:<hex>`" }),
      watermarked: Schema.Boolean,
      c2pa: Schema.Boolean.annotate({ description: "whether C2PA provenance data was registered" }),
      agentId: Schema.optionalKey(AgentId).annotate({ description: "the agent that produced it, if any" }),
    }),
  },
  "content.match.detected": {
    description: "potential infringement detected",
    emittedBy: "POST /content/scan, POST /content/:id/scan",
    data: Schema.Struct({
      contentId: ContentId.annotate({ description: "the registered content that was matched (`cnt_…`)" }),
      matchId: Schema.String,
      similarity: Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })).annotate({
        description: "0..1",
      }),
      url: Schema.optionalKey(Schema.String).annotate({ description: "where the match was found" }),
      matchedContentId: Schema.optionalKey(Schema.String).annotate({
        description: "the other registered content it matched, if any",
      }),
      method: Schema.optionalKey(
        Schema.Literals(["text-winnowing", "text-minhash", "phash", "phash-mirror", "watermark"]),
      ).annotate({ description: "how it was found" }),
    }),
  },
  "content.takedown.submitted": {
    description: "takedown recorded, before its notice is sent (it stays pending when no SMTP server is configured)",
    emittedBy: "POST /content/:id/takedowns",
    data: Schema.Struct({
      contentId: ContentId,
      takedownId: Schema.String,
      url: Schema.String.annotate({ description: "the infringing location" }),
      matchId: Schema.optionalKey(Schema.String).annotate({ description: "the match it answers, if any" }),
    }),
  },
  "badge.earned": {
    description: "trust badge awarded",
    emittedBy: "trust scoring",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName,
      tier: BadgeTier,
      score: Score,
    }),
  },
  "badge.revoked": {
    description: "trust badge removed",
    emittedBy: "trust scoring, suspension",
    data: Schema.Struct({
      agentId: AgentId,
      agentName: AgentName,
      tier: BadgeTier.annotate({ description: "the tier of the badge removed" }),
      reason: Schema.Literals(["tier_below_bronze", "agent_suspended", "agent_deregistered"]),
    }),
  },
  "workspace.created": {
    description: "workspace created",
    emittedBy: "POST /workspaces, first start, CLI",
    data: Schema.Struct({
      workspaceId: Schema.String.annotate({ description: "`ws_…`" }),
      name: Schema.String,
      environment: Environment,
      plan: Plan,
    }),
  },
  "workspace.updated": {
    description: "workspace settings changed",
    emittedBy: "PATCH /workspaces/:id",
    data: Schema.Struct({
      workspaceId: Schema.String,
      changes: Schema.Array(Schema.Literals(WORKSPACE_CHANGES)).annotate({
        description: "the fields that changed; each also appears with its new value",
      }),
      name: Schema.optionalKey(Schema.String).annotate({ description: "the new name, when changed" }),
      plan: Schema.optionalKey(Plan).annotate({ description: "the new plan, when changed" }),
      guardDefault: Schema.optionalKey(GuardDefault).annotate({
        description: "the new guard default, when changed",
      }),
    }),
  },
  "workspace.deleted": {
    description: "workspace deleted (soft); its keys are revoked",
    emittedBy: "DELETE /workspaces/:id",
    data: Schema.Struct({
      workspaceId: Schema.String,
      name: Schema.String,
      revokedKeys: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
        description: "how many active keys were revoked (no `apikey.revoked` for each)",
      }),
    }),
  },
  "apikey.created": {
    description: "API key created",
    emittedBy: "POST /api-keys, POST /api-keys/:id/rotate, POST /workspaces, first start, CLI",
    data: Schema.Struct({
      keyId: Schema.String.annotate({ description: "`key_…`" }),
      name: Schema.String,
      type: Schema.Literals(["workspace", "agent"]).annotate({
        description: "an agent key's agent is the event's `agentId`",
      }),
      prefix: Schema.String.annotate({ description: "the 6-character lookup prefix" }),
      scopes: Schema.Array(Schema.String).annotate({ description: "scope names" }),
    }),
  },
  "apikey.revoked": {
    description: "API key revoked",
    emittedBy:
      "DELETE /api-keys/:id, expiry, rotation, agent deregistration, the removal of the member who made the key",
    data: Schema.Struct({
      keyId: Schema.String,
      name: Schema.String,
      prefix: Schema.String,
      reason: Schema.Literals(EVENT_REVOKE_REASONS),
    }),
  },
  "apikey.rotated": {
    description: "API key replaced by a new one",
    emittedBy: "POST /api-keys/:id/rotate",
    data: Schema.Struct({
      keyId: Schema.String.annotate({ description: "the old key" }),
      newKeyId: Schema.String.annotate({ description: "the replacement" }),
      overlapSeconds: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
        description: "how long the old key keeps working; 0 revoked it at once",
      }),
    }),
  },
  "member.invited": {
    description: "a person invited to the workspace by e-mail",
    emittedBy: "POST /workspaces/:id/invitations",
    data: Schema.Struct({
      invitationId: Schema.String.annotate({ description: "`inv_…`" }),
      email: Schema.String,
      role: MemberRole,
      expiresAt: At("when the invitation link stops working"),
    }),
  },
  "invitation.revoked": {
    description: "a pending invitation withdrawn",
    emittedBy:
      "DELETE /workspaces/:id/invitations/:invitationId, the removal of the member who sent it (in the dashboard, with a key they made, or through an app)",
    data: Schema.Struct({ invitationId: Schema.String, email: Schema.String, role: MemberRole }),
  },
  "member.joined": {
    description: "an invited person accepted and became a member",
    emittedBy: "POST /invitations/accept",
    data: Schema.Struct({
      userId: Schema.String.annotate({ description: "`usr_…`" }),
      email: Schema.String,
      role: MemberRole,
      invitationId: Schema.String,
    }),
  },
  "member.role_changed": {
    description: "a member's role changed",
    emittedBy: "PATCH /workspaces/:id/members/:userId",
    data: Schema.Struct({ userId: Schema.String, email: Schema.String, from: MemberRole, to: MemberRole }),
  },
  "member.signin_link_created": {
    description:
      "the operator made a one-time dashboard sign-in link for an owner; any earlier unused link of theirs stopped working",
    emittedBy: "npm run cli -- signin-link",
    data: Schema.Struct({
      userId: Schema.String.annotate({ description: "`usr_…`: the owner the link signs in" }),
      email: Schema.String,
      expiresAt: At("when the link stops working, if unused"),
    }),
  },
  "member.removed": {
    description: "a member removed, or left; their sessions and OAuth tokens stop acting in the workspace at once",
    emittedBy: "DELETE /workspaces/:id/members/:userId",
    data: Schema.Struct({
      userId: Schema.String,
      email: Schema.String,
      role: MemberRole.annotate({ description: "the role they held" }),
      left: Schema.Boolean.annotate({ description: "true when the member removed themselves" }),
    }),
  },
  "oauth.client.created": {
    description: "a third-party app registered in the workspace (its secret, if any, is shown once and never recorded)",
    emittedBy: "POST /oauth/clients",
    data: Schema.Struct({
      clientId: Schema.String.annotate({ description: "`oac_…`" }),
      name: Schema.String,
      type: Schema.Literals(["confidential", "public"]),
      redirectUris: Schema.Array(Schema.String),
      scopes: Schema.Array(Schema.String).annotate({ description: "the scopes the app may ask for" }),
    }),
  },
  "oauth.client.deleted": {
    description: "a third-party app deleted; every grant to it is revoked and its tokens stop at once",
    emittedBy: "DELETE /oauth/clients/:id",
    data: Schema.Struct({
      clientId: Schema.String,
      name: Schema.String,
      revokedGrants: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
        description: "how many active grants were revoked (no `oauth.grant.revoked` for each)",
      }),
    }),
  },
  "oauth.grant.created": {
    description: "a member authorised a third-party app to act for them in the workspace (the consent screen)",
    emittedBy: "POST /oauth/authorize",
    data: Schema.Struct({
      grantId: Schema.String.annotate({ description: "`grt_…`" }),
      clientId: Schema.String,
      clientName: Schema.String,
      userId: Schema.String.annotate({ description: "`usr_…`: the member who consented (also the event's actor)" }),
      scopes: Schema.Array(Schema.String).annotate({ description: "the scopes granted" }),
    }),
  },
  "oauth.grant.revoked": {
    description: "an app's grant ended: its access and refresh tokens stop at once",
    emittedBy:
      "DELETE /oauth/grants/:id, POST /oauth/revoke (a refresh token), POST /oauth/token (a code or a rotated refresh token presented again)",
    data: Schema.Struct({
      grantId: Schema.String,
      clientId: Schema.String,
      userId: Schema.String.annotate({ description: "the member who had granted it" }),
      reason: Schema.Literals(OAUTH_GRANT_REVOKE_REASONS).annotate({
        description:
          "`revoked`: by a member in the dashboard, or a key or an app's token with `apikeys:write`; `revoked_by_client`: the app revoked its refresh token; `code_reused` and `refresh_token_reused`: a replay, taken as a theft (RFC 6749 4.1.2, RFC 9700 4.14.2). For the last three the actor is the app through the grant (`oauth`, the grant's id), as for everything an app's token does",
      }),
    }),
  },
  "webhook.created": {
    description: "webhook registered",
    emittedBy: "POST /webhooks",
    data: Schema.Struct({
      webhookId: WebhookId,
      origin: WebhookOrigin,
      events: WebhookFilters,
      retryPolicy: RetryPolicy,
      enabled: Schema.Boolean,
    }),
  },
  "webhook.updated": {
    description: "webhook changed (its URL, filters, description, retry policy, or enabled by hand)",
    emittedBy: "PATCH /webhooks/:id",
    data: Schema.Struct({
      webhookId: WebhookId,
      changes: Schema.Array(Schema.Literals(UPDATABLE_WEBHOOK_FIELDS)).annotate({
        description: "the fields that changed; each also appears with its new value (`url` as `origin`)",
      }),
      origin: Schema.optionalKey(WebhookOrigin),
      events: Schema.optionalKey(WebhookFilters),
      description: Schema.optionalKey(Schema.NullOr(Schema.String)),
      retryPolicy: Schema.optionalKey(RetryPolicy),
      enabled: Schema.optionalKey(Schema.Boolean),
    }),
  },
  "webhook.secret.rotated": {
    description: "webhook signing secret replaced (the secret itself is never recorded)",
    emittedBy: "POST /webhooks/:id/rotate",
    data: Schema.Struct({
      webhookId: WebhookId,
      overlapSeconds: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
        description: "how long deliveries are signed with the old secret too; 0 dropped it at once",
      }),
    }),
  },
  "webhook.deleted": {
    description: "webhook deleted, with its delivery history",
    emittedBy: "DELETE /webhooks/:id",
    data: Schema.Struct({ webhookId: WebhookId, origin: WebhookOrigin }),
  },
  "webhook.redelivered": {
    description: "failed deliveries of a webhook queued again",
    emittedBy: "POST /webhooks/:id/redeliver (when it queues any)",
    data: Schema.Struct({
      webhookId: WebhookId,
      queued: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)).annotate({
        description: "how many deliveries were queued again",
      }),
    }),
  },
  "webhook.disabled": {
    description:
      "webhook disabled by the delivery engine: a delivery's every attempt failed, or the endpoint answered 410",
    emittedBy: "the webhook worker",
    data: Schema.Struct({
      webhookId: WebhookId,
      reason: Schema.Literals(["all_attempts_failed", "endpoint_gone"]),
      deliveryId: Schema.String.annotate({ description: "the delivery whose failure disabled it (`dlv_…`)" }),
      eventId: Schema.String.annotate({ description: "that delivery's event (`evt_…`)" }),
    }),
  },
  "chain.invalid": {
    description:
      "the workspace's audit chain failed verification or conflicts with a checkpoint already signed; no checkpoint is signed over it",
    emittedBy:
      "POST /events/verify, the 6-hourly verification, the checkpointer, compliance report generation (once, when the chain was not already known broken)",
    data: Schema.Struct({
      trigger: Schema.Literals(["api", "scheduled", "checkpoint", "report"]).annotate({ description: "what found it" }),
      checked: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
        description: "events that verified before the break",
      }),
      firstBadSequence: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)).annotate({
        description:
          "the first sequence that does not verify (or the first of the range a signed root no longer matches)",
      }),
      reason: Schema.String,
    }),
  },
  "compliance.report.generated": {
    description: "a compliance report was generated, signed and pinned to a checkpoint",
    emittedBy: "the report worker, after POST /compliance/reports",
    data: Schema.Struct({
      reportId: Schema.String.annotate({ description: "`rpt_…`" }),
      framework: ComplianceFramework,
      agentId: Schema.optionalKey(AgentId).annotate({ description: "the agent reported on; absent for the workspace" }),
      from: At("start of the period (inclusive)"),
      to: At("end of the period (exclusive)"),
      result: Schema.Literals(["compliant", "partially_compliant", "non_compliant"]),
      treeSize: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
        description: "the tree size of the signed checkpoint the report is pinned to",
      }),
      counted: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({ description: "events counted" }),
    }),
  },
  "certification.issued": {
    description: "an agent was certified for a framework (valid one year)",
    emittedBy: "POST /compliance/certifications",
    data: Schema.Struct({
      certificationId: Schema.String.annotate({ description: "`crt_…`" }),
      agentId: AgentId,
      framework: ComplianceFramework,
      reportId: Schema.String.annotate({ description: "the report it was issued from (`rpt_…`)" }),
      expiresAt: At("a year after issue"),
    }),
  },
  "certification.revoked": {
    description: "an agent's certification was revoked",
    emittedBy:
      "POST /enforcement (suspension or revocation), automatic enforcement, a fall below bronze, POST /compliance/certifications/:id/revoke",
    data: Schema.Struct({
      certificationId: Schema.String,
      agentId: AgentId,
      framework: ComplianceFramework,
      reportId: Schema.String,
      reason: Schema.Literals(["agent_suspended", "agent_revoked", "trust_below_bronze", "revoked_by_operator"]),
      note: Schema.optionalKey(
        Schema.String.annotate({ description: "the operator's reason, when `reason` is `revoked_by_operator`" }),
      ),
    }),
  },
  "mcp.tool.called": {
    description: "an MCP tool call was allowed by the guard, forwarded to its server, and answered",
    emittedBy: "the MCP gateway (@agentgov/mcp-gateway), reported under the agent's key",
    reportedBy: "agent",
    data: Schema.Struct({
      ...McpCall,
      guardEventId: Schema.NullOr(Schema.String).annotate({
        description:
          "the `policy.evaluated` event of the decision that let it through; null when the gateway decided alone (service unreachable, fail open)",
      }),
      approvalId: Schema.optionalKey(Schema.String.annotate({ description: "the approval it waited for (`apr_…`)" })),
      durationMs: NonNegative.annotate({ description: "time the server took to answer, in milliseconds" }),
      isError: Schema.Boolean.annotate({ description: "the server answered with a tool error" }),
      contentItems: NonNegative.annotate({ description: "content items in the result" }),
      resultBytes: NonNegative.annotate({ description: "size of the result as JSON, after sanitising" }),
      redactions: Schema.Array(McpRedaction).annotate({ description: "what the sanitiser removed from the result" }),
    }),
  },
  "mcp.tool.denied": {
    description: "an MCP tool call was refused by the gateway and never reached its server",
    emittedBy: "the MCP gateway (@agentgov/mcp-gateway), reported under the agent's key",
    reportedBy: "agent",
    data: Schema.Struct({
      ...McpCall,
      reason: Schema.Literals(["policy_denied", "approval_denied", "approval_timeout", "service_unavailable"]),
      reasons: Schema.Array(GuardReason).annotate({ description: "the guard's reasons (or the gateway's)" }),
      guardEventId: Schema.NullOr(Schema.String).annotate({
        description: "the `policy.evaluated` event; null when the service could not be reached",
      }),
      approvalId: Schema.optionalKey(Schema.String),
    }),
  },
  "mcp.definition.flagged": {
    description: "an MCP tool definition failed the gateway's scan when listed",
    emittedBy: "the MCP gateway (@agentgov/mcp-gateway), reported under the agent's key",
    reportedBy: "agent",
    data: Schema.Struct({
      agentId: AgentId,
      server: McpServer,
      tool: McpTool,
      findings: Schema.Array(
        Schema.Struct({
          kind: McpFindingKind,
          detail: Schema.String.annotate({ description: "what matched, quoted short" }),
        }),
      ),
      definitionHash: Schema.String.annotate({ description: "SHA-256 of the definition as listed now" }),
      firstSeenHash: Schema.optionalKey(
        Schema.String.annotate({ description: "SHA-256 of the definition first seen, when it changed" }),
      ),
    }),
  },
  "mcp.result.redacted": {
    description: "the gateway's sanitiser removed credentials or URLs from an MCP tool result before the model saw it",
    emittedBy: "the MCP gateway (@agentgov/mcp-gateway), reported under the agent's key",
    reportedBy: "agent",
    data: Schema.Struct({
      ...McpCall,
      redactions: Schema.Array(McpRedaction),
    }),
  },
} satisfies Record<string, EventDefinition>

export type SystemEventName = keyof typeof SYSTEM_EVENTS

/** The `data` of a system event, as its catalog schema types it. */
export type SystemEventData<N extends SystemEventName> = (typeof SYSTEM_EVENTS)[N]["data"]["Type"]

/** The spec's example alias of `enforcement.created` (D7). */
export const EVENT_ALIASES: Readonly<Record<string, SystemEventName>> = { "enforcement.issued": "enforcement.created" }

const reserved: ReadonlySet<string> = new Set([...Object.keys(SYSTEM_EVENTS), ...Object.keys(EVENT_ALIASES)])

export const isSystemEvent = (name: string): boolean => reserved.has(name)

/** The first segments of the system's names (`agent`, `policy`, `enforcement`, …): namespaces only the service writes in. */
export const SYSTEM_NAMESPACES: ReadonlySet<string> = new Set([...reserved].map((name) => name.split(".")[0]!))

/**
 * The system namespace an ingested type would write in (`enforcement` for `enforcement.created.v2`), or
 * undefined. Not only the catalog's exact names are kept from clients: a subscriber to `enforcement.*` (a
 * pager, a chat channel) must only ever receive what the service itself recorded.
 */
export const systemNamespaceOf = (name: string): string | undefined => {
  const [first] = name.split(".", 1)
  return first !== undefined && SYSTEM_NAMESPACES.has(first) ? first : undefined
}

/** Whether an agent-bound credential may ingest this system event for its own agent (`reportedBy: "agent"`). */
export const isAgentReported = (name: string): boolean =>
  Object.hasOwn(SYSTEM_EVENTS, name) &&
  (SYSTEM_EVENTS[name as SystemEventName] as EventDefinition).reportedBy === "agent"

/** The schema of a system event's `data` (an alias gives its target's); undefined for other names. */
export const eventDataSchema = (name: string): EventDataSchema | undefined => {
  const target = Object.hasOwn(EVENT_ALIASES, name) ? EVENT_ALIASES[name]! : name
  return Object.hasOwn(SYSTEM_EVENTS, target) ? SYSTEM_EVENTS[target as SystemEventName].data : undefined
}

/** `lowercase.dotted`: at least two segments of [a-z0-9_], each starting with a letter. */
export const INGESTED_EVENT_TYPE = /^[a-z][a-z0-9_]{0,62}(\.[a-z][a-z0-9_]{0,62}){1,7}$/
