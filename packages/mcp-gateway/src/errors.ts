import { McpError } from "@modelcontextprotocol/sdk/types.js"

/**
 * The JSON-RPC error codes the gateway answers with (the implementation-defined server range): a client can
 * tell a refusal from a failure, and the message says it in words for the model.
 */
export const GATEWAY_ERRORS = {
  /** The policies deny the call. */
  denied: -32010,
  /** An approval was needed and was denied, expired, or not decided in time. */
  approvalNotGranted: -32011,
  /** The agentgov service could not be reached and the server fails closed. */
  serviceUnavailable: -32012,
  /** The MCP server behind the gateway is not running (crashed, restarting) or failed mid-call. */
  upstreamUnavailable: -32013,
} as const

export const gatewayError = (code: number, message: string, data?: Record<string, unknown>) =>
  new McpError(code, message, data)
