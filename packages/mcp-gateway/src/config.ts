import { homedir } from "node:os"
import { basename, join } from "node:path"
import { parseArgs } from "node:util"

export interface GatewayConfig {
  readonly url: string
  readonly apiKey: string
  readonly server: string
  /** Upstream over stdio: the original command and its arguments. */
  readonly command?: { readonly command: string; readonly args: ReadonlyArray<string> }
  /** Upstream over Streamable HTTP. */
  readonly upstreamUrl?: string
  /** Downstream over Streamable HTTP on `host:port` (path `/mcp`); stdio when absent. */
  readonly listen?: { readonly host: string; readonly port: number }
  /** A bearer token HTTP clients must send (downstream HTTP only). */
  readonly httpToken?: string
  readonly onUnavailable: "deny" | "allow"
  readonly approvalTimeoutMs: number
  readonly allowedHosts?: ReadonlyArray<string>
  readonly storePath: string
  readonly hideDenied: boolean
  readonly guardTimeoutMs: number
}

export const USAGE = `usage: agentgov-mcp-gateway [options] -- <command> [args...]   (wrap a stdio MCP server)
       agentgov-mcp-gateway [options] --upstream-url <url>        (wrap a Streamable HTTP MCP server)

environment (each also a flag):
  AGENTGOV_URL                   the agentgov service, e.g. https://agentgov.example.com   (--url)
  AGENTGOV_API_KEY               an agent key (svc_ag_sk_…)                                (--api-key)
  AGENTGOV_MCP_SERVER            the server's name in actions mcp.<server>.<tool>          (--server)
                                 default: from the command (npx -y @acme/mcp-server-files → files)
  AGENTGOV_MCP_UPSTREAM_URL      the MCP server's Streamable HTTP endpoint                 (--upstream-url)
  AGENTGOV_MCP_LISTEN            serve Streamable HTTP on [host:]port at /mcp; default stdio (--listen)
  AGENTGOV_MCP_HTTP_TOKEN        bearer token HTTP clients must send; needed off loopback  (--http-token)
  AGENTGOV_MCP_ON_UNAVAILABLE    deny (default) | allow, when agentgov cannot be reached   (--on-unavailable)
  AGENTGOV_MCP_APPROVAL_TIMEOUT  seconds a call waits for an approval, default 50          (--approval-timeout)
  AGENTGOV_MCP_ALLOWED_HOSTS     hosts URLs in results may name (a.com,*.b.com); others are redacted (--allowed-hosts)
  AGENTGOV_MCP_STORE             the file of first-seen tool definitions                  (--store)
                                 default ~/.agentgov/mcp-gateway/definitions.json
  AGENTGOV_MCP_HIDE_DENIED       true (default) | false: hide tools the policies deny outright (--hide-denied)
  AGENTGOV_MCP_GUARD_TIMEOUT     milliseconds per guard attempt, default 5000             (--guard-timeout)`

export class ConfigError extends Error {}

/** `npx -y @acme/mcp-server-files` → `files`; `python weather_server.py` → `weather_server`. */
/** Whether a listen host is this machine's loopback only (what the HTTP listener may serve without a token). */
export const isLoopbackHost = (host: string): boolean =>
  ["127.0.0.1", "localhost", "::1", "[::1]"].includes(host.toLowerCase())

export const serverNameFromCommand = (command: string, args: ReadonlyArray<string>): string => {
  const words = [command, ...args].filter((a) => !a.startsWith("-"))
  const runners = new Set([
    "npx",
    "node",
    "uvx",
    "uv",
    "python",
    "python3",
    "deno",
    "bun",
    "bunx",
    "pnpm",
    "dlx",
    "run",
    "exec",
    "docker",
  ])
  const subject = words.filter((w) => !runners.has(basename(w))).at(0) ?? command
  const name = basename(subject.replace(/@[^/@]*$/, "")) // drop a version (`pkg@1.2.3`)
    .replace(/\.(m?[jt]s|py|sh|exe)$/i, "")
    .replace(/^(mcp[-_]server[-_]|server[-_]|mcp[-_])/i, "")
    .replace(/([-_]mcp[-_]server|[-_]mcp|[-_]server)$/i, "")
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "_")
  return name === "" ? "server" : name
}

const positiveNumber = (value: string, what: string): number => {
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0) throw new ConfigError(`${what} must be a positive number, not "${value}"`)
  return n
}

/** Flags win over the environment; throws {@link ConfigError} with a message fit for the user. */
export const parseConfig = (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): GatewayConfig => {
  const dashes = argv.indexOf("--")
  const own = dashes === -1 ? argv : argv.slice(0, dashes)
  const wrapped = dashes === -1 ? [] : argv.slice(dashes + 1)
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: [...own],
      options: {
        url: { type: "string" },
        "api-key": { type: "string" },
        server: { type: "string" },
        "upstream-url": { type: "string" },
        listen: { type: "string" },
        "http-token": { type: "string" },
        "on-unavailable": { type: "string" },
        "approval-timeout": { type: "string" },
        "allowed-hosts": { type: "string" },
        store: { type: "string" },
        "hide-denied": { type: "string" },
        "guard-timeout": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (error) {
    throw new ConfigError((error as Error).message)
  }
  if (values.help) throw new ConfigError("")
  const pick = (flag: string, name: string) => (values[flag] as string | undefined) ?? (env[name] || undefined)

  const url = pick("url", "AGENTGOV_URL")
  const apiKey = pick("api-key", "AGENTGOV_API_KEY")
  if (!url) throw new ConfigError("AGENTGOV_URL is not set: the agentgov service to ask")
  if (!apiKey) throw new ConfigError("AGENTGOV_API_KEY is not set: an agent key (svc_ag_sk_…)")
  const upstreamUrl = pick("upstream-url", "AGENTGOV_MCP_UPSTREAM_URL")
  if (wrapped.length === 0 && !upstreamUrl)
    throw new ConfigError("nothing to wrap: give `-- <command> [args...]` or --upstream-url")
  if (wrapped.length > 0 && upstreamUrl) throw new ConfigError("give either `-- <command>` or --upstream-url, not both")
  if (upstreamUrl) {
    try {
      new URL(upstreamUrl)
    } catch {
      throw new ConfigError(`--upstream-url is not a URL: "${upstreamUrl}"`)
    }
  }
  const onUnavailable = pick("on-unavailable", "AGENTGOV_MCP_ON_UNAVAILABLE") ?? "deny"
  if (onUnavailable !== "deny" && onUnavailable !== "allow")
    throw new ConfigError(`AGENTGOV_MCP_ON_UNAVAILABLE must be deny or allow, not "${onUnavailable}"`)
  const hide = pick("hide-denied", "AGENTGOV_MCP_HIDE_DENIED") ?? "true"
  if (hide !== "true" && hide !== "false")
    throw new ConfigError(`AGENTGOV_MCP_HIDE_DENIED must be true or false, not "${hide}"`)

  let listen: GatewayConfig["listen"]
  const listenSpec = pick("listen", "AGENTGOV_MCP_LISTEN")
  if (listenSpec) {
    const m = /^(?:(.+):)?(\d{1,5})$/.exec(listenSpec)
    if (!m || Number(m[2]) > 65535) throw new ConfigError(`--listen must be [host:]port, not "${listenSpec}"`)
    listen = { host: m[1] ?? "127.0.0.1", port: Number(m[2]) }
  }
  const command = wrapped.length > 0 ? { command: wrapped[0]!, args: wrapped.slice(1) } : undefined
  const server =
    pick("server", "AGENTGOV_MCP_SERVER") ??
    (command
      ? serverNameFromCommand(command.command, command.args)
      : serverNameFromCommand(new URL(upstreamUrl!).hostname, []))
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(server))
    throw new ConfigError(
      `AGENTGOV_MCP_SERVER must be 1–64 letters, digits, '-' or '_' (it is a segment of the action name), not "${server}"`,
    )
  const hosts = pick("allowed-hosts", "AGENTGOV_MCP_ALLOWED_HOSTS")
  const approvalTimeout = pick("approval-timeout", "AGENTGOV_MCP_APPROVAL_TIMEOUT")
  const guardTimeout = pick("guard-timeout", "AGENTGOV_MCP_GUARD_TIMEOUT")
  const httpToken = pick("http-token", "AGENTGOV_MCP_HTTP_TOKEN")
  // Off loopback, anyone who can reach the port (another machine, a web page through a name it rebinds) could
  // call the agent's tools: no Host or Origin tells a stranger apart there, only a token.
  if (listen && !isLoopbackHost(listen.host) && !httpToken)
    throw new ConfigError(
      `--listen on ${listen.host} is reachable beyond this machine: set AGENTGOV_MCP_HTTP_TOKEN (--http-token), or listen on 127.0.0.1`,
    )
  return {
    url,
    apiKey,
    server,
    ...(command ? { command } : {}),
    ...(upstreamUrl ? { upstreamUrl } : {}),
    ...(listen ? { listen } : {}),
    ...(httpToken ? { httpToken } : {}),
    onUnavailable,
    approvalTimeoutMs: approvalTimeout
      ? positiveNumber(approvalTimeout, "AGENTGOV_MCP_APPROVAL_TIMEOUT") * 1000
      : 50_000,
    ...(hosts
      ? {
          allowedHosts: hosts
            .split(",")
            .map((h) => h.trim())
            .filter(Boolean),
        }
      : {}),
    storePath: pick("store", "AGENTGOV_MCP_STORE") ?? join(homedir(), ".agentgov", "mcp-gateway", "definitions.json"),
    hideDenied: hide === "true",
    guardTimeoutMs: guardTimeout ? positiveNumber(guardTimeout, "AGENTGOV_MCP_GUARD_TIMEOUT") : 5_000,
  }
}
