import { timingSafeEqual } from "node:crypto"
import { createServer, type Server as HttpServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { AgentGov } from "@agentgov/sdk"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { boundedFetch } from "./boundedFetch.ts"
import { type GatewayConfig, isLoopbackHost } from "./config.ts"
import { DefinitionStore } from "./DefinitionStore.ts"
import { digestKeyOf, Gateway } from "./Gateway.ts"
import { readJsonRpcBody } from "./jsonRpcBody.ts"
import { keepAliveFetch } from "./keepAliveFetch.ts"
import { Sanitizer } from "./sanitizer.ts"
import { Upstream } from "./Upstream.ts"

export interface RunningGateway {
  readonly gateway: Gateway
  /** The Streamable HTTP endpoint, when serving HTTP. */
  readonly url?: string
  /** Stops serving, stops the upstream server, and sends the events still queued. */
  readonly close: () => Promise<void>
}

/**
 * The client transport to a Streamable HTTP server: its answers are bounded per message (10 MiB, as a stdio
 * server's lines are by the SDK), so a server cannot make the gateway read without end.
 */
export const upstreamHttpTransport = (url: string) =>
  new StreamableHTTPClientTransport(new URL(url), { fetch: boundedFetch() })

/** The wrapped server's environment: the user's, without the gateway's own credentials. */
const upstreamEnv = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).filter(
      (e): e is [string, string] => e[1] !== undefined && !e[0].startsWith("AGENTGOV_"),
    ),
  )

const sameSecret = (given: string, expected: string) => {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

const LOOPBACK_NAMES = new Set(["127.0.0.1", "localhost", "[::1]"])

/** The host name of a Host or Origin header value (`host[:port]`, or an origin), or undefined if it is none. */
const hostnameOf = (value: string, origin: boolean): string | undefined => {
  try {
    return new URL(origin ? value : `http://${value}`).hostname
  } catch {
    return undefined
  }
}

/**
 * A listener on loopback answers only requests addressed to loopback and sent from no web page but a loopback
 * one: a page elsewhere that rebinds its own name to 127.0.0.1 (DNS rebinding) names itself in Host and Origin,
 * and would otherwise call tools as the agent (MCP's transport rules require this check).
 */
const rebound = (req: IncomingMessage): boolean => {
  const host = hostnameOf(req.headers.host ?? "", false)
  if (host === undefined || !LOOPBACK_NAMES.has(host)) return true
  const origin = req.headers.origin
  return origin !== undefined && !LOOPBACK_NAMES.has(hostnameOf(origin, true) ?? "")
}

const reply = (res: ServerResponse, status: number, message: string, code = -32000) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }))
}

/**
 * Starts a gateway from its configuration: the upstream server (spawned, or connected over HTTP), and the
 * downstream side (stdio of this process, or a Streamable HTTP endpoint at `/mcp`).
 */
export const startGateway = async (
  config: GatewayConfig,
  log: (message: string) => void = (m) => process.stderr.write(`agentgov-mcp-gateway: ${m}\n`),
): Promise<RunningGateway> => {
  const service = keepAliveFetch()
  const client = new AgentGov({ apiKey: config.apiKey, baseUrl: config.url, fetch: service.fetch })
  const agent = client.agent({
    onUnavailable: config.onUnavailable,
    guardTimeoutMs: config.guardTimeoutMs,
    guardMaxRetries: 1,
    onDrop: (d) => log(`${d.events.length} event(s) dropped (${d.reason})`),
  })
  let gateway: Gateway | undefined
  const upstream = new Upstream({
    name: config.server,
    transport: () =>
      config.command
        ? new StdioClientTransport({
            command: config.command.command,
            args: [...config.command.args],
            env: upstreamEnv(),
            stderr: "inherit",
          })
        : upstreamHttpTransport(config.upstreamUrl!),
    log,
    onToolsChanged: () => gateway?.toolsChanged(),
  })
  gateway = new Gateway({
    server: config.server,
    upstream,
    client,
    agent,
    sanitizer: new Sanitizer({ allowedHosts: config.allowedHosts }),
    store: new DefinitionStore(config.storePath),
    approvalTimeoutMs: config.approvalTimeoutMs,
    hideDenied: config.hideDenied,
    digestKey: digestKeyOf(config.apiKey),
    log,
  })
  await upstream.start()

  // The connection to the service and the agent's id (a token exchange) before the first call needs them; a
  // service down now is not a failure to start: calls are refused until it answers (fail closed).
  gateway.warm()

  let listener: HttpServer | undefined
  let url: string | undefined
  const closeAll = async () => {
    if (listener) await new Promise<void>((resolve) => listener!.close(() => resolve()))
    await upstream.close()
    await agent.shutdown({ timeoutMs: 10_000 })
    service.close()
  }

  if (config.listen) {
    const g = gateway
    const loopback = isLoopbackHost(config.listen.host)
    listener = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      if (new URL(req.url ?? "/", "http://x").pathname !== "/mcp")
        return reply(res, 404, "not found: the endpoint is /mcp")
      if (loopback && rebound(req))
        return reply(res, 403, "refused: a loopback gateway answers requests for loopback hosts only")
      if (config.httpToken !== undefined) {
        // One header with one credential, as the service asks: Node keeps only the first of repeated Authorization
        // lines, and a proxy in front may have acted on another.
        const lines = req.headersDistinct.authorization ?? []
        const given = lines.length === 1 ? (/^Bearer ([^\s,]+)$/.exec(lines[0]!)?.[1] ?? "") : ""
        if (!sameSecret(given, config.httpToken)) return reply(res, 401, "a bearer token is required")
      }
      // Stateless: each request gets its own MCP server and transport; the gateway behind them is shared.
      if (req.method !== "POST") return reply(res, 405, "this gateway is stateless: POST only")
      // Read here, not by the transport, to refuse a batch whose requests share an id before any of it runs.
      let body: Awaited<ReturnType<typeof readJsonRpcBody>>
      try {
        body = await readJsonRpcBody(req)
      } catch (error) {
        log(`HTTP request failed: ${(error as Error).message}`)
        return res.destroy()
      }
      if (body !== undefined && "refused" in body) {
        log(`refused an HTTP request: ${body.refused.message.slice(0, 200)}`)
        return reply(res, body.refused.status, body.refused.message, body.refused.code)
      }
      const server = g.createServer()
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
      res.on("close", () => {
        void transport.close()
        void server.close()
      })
      try {
        await server.connect(transport)
        await transport.handleRequest(req, res, body?.parsed)
      } catch (error) {
        log(`HTTP request failed: ${(error as Error).message}`)
        if (!res.headersSent) reply(res, 500, "internal error")
      }
    })
    await new Promise<void>((resolve, reject) => {
      listener!.once("error", reject)
      listener!.listen(config.listen!.port, config.listen!.host, () => resolve())
    })
    const { port } = listener.address() as AddressInfo
    url = `http://${config.listen.host.includes(":") ? `[${config.listen.host}]` : config.listen.host}:${port}/mcp`
    log(`listening on ${url}`)
  } else {
    const server = gateway.createServer()
    await server.connect(new StdioServerTransport())
  }
  return { gateway, ...(url ? { url } : {}), close: closeAll }
}
