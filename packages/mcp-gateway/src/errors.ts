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
  /** The call names no tool of the server's latest listing (JSON-RPC's invalid params, as MCP answers an unknown tool). */
  unknownTool: -32602,
} as const

/**
 * An error the gateway answers a request with. Not the SDK's `McpError`, whose message carries an
 * "MCP error <code>:" prefix that the client's `McpError` adds a second time.
 */
export class GatewayError extends Error {
  readonly code: number
  readonly data: Record<string, unknown> | undefined
  constructor(code: number, message: string, data?: Record<string, unknown>) {
    super(message)
    this.name = "GatewayError"
    this.code = code
    this.data = data
  }
}

export const gatewayError = (code: number, message: string, data?: Record<string, unknown>) =>
  new GatewayError(code, message, data)

/** The server's own error, passed on as it was (its code, message and data), without a second prefix. */
export const passOn = (error: { readonly code: number; readonly message: string; readonly data?: unknown }) =>
  new GatewayError(
    error.code,
    error.message.replace(/^MCP error -?\d+: /, ""),
    error.data as Record<string, unknown> | undefined,
  )
