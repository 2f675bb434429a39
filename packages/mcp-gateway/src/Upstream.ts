import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  type CallToolResult,
  ErrorCode,
  type Tool,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js"
import { GATEWAY_ERRORS, gatewayError } from "./errors.ts"

/** The most pages and tools one listing may take: past them the server is misbehaving, not large. */
export const MAX_TOOL_PAGES = 100
export const MAX_TOOLS = 10_000

/** Errors of calls refused before anything was sent to the server (it is down). */
const unsent = new WeakSet<object>()

/** Whether a call failed before it was sent: the server never saw it. */
export const notSent = (error: unknown): boolean => typeof error === "object" && error !== null && unsent.has(error)

export interface UpstreamOptions {
  /** A new transport for each (re)start: a stdio child process or a Streamable HTTP client. */
  readonly transport: () => Transport
  /** What to call it in messages. */
  readonly name: string
  /** First restart delay; doubles per failed start up to {@link maxBackoffMs}. */
  readonly initialBackoffMs?: number
  readonly maxBackoffMs?: number
  /** A connection that lived this long resets the backoff. */
  readonly stableAfterMs?: number
  /** Per tools/call (MCP request timeout). */
  readonly callTimeoutMs?: number
  /** A whole tools/list, every page (default 60 s): calls that need a listing wait for it. */
  readonly listTimeoutMs?: number
  readonly log?: (message: string) => void
  /** Told when the server's tool list may have changed (a restart, or its own notification). */
  readonly onToolsChanged?: () => void
}

/**
 * The MCP server behind the gateway, as one MCP client that restarts it when it dies: exponential backoff from
 * `initialBackoffMs` (250 ms) to `maxBackoffMs` (30 s), reset once a connection has lived `stableAfterMs`
 * (30 s). While it is down every call fails at once with a clear error (never queued: an agent retries
 * better than a gateway guesses), and a call in flight when it dies fails with one.
 */
export class Upstream {
  private client: Client | undefined
  private connecting: Promise<Client> | undefined
  private restartTimer: NodeJS.Timeout | undefined
  private attempts = 0
  private closed = false
  private connectedAt = 0
  /** Why the server is down, for the error a caller gets. */
  private downReason = "not started"

  private readonly options: UpstreamOptions

  constructor(options: UpstreamOptions) {
    this.options = options
  }

  /** Connects for the first time; rejects when the server cannot be started. */
  async start(): Promise<void> {
    await this.connect()
  }

  get connected(): boolean {
    return this.client !== undefined
  }

  private connect(): Promise<Client> {
    if (this.connecting) return this.connecting
    const client = new Client({ name: "agentgov-mcp-gateway", version: "0.1.0" }, { capabilities: {} })
    this.connecting = (async () => {
      try {
        await client.connect(this.options.transport())
      } catch (error) {
        await client.close().catch(() => {})
        throw error
      }
      if (this.closed) {
        await client.close().catch(() => {})
        throw new Error("the gateway is closing")
      }
      this.client = client
      this.connectedAt = Date.now()
      client.onclose = () => this.lost(client, "exited")
      client.setNotificationHandler(ToolListChangedNotificationSchema, async () => this.options.onToolsChanged?.())
      return client
    })().finally(() => {
      this.connecting = undefined
    })
    return this.connecting
  }

  private lost(client: Client, how: string) {
    if (this.client !== client) return
    this.client = undefined
    if (this.closed) return
    this.downReason = `the MCP server "${this.options.name}" ${how}`
    if (Date.now() - this.connectedAt >= (this.options.stableAfterMs ?? 30_000)) this.attempts = 0
    this.options.log?.(`${this.downReason}; restarting`)
    this.scheduleRestart()
  }

  private scheduleRestart() {
    if (this.closed || this.restartTimer) return
    const base = this.options.initialBackoffMs ?? 250
    const delay = Math.min(this.options.maxBackoffMs ?? 30_000, base * 2 ** this.attempts)
    this.attempts++
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined
      this.connect().then(
        () => {
          this.options.log?.(`the MCP server "${this.options.name}" is back`)
          this.options.onToolsChanged?.()
        },
        (error) => {
          this.downReason = `the MCP server "${this.options.name}" failed to start (${(error as Error).message})`
          this.options.log?.(`${this.downReason}; retrying`)
          this.scheduleRestart()
        },
      )
    }, delay)
    this.restartTimer.unref?.()
  }

  private current(): Client {
    if (this.client) return this.client
    const error = gatewayError(
      GATEWAY_ERRORS.upstreamUnavailable,
      `${this.downReason}; the gateway is restarting it, try again shortly`,
      { reason: "upstream_unavailable" },
    )
    unsent.add(error)
    throw error
  }

  /**
   * Every tool, across pages. A server whose pages do not end (a cursor seen before, more than MAX_TOOL_PAGES pages
   * or MAX_TOOLS tools, on any page, the last one included) is refused with a clear error instead of holding the gateway in the loop.
   */
  async listTools(): Promise<Array<Tool>> {
    const client = this.current()
    const tools: Array<Tool> = []
    const cursors = new Set<string>()
    const limit = this.options.listTimeoutMs ?? 60_000
    const deadline = Date.now() + limit
    const unbounded = (why: string) =>
      gatewayError(
        GATEWAY_ERRORS.upstreamUnavailable,
        `the MCP server "${this.options.name}" listed tools without end (${why}); the gateway lists none of them`,
        { reason: "upstream_tool_list_unbounded" },
      )
    let cursor: string | undefined
    do {
      // One deadline for the whole listing, not one per page: a server answering each page just in time would
      // otherwise hold every call that waits for the listing for 100 pages' time-outs.
      const left = deadline - Date.now()
      if (left <= 0) throw unbounded(`not done within ${limit / 1000} s`)
      const page = await this.wrap(client.listTools(cursor === undefined ? {} : { cursor }, { timeout: left })).catch(
        (error: unknown) => {
          if ((error as { code?: unknown }).code === ErrorCode.RequestTimeout && Date.now() >= deadline - 5)
            throw unbounded(`not done within ${limit / 1000} s`)
          throw error
        },
      )
      tools.push(...page.tools)
      cursor = page.nextCursor
      // Too many tools is refused on the last page too: one page of a million tools is no listing either.
      const why =
        cursor && cursors.has(cursor)
          ? `cursor "${cursor.slice(0, 40)}" came back`
          : (cursor && cursors.size + 1 >= MAX_TOOL_PAGES) || tools.length > MAX_TOOLS
            ? `over ${MAX_TOOL_PAGES} pages or ${MAX_TOOLS} tools`
            : undefined
      if (why !== undefined) throw unbounded(why)
      if (cursor) cursors.add(cursor)
    } while (cursor)
    return tools
  }

  async callTool(
    name: string,
    args: Record<string, unknown> | undefined,
    signal?: AbortSignal,
  ): Promise<CallToolResult> {
    const client = this.current()
    if (signal?.aborted) {
      // The client cancelled before the call went out: nothing is sent.
      const error = signal.reason instanceof Error ? signal.reason : new Error("the call was cancelled")
      unsent.add(error)
      throw error
    }
    return (await this.wrap(
      client.callTool({ name, arguments: args }, undefined, {
        timeout: this.options.callTimeoutMs ?? 60_000,
        ...(signal ? { signal } : {}),
      }),
    )) as CallToolResult
  }

  /** A connection lost mid-request becomes the gateway's clear error; the server's own errors pass as they are. */
  private async wrap<T>(request: Promise<T>): Promise<T> {
    try {
      return await request
    } catch (error) {
      const code = (error as { code?: unknown }).code
      if (code === -32000 /* ConnectionClosed */ || !this.client)
        throw gatewayError(
          GATEWAY_ERRORS.upstreamUnavailable,
          `the MCP server "${this.options.name}" stopped while answering (${(error as Error).message}); the gateway is restarting it`,
          { reason: "upstream_unavailable" },
        )
      throw error
    }
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.restartTimer) clearTimeout(this.restartTimer)
    const client = this.client
    this.client = undefined
    await client?.close().catch(() => {})
  }
}
