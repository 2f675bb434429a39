/**
 * @agentgov/mcp-gateway: a governed proxy for MCP tool servers. The CLI (`agentgov-mcp-gateway`) is the usual
 * way in; these exports embed the same gateway in a program.
 *
 * @example
 * ```ts
 * import { parseConfig, startGateway } from "@agentgov/mcp-gateway"
 *
 * const running = await startGateway(parseConfig(["--", "node", "my-server.js"], process.env))
 * ```
 */
export { ConfigError, type GatewayConfig, parseConfig, serverNameFromCommand, USAGE } from "./config.ts"
export { DefinitionStore } from "./DefinitionStore.ts"
export { GATEWAY_ERRORS, GatewayError } from "./errors.ts"
export { Gateway, type GatewayOptions } from "./Gateway.ts"
export { deniedOutright } from "./hiddenTools.ts"
export { type RunningGateway, startGateway } from "./run.ts"
export { CREDENTIAL_PATTERNS, type Redaction, Sanitizer, type SanitizerOptions } from "./sanitizer.ts"
export { definitionHash, type Finding, type FindingKind, scanDefinition, type ToolDefinition } from "./scanner.ts"
export { Upstream, type UpstreamOptions } from "./Upstream.ts"
