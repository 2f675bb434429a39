import type { Scope } from "./scopes.ts"

/**
 * Who is calling, as established by the authenticator. Every domain method
 * takes it: the workspace scopes every query, the agent binding narrows an
 * agent key to its one agent.
 */
export interface Actor {
  readonly workspaceId: string
  readonly environment: "live" | "test"
  readonly credential: { readonly type: "api_key" | "sdk_token" | "oauth" | "user" | "system"; readonly id: string }
  readonly keyType: "workspace" | "agent"
  /** Set for agent keys (and tokens minted from them): the one agent they act for. */
  readonly agentId?: string | undefined
  readonly scopes: ReadonlySet<Scope>
  /**
   * Set when a person acts: signed in to the dashboard (credential `user`) or through a third-party app
   * they authorised (credential `oauth`). Their membership's role bounds the scopes.
   */
  readonly userId?: string | undefined
}

/** The operator acting through the CLI or a worker: every scope in one workspace. */
export const systemActor = (workspaceId: string, environment: "live" | "test", scopes: ReadonlySet<Scope>): Actor => ({
  workspaceId,
  environment,
  credential: { type: "system", id: "system" },
  keyType: "workspace",
  scopes,
})
