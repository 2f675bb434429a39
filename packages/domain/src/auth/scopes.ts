/**
 * Scopes of the spec's table plus the project's additions in the same
 * `resource:verb` form (decision D4). `policies:evaluate` is accepted as an
 * alias of `guard:evaluate` and stored as the canonical name.
 */
export const SCOPES = [
  "agents:read",
  "agents:write",
  "policies:read",
  "policies:write",
  "guard:evaluate",
  "events:read",
  "events:write",
  "content:read",
  "content:write",
  "content:scan",
  "enforcement:read",
  "enforcement:write",
  "webhooks:read",
  "webhooks:write",
  "approvals:read",
  "approvals:write",
  "approvals:manage",
  "apikeys:read",
  "apikeys:write",
  "trust:read",
  "trust:write",
  "compliance:read",
  "compliance:write",
  "members:read",
  "members:write",
  "workspaces:read",
  "workspaces:write",
  "workspaces:admin",
] as const

export type Scope = (typeof SCOPES)[number]

export const SCOPE_ALIASES: Readonly<Record<string, Scope>> = { "policies:evaluate": "guard:evaluate" }

/** What an agent key may carry: the spec's table marks these "workspace, agent". */
export const AGENT_KEY_SCOPES: ReadonlySet<Scope> = new Set<Scope>([
  "agents:read",
  "policies:read",
  "guard:evaluate",
  "events:read",
  "events:write",
  "enforcement:read",
  "approvals:read",
  "compliance:read",
])

const known: ReadonlySet<string> = new Set(SCOPES)

/** The canonical scope for a name, or undefined for an unknown one. */
export const canonicalScope = (name: string): Scope | undefined =>
  SCOPE_ALIASES[name] ?? (known.has(name) ? (name as Scope) : undefined)
