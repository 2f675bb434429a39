import {
  ROLE_SCOPES,
  AGENT_KEY_SCOPES as SERVICE_AGENT_KEY_SCOPES,
  SCOPES as SERVICE_SCOPES,
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

/**
 * Who may do what (D16): a person acts with their role's scopes (`ROLE_SCOPES`), no more. The service decides on
 * every call; the dashboard only stops offering a control the signed-in role cannot use, and says which role can.
 */
export type Role = keyof typeof ROLE_SCOPES
/** Any scope of the service, the operator's `workspaces:admin` included (what an operation needs). */
export type { ServiceScope }

/** The roles, the least first. */
const LEAST_FIRST: ReadonlyArray<Role> = ["viewer", "member", "admin", "owner"]

/** Whether `role` holds `scope` (no role: nothing). */
export const roleCan = (role: Role | undefined, scope: ServiceScope) =>
  role !== undefined && (ROLE_SCOPES[role]?.includes(scope) ?? false)

/** The least role holding `scope`, or undefined (the service operator's `workspaces:admin`). */
export const leastRoleFor = (scope: ServiceScope): Role | undefined => LEAST_FIRST.find((r) => roleCan(r, scope))

/** The roles holding `scope`, in words: "the admin role or above", "the owner role"; undefined for none. */
const rolesHolding = (scope: ServiceScope) => {
  const least = leastRoleFor(scope)
  if (least === undefined) return undefined
  return least === "owner" ? "the owner role" : `the ${least} role or above`
}

/** What a control the role cannot use says, the same on every page: "Needs the admin role or above". */
export const needsRole = (scope: ServiceScope) => {
  const who = rolesHolding(scope)
  return who === undefined ? `Needs the service operator (${scope})` : `Needs ${who}`
}

/** A refusal for a missing scope, in the role's words: "Your role (viewer) cannot do this: it needs approvals:manage". */
export const forbiddenText = (role: Role | undefined, scope: string) => {
  const known = (SERVICE_SCOPES as ReadonlyArray<string>).includes(scope)
  const who = (known ? rolesHolding(scope as ServiceScope) : undefined) ?? "the service operator"
  return `${role ? `Your role (${role})` : "You"} cannot do this: it needs ${scope} (${who}).`
}
