import type { Inputs } from "./api.ts"

/** Every scope (D4), checked against the router's own list: a scope added or renamed there fails the build here. */
export type Scope = NonNullable<Inputs["oauth"]["clients"]["create"]["scopes"]>[number]
export const SCOPES = [
  "agents:read",
  "agents:write",
  "policies:read",
  "policies:write",
  "guard:evaluate",
  "events:read",
  "events:write",
  "approvals:read",
  "approvals:write",
  "approvals:manage",
  "enforcement:read",
  "enforcement:write",
  "trust:read",
  "trust:write",
  "compliance:read",
  "compliance:write",
  "content:read",
  "content:write",
  "content:scan",
  "webhooks:read",
  "webhooks:write",
  "apikeys:read",
  "apikeys:write",
  "members:read",
  "members:write",
  "workspaces:read",
  "workspaces:write",
] as const satisfies ReadonlyArray<Scope>
type Missing = Exclude<Scope, (typeof SCOPES)[number]>
const _exhaustive: [Missing] extends [never] ? true : Missing = true
void _exhaustive

/** The scopes an agent-bound key may hold (the service refuses others for `type: agent`). */
export const AGENT_KEY_SCOPES: ReadonlyArray<Scope> = [
  "agents:read",
  "policies:read",
  "guard:evaluate",
  "events:read",
  "events:write",
  "enforcement:read",
  "approvals:read",
  "compliance:read",
]
/** What an agent's key typically needs: to ask the guard and report and read its events. */
export const AGENT_SCOPES: ReadonlyArray<Scope> = ["guard:evaluate", "events:write", "events:read", "agents:read"]
