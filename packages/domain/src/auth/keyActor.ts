import type { KeyForAuth } from "../apikeys/ApiKeyRepo.ts"
import { ROLE_SCOPES } from "../people/roles.ts"
import type { Actor } from "./Actor.ts"
import { canonicalScope, type Scope } from "./scopes.ts"

/**
 * Why a stored API key cannot act at `nowMs` (its workspace is deleted, it is
 * revoked, or it has expired), or undefined when it can. One rule for the key
 * itself and for the SDK tokens minted from it.
 */
export const keyRefusal = (stored: KeyForAuth, nowMs: number): "gone" | "revoked" | "expired" | undefined => {
  if (stored.workspaceDeleted) return "gone"
  if (stored.status === "revoked") return "revoked"
  if (stored.expiresAt !== null && Date.parse(stored.expiresAt) <= nowMs) return "expired"
  return undefined
}

const canonicalScopes = (names: ReadonlyArray<unknown>): Set<Scope> => {
  const scopes = new Set<Scope>()
  for (const name of names) {
    const scope = canonicalScope(String(name))
    if (scope) scopes.add(scope)
  }
  return scopes
}

/**
 * The Actor of a usable key, or of a token minted from it: the token acts with
 * the scopes it names that its key holds now, never more than the key, whatever
 * its claims say (defence in depth should a signing key leak). A key made by a
 * person acts with no more than that person's role holds now: a demotion narrows
 * the keys they made at once, a promotion never widens a key past its own scopes.
 */
export const actorOfKey = (
  stored: KeyForAuth,
  credential: "api_key" | "sdk_token",
  tokenScopes: ReadonlyArray<unknown> = [],
): Actor => {
  const held = canonicalScopes(stored.scopes)
  if (stored.createdByUser !== null) {
    const role = stored.creatorRole === null ? undefined : ROLE_SCOPES[stored.creatorRole]
    for (const scope of held) if (!role?.has(scope)) held.delete(scope)
  }
  const scopes = credential === "api_key" ? held : canonicalScopes(tokenScopes)
  for (const scope of scopes) if (!held.has(scope)) scopes.delete(scope)
  return {
    workspaceId: stored.workspaceId,
    environment: stored.environment,
    credential: { type: credential, id: stored.id },
    keyType: stored.type,
    agentId: stored.agentId ?? undefined,
    scopes,
  }
}
