import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { AgentGov } from "@agentgov/sdk"
import { tempDir } from "@agentgov/testing/tempDir"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import { expect } from "vitest"
import { unique } from "../../sdk/test/helpers.ts"

export { clientFor, closedPort, startTestServer, type TestServer, unique } from "../../sdk/test/helpers.ts"

/** The CLI's source, not the bin (which prefers a `dist` that may be older than the source under test). */
const BIN = fileURLToPath(new URL("../src/cli.ts", import.meta.url))
const FIXTURE = fileURLToPath(new URL("fixtures/toolServer.ts", import.meta.url))
/** Without a build, the gateway runs from its TypeScript source and imports the SDK's. */
const NODE_ARGS = ["--conditions=@agentgov/source"]

export type Mode = "stdio" | "http"

export interface GatewayOptions {
  readonly url: string
  readonly apiKey: string
  readonly server: string
  /** The first-seen definitions file; a fresh one by default. */
  readonly store?: string
  /** Environment of the wrapped tool server (TOOL_SERVER_VARIANT…). */
  readonly toolEnv?: Record<string, string>
  /** Extra gateway flags. */
  readonly flags?: ReadonlyArray<string>
  /** Over HTTP: the gateway's `--http-token`, which the client then sends. */
  readonly httpToken?: string
}

export interface Connected {
  readonly client: Client
  /** Tool calls that reached the tool server, in order (`<tool> <arguments JSON>` lines). */
  readonly calls: () => Array<string>
  /** The gateway's stderr so far. */
  readonly stderr: () => string
  /** Over HTTP: the gateway's endpoint. */
  readonly url?: string
  readonly close: () => Promise<void>
}

const children = new Set<ChildProcess>()

/** Waits for a line of a child's output matching `pattern`; rejects when the child exits first. */
const waitForLine = (child: ChildProcess, stream: "stdout" | "stderr", pattern: RegExp): Promise<RegExpExecArray> =>
  new Promise((resolve, reject) => {
    let seen = ""
    const onData = (chunk: Buffer) => {
      seen += chunk.toString("utf8")
      const m = pattern.exec(seen)
      if (m) {
        child[stream]!.off("data", onData)
        resolve(m)
      }
    }
    child[stream]!.on("data", onData)
    child.once("exit", (code) => reject(new Error(`exited (${code}) before printing ${pattern}: ${seen}`)))
  })

const track = (child: ChildProcess) => {
  children.add(child)
  child.once("exit", () => children.delete(child))
  return child
}

/** Stops every child process a test left running (by its own handle). */
export const stopChildren = async () => {
  await Promise.all(
    [...children].map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve()
          c.once("exit", () => resolve())
          c.kill("SIGTERM")
        }),
    ),
  )
}

/**
 * A real MCP client connected through the gateway CLI to the test tool server: over stdio (the client
 * spawns the gateway, which spawns the server), or over Streamable HTTP (the server listens, the gateway
 * wraps its URL and listens itself, the client posts to the gateway).
 */
export const connect = async (mode: Mode, o: GatewayOptions): Promise<Connected> => {
  const dir = tempDir("mcp-gateway-test-")
  const callsFile = join(dir, "calls.log")
  const store = o.store ?? join(dir, "definitions.json")
  const gatewayEnv = {
    ...(process.env as Record<string, string>),
    AGENTGOV_URL: o.url,
    AGENTGOV_API_KEY: o.apiKey,
    AGENTGOV_MCP_SERVER: o.server,
    AGENTGOV_MCP_STORE: store,
  }
  const toolEnv = { TOOL_SERVER_CALLS: callsFile, ...o.toolEnv }
  const calls = () => {
    try {
      return readFileSync(callsFile, "utf8").split("\n").filter(Boolean)
    } catch {
      return []
    }
  }
  let stderr = ""
  const client = new Client({ name: "gateway-test", version: "1.0.0" })
  if (mode === "stdio") {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [...NODE_ARGS, BIN, ...(o.flags ?? []), "--", process.execPath, FIXTURE],
      env: { ...gatewayEnv, ...toolEnv },
      stderr: "pipe",
    })
    transport.stderr?.on("data", (c: Buffer) => {
      stderr += c.toString("utf8")
    })
    await client.connect(transport)
    return { client, calls, stderr: () => stderr, close: () => client.close() }
  }
  const tool = track(
    spawn(process.execPath, [FIXTURE, "--http"], {
      env: { ...process.env, ...toolEnv },
      stdio: ["ignore", "pipe", "inherit"],
    }),
  )
  const [, toolUrl] = (await waitForLine(tool, "stdout", /listening on (\S+)\n/)) as unknown as [string, string]
  const gateway = track(
    spawn(
      process.execPath,
      [
        ...NODE_ARGS,
        BIN,
        "--listen",
        "127.0.0.1:0",
        "--upstream-url",
        toolUrl,
        ...(o.httpToken === undefined ? [] : ["--http-token", o.httpToken]),
        ...(o.flags ?? []),
      ],
      {
        env: gatewayEnv,
        stdio: ["ignore", "ignore", "pipe"],
      },
    ),
  )
  gateway.stderr!.on("data", (c: Buffer) => {
    stderr += c.toString("utf8")
  })
  const [, gatewayUrl] = (await waitForLine(gateway, "stderr", /listening on (\S+)\n/)) as unknown as [string, string]
  await client.connect(
    new StreamableHTTPClientTransport(
      new URL(gatewayUrl),
      o.httpToken === undefined ? undefined : { requestInit: { headers: { authorization: `Bearer ${o.httpToken}` } } },
    ),
  )
  return {
    client,
    calls,
    stderr: () => stderr,
    url: gatewayUrl,
    close: async () => {
      await client.close()
      for (const child of [gateway, tool]) {
        if (child.exitCode !== null) continue
        const exited = new Promise((r) => child.once("exit", r))
        child.kill("SIGTERM")
        await exited
      }
    },
  }
}

/** The text of a tool result's first content item. */
export const textOf = (result: unknown): string => {
  const content = (result as { content: Array<{ type: string; text?: string }> }).content
  return content[0]?.text ?? ""
}

/** The McpError a call rejects with. */
export const mcpError = async (call: Promise<unknown>): Promise<McpError> => {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(McpError)
  return error as McpError
}

/**
 * The agent's events of `type`, once there are at least `atLeast` of them (the gateway sends its events in the
 * background, in batches).
 */
export const eventsOf = async (admin: AgentGov, agentId: string, type: string, atLeast = 1) => {
  const deadline = Date.now() + 20_000
  for (;;) {
    const events = await admin.events.list({ type, agentId, limit: 100 }).toArray(1_000)
    if (events.length >= atLeast || Date.now() > deadline) return events
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** The scopes of a gateway's agent key in these suites. */
export const AGENT_SCOPES = [
  "guard:evaluate",
  "events:write",
  "events:read",
  "approvals:read",
  "policies:read",
  "agents:read",
]

/** A new agent, its gateway key, and a server name of its own (so that actions and policies do not collide). */
export const newAgent = async (admin: AgentGov, name = "mcp") => {
  const agent = await admin.agents.create({ name: unique(name) })
  const key = await admin.apiKeys.create({ name: "gateway", type: "agent", agentId: agent.id, scopes: AGENT_SCOPES })
  const server = unique("srv").replace(/[^a-z0-9]/g, "_")
  return { agentId: agent.id, apiKey: key.apiKey, server }
}

export type Rules = Parameters<AgentGov["policies"]["create"]>[0]["rules"]
/** A policy of these rules for the agent alone. */
export const policyFor = (admin: AgentGov, agentId: string, rules: Rules) =>
  admin.policies.create({ name: unique("mcp-policy"), target: { agentIds: [agentId] }, rules })
