import { Schema } from "effect"
import { SCOPES, type Scope } from "../auth/scopes.ts"

/** D16: a member's role in a workspace, each a fixed set of scopes. */
export const ROLES = ["owner", "admin", "member", "viewer"] as const
export const Role = Schema.Literals(ROLES).annotate({
  description:
    "`owner`: everything in the workspace, owners included; `admin`: everything but the workspace's settings and its owners; `member`: works with agents, policies, events and content; `viewer`: reads",
})
export type Role = typeof Role.Type

const readScopes = SCOPES.filter((s) => s.endsWith(":read"))
/** `workspaces:admin` is the operator's (every workspace): no role of one workspace carries it. */
const ownerScopes = SCOPES.filter((s) => s !== "workspaces:admin")
const adminScopes = ownerScopes.filter((s) => s !== "workspaces:write")
const memberScopes: ReadonlyArray<Scope> = [
  ...readScopes,
  "agents:write",
  "policies:write",
  "guard:evaluate",
  "events:write",
  "content:write",
  "content:scan",
  "enforcement:write",
  "webhooks:write",
  "approvals:write",
]

/** The scopes each role holds. A person acting in a workspace never holds more than their role's. */
export const ROLE_SCOPES: Readonly<Record<Role, ReadonlySet<Scope>>> = {
  owner: new Set(ownerScopes),
  admin: new Set(adminScopes),
  member: new Set(memberScopes),
  viewer: new Set(readScopes),
}

/** Granting, changing or removing the owner role needs this scope, which only owners (and operator keys) hold. */
export const OWNER_SCOPE: Scope = "workspaces:write"
