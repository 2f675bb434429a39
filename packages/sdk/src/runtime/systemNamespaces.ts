/**
 * The service's reserved event names, copied from its catalog (`SYSTEM_NAMESPACES` and the events
 * `reportedBy: "agent"` in `packages/domain/src/audit/eventCatalog.ts`): the SDK is published alone
 * and must not load `@agentgov/domain`. `test/system-namespaces.test.ts` compares both lists with the
 * catalog, so a change there fails the SDK's tests until this file is updated.
 */

/** First segments only the service writes in: `track()` refuses a type under one of them. */
export const SYSTEM_NAMESPACES: ReadonlySet<string> = new Set([
  "agent",
  "policy",
  "enforcement",
  "approval",
  "trust",
  "content",
  "badge",
  "workspace",
  "apikey",
  "member",
  "invitation",
  "oauth",
  "webhook",
  "chain",
  "compliance",
  "certification",
  "mcp",
])

/**
 * System events an agent-bound credential reports for its own agent (the MCP gateway's): the
 * exception to the namespaces above.
 */
export const AGENT_REPORTED_EVENTS: ReadonlySet<string> = new Set([
  "mcp.tool.called",
  "mcp.tool.denied",
  "mcp.definition.flagged",
  "mcp.result.redacted",
])

/** The reserved namespace `type` would write in (`agent` for `agent.heartbeat`), or undefined. */
export const reservedNamespaceOf = (type: string): string | undefined => {
  if (AGENT_REPORTED_EVENTS.has(type)) return undefined
  const first = type.slice(0, type.indexOf("."))
  return SYSTEM_NAMESPACES.has(first) ? first : undefined
}
