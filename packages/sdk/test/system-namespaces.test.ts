import { SYSTEM_NAMESPACES as CATALOG_NAMESPACES, SYSTEM_EVENTS } from "@agentgov/domain"
import { expect, it } from "vitest"
import { AGENT_REPORTED_EVENTS, SYSTEM_NAMESPACES } from "../src/runtime/systemNamespaces.ts"

/**
 * The SDK is published alone and carries its own copy of the service's reserved names (for
 * `track()`'s check); this keeps the copy equal to the catalog. On a failure, update
 * `src/runtime/systemNamespaces.ts` from `packages/domain/src/audit/eventCatalog.ts`.
 */
it("refuses the same namespaces as the service's catalog, and lets through the same agent-reported events", () => {
  expect([...SYSTEM_NAMESPACES].sort()).toEqual([...CATALOG_NAMESPACES].sort())
  const reported = Object.entries(SYSTEM_EVENTS)
    .filter(([, definition]) => (definition as { readonly reportedBy?: string }).reportedBy === "agent")
    .map(([name]) => name)
  expect([...AGENT_REPORTED_EVENTS].sort()).toEqual(reported.sort())
})
