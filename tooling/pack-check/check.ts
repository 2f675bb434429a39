/**
 * The published packages as a user gets them: builds, packs the publishable packages, installs the tarballs
 * in a fresh project outside the repository (with the machine's own Node and npm, none of the repository's
 * node_modules on the PATH), and there runs the SDK README's quick start and a typed tRPC client against a
 * real server, type-checks them under `moduleResolution` `nodenext` and `bundler`, and verifies an exported
 * audit bundle with `npx agentgov-verify`, and runs the MCP gateway's example (an MCP client, the gateway, a small
 * MCP server) as installed. Run by CI after the tests: `npm run pack-check`.
 *
 * The server is started like in production: environment variables and the key it prints on its first start,
 * so it works on whichever store is the default.
 */
import { type SpawnSyncOptions, spawnSync } from "node:child_process"
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type ChildServer, spawnServer, stopChildren } from "../../apps/server/test/childServer.ts"

const repo = fileURLToPath(new URL("../../", import.meta.url))
const fixture = fileURLToPath(new URL("fixture/", import.meta.url))
const PUBLISHED = [
  "@agentgov/sdk",
  "@agentgov/connector-sdk",
  "@agentgov/verifier",
  "@agentgov/trpc-types",
  "@agentgov/mcp-gateway",
]
const readJson = (path: string) => JSON.parse(readFileSync(path, "utf8"))
const rootPackage = readJson(join(repo, "package.json"))
const trpcVersion: string = readJson(join(repo, "packages/trpc-types/package.json")).devDependencies["@trpc/server"]

/** Loads every entry point of the SDK installed alone (`ai` is an optional peer, loaded by nothing at run time). */
const SDK_ALONE = `
import { AgentGov } from "@agentgov/sdk"
import { governTools } from "@agentgov/sdk/ai"
import { Webhook } from "@agentgov/sdk/webhooks"
if (typeof AgentGov !== "function" || typeof governTools !== "function" || typeof Webhook !== "function") process.exit(1)
console.log("@agentgov/sdk installed alone: its three entry points load")
`

const step = (title: string) => console.log(`\n== pack-check: ${title}`)

/**
 * The environment of a user's shell: no `npm_*` variables of this `npm run` (they name the repository as the
 * prefix) and no `node_modules/.bin` of the repository on the PATH (so `node` is the machine's, not the
 * repository's Node 24).
 */
const outside: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env)
    .filter(([name]) => !/^npm_/i.test(name) && name !== "INIT_CWD")
    .map(([name, value]) =>
      name === "PATH"
        ? [
            name,
            value!
              .split(delimiter)
              .filter((dir) => !dir.startsWith(repo))
              .join(delimiter),
          ]
        : [name, value],
    ),
)

const run = (command: string, args: ReadonlyArray<string>, options: SpawnSyncOptions & { capture?: boolean }) => {
  const result = spawnSync(command, args, {
    ...options,
    encoding: "utf8",
    stdio: options.capture ? ["ignore", "pipe", "inherit"] : "inherit",
  })
  if (result.status !== 0) {
    throw new Error(`\`${command} ${args.join(" ")}\` failed (${result.error ?? `exit ${result.status}`})`)
  }
  return String(result.stdout ?? "")
}

/** The first TypeScript block under "## Quick start" of the SDK's README: the code a user copies. */
const quickStart = (): string => {
  const readme = readFileSync(join(repo, "packages/sdk/README.md"), "utf8")
  const block = /^## Quick start\n[\s\S]*?^```ts\n([\s\S]*?)^```/m.exec(readme)?.[1]
  if (!block) throw new Error("packages/sdk/README.md has no ```ts block under '## Quick start'")
  return [
    "// The quick start of @agentgov/sdk's README, as is; `mailer` stands for the reader's own.",
    "const mailer = { send: async (to: string, body: string) => ({ to, length: body.length }) }",
    block,
  ].join("\n")
}

const work = mkdtempSync(join(tmpdir(), "agentgov-pack-check-"))
// mkdtemp makes it 0700: a store that runs as another user (an embedded PostgreSQL started by root runs as
// `postgres`) must reach its data directory inside.
chmodSync(work, 0o755)
const packs = join(work, "packs")
const project = join(work, "project")
let failed = false
let server: ChildServer | undefined
try {
  step("npm run build")
  run("npm", ["run", "build"], { cwd: repo })

  step(`npm pack ${PUBLISHED.join(" ")}`)
  mkdirSync(packs)
  // Each package's prepack builds it (turbo: a cache hit after the build above).
  run("npm", ["pack", ...PUBLISHED.flatMap((p) => ["-w", p]), "--pack-destination", packs, "--silent"], {
    cwd: repo,
  })
  const tarballs = readdirSync(packs).map((f) => join(packs, f))
  if (tarballs.length !== PUBLISHED.length)
    throw new Error(`packed ${tarballs.length} tarballs, not ${PUBLISHED.length}`)

  step(`a fresh project in ${project}`)
  cpSync(fixture, project, { recursive: true })
  const inProject = { cwd: project, env: outside }
  run("npm", ["init", "-y", "--silent"], { ...inProject, capture: true })
  run("npm", ["pkg", "set", "type=module"], inProject)
  const install = (specs: ReadonlyArray<string>) =>
    run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", ...specs], inProject)
  // The SDK first, alone: nothing it needs, the webhook verifier included, may have to come from elsewhere.
  const sdk = tarballs.find((t) =>
    t.endsWith(`agentgov-sdk-${readJson(join(repo, "packages/sdk/package.json")).version}.tgz`),
  )
  install([sdk!])
  run("node", ["--input-type=module", "-e", SDK_ALONE], inProject)
  const typescript = `typescript@${rootPackage.devDependencies.typescript}`
  install([...tarballs, typescript, "@types/node", `@trpc/client@${trpcVersion}`, `@trpc/server@${trpcVersion}`])
  const versions = (command: string, args: Array<string>) => run(command, args, { ...inProject, capture: true }).trim()
  console.log(
    `node ${versions("node", ["--version"])}, npm ${versions("npm", ["--version"])}, ${versions("npx", ["tsc", "--version"])}, @types/node ${readJson(join(project, "node_modules/@types/node/package.json")).version}`,
  )
  const installed = readJson(join(project, "package-lock.json")).packages as Record<string, { resolved?: string }>
  const fromRegistry = Object.entries(installed).filter(
    ([path, p]) => path.startsWith("node_modules/@agentgov/") && !p.resolved?.startsWith("file:"),
  )
  if (fromRegistry.length > 0) throw new Error(`not installed from the tarballs: ${fromRegistry.map(([p]) => p)}`)
  writeFileSync(join(project, "src/quickstart.ts"), quickStart())

  step("type-check: moduleResolution nodenext (and emit), then bundler")
  run("npx", ["tsc", "-p", "tsconfig.nodenext.json"], inProject)
  run("npx", ["tsc", "-p", "tsconfig.bundler.json"], inProject)
  console.log("both type-check")

  step("start a server from the repository")
  server = await spawnServer({ AGENTGOV_DATA_DIR: join(work, "data") })
  const { url } = server
  const adminKey = await server.waitForKey(60_000)
  const api = async (method: string, path: string, body?: unknown, key = adminKey) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`)
    return JSON.parse(text)
  }
  console.log(`listening on ${url}`)
  const agent = (await api("POST", "/api/v1/agents", { name: "quick-start" })).data
  const agentKey = (
    await api("POST", "/api/v1/api-keys", {
      name: "quick-start",
      type: "agent",
      agentId: agent.id,
      scopes: ["guard:evaluate", "events:write", "events:read", "approvals:read"],
    })
  ).data.apiKey
  const env = { ...outside, AGENTGOV_URL: url }

  step("the SDK README's quick start (node out/quickstart.js)")
  run("node", ["out/quickstart.js"], { cwd: project, env: { ...env, AGENTGOV_API_KEY: agentKey } })
  const tracked = (await api("GET", `/api/v1/events?type=report.sent&agentId=${agent.id}`)).data
  const guarded = (await api("GET", `/api/v1/events?agentId=${agent.id}&limit=100`)).data
  if (tracked.length !== 1) throw new Error(`the quick start's report.sent was stored ${tracked.length} times`)
  console.log(`stored: ${guarded.map((e: { type: string }) => e.type).join(", ")}`)

  step("the typed tRPC client (node out/trpc.js)")
  run("node", ["out/trpc.js"], { cwd: project, env: { ...env, AGENTGOV_ADMIN_KEY: adminKey } })

  step("@agentgov/sdk/webhooks (node out/webhooks.js)")
  run("node", ["out/webhooks.js"], { cwd: project, env })

  step("@agentgov/mcp-gateway's example: an MCP client, agentgov-mcp-gateway, and the example's server")
  const mcpKey = (
    await api("POST", "/api/v1/api-keys", {
      name: "mcp-gateway",
      type: "agent",
      agentId: agent.id,
      scopes: ["guard:evaluate", "events:write", "events:read", "approvals:read", "policies:read", "agents:read"],
    })
  ).data.apiKey
  await api("POST", "/api/v1/policies", {
    name: "no deleting notes",
    target: { agentIds: [agent.id] },
    rules: [{ id: "no-delete", effect: "deny", actions: ["mcp.notes.delete_notes"], reason: "notes are kept" }],
  })
  const example = run("node", ["node_modules/@agentgov/mcp-gateway/example/run.mjs"], {
    cwd: project,
    env: { ...env, AGENTGOV_API_KEY: mcpKey, AGENTGOV_MCP_STORE: join(work, "mcp-definitions.json") },
    capture: true,
  })
  console.log(example.trim())
  if (/tools:.*delete_notes/.test(example) || !/delete_notes → refused/.test(example))
    throw new Error("the MCP gateway did not hide and refuse delete_notes")
  const mcpEvents = async (type: string, count: number) => {
    for (let i = 0; i < 100; i++) {
      const found = (await api("GET", `/api/v1/events?type=${type}&agentId=${agent.id}`)).data
      if (found.length >= count) return found
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw new Error(`the gateway's ${type} events did not arrive`)
  }
  await mcpEvents("mcp.tool.called", 2)
  await mcpEvents("mcp.tool.denied", 1)
  await mcpEvents("mcp.result.redacted", 1)
  console.log("the gateway recorded mcp.tool.called, mcp.tool.denied and mcp.result.redacted")

  step("npx agentgov-verify bundle.json --jwks jwks.json")
  writeFileSync(join(project, "bundle.json"), JSON.stringify(await api("GET", "/api/v1/events/export")))
  const jwks = await fetch(`${url}/.well-known/jwks.json`)
  writeFileSync(join(project, "jwks.json"), await jwks.text())
  run("npx", ["agentgov-verify", "bundle.json", "--jwks", "jwks.json"], { cwd: project, env })
} catch (error) {
  failed = true
  console.error(`\npack-check FAILED: ${error instanceof Error ? error.message : String(error)}`)
  console.error(`(the fresh project is kept in ${work})`)
} finally {
  // SIGTERM first, so that the server stops its store (an embedded database's own processes) as in production.
  if (server && server.proc.exitCode === null) {
    server.proc.kill("SIGTERM")
    await Promise.race([server.exited, new Promise((resolve) => setTimeout(resolve, 30_000).unref())])
    console.log(
      `server stopped (${server.proc.exitCode === null ? "did not exit on SIGTERM: killed" : `exit ${server.proc.exitCode}`})`,
    )
  }
  await stopChildren()
  if (!failed) rmSync(work, { recursive: true, force: true })
}
if (failed) process.exit(1)
console.log("\npack-check: the published packages install and work outside the repository")
