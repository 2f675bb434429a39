import { AGENT_KEY_SCOPES, ROLE_SCOPES, ROLES, SCOPES } from "@agentgov/domain"
import * as published from "@agentgov/trpc-types/scopes"
import { expect, it } from "vitest"

/**
 * The dashboard takes the service's scope lists from `@agentgov/trpc-types/scopes` (plain data, no server code in
 * the bundle): they must be the domain's own, or a scope added or a role changed there would go unseen here. After
 * such a change: `npm run scopes -w @agentgov/trpc-types`.
 */
it("publishes the domain's scopes, agent-key scopes and role scopes as they are", () => {
  expect(published.SCOPES).toEqual([...SCOPES])
  expect(published.AGENT_KEY_SCOPES).toEqual([...AGENT_KEY_SCOPES])
  expect(published.ROLES).toEqual([...ROLES])
  expect(Object.keys(published.ROLE_SCOPES)).toEqual([...ROLES])
  for (const role of ROLES) expect(published.ROLE_SCOPES[role]).toEqual([...ROLE_SCOPES[role]])
})
