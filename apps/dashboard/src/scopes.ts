import {
  ROLE_SCOPES,
  AGENT_KEY_SCOPES as SERVICE_AGENT_KEY_SCOPES,
  type Scope as ServiceScope,
} from "@agentgov/trpc-types/scopes"
import type { Inputs } from "./api.ts"

/**
 * Every scope a person may hold or grant in a workspace: the owner role's, all but the operator's
 * `workspaces:admin`. The lists come from the service itself (`@agentgov/trpc-types/scopes`, plain data generated
 * from @agentgov/domain: no server code in the bundle), typed by the router's own input.
 */
export type Scope = NonNullable<Inputs["oauth"]["clients"]["create"]["scopes"]>[number]
const personal = (s: ServiceScope): s is Scope => s !== "workspaces:admin"
export const SCOPES: ReadonlyArray<Scope> = ROLE_SCOPES.owner.filter(personal)
// A scope the router takes that the service's list lacks fails the build here.
type Missing = Exclude<Scope, ServiceScope>
const _exhaustive: [Missing] extends [never] ? true : Missing = true
void _exhaustive

/** The scopes an agent-bound key may hold (the service refuses others for `type: agent`). */
export const AGENT_KEY_SCOPES: ReadonlyArray<Scope> = SERVICE_AGENT_KEY_SCOPES.filter(personal)
/** What an agent's key typically needs: to ask the guard and report and read its events. */
export const AGENT_SCOPES: ReadonlyArray<Scope> = ["guard:evaluate", "events:write", "events:read", "agents:read"]
