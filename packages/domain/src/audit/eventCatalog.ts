/**
 * The system's own event names: the spec's catalog plus the project's
 * additions (docs/decisions.md). Clients cannot ingest these names (D8), and
 * each says which operation emits it and what its data holds.
 */
export interface EventDefinition {
  readonly description: string
  readonly emittedBy: string
  /** Field → description of `data`. */
  readonly data: Readonly<Record<string, string>>
}

export const SYSTEM_EVENTS = {
  "agent.registered": {
    description: "new agent registered",
    emittedBy: "POST /agents",
    data: { agentId: "string", agentName: "string", trustScore: "number, 0..1000" },
  },
  "agent.updated": {
    description: "agent metadata or configuration changed",
    emittedBy: "PATCH /agents/:id, POST /agents/:id/versions",
    data: {
      agentId: "string",
      agentName: "string",
      changes: "array of the changed field names",
      version: "string, for a new version",
      versionId: "string, for a new version",
      previousVersion: "string or null, for a new version",
    },
  },
  "agent.deregistered": {
    description: "agent deregistered (soft); its keys are revoked",
    emittedBy: "DELETE /agents/:id",
    data: { agentId: "string", agentName: "string" },
  },
  "agent.suspended": {
    description: "agent suspended due to enforcement",
    emittedBy: "enforcement (suspension)",
    data: { agentId: "string" },
  },
  "policy.evaluated": {
    description: "policy check completed",
    emittedBy: "POST /guard, POST /policies/evaluate",
    data: {},
  },
  "policy.denied": { description: "action blocked by policy", emittedBy: "POST /guard", data: {} },
  "policy.violated": { description: "agent action violated a policy rule", emittedBy: "POST /guard", data: {} },
  "enforcement.created": { description: "enforcement action applied", emittedBy: "POST /enforcement", data: {} },
  "enforcement.appealed": {
    description: "agent appealed an enforcement",
    emittedBy: "POST /enforcement/:id/appeal",
    data: {},
  },
  "enforcement.resolved": {
    description: "enforcement resolved or expired",
    emittedBy: "PATCH /enforcement/:id, expiry",
    data: {},
  },
  "approval.requested": {
    description: "operator approval needed",
    emittedBy: "POST /guard, POST /approvals",
    data: {},
  },
  "approval.decided": {
    description: "approval approved or denied",
    emittedBy: "POST /approvals/:id/decide, expiry",
    data: {},
  },
  "trust.score.changed": {
    description: "trust score updated",
    emittedBy: "trust scoring",
    data: {
      agentId: "string",
      agentName: "string",
      previousScore: "number",
      newScore: "number",
      delta: "number",
      reason: "string",
      newTier: "string",
    },
  },
  "trust.tier.upgraded": { description: "promoted to a higher badge tier", emittedBy: "trust scoring", data: {} },
  "trust.tier.downgraded": { description: "demoted to a lower badge tier", emittedBy: "trust scoring", data: {} },
  "content.registered": { description: "content registered for protection", emittedBy: "POST /content", data: {} },
  "content.match.detected": {
    description: "potential infringement detected",
    emittedBy: "POST /content/:id/scan",
    data: {},
  },
  "content.takedown.submitted": { description: "takedown notice sent", emittedBy: "takedown", data: {} },
  "badge.earned": { description: "trust badge awarded", emittedBy: "trust scoring", data: {} },
  "badge.revoked": { description: "trust badge removed", emittedBy: "trust scoring, suspension", data: {} },
  "workspace.created": {
    description: "workspace created",
    emittedBy: "POST /workspaces, first start, CLI",
    data: { workspaceId: "string", name: "string", environment: "live | test", plan: "free | pro | enterprise" },
  },
  "workspace.updated": {
    description: "workspace settings changed",
    emittedBy: "PATCH /workspaces/:id",
    data: { workspaceId: "string", changes: "array of field names", "<field>": "the new value of each changed field" },
  },
  "workspace.deleted": {
    description: "workspace deleted (soft); its keys are revoked",
    emittedBy: "DELETE /workspaces/:id",
    data: { workspaceId: "string", name: "string", revokedKeys: "number" },
  },
  "apikey.created": {
    description: "API key created",
    emittedBy: "POST /api-keys, POST /api-keys/:id/rotate, POST /workspaces",
    data: {
      keyId: "string",
      name: "string",
      type: "workspace | agent",
      prefix: "string",
      scopes: "array of scope names",
    },
  },
  "apikey.revoked": {
    description: "API key revoked",
    emittedBy: "DELETE /api-keys/:id, expiry, rotation, agent deregistration",
    data: {
      keyId: "string",
      name: "string",
      prefix: "string",
      reason: "revoked | expired | rotated | agent_deregistered | …",
    },
  },
  "apikey.rotated": {
    description: "API key replaced by a new one",
    emittedBy: "POST /api-keys/:id/rotate",
    data: { keyId: "string", newKeyId: "string", overlapSeconds: "number" },
  },
} satisfies Record<string, EventDefinition>

export type SystemEventName = keyof typeof SYSTEM_EVENTS

/** The spec's example alias of `enforcement.created` (D7). */
export const EVENT_ALIASES: Readonly<Record<string, SystemEventName>> = { "enforcement.issued": "enforcement.created" }

const reserved: ReadonlySet<string> = new Set([...Object.keys(SYSTEM_EVENTS), ...Object.keys(EVENT_ALIASES)])

export const isSystemEvent = (name: string): boolean => reserved.has(name)

/** `lowercase.dotted`: at least two segments of [a-z0-9_], each starting with a letter. */
export const INGESTED_EVENT_TYPE = /^[a-z][a-z0-9_]{0,62}(\.[a-z][a-z0-9_]{0,62}){1,7}$/
