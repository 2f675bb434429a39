import { settledWithin } from "./background.ts"
import { DASHBOARD_DIST } from "./dashboard.ts"
import { configAndLock } from "./dataDirLock.ts"
import { makeLogger } from "./logger.ts"
import { refuseStart } from "./startupError.ts"
import { embeddedClusterDir, embeddedStore, startEmbedded } from "./store.ts"

// Every refusal the operator can fix (configuration, port, data directory, store, Redis) is one
// `agentgov: …` line on stderr and exit 2; anything else is a defect and keeps its stack trace.
const { config, release } = configAndLock()
const log = makeLogger(config.logLevel)
// The embedded cluster boots while the server's modules load: both take a while on a first start.
const cluster = config.databaseUrl ? undefined : startEmbedded(config.dataDir)
cluster?.catch(() => {}) // awaited, and reported, by the store below
const { startServer } = await import("./server.ts")
let server: Awaited<ReturnType<typeof startServer>>
try {
  server = await startServer(config, {
    logger: log,
    dashboardDir: DASHBOARD_DIST,
    ...(cluster ? { store: embeddedStore(() => cluster) } : {}),
  })
} catch (e) {
  // A cluster this start began is stopped by its watchdog when this process exits.
  release()
  refuseStart(e)
  throw e
}

const store = config.databaseUrl
  ? "PostgreSQL (DATABASE_URL)"
  : `embedded PostgreSQL in ${embeddedClusterDir(config.dataDir)}`
log.info("agentgov listening", { url: server.url, store })
if (config.webhookAllowlist && config.webhookAllowlist.length > 0)
  // Said at every start: these are the operator's own services that every workspace's webhooks may reach.
  log.info("webhooks may target these non-public addresses (AGENTGOV_WEBHOOK_ALLOWLIST)", {
    allowlist: config.webhookAllowlist,
  })
if (server.metricsUrl)
  log.info("metrics served", {
    url: server.metricsUrl,
    ...(config.metrics!.token === undefined && !/^(127\.|localhost$|::1$|\[::1\]$)/.test(config.metrics!.host)
      ? {
          warning:
            "no AGENTGOV_METRICS_TOKEN on a non-loopback address: anyone who reaches this port reads the metrics (counts and operation names, no ids or secrets)",
        }
      : {}),
  })
if (config.databaseUrl && !process.env.AGENTGOV_PUBLIC_URL)
  // The public URL is the SDK tokens' issuer: derived from this instance's host and port, it differs between
  // instances on one host, and a token minted by one would be refused by the others as of a wrong issuer.
  log.warn("AGENTGOV_PUBLIC_URL is not set: SDK tokens are issued by this instance's own URL", {
    issuer: server.publicUrl,
    hint: "instances sharing a PostgreSQL database must share AGENTGOV_PUBLIC_URL for their tokens to work on each other",
  })
if (server.bootstrapped) {
  // Printed once, on stdout, on the first start only: the key is stored nowhere in clear.
  process.stdout.write(
    [
      "",
      "  First start: created workspace `default` and a workspace key with every scope.",
      "  It is shown this once; store it now:",
      "",
      `    ${server.bootstrapped.apiKey}`,
      "",
      `  Try:  curl -s -X POST ${server.url}/api/v1/agents -H "Authorization: Bearer <key>" \\`,
      `          -H "Content-Type: application/json" -d '{"name":"my-agent"}'`,
      `  More keys:  POST ${server.url}/api/v1/api-keys, or  npm run cli -- key create --help`,
      `  API reference:  ${server.url}/api/v1/reference`,
      ...(server.bootstrapped.signInLink
        ? [
            "",
            "  No sign-in provider is configured (AGENTGOV_OIDC_PROVIDERS). This link signs the workspace's owner in",
            "  to the dashboard once, within 24 hours; then add a provider (see the README):",
            "",
            `    ${server.bootstrapped.signInLink}`,
          ]
        : []),
      "",
    ].join("\n") + "\n",
  )
} else if (config.bootstrap) {
  // A later start: the operator who lost the first key learns it cannot be shown again, and how to make another.
  process.stdout.write(
    [
      "",
      "  This store was set up by an earlier start, which showed its workspace key once; it is kept only as a",
      "  hash and cannot be shown again. To create another key:",
      `    ${config.databaseUrl ? "" : "stop the server (one process owns the data directory), then "}npm run cli -- workspace list`,
      "    npm run cli -- key create --workspace <ws_id> --name <name> --scopes all",
      `  or, with a key that may create keys:  POST ${server.url}/api/v1/api-keys`,
      "",
    ].join("\n") + "\n",
  )
}

let stopping = false
/** Past this, a shutdown that has not finished (a store that no longer answers, say) ends the process anyway. */
const STOP_DEADLINE_MS = 60_000
/** Ends the process, its data directory released (the embedded PostgreSQL is stopped by its watchdog). */
const exit = (code: 0 | 1): never => {
  release()
  process.exit(code)
}
const stop = async (signal: string) => {
  if (stopping) {
    // A second signal: the operator will not wait.
    log.warn("second signal: exiting without finishing the shutdown", { signal })
    exit(1)
  }
  stopping = true
  log.info("shutting down", { signal })
  setTimeout(() => {
    log.error("the shutdown did not finish in time: exiting", { deadlineMs: STOP_DEADLINE_MS })
    exit(1)
  }, STOP_DEADLINE_MS).unref()
  try {
    await server.close()
  } catch (cause) {
    log.error("the shutdown failed", { cause: String(cause) })
    exit(1)
  }
  exit(0)
}
// The embedded PostgreSQL gone while the server runs (killed, out of memory): nothing would bring it back, and
// every request would wait for a store that never answers. Said in one line, and exit for a supervisor to restart
// (the next start recovers the cluster).
void cluster?.then((pg) =>
  pg.exited.then((code) => {
    if (stopping) return
    stopping = true
    log.error("the embedded PostgreSQL exited while the server ran: exiting", {
      pid: pg.pid,
      code,
      log: `${embeddedClusterDir(config.dataDir)}.log`,
    })
    exit(1)
  }),
)
// A rejection no code awaited (the driver's write to a store that just died, say): one line, then exit 1 as Node
// would. When the embedded PostgreSQL is what went away, its own line above says why, so it gets a moment first.
process.on("unhandledRejection", (reason) => {
  void (async () => {
    const pg = await cluster?.catch(() => undefined)
    if (pg) await settledWithin([pg.exited], 3_000)
    if (stopping) return
    stopping = true
    log.error("unexpected error: exiting", {
      cause: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason),
    })
    exit(1)
  })()
})
process.on("SIGINT", () => void stop("SIGINT"))
process.on("SIGTERM", () => void stop("SIGTERM"))
