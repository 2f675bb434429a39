import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import {
  ApiError,
  authorizationOf,
  buildOpenApi,
  makeEventStreamHandler,
  makeExecutor,
  makePublicRoutes,
  makeRestHandler,
  makeTrpcRouter,
  operations,
  type Runtime,
  renderReference,
  requestIdOf,
  sendError,
  sendJson,
  sessionRequestOf,
} from "@agentgov/api"
import {
  ApiKeyService,
  ApprovalService,
  C2paSigner,
  ContentService,
  ContentSettings,
  DomainLayer,
  EnforcementService,
  Idempotency,
  OAuthService,
  Sessions,
  SigningKeys,
} from "@agentgov/domain"
import { createHTTPHandler } from "@trpc/server/adapters/standalone"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { checkpointAll, verifyAllChains } from "./auditJobs.ts"
import { STOP_GRACE_MS, settledWithin } from "./background.ts"
import { type BootstrapResult, bootstrap } from "./bootstrap.ts"
import { type ComplianceWorker, startComplianceWorker } from "./complianceWorker.ts"
import { type ServerConfig, urlHostOf } from "./config.ts"
import { makeDashboard } from "./dashboard.ts"
import { admitMasterKey, chooseMasterKey, domainSettings } from "./domainSettings.ts"
import {
  type Instruments,
  installBatchHook,
  instrumentExecutor,
  instrumentHandler,
  operationObserver,
} from "./instrument.ts"
import { type Logger, makeLogger } from "./logger.ts"
import { makeMetricsHandler, processMetrics, type StoreProbe } from "./metrics.ts"
import { makeOAuthRoutes } from "./oauth/OAuthRoutes.ts"
import { makeSignIn } from "./signin/SignIn.ts"
import { StartupError } from "./startupError.ts"
import { migratedStore, type StoreLayer, storeLayer, storeName } from "./store.ts"
import { effectTracerLayer, startTracing, untraced } from "./tracing.ts"
import { startTrustWorker, type TrustWorker } from "./trustWorker.ts"
import { startWebhookWorker, type WebhookWorker, webhookSettings } from "./webhookWorker.ts"

/** A probe's SQL, not traced: a scrape is not the service's work. */
const untracedUse = <A, E>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) => untraced(SqlClient.SqlClient.use(f))

/** The metrics' probes of the store, read at scrape time only. */
const storeProbe = (runtime: Runtime): StoreProbe => ({
  checkpointAgeSeconds: async () => {
    const [row] = await runtime.runPromise(
      untracedUse(
        (sql) => sql<{ age: number | null }>`SELECT extract(epoch FROM now() - max(signed_at))::float8 AS age
          FROM (SELECT max(signed_at) AS signed_at FROM checkpoints GROUP BY workspace_id) c`,
      ),
    )
    return row?.age ?? undefined
  },
  chainEvents: async () => {
    const [row] = await runtime.runPromise(
      untracedUse((sql) => sql<{ n: number }>`SELECT coalesce(sum(sequence), 0)::float8 AS n FROM chain_heads`),
    )
    return row?.n ?? 0
  },
  webhookQueueDepth: async () => {
    const [row] = await runtime.runPromise(
      untracedUse(
        // A deleted webhook's rows wait for the purge and are never sent: not queued.
        (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries d
          WHERE d.status = 'pending' AND EXISTS (SELECT 1 FROM webhooks h WHERE h.id = d.webhook_id)`,
      ),
    )
    return row?.n ?? 0
  },
})

/** /metrics alone on a port of its own (AGENTGOV_METRICS_PORT): every other path is a 404. */
const listenMetrics = async (
  host: string,
  port: number,
  handler: ReturnType<typeof makeMetricsHandler>,
): Promise<Server> => {
  const s = createServer((req, res) => {
    const requestId = requestIdOf(req)
    if ((req.url ?? "/").split("?")[0] === "/metrics")
      return void handler(req, res, requestId).catch(() => res.destroy())
    sendError(res, new ApiError(404, "NOT_FOUND", "this port serves /metrics only"), requestId)
  })
  await new Promise<void>((resolve, reject) => {
    s.once("error", (e: NodeJS.ErrnoException) =>
      reject(new StartupError(`cannot serve metrics on ${host}:${port} (${e.code}): set AGENTGOV_METRICS_PORT`)),
    )
    s.listen(port, host, () => resolve())
  })
  return s
}

export interface RunningServer {
  readonly url: string
  /** The public base URL in use: AGENTGOV_PUBLIC_URL, or derived from HOST and the bound port. */
  readonly publicUrl: string
  readonly port: number
  readonly runtime: Runtime
  /** Set on the first start against an empty store: the bootstrap key, shown once. */
  readonly bootstrapped: BootstrapResult | undefined
  /** `http://host:port/metrics` when metrics have a port of their own (AGENTGOV_METRICS_PORT). */
  readonly metricsUrl?: string
  readonly close: () => Promise<void>
}

export interface StartOptions {
  /** Replaces the store chosen from config (tests pass a fresh database). */
  readonly store?: StoreLayer
  readonly logger?: Logger
  /** SSE heartbeat interval (tests shorten it). */
  readonly heartbeatMs?: number
  /** The built dashboard's directory, served at `/` (`main.ts` passes apps/dashboard/dist); none when absent. */
  readonly dashboardDir?: string
}

const API_PREFIXES = ["/api/v1", "/v1"] as const
/** How long a stopping server waits for its unfinished requests before it closes their connections. */
const SHUTDOWN_GRACE_MS = 10_000
const JWKS_PATH = "/.well-known/jwks.json"

/**
 * Starts the service: migrates the store, bootstraps an empty one, and serves
 * REST (`/api/v1`, `/v1`), tRPC (`/trpc`), the OpenAPI document, the API
 * reference and health checks on one node:http server.
 */
export const startServer = async (given: ServerConfig, options: StartOptions = {}): Promise<RunningServer> => {
  let config = given
  const log = options.logger ?? makeLogger(config.logLevel)
  // Metrics and traces (issue 34): both off unless configured, and then nothing below is wrapped.
  const instruments: Instruments = {
    metrics: config.metrics ? processMetrics() : undefined,
    tracing: config.tracing === true,
  }
  if (instruments.tracing) await startTracing()
  // The port is taken before anything is written: a first start that bootstrapped and then found its
  // port in use would have created the one key it shows, and never shown it.
  let handle: ((req: IncomingMessage, res: ServerResponse) => Promise<void>) | undefined
  // Set by close(): every answer from then on ends its connection, so keep-alive clients move to another instance.
  let draining = false
  // Node's own check answers a missing Host with a bare 400 that no handler sees (nor the metrics): ours, below.
  const server: Server = createServer({ requireHostHeader: false }, (req, res) => {
    if (draining) res.shouldKeepAlive = false
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      instruments.metrics?.request("other", req.method ?? "OTHER", 400, 0)
      res.shouldKeepAlive = false
      return sendError(
        res,
        new ApiError(400, "BAD_REQUEST", "an HTTP/1.1 request must carry a Host header (RFC 9112 3.2)"),
        requestIdOf(req),
      )
    }
    if (!handle)
      return sendError(res, new ApiError(503, "NOT_READY", "the server is starting"), requestIdOf(req), {
        "retry-after": "1",
      })
    handle(req, res).catch((cause) => {
      // The id the response carries when one was set, so the log line and the answer name the same request.
      const requestId = String(res.getHeader("x-request-id") ?? requestIdOf(req))
      log.error("request failed", { requestId, cause: String(cause?.stack ?? cause) })
      if (!res.headersSent) sendError(res, new ApiError(500, "INTERNAL_ERROR", "internal error"), requestId)
      else res.destroy()
    })
  })
  // Requests Node's parser refuses (oversized headers, a target that is no path) still get the envelope.
  server.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable || (socket as { _httpMessage?: unknown })._httpMessage) return void socket.destroy()
    const [status, code, message] =
      err.code === "HPE_HEADER_OVERFLOW"
        ? [431, "HEADERS_TOO_LARGE", "request headers too large"]
        : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? [408, "REQUEST_TIMEOUT", "request not received in time"]
          : [400, "BAD_REQUEST", "malformed HTTP request"]
    const body = JSON.stringify({ ok: false, error: { code, message } })
    // Refused before it was a request (no method or path to read): counted as the surface `other`.
    instruments.metrics?.request("other", "OTHER", status as number, 0)
    const reason =
      status === 431 ? "Request Header Fields Too Large" : status === 408 ? "Request Timeout" : "Bad Request"
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: req_${randomBytes(12).toString("base64url")}\r\nconnection: close\r\n\r\n${body}`,
    )
  })
  server.requestTimeout = 30_000
  server.headersTimeout = 20_000
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) =>
      reject(
        e.code === "EADDRINUSE" || e.code === "EACCES" || e.code === "EADDRNOTAVAIL"
          ? new StartupError(
              e.code === "EADDRINUSE"
                ? `port ${config.port} on ${config.host} is in use by another process: stop it, or set PORT (0 picks a free one)`
                : `cannot listen on ${config.host}:${config.port} (${e.code}): set HOST or PORT`,
            )
          : e.syscall === "getaddrinfo"
            ? new StartupError(
                `HOST ${config.host} does not resolve (${e.code}): set HOST to an address of this machine, or a name it resolves`,
              )
            : e,
      ),
    )
    server.listen(config.port, config.host, () => resolve())
  })
  // PORT=0 picked a port: a public URL derived from HOST and PORT names the one bound (the tokens' issuer,
  // the OpenAPI servers, links), not port 0.
  if (config.port === 0 && config.publicUrlDerived) {
    const url = new URL(config.publicUrl)
    url.port = String((server.address() as { port: number }).port)
    config = { ...config, publicUrl: url.href.replace(/\/$/, "") }
  }
  const store = migratedStore(options.store ?? storeLayer(config), storeName(config))
  // A new installation's master key is written only once the store is known to hold nothing sealed under
  // another key (below): a restored store started without its master.key must not get a second one.
  const masterKey = chooseMasterKey(config)
  const runtime: Runtime = ManagedRuntime.make(
    DomainLayer.pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          store,
          domainSettings(config, masterKey.key),
          webhookSettings(config),
          Layer.succeed(ContentSettings, {
            smtpUrl: config.smtpUrl,
            from: config.takedownFrom ?? "agentgov <takedowns@localhost>",
            c2paCertPem: config.c2paCertPem,
            c2paKeyPem: config.c2paKeyPem,
            matchRetentionDays: config.contentMatchRetentionDays,
          }),
        ),
      ),
      // The domain's verbs and SQL as OpenTelemetry spans, when tracing is on.
      instruments.tracing ? Layer.merge(effectTracerLayer) : (l) => l,
    ),
  )
  let bootstrapped: BootstrapResult | undefined
  try {
    await runtime.runPromise(admitMasterKey(config, masterKey))
    bootstrapped = config.bootstrap
      ? await runtime.runPromise(
          bootstrap({ publicUrl: config.publicUrl, providers: config.oidcProviders?.length ?? 0 }),
        )
      : undefined
    // The JWKS is never empty: a signing key exists before the first request.
    await runtime.runPromise(SigningKeys.use((k) => k.current))
    // The C2PA credential too: issued at first start (or the operator's checked), not at the first upload.
    await runtime.runPromise(C2paSigner.use((s) => s.signing))
  } catch (e) {
    // Another instance with another master key sealed the first secrets between the check and here (two first
    // starts at once): refused as the check refuses, in one line.
    const refusal =
      e instanceof StartupError
        ? e
        : await runtime.runPromise(admitMasterKey(config, masterKey, false)).then(
            () => e,
            (refused: unknown) => refused,
          )
    server.close()
    await runtime.dispose().catch(() => {})
    throw refusal
  }

  const signIn = makeSignIn({
    runtime,
    log,
    publicUrl: config.publicUrl,
    providers: config.oidcProviders ?? [],
  })
  const oauth = makeOAuthRoutes({ runtime, publicUrl: config.publicUrl, signIn })
  const executor = instrumentExecutor(
    makeExecutor(runtime, log, {
      publicOrigin: new URL(config.publicUrl).origin,
      observe: operationObserver(instruments.metrics),
    }),
    instruments,
  )
  const uninstallBatchHook = installBatchHook(instruments)
  const metricsHandler = config.metrics && makeMetricsHandler(instruments.metrics!, config.metrics.token)
  const unprobe = instruments.metrics?.probe(storeProbe(runtime))
  const eventStream = makeEventStreamHandler(runtime, executor, { heartbeatMs: options.heartbeatMs })
  const rest = makeRestHandler({
    operations,
    executor,
    maxBodyBytes: config.maxBodyBytes,
    sessionCookie: signIn.cookieName,
    streams: { "/events/stream": eventStream },
  })
  const publicRoutes = makePublicRoutes({
    operations,
    executor,
    maxBodyBytes: Math.min(config.maxBodyBytes, 128 * 1024),
  })
  const trpc = createHTTPHandler({
    router: makeTrpcRouter(executor),
    basePath: "/trpc/",
    maxBodySize: config.maxBodyBytes,
    createContext: ({ req }) => ({
      authorization: authorizationOf(req),
      requestId: String(req.headers["x-request-id"]),
      address: req.socket.remoteAddress,
      session: sessionRequestOf(req, signIn.cookieName),
      idempotencyKey: req.headers["idempotency-key"],
    }),
    onError: ({ error, path, req }) => {
      if (error.code === "INTERNAL_SERVER_ERROR")
        log.error("trpc procedure failed", {
          requestId: String(req.headers["x-request-id"]),
          path,
          cause: String(error.cause ?? error),
        })
    },
  })
  /**
   * The OpenAPI document and its HTML reference, built on first request and kept: together about 2 MB of
   * objects and text that an instance serving only the API never needs (issue 25's idle-memory target).
   */
  let documents: { readonly openapiBody: string; readonly referenceHtml: string } | undefined
  const apiDocuments = () => {
    if (documents === undefined) {
      const openapi = buildOpenApi(operations, { serverUrl: config.publicUrl })
      documents = { openapiBody: JSON.stringify(openapi), referenceHtml: renderReference(openapi) }
    }
    return documents
  }

  /** The server's own GET-only paths (health, JWKS, the API's documents): anything else is 405 with Allow. */
  const refusedUnlessGet = (req: IncomingMessage, res: ServerResponse, path: string, requestId: string) => {
    if (req.method === "GET" || req.method === "HEAD") return false
    sendError(res, new ApiError(405, "METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}`), requestId, {
      allow: "GET, HEAD",
    })
    return true
  }

  /**
   * The public signing keys as a plain JWKS document (RFC 7517), the form JWT libraries fetch. Public, and a read
   * of the store each time: limited per client address like every public route (D10's anonymous limit).
   */
  const jwks = async (req: IncomingMessage, res: ServerResponse, path: string, requestId: string) => {
    if (refusedUnlessGet(req, res, path, requestId)) return
    if (!(await admittedByAddress(req, res, requestId))) return
    const keys = await runtime.runPromise(SigningKeys.use((k) => k.jwks))
    return sendJson(res, 200, JSON.stringify(keys), requestId, { "cache-control": "public, max-age=300" })
  }

  const ready = async (res: ServerResponse, requestId: string) => {
    const exit = await runtime.runPromiseExit(SqlClient.SqlClient.use((sql) => sql`SELECT 1`))
    const ok = exit._tag === "Success"
    sendJson(
      res,
      ok ? 200 : 503,
      JSON.stringify(
        ok
          ? { ok: true, data: { status: "ready" } }
          : { ok: false, error: { code: "NOT_READY", message: "store unavailable" } },
      ),
      requestId,
    )
  }

  /**
   * Sign-in and the OAuth server take no API credential: like every public route they are limited per client
   * address (D10's anonymous limit, one counter with the badges'), so that codes, links, client secrets and
   * refresh tokens cannot be tried at speed. Sets the X-RateLimit-* headers; false once it has answered 429.
   */
  const admittedByAddress = async (req: IncomingMessage, res: ServerResponse, requestId: string) => {
    const admission = await executor.admitPublic(req.socket.remoteAddress, requestId)
    for (const name in admission.headers) res.setHeader(name, admission.headers[name]!)
    if (admission.result.ok) return true
    sendError(res, admission.result.error, requestId)
    return false
  }

  // AGENTGOV_ROLES: which parts this process runs (the API, the webhook worker); both by default.
  const roles = config.roles ?? ["api", "worker"]

  const dashboard = options.dashboardDir === undefined ? undefined : makeDashboard(options.dashboardDir)

  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    const requestId = requestIdOf(req)
    let url: URL
    try {
      url = new URL(req.url ?? "/", "http://local")
    } catch {
      return sendError(res, new ApiError(400, "BAD_REQUEST", "malformed request target"), requestId)
    }
    const path = url.pathname
    if (path === "/metrics" && metricsHandler && config.metrics?.port === undefined)
      return metricsHandler(req, res, requestId)
    if (path === "/healthz" || path === "/readyz") {
      if (refusedUnlessGet(req, res, path, requestId)) return
      if (path === "/healthz") return sendJson(res, 200, '{"ok":true,"data":{"status":"ok"}}', requestId)
      return ready(res, requestId)
    }
    if (!roles.includes("api"))
      return sendError(res, new ApiError(404, "NOT_FOUND", "this instance runs the worker role only"), requestId)
    if (path === JWKS_PATH || path === `/api/v1${JWKS_PATH}` || path === `/v1${JWKS_PATH}`)
      return jwks(req, res, path, requestId)
    if (path.startsWith("/oauth/") || path.startsWith("/.well-known/oauth-authorization-server")) {
      res.setHeader("x-request-id", requestId)
      if (!(await admittedByAddress(req, res, requestId))) return
      if (await oauth.handle(req, res, url)) return
    }
    if (path === "/auth" || path.startsWith("/auth/")) {
      res.setHeader("x-request-id", requestId)
      if (!(await admittedByAddress(req, res, requestId))) return
      return signIn.handle(req, res, url, requestId)
    }
    if (path === "/trpc" || path.startsWith("/trpc/")) {
      // tRPC reads the request id from the header: make sure one is there.
      req.headers["x-request-id"] = requestId
      res.setHeader("x-request-id", requestId)
      // The dashboard's answers are a signed-in person's data: never stored by a browser or a shared cache (as the
      // REST facade's), and JSON read as nothing else.
      res.setHeader("cache-control", "no-store")
      res.setHeader("x-content-type-options", "nosniff")
      return trpc(req, res)
    }
    const prefix = API_PREFIXES.find((p) => path === p || path.startsWith(`${p}/`))
    if (prefix === undefined && dashboard && !path.startsWith("/.well-known/") && dashboard(req, res, path, requestId))
      return
    if (prefix === undefined)
      return sendError(res, new ApiError(404, "NOT_FOUND", `no route for ${req.method} ${path}`), requestId)
    const rest_ = path.slice(prefix.length) || "/"
    if (rest_ === "/openapi.json" || rest_ === "/reference" || rest_ === "/docs") {
      if (refusedUnlessGet(req, res, path, requestId)) return
      if (rest_ === "/openapi.json")
        return sendJson(res, 200, apiDocuments().openapiBody, requestId, { "cache-control": "public, max-age=300" })
      res.writeHead(200, {
        "content-type": "text/html; charset=utf-8",
        "x-request-id": requestId,
        "cache-control": "public, max-age=300",
      })
      return void res.end(apiDocuments().referenceHtml)
    }
    // Badges and their verification (D1: public) before the REST facade, which asks every call for a credential.
    if (await publicRoutes(req, res, rest_, url, requestId)) return
    return rest(req, res, rest_, url, requestId)
  }

  handle = instrumentHandler(serve, instruments)
  const port = (server.address() as AddressInfo).port
  const metricsServer =
    metricsHandler && config.metrics?.port !== undefined
      ? await listenMetrics(config.metrics.host, config.metrics.port, metricsHandler)
      : undefined
  // The background work (the workers' passes and the periodic jobs below) runs on the runtime's services but not as
  // its managed fibers: disposing a runtime interrupts its fibers and waits for them, and a pass interrupted inside a
  // transaction waits for its ROLLBACK behind its own query, which nothing ends until the pool closes, which happens
  // only after. A pass still running when the shutdown gives up on it is left to the pool's closing instead
  // (its transaction never commits: the next instance does that work again).
  const services = await runtime.context()
  const detached: Pick<Runtime, "runPromise"> = {
    runPromise: (effect, options) => Effect.runPromiseWith(services)(effect, options),
  }
  const worker: WebhookWorker | undefined = roles.includes("worker")
    ? await startWebhookWorker(detached, log, {}, instruments)
    : undefined
  const reports: ComplianceWorker | undefined = roles.includes("worker")
    ? await startComplianceWorker(detached, log, config.compliancePollMs)
    : undefined
  const trust: TrustWorker | undefined =
    roles.includes("worker") && config.trustWorker !== false
      ? await startTrustWorker(detached, log, { sweepMs: config.trustSweepIntervalMs })
      : undefined

  /** Set by close(): no periodic job starts a pass from then on. */
  let stopping = false
  /** The periodic jobs' passes in flight: close() waits for them (at most STOP_GRACE_MS). */
  const passes = new Set<Promise<void>>()
  /**
   * Runs one pass of a periodic job; its failure is an `error` line, except once the shutdown began: a pass cut
   * off by the pool closing under it is no fault (debug), and what it did not commit is done by the next instance.
   */
  const every = <A, E>(
    ms: number,
    failure: string,
    pass: Effect.Effect<A, E, ManagedRuntime.ManagedRuntime.Services<Runtime>>,
    done: (a: A) => void,
  ) => {
    const timer = setInterval(() => {
      if (stopping) return
      const running: Promise<void> = detached
        .runPromise(pass)
        .then(done)
        .catch((cause) =>
          stopping
            ? log.debug(`${failure} (left unfinished by the shutdown)`, { cause: String(cause) })
            : log.error(failure, { cause: String(cause) }),
        )
        .finally(() => passes.delete(running))
      passes.add(running)
    }, ms)
    timer.unref()
    return timer
  }

  // Expired keys are refused at once by the authenticator; the sweep records their revocation. It also revokes
  // keys whose person is no longer a member (made before a removal revoked them: the upgrade to migration 0017).
  // The periodic sweeps are housekeeping, not traced (an idle server exported a trace for each); what they record
  // is on the audit trail.
  const sweep = every(
    config.sweepIntervalMs,
    "sweep failed",
    untraced(
      Effect.gen(function* () {
        const n =
          (yield* ApiKeyService.use((s) => s.revokeExpired)) + (yield* ApiKeyService.use((s) => s.revokeOrphaned))
        yield* Idempotency.use((i) => i.purgeExpired)
        // Rows that can never act again: sessions ended a day ago, used or expired sign-in links, consents whose
        // code was never exchanged, OAuth tokens expired a day ago (a revoked grant's too).
        yield* Sessions.use((s) => s.purgeEnded)
        yield* Sessions.use((s) => s.purgeSignInLinks)
        yield* OAuthService.use((s) => s.purgeAbandonedGrants)
        yield* OAuthService.use((s) => s.purgeExpiredTokens)
        yield* SigningKeys.use((k) => k.retire)
        // Content matches past their retention that no takedown cites (AGENTGOV_CONTENT_MATCH_RETENTION_DAYS).
        yield* ContentService.use((s) => s.purgeMatches)
        return n
      }),
    ),
    (n) => n > 0 && log.info("revoked expired keys and keys of removed members", { count: n }),
  )

  // Undecided approvals and enforcements past their expiry read as expired at once; this records it
  // (approval.decided, enforcement.resolved) and reinstates agents whose last suspension ended.
  const expiries = every(
    config.sweepIntervalMs,
    "expiry sweep failed",
    untraced(
      Effect.gen(function* () {
        const approvals = yield* ApprovalService.use((s) => s.expireDue)
        const enforcements = yield* EnforcementService.use((s) => s.expireDue)
        return { approvals, enforcements }
      }),
    ),
    (n) => (n.approvals > 0 || n.enforcements > 0) && log.info("recorded expiries", n),
  )

  const checkpoint = every(
    config.checkpointIntervalMs,
    "checkpointing failed",
    untraced(checkpointAll),
    (n) => n > 0 && log.debug("signed checkpoints", { count: n }),
  )

  const verify = every(
    config.verifyIntervalMs,
    "chain verification did not run",
    verifyAllChains,
    ({ checked, failed }) => {
      for (const f of failed) log.error("audit chain verification failed", f)
      if (instruments.metrics) {
        for (let i = failed.length; i < checked; i++) instruments.metrics.verification("valid", "scheduled")
        for (const _ of failed) instruments.metrics.verification("invalid", "scheduled")
      }
    },
  )

  const close = async () => {
    // The background work stops first, and together with the requests: no new pass, those in flight finish or are
    // given up after a grace, and only then the pool closes.
    stopping = true
    clearInterval(sweep)
    clearInterval(expiries)
    clearInterval(verify)
    clearInterval(checkpoint)
    const background = Promise.all([
      worker?.stop(),
      reports?.stop(),
      trust?.stop(),
      settledWithin([...passes], STOP_GRACE_MS),
    ])
    draining = true
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    const metricsClosed = metricsServer && new Promise<void>((resolve) => metricsServer.close(() => resolve()))
    eventStream.closeAll()
    // A keep-alive connection busy when the server closed goes idle after its answer: close it then, or a
    // client that keeps it busy (a balancer's pooled connection) would hold this instance open for ever.
    server.closeIdleConnections()
    const idle = setInterval(() => server.closeIdleConnections(), 50)
    // Once closed, Node no longer enforces headersTimeout and requestTimeout: a request still unfinished after
    // the grace (a client sending its headers or body slowly, or not at all) would hold the process for ever.
    const cut = setTimeout(() => {
      log.warn("requests still unfinished after the shutdown grace: their connections are closed", {
        graceMs: SHUTDOWN_GRACE_MS,
      })
      server.closeAllConnections()
      metricsServer?.closeAllConnections()
    }, SHUTDOWN_GRACE_MS)
    await closed
    clearInterval(idle)
    await background
    await metricsClosed
    clearTimeout(cut)
    unprobe?.()
    uninstallBatchHook()
    await runtime.dispose()
  }

  return {
    url: `http://${urlHostOf(config.host)}:${port}`,
    publicUrl: config.publicUrl,
    port,
    runtime,
    bootstrapped,
    ...(metricsServer
      ? {
          metricsUrl: `http://${urlHostOf(config.metrics!.host)}:${(metricsServer.address() as AddressInfo).port}/metrics`,
        }
      : {}),
    close,
  }
}
