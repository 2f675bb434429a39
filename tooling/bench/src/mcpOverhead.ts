import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { AgentGov } from "../../../packages/sdk/src/index.ts"
import { type BenchmarkResult, benchmark, median, round, summarise, target } from "./report.ts"
import { type BenchServer, startServer } from "./server.ts"

/**
 * The MCP gateway (issue 35): what `agentgov-mcp-gateway` adds to an allowed `tools/call` over stdio. One MCP
 * client (the SDK's) calls the example's notes server (packages/mcp-gateway/example/notes-server.mjs)
 * directly, another calls the same server through the gateway's CLI (`agentgov-mcp-gateway -- node
 * notes-server.mjs`), sequentially, in interleaved rounds. Every gateway call is a guard call of the agent's
 * key (allowed by a policy) and a `mcp.tool.called` event. The service is a server child of its own on its
 * embedded default (no DATABASE_URL, a fresh data directory), as a team trying the gateway runs it.
 * Measured beside them, to tell the gateway's own cost from the service's: the same guard call alone, made
 * by the agent SDK from this process (what every allowed call must wait for before it is forwarded).
 */

const ROUNDS = 5
const CALLS = 300
const WARMUP = 300
const TOOL = "list_notes"
const SERVER = "notes"

const expectStatus = (res: { status: number; body: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what} answered ${res.status}: ${JSON.stringify(res.body)}`)
  return res.body.data
}

/** An agent with a gateway key, and a policy allowing the tool. */
const agentKey = async (server: BenchServer) => {
  const agent = expectStatus(
    await server.call("POST", "/api/v1/agents", { name: "bench-mcp" }),
    201,
    "creating the agent",
  )
  const key = expectStatus(
    await server.call("POST", "/api/v1/api-keys", {
      name: "bench-mcp-gateway",
      type: "agent",
      agentId: agent.id,
      scopes: ["guard:evaluate", "events:write", "events:read", "approvals:read", "policies:read", "agents:read"],
    }),
    201,
    "creating the agent key",
  )
  expectStatus(
    await server.call("POST", "/api/v1/policies", {
      name: "bench-mcp-allow",
      target: { agentIds: [agent.id] },
      rules: [{ id: "allow-notes", effect: "allow", actions: [`mcp.${SERVER}.*`] }],
    }),
    201,
    "creating the policy",
  )
  return key.apiKey as string
}

const connect = async (command: string, args: ReadonlyArray<string>, env: Record<string, string>) => {
  const client = new Client({ name: "agentgov-bench", version: "1.0.0" })
  let stderr = ""
  const transport = new StdioClientTransport({ command, args: [...args], env, stderr: "pipe" })
  transport.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString("utf8")
  })
  await client.connect(transport)
  return { client, stderr: () => stderr }
}

/** `n` sequential calls; each one's time in ms. */
const timed = async (client: Client, n: number) => {
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const start = performance.now()
    const result = await client.callTool({ name: TOOL, arguments: {} })
    out.push(performance.now() - start)
    if (result.isError) throw new Error(`${TOOL} failed: ${JSON.stringify(result.content)}`)
  }
  return out
}

export async function runMcpOverheadBenchmark(root: string, log: (line: string) => void): Promise<BenchmarkResult> {
  const dataDir = mkdtempSync(join(tmpdir(), "agentgov-bench-mcp-"))
  // as root the embedded cluster runs as the `postgres` user, which must enter it
  chmodSync(dataDir, 0o755)
  let server: BenchServer | undefined
  const clients: Array<Client> = []
  try {
    log("mcp-overhead: a server on its embedded default")
    server = await startServer({ root, databaseUrl: undefined, dataDir })
    const apiKey = await agentKey(server)
    const notes = join(root, "packages/mcp-gateway/example/notes-server.mjs")
    const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" }
    const direct = await connect(process.execPath, [notes], env)
    clients.push(direct.client)
    const gateway = await connect(
      process.execPath,
      ["--conditions=@agentgov/source", join(root, "packages/mcp-gateway/src/cli.ts"), "--", process.execPath, notes],
      {
        ...env,
        AGENTGOV_URL: server.url,
        AGENTGOV_API_KEY: apiKey,
        AGENTGOV_MCP_SERVER: SERVER,
        AGENTGOV_MCP_STORE: join(dataDir, "definitions.json"),
      },
    )
    clients.push(gateway.client)
    await gateway.client.listTools()
    log(`mcp-overhead: warm-up, ${WARMUP} calls each`)
    await timed(direct.client, WARMUP)
    await timed(gateway.client, WARMUP)
    const agent = new AgentGov({ apiKey, baseUrl: server.url }).agent({ guardMaxRetries: 1 })
    const context = {
      server: SERVER,
      tool: TOOL,
      arguments: {},
      definition: { known: true, flagged: false, findings: [] },
    }
    const guardAlone = async (n: number) => {
      const out: Array<number> = []
      for (let i = 0; i < n; i++) {
        const start = performance.now()
        const d = await agent.guard(`mcp.${SERVER}.${TOOL}`, context)
        out.push(performance.now() - start)
        if (!d.allowed) throw new Error(`the guard did not allow mcp.${SERVER}.${TOOL}: ${JSON.stringify(d)}`)
      }
      return out
    }
    await guardAlone(WARMUP)
    const rounds = []
    for (let r = 1; r <= ROUNDS; r++) {
      // interleaved, the order swapped every round
      const first = r % 2 === 1 ? await timed(direct.client, CALLS) : undefined
      const through = await timed(gateway.client, CALLS)
      const guard = summarise(await guardAlone(CALLS))
      const plain = first ?? (await timed(direct.client, CALLS))
      const d = summarise(plain)
      const g = summarise(through)
      log(
        `mcp-overhead round ${r}: direct p50 ${d.p50} ms, through the gateway p50 ${g.p50} ms (+${round(g.p50 - d.p50, 2)}); the guard call alone p50 ${guard.p50} ms`,
      )
      rounds.push({ direct: d, gateway: g, guardAlone: guard, addedP50: round(g.p50 - d.p50, 2) })
    }
    await agent.shutdown({ timeoutMs: 5_000 })
    const added = median(rounds.map((r) => r.addedP50))
    const problems = gateway
      .stderr()
      .split("\n")
      .filter((l) => l.trim() !== "")
    return benchmark({
      name: "mcp-overhead",
      what: `${ROUNDS} interleaved rounds of ${CALLS} sequential allowed tools/call (${TOOL} of the example notes server) over stdio, directly and through agentgov-mcp-gateway (a guard call and an mcp.tool.called event each), the service on its embedded default; the median over rounds of the gateway's p50 minus the direct p50`,
      unit: "ms added (p50)",
      value: added,
      baseline: {
        what: "the same MCP server called directly over stdio by the same kind of client, same run (p50, median over rounds)",
        value: median(rounds.map((r) => r.direct.p50)),
      },
      targets: [target("p50 added per allowed tools/call (ms)", "max", 1.5, added)],
      details: {
        guardAloneP50: {
          what: "the same guard call made alone by the agent SDK from the bench process, same rounds (median of the rounds' p50): the part of the overhead that is the service's",
          value: median(rounds.map((r) => r.guardAlone.p50)),
        },
        rounds,
        gatewayStderr: problems.slice(0, 10),
        serverProblems: server.problems.slice(0, 10),
      },
    })
  } finally {
    for (const c of clients) await c.close().catch(() => undefined)
    await server?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
