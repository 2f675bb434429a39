import type { IncomingMessage } from "node:http"
import {
  DEFAULT_MAX_REQUEST_BODY_SIZE,
  requestBodyTooLargeMessage,
} from "@modelcontextprotocol/sdk/server/requestBody.js"
import { isJsonContentType } from "@modelcontextprotocol/sdk/shared/mediaType.js"

/** A request the listener answers itself, as the SDK's transport answers the ones it refuses. */
export interface BodyRefusal {
  readonly status: number
  readonly code: number
  readonly message: string
}

const isRequest = (m: unknown): m is { readonly id: string | number; readonly method: string } =>
  typeof m === "object" &&
  m !== null &&
  typeof (m as { method?: unknown }).method === "string" &&
  (typeof (m as { id?: unknown }).id === "string" || typeof (m as { id?: unknown }).id === "number")

/**
 * The first id that two requests of a batch share, or undefined (a single message, or ids all distinct). Ids are
 * compared as JSON-RPC values: `1` and `"1"` are two ids. Notifications (no id) and responses are not requests.
 */
export const duplicateRequestId = (message: unknown): string | number | undefined => {
  if (!Array.isArray(message)) return undefined
  const seen = new Set<string | number>()
  for (const m of message) {
    if (!isRequest(m)) continue
    if (seen.has(m.id)) return m.id
    seen.add(m.id)
  }
  return undefined
}

/**
 * Reads and parses a POST's JSON body for the transport (which then takes it as parsed), refusing what the
 * transport would refuse (over 4 MiB: 413; not JSON: -32700) and a batch whose requests share an id: -32600
 * Invalid Request, and none of it runs. JSON-RPC matches each answer to its request by id, so two requests with
 * one id cannot both be answered (the transport would run both and answer one), and MCP forbids reusing a request
 * id within a session. Undefined when the body is not declared JSON: the transport refuses that itself (415).
 */
export const readJsonRpcBody = async (
  req: IncomingMessage,
): Promise<{ readonly parsed: unknown } | { readonly refused: BodyRefusal } | undefined> => {
  if (!isJsonContentType(req.headers["content-type"])) return undefined
  const max = DEFAULT_MAX_REQUEST_BODY_SIZE
  const tooLarge = { refused: { status: 413, code: -32000, message: requestBodyTooLargeMessage(max) } }
  if (Number(req.headers["content-length"]) > max) return tooLarge
  const chunks: Array<Buffer> = []
  let received = 0
  for await (const chunk of req) {
    received += (chunk as Buffer).byteLength
    if (received > max) return tooLarge
    chunks.push(chunk as Buffer)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"))
  } catch {
    return { refused: { status: 400, code: -32700, message: "Parse error: Invalid JSON" } }
  }
  const id = duplicateRequestId(parsed)
  if (id !== undefined) {
    return {
      refused: {
        status: 400,
        code: -32600,
        message: `Invalid Request: the batch uses the id ${JSON.stringify(id).slice(0, 64)} more than once; answers are matched to requests by id, so none of the batch was run`,
      },
    }
  }
  return { parsed }
}
