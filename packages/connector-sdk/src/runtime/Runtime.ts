import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { resolve } from "node:path"
import { WebhookVerificationError } from "../errors.ts"
import type { AnyWebhookEvent } from "../events.ts"
import { errorSummary, methodNotAllowed, readBody, send } from "../http.ts"
import { isRetryable, retryAfterMs } from "../retry.ts"
import type { Severity } from "../severity.ts"
import { Webhook } from "../Webhook.ts"
import { type ApiTarget, InstallError, installWebhook, readInstalled, uninstallWebhook } from "./install.ts"
import { isLogLevel, jsonLogger, type Logger, type LogLevel } from "./log.ts"
import { loudEnough, type Routing, readRouting, routes, severityOf } from "./routing.ts"
import { type AcceptedJob, Store, type StoredJob } from "./Store.ts"
import {
  type Env,
  httpsUrlProblem,
  httpUrlProblem,
  readSettings,
  type SettingsOf,
  type SettingsSchema,
} from "./settings.ts"

// -----------------------------------------------------------------------------------------------
// What a connector app writes

/**
 * What `deliver` answers: delivered, try again (after the vendor's `Retry-After` when it gave
 * one), or never (dead-letter it; `replay` can send it again once the cause is fixed).
 *
 * @example
 * ```ts
 * import { dead, ok, retry } from "@agentgov/connector-sdk/runtime"
 *
 * if (res.status === 429) return retry("rate limited", { afterMs: 1000 * Number(res.headers.get("retry-after")), pauseAll: true })
 * if (res.status >= 500) return retry(`HTTP ${res.status}`)
 * if (!res.ok) return dead(`HTTP ${res.status}`)
 * return ok()
 * ```
 */
export type DeliveryResult =
  | { readonly outcome: "ok" }
  | {
      readonly outcome: "retry"
      readonly reason: string
      /** Wait this long (the vendor's `Retry-After`); default: backoff with jitter. */
      readonly afterMs?: number
      /** Hold every job for the wait, not only this one (a rate limit covers them all). */
      readonly pauseAll?: boolean
    }
  | { readonly outcome: "dead"; readonly reason: string }

/**
 * Delivered.
 *
 * @example
 * ```ts
 * return ok()
 * ```
 */
export const ok = (): DeliveryResult => ({ outcome: "ok" })

/** Whether `value` is one of the three answers `deliver` may give. */
const isDeliveryResult = (value: unknown): value is DeliveryResult => {
  if (typeof value !== "object" || value === null) return false
  const { outcome } = value as { outcome?: unknown }
  return outcome === "ok" || outcome === "retry" || outcome === "dead"
}

/** A short description of what `deliver` answered instead, for the dead letter's reason. */
const describe = (value: unknown): string => {
  if (value === null || typeof value !== "object") return String(value)
  const keys = Object.keys(value).slice(0, 5)
  return `an object with ${keys.length === 0 ? "no keys" : `keys ${keys.join(", ")}`}`
}

/**
 * Try again later: after `afterMs` when given (capped at 15 minutes), else with exponential backoff
 * and jitter.
 *
 * @example
 * ```ts
 * return retry("HTTP 503")
 * ```
 */
export const retry = (reason: string, options: { readonly afterMs?: number; readonly pauseAll?: boolean } = {}) =>
  ({ outcome: "retry", reason, ...options }) as DeliveryResult

/**
 * Never retry: the vendor refused the message itself (400), or its target is gone (404). Kept as a
 * dead letter for `replay`.
 *
 * @example
 * ```ts
 * return dead("channel_not_found")
 * ```
 */
export const dead = (reason: string): DeliveryResult => ({ outcome: "dead", reason })

/**
 * How long a state entry is kept after its last `set` unless the set says otherwise: 90 days. Longer than any
 * event's useful life: an approval is decided or expires within 30 days at most (its longest time-out), and the
 * events about it arrive within that, or later by the service's retries and a dead letter's `replay`.
 */
export const DEFAULT_STATE_TTL_MS = 90 * 86_400_000

/** How long {@link StateStore.set} keeps an entry. */
export interface StateSetOptions {
  /**
   * Milliseconds from this `set` (default {@link DEFAULT_STATE_TTL_MS}); `Infinity` keeps it until it is
   * deleted, for an entry whose need has no end in time that the connector does not see (an incident open for
   * as long as an agent stays downgraded). Each `set` of the key starts its time again.
   */
  readonly ttlMs?: number
}

/**
 * Small durable state for a connector (a Slack thread's `ts` by approval id): kept in the data
 * directory with the queue. Each entry expires (`ttlMs`, by default {@link DEFAULT_STATE_TTL_MS} after its
 * last `set`): once expired, `get` no longer returns it, and the runtime deletes it within the hour, so the
 * store stops growing with the events it has seen.
 *
 * @example
 * ```ts
 * const ts = ctx.state.get(`thread:${approvalId}`)
 * ctx.state.set(`thread:${approvalId}`, posted.ts)
 * ctx.state.set(`incident:${agentId}`, key, { ttlMs: Number.POSITIVE_INFINITY }) // until deleted
 * ```
 */
export interface StateStore {
  get(key: string): string | undefined
  /** @throws {RangeError} when `ttlMs` is not a positive number */
  set(key: string, value: string, options?: StateSetOptions): void
  delete(key: string): void
}

/**
 * What `deliver` gets beside the event.
 *
 * @example
 * ```ts
 * deliver: async (event, { client, severity, dashboardUrl, signal }) => { … }
 * ```
 */
export interface DeliveryContext<S extends SettingsSchema, C> {
  readonly settings: SettingsOf<S>
  /** What `setup` returned. */
  readonly client: C
  /** The event's severity after the operator's severity map. */
  readonly severity: Severity
  /** `AGENTGOV_DASHBOARD_URL`, for links back to the service. */
  readonly dashboardUrl: string | undefined
  /** 1 for the first attempt (also after a `replay`). */
  readonly attempt: number
  /** Aborted when the attempt times out or the process drains. Pass it to the vendor client. */
  readonly signal: AbortSignal
  readonly deliveryId: string
  readonly state: StateStore
  readonly log: Logger
}

/**
 * A connector app: a name, the events it subscribes to by default, its settings, and how it
 * delivers one event. Everything else (verification, durable queue, de-duplication, retries, dead
 * letters, routing, health, drain, install) is the runtime's.
 *
 * @example
 * ```ts
 * import { defineConnector, ok, retry } from "@agentgov/connector-sdk/runtime"
 *
 * export const echo = defineConnector({
 *   name: "echo",
 *   defaultEvents: ["*"],
 *   settings: { target: { env: "ECHO_URL", description: "where to POST", kind: "url", required: true } },
 *   deliver: async (event, { settings, signal }) => {
 *     const res = await fetch(settings.target, { method: "POST", body: event.type, signal })
 *     return res.ok ? ok() : retry(`HTTP ${res.status}`)
 *   },
 * })
 * ```
 */
export interface ConnectorDefinition<S extends SettingsSchema = SettingsSchema, C = undefined> {
  /** Lowercase; the command is `agentgov-connector-<name>`. */
  readonly name: string
  /** One line, for `help` and the webhook's description. */
  readonly description: string
  /** The event filter `install` subscribes to, unless `AGENTGOV_CONNECTOR_EVENTS` says otherwise. */
  readonly defaultEvents: ReadonlyArray<string>
  readonly settings: S
  /** Checks across settings; each string is one problem. */
  readonly validate?: (settings: SettingsOf<S>) => ReadonlyArray<string>
  /**
   * Builds the vendor client once at start. `dataDir` is the connector's data directory, for a
   * connector that keeps durable state of its own beside the queue (the e-mail digest), and
   * `dashboardUrl` the common `AGENTGOV_DASHBOARD_URL`, for work done outside `deliver`.
   */
  readonly setup?: (
    settings: SettingsOf<S>,
    runtime: { readonly log: Logger; readonly dataDir: string; readonly dashboardUrl: string | undefined },
  ) => C
  /**
   * Called once while the connector closes, after running deliveries are drained and before the
   * store closes: stop timers and close what `setup` opened.
   */
  readonly stop?: (client: C) => void | Promise<void>
  /**
   * Events with the same key are delivered one at a time, in arrival order (an approval's request
   * before its decision, so the decision can thread under it). Undefined: no ordering.
   */
  readonly orderingKey?: (event: AnyWebhookEvent) => string | undefined
  readonly deliver: (event: AnyWebhookEvent, ctx: DeliveryContext<S, C>) => DeliveryResult | Promise<DeliveryResult>
  /**
   * Dead letters the connector keeps in its own durable state instead of the runtime's queue (the
   * e-mail app's digests refused for good): `dead-letters` lists them after the runtime's, `/healthz`
   * and `/metrics` count them in `deadLetters`, and `replay` (`--all`, or their ids) brings them back.
   */
  readonly ownDeadLetters?: OwnDeadLetters<C>
  /**
   * Several events in one vendor call (Discord: up to 10 embeds a message). When set, up to `max`
   * due events go to `batch.deliver` at once (a single due event still goes to `deliver`). Answer one
   * result for all, or one per event in order. A refused batch (`dead`) is not dead-lettered: each of
   * its events goes again alone, so that only the bad one is.
   */
  readonly batch?: {
    readonly max: number
    readonly deliver: (
      events: ReadonlyArray<AnyWebhookEvent>,
      ctx: BatchContext<S, C>,
    ) => DeliveryResult | ReadonlyArray<DeliveryResult> | Promise<DeliveryResult | ReadonlyArray<DeliveryResult>>
  }
}

/**
 * A dead letter a connector keeps itself (see {@link ConnectorDefinition.ownDeadLetters}).
 *
 * @example
 * ```ts
 * const d: OwnDeadLetter = { id: "digest-12", type: "email.digest", events: 3, attempts: 3, reason: "smtp_failed", error: "535 …", failedAt: Date.now() }
 * ```
 */
export interface OwnDeadLetter {
  /** Not a number and not an event id, so that `replay <id>` names it alone (e.g. `digest-12`). */
  readonly id: string
  readonly type: string
  /** How many events it holds. */
  readonly events: number
  readonly attempts: number
  readonly reason: string
  readonly error: string
  /** Epoch ms. */
  readonly failedAt: number
}

/**
 * How the runtime reaches a connector's own dead letters. `count` runs in the running connector, with
 * what `setup` built; `list` and `replay` run in the `dead-letters` and `replay` commands, which do not
 * run `setup`, with the data directory (a running connector may have the same files open). `replay`
 * makes them due at once, with fresh attempts, and returns the ones it moved.
 *
 * @example
 * ```ts
 * ownDeadLetters: { count: (client) => client.failedCount(), list: (dir) => failedIn(dir), replay: (dir, ids) => retryIn(dir, ids) }
 * ```
 */
export interface OwnDeadLetters<C> {
  readonly count: (client: C) => number
  readonly list: (dataDir: string) => ReadonlyArray<OwnDeadLetter>
  readonly replay: (dataDir: string, ids: ReadonlyArray<string> | "all") => ReadonlyArray<OwnDeadLetter>
}

/**
 * What `batch.deliver` gets beside the events: a {@link DeliveryContext} with a severity per event.
 *
 * @example
 * ```ts
 * batch: { max: 10, deliver: (events, { severities }) => post(events.map((e, i) => render(e, severities[i]))) }
 * ```
 */
export type BatchContext<S extends SettingsSchema, C> = Omit<DeliveryContext<S, C>, "severity" | "deliveryId"> & {
  readonly severities: ReadonlyArray<Severity>
}

/**
 * Declares a connector (an identity function that keeps the settings' types).
 *
 * @example
 * ```ts
 * export const connector = defineConnector({ name: "teams", description: "…", defaultEvents: ["*"], settings, deliver })
 * ```
 */
export const defineConnector = <const S extends SettingsSchema, C = undefined>(
  definition: ConnectorDefinition<S, C>,
): ConnectorDefinition<S, C> => definition

// -----------------------------------------------------------------------------------------------
// Common configuration

/** A start (or command) refused: every problem found. */
export class ConfigError extends Error {
  override readonly name = "ConfigError"
  readonly problems: ReadonlyArray<string>
  constructor(problems: ReadonlyArray<string>) {
    super(`configuration problems:\n${problems.map((p) => `  - ${p}`).join("\n")}`)
    this.problems = problems
  }
}

type Command = "start" | "install" | "uninstall" | "replay" | "dead-letters" | "check"

interface CommonConfig {
  readonly port: number
  readonly host: string | undefined
  readonly dataDir: string
  readonly secrets: ReadonlyArray<string>
  readonly agentgovUrl: string | undefined
  readonly apiKey: string | undefined
  readonly publicUrl: string | undefined
  /** AGENTGOV_CONNECTOR_ALLOW_HTTP: the two URLs above may be http:// to any host. */
  readonly allowHttp: boolean
  readonly dashboardUrl: string | undefined
  readonly routing: Routing
  readonly concurrency: number
  readonly maxAttempts: number
  readonly attemptTimeoutMs: number
  readonly drainTimeoutMs: number
  readonly maxQueue: number
  readonly toleranceSeconds: number
  readonly paused: boolean
  readonly logLevel: LogLevel
}

const ALLOW_HTTP_HINT = "http:// to a host other than loopback needs AGENTGOV_CONNECTOR_ALLOW_HTTP=true"

const COMMON = {
  port: { env: "PORT", description: "the port to listen on", kind: "integer", default: "3000", min: 0 },
  host: { env: "HOST", description: "the interface to bind (default every interface)" },
  dataDir: { env: "AGENTGOV_CONNECTOR_DATA_DIR", description: "where the queue and the webhook secret are kept" },
  secret: { env: "AGENTGOV_WEBHOOK_SECRET", description: "the webhook's signing secret", secret: true },
  previousSecret: {
    env: "AGENTGOV_WEBHOOK_SECRET_PREVIOUS",
    description: "the secret being rotated out, also accepted",
    secret: true,
  },
  // https but to loopback, as a vendor's URL: the first is sent the API key, the second the service's signed events.
  // AGENTGOV_CONNECTOR_ALLOW_HTTP=true takes http to any host, for a private network the operator trusts.
  agentgovUrl: {
    env: "AGENTGOV_URL",
    description: `the service's base URL, e.g. https://agentgov.example.com (${ALLOW_HTTP_HINT})`,
    kind: "https",
  },
  apiKey: { env: "AGENTGOV_API_KEY", description: "an API key with webhooks:write", secret: true },
  publicUrl: {
    env: "CONNECTOR_PUBLIC_URL",
    description: `this connector's public base URL, which the service can reach (${ALLOW_HTTP_HINT})`,
    kind: "https",
  },
  allowHttp: {
    env: "AGENTGOV_CONNECTOR_ALLOW_HTTP",
    description:
      "true: AGENTGOV_URL and CONNECTOR_PUBLIC_URL may be http:// to any host (a private network you trust; the API key and the signed events then cross it in the clear)",
    kind: "boolean",
    default: "false",
  },
  dashboardUrl: { env: "AGENTGOV_DASHBOARD_URL", description: "the dashboard's base URL, for links", kind: "url" },
  concurrency: {
    env: "AGENTGOV_CONNECTOR_CONCURRENCY",
    description: "deliveries at once",
    kind: "integer",
    default: "4",
    min: 1,
  },
  maxAttempts: {
    env: "AGENTGOV_CONNECTOR_MAX_ATTEMPTS",
    description: "attempts per event before it is dead-lettered",
    kind: "integer",
    default: "12",
    min: 1,
  },
  attemptTimeoutMs: {
    env: "AGENTGOV_CONNECTOR_ATTEMPT_TIMEOUT_MS",
    description: "how long one vendor call may take",
    kind: "integer",
    default: "30000",
    min: 100,
  },
  drainTimeoutMs: {
    env: "AGENTGOV_CONNECTOR_DRAIN_TIMEOUT_MS",
    description: "how long SIGTERM waits for running deliveries",
    kind: "integer",
    default: "10000",
    min: 0,
  },
  maxQueue: {
    env: "AGENTGOV_CONNECTOR_MAX_QUEUE",
    description: "events held before deliveries are answered 503",
    kind: "integer",
    default: "100000",
    min: 1,
  },
  toleranceSeconds: {
    env: "AGENTGOV_WEBHOOK_TOLERANCE_SECONDS",
    description: "signature timestamp skew allowed",
    kind: "integer",
    default: "300",
    min: 1,
  },
  paused: {
    env: "AGENTGOV_CONNECTOR_PAUSE",
    description: "store events but do not deliver them (maintenance)",
    kind: "boolean",
    default: "false",
  },
  logLevel: { env: "LOG_LEVEL", description: "debug, info, warn or error", default: "info" },
} as const satisfies SettingsSchema

const REQUIRED_FOR: Partial<Record<Command, ReadonlyArray<keyof typeof COMMON>>> = {
  install: ["agentgovUrl", "apiKey", "publicUrl"],
  uninstall: ["agentgovUrl", "apiKey", "publicUrl"],
}

const readCommon = (
  definition: ConnectorDefinition<any, any>,
  env: Env,
  command: Command,
  problems: Array<string>,
): CommonConfig => {
  // The operator's opt-out of https for the service's and the connector's own URLs (a private network): read first, as
  // it decides how those two are read.
  const allowHttp = readSettings({ allowHttp: COMMON.allowHttp }, env, []).allowHttp
  const schema = allowHttp
    ? {
        ...COMMON,
        agentgovUrl: { ...COMMON.agentgovUrl, kind: "url" },
        publicUrl: { ...COMMON.publicUrl, kind: "url" },
      }
    : COMMON
  const s = readSettings(schema as typeof COMMON, env, problems)
  for (const key of REQUIRED_FOR[command] ?? []) {
    // a value that is there but bad was named already, as such
    if (s[key] === undefined && (env[COMMON[key].env]?.trim() ?? "") === "")
      problems.push(`${COMMON[key].env} is required for ${command}: ${COMMON[key].description}`)
  }
  if (!isLogLevel(s.logLevel)) problems.push(`LOG_LEVEL must be debug, info, warn or error (got "${s.logLevel}")`)
  const dataDir = resolve(s.dataDir ?? `.agentgov-connector-${definition.name}`)
  let secrets: Array<string> = []
  if (s.secret !== undefined) secrets = [s.secret]
  else {
    try {
      const stored = readInstalled(dataDir)
      if (stored) secrets = [stored.secret]
    } catch (error) {
      problems.push(`AGENTGOV_CONNECTOR_DATA_DIR: ${(error as Error).message}`)
    }
  }
  if (s.previousSecret !== undefined) secrets.push(s.previousSecret)
  if ((command === "start" || command === "check") && secrets.length === 0) {
    problems.push(
      `AGENTGOV_WEBHOOK_SECRET is required: the webhook's signing secret (or run \`agentgov-connector-${definition.name} install\`, which stores one in ${dataDir})`,
    )
  }
  for (const secret of secrets) {
    if (secret.length < 16)
      problems.push("AGENTGOV_WEBHOOK_SECRET must be at least 16 characters (the service's minimum)")
  }
  const routing = readRouting(env, definition.defaultEvents, problems)
  const base = (u: string | undefined) => u?.replace(/\/+$/, "")
  return {
    port: s.port,
    host: s.host,
    dataDir,
    secrets,
    agentgovUrl: base(s.agentgovUrl),
    apiKey: s.apiKey,
    publicUrl: base(s.publicUrl),
    allowHttp: s.allowHttp,
    dashboardUrl: base(s.dashboardUrl),
    routing,
    concurrency: s.concurrency,
    maxAttempts: s.maxAttempts,
    attemptTimeoutMs: s.attemptTimeoutMs,
    drainTimeoutMs: s.drainTimeoutMs,
    maxQueue: s.maxQueue,
    toleranceSeconds: s.toleranceSeconds,
    paused: s.paused,
    logLevel: isLogLevel(s.logLevel) ? s.logLevel : "info",
  }
}

/**
 * Reads and checks every setting a command needs: the runtime's and (for `start` and `check`) the
 * connector's. Throws a {@link ConfigError} listing every problem.
 *
 * @example
 * ```ts
 * const { common, settings } = loadConfig(slack, process.env, "start")
 * ```
 */
export const loadConfig = <S extends SettingsSchema, C>(
  definition: ConnectorDefinition<S, C>,
  env: Env,
  command: Command = "start",
): { readonly common: CommonConfig; readonly settings: SettingsOf<S> } => {
  const problems: Array<string> = []
  const common = readCommon(definition, env, command, problems)
  const own = command === "start" || command === "check"
  const settings = readSettings(definition.settings, env, problems, { requireAll: own })
  if (own && problems.length === 0 && definition.validate) problems.push(...definition.validate(settings))
  if (problems.length > 0) throw new ConfigError(problems)
  return { common, settings }
}

// -----------------------------------------------------------------------------------------------
// The running connector

/** Counters and state, as `/healthz` and `/readyz` serve them. */
export interface RuntimeHealth {
  readonly status: "ok" | "draining"
  readonly ready: boolean
  readonly paused: boolean
  readonly queued: number
  readonly inFlight: number
  readonly deadLetters: number
  readonly received: number
  readonly duplicates: number
  readonly ignored: number
  readonly delivered: number
  readonly failedAttempts: number
}

/** The families of a connector's `/metrics`: what `/healthz` says, in Prometheus text format. */
const METRICS: ReadonlyArray<readonly [keyof RuntimeHealth, string, "gauge" | "counter", string]> = [
  ["queued", "agentgov_connector_queue_depth", "gauge", "Deliveries waiting in the connector's queue"],
  ["inFlight", "agentgov_connector_in_flight", "gauge", "Deliveries being sent now"],
  ["deadLetters", "agentgov_connector_dead_letters", "gauge", "Deliveries given up on, kept for replay"],
  ["paused", "agentgov_connector_paused", "gauge", "1 while the connector is paused"],
  ["ready", "agentgov_connector_ready", "gauge", "1 while the connector takes webhooks"],
  ["received", "agentgov_connector_received_total", "counter", "Webhooks received since start"],
  ["duplicates", "agentgov_connector_duplicates_total", "counter", "Webhooks received again (already queued)"],
  ["ignored", "agentgov_connector_ignored_total", "counter", "Webhooks of event types the connector ignores"],
  ["delivered", "agentgov_connector_delivered_total", "counter", "Deliveries the vendor accepted since start"],
  ["failedAttempts", "agentgov_connector_failed_attempts_total", "counter", "Delivery attempts that failed"],
]

/** `/metrics` of a connector; its one label, `connector`, is the connector's name. */
export const renderMetrics = (connector: string, h: RuntimeHealth): string => {
  const label = `{connector="${connector.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"}`
  let out = ""
  for (const [field, name, type, help] of METRICS) {
    const v = h[field]
    out += `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name}${label} ${typeof v === "boolean" ? (v ? 1 : 0) : v}\n`
  }
  return out
}

/**
 * A started connector.
 *
 * @example
 * ```ts
 * const running = await startConnector(slack, { env: process.env })
 * process.on("SIGTERM", () => running.close())
 * ```
 */
export interface RunningConnector {
  readonly url: string
  readonly port: number
  readonly dataDir: string
  readonly health: () => RuntimeHealth
  /** Resolves once no job is due or running (jobs waiting for a later retry do not count). */
  readonly idle: () => Promise<void>
  /** Stops accepting, waits for running deliveries (up to the drain time-out), closes the store. Idempotent. */
  readonly close: () => Promise<{ readonly drained: boolean }>
}

/**
 * Options of {@link startConnector}.
 *
 * @example
 * ```ts
 * await startConnector(teams, { env: { ...process.env, PORT: "0" }, log: (line) => lines.push(line) })
 * ```
 */
export interface StartOptions {
  readonly env: Env
  /** Where JSON log lines go. Default stdout. */
  readonly log?: (line: string) => void
}

const BACKOFF_INITIAL_MS = 1000
const BACKOFF_MAX_MS = 300_000
const MAX_RETRY_AFTER_MS = 900_000
const POLL_MS = 1000
/** Event ids are remembered this long: beyond the service's longest retry schedule (34 h 42 min). */
const SEEN_TTL_MS = 7 * 86_400_000
const CLOSING_RETRY_AFTER_S = 5
const QUEUE_FULL_RETRY_AFTER_S = 30
const MAX_BODY_BYTES = 1024 * 1024

/**
 * Starts a connector: opens its store, listens for deliveries, and delivers from the queue.
 * Throws a {@link ConfigError} when a setting is missing or bad.
 *
 * @example
 * ```ts
 * const running = await startConnector(connector, { env: process.env })
 * console.log(`POST ${running.url}/webhooks`)
 * ```
 */
export const startConnector = async <S extends SettingsSchema, C>(
  definition: ConnectorDefinition<S, C>,
  options: StartOptions,
): Promise<RunningConnector> => {
  const { common, settings } = loadConfig(definition, options.env, "start")
  const log = jsonLogger(definition.name, common.logLevel, options.log)
  const client = (
    definition.setup
      ? definition.setup(settings, { log, dataDir: common.dataDir, dashboardUrl: common.dashboardUrl })
      : undefined
  ) as C
  const store = new Store(common.dataDir)
  const webhook = new Webhook({
    secret: common.secrets,
    toleranceSeconds: common.toleranceSeconds,
    // de-duplication by event id in the store stops replays, and survives restarts
    replayProtection: false,
  })
  const stats = { received: 0, duplicates: 0, ignored: 0, delivered: 0, failedAttempts: 0 }
  const busy = new Map<number, AbortController>()
  let closing = false
  let stopped = false
  let listening = false
  let timer: NodeJS.Timeout | undefined
  let idleWaiters: Array<() => void> = []
  const state: StateStore = {
    get: (key) => store.getState(key, Date.now()),
    set: (key, value, options) => {
      const ttlMs = options?.ttlMs ?? DEFAULT_STATE_TTL_MS
      if (!(ttlMs > 0)) throw new RangeError(`state ttlMs must be a positive number of ms or Infinity, got ${ttlMs}`)
      const now = Date.now()
      store.setState(key, value, now, ttlMs === Number.POSITIVE_INFINITY ? null : now + ttlMs)
    },
    delete: (key) => store.deleteState(key),
  }

  /** The connector's own dead letters (0 once it has stopped). */
  const ownDeadLetters = () => {
    if (!definition.ownDeadLetters || stopped) return 0
    try {
      return definition.ownDeadLetters.count(client)
    } catch (error) {
      log.error("counting the connector's own dead letters failed", { error: (error as Error).message })
      return 0
    }
  }
  const health = (): RuntimeHealth => {
    const counts = store.isOpen ? store.counts() : { queued: 0, deadLetters: 0 }
    return {
      status: closing ? "draining" : "ok",
      ready: listening && !closing && store.isOpen,
      paused: common.paused,
      queued: counts.queued,
      inFlight: busy.size,
      deadLetters: counts.deadLetters + ownDeadLetters(),
      ...stats,
    }
  }

  // --- the worker ------------------------------------------------------------------------------

  const isIdle = () => {
    if (busy.size > 0) return false
    if (common.paused || !store.isOpen) return true
    const next = store.nextDue(new Set())
    return next === undefined || next > Date.now()
  }
  const notifyIdle = () => {
    if (idleWaiters.length === 0 || !isIdle()) return
    const waiters = idleWaiters
    idleWaiters = []
    for (const w of waiters) w()
  }

  const schedule = (ms: number) => {
    if (stopped) return
    clearTimeout(timer)
    timer = setTimeout(tick, Math.max(0, Math.min(ms, POLL_MS)))
  }

  /** Runs in flight (a run is one event, or one batch). */
  let runs = 0
  const controllers = new Set<AbortController>()
  const maxBatch = definition.batch ? Math.max(1, definition.batch.max) : 1

  const tick = () => {
    if (stopped || closing || common.paused) return
    const now = Date.now()
    const free = common.concurrency - runs
    if (free > 0) {
      const due = store.dueJobs(now, free * maxBatch, new Set(busy.keys()))
      // a job split out of a refused batch goes alone, so that only the bad event is dead-lettered
      const groups: Array<Array<StoredJob>> = due.filter((j) => j.solo).map((j) => [j])
      const rest = due.filter((j) => !j.solo)
      for (let i = 0; i < rest.length; i += maxBatch) groups.push(rest.slice(i, i + maxBatch))
      for (const group of groups.slice(0, free)) void run(group)
    }
    const next = store.nextDue(new Set(busy.keys()))
    schedule(next === undefined ? POLL_MS : next - Date.now())
    notifyIdle()
  }

  const backoff = (attempt: number) => {
    const exp = Math.min(BACKOFF_MAX_MS, BACKOFF_INITIAL_MS * 2 ** (attempt - 1))
    return Math.round(exp / 2 + Math.random() * (exp / 2))
  }

  /** Calls the connector for `jobs` (one, or a batch); one result per job. */
  const attemptJobs = async (
    jobs: ReadonlyArray<StoredJob>,
    events: ReadonlyArray<AnyWebhookEvent>,
    attempts: ReadonlyArray<number>,
    controller: AbortController,
  ): Promise<ReadonlyArray<DeliveryResult>> => {
    const base = {
      settings,
      client,
      dashboardUrl: common.dashboardUrl,
      signal: controller.signal,
      state,
      log,
    }
    try {
      const answered =
        definition.batch && jobs.length > 1
          ? definition.batch.deliver(events, {
              ...base,
              attempt: Math.max(...attempts),
              severities: events.map((e) => severityOf(common.routing, e)),
            })
          : definition.deliver(events[0]!, {
              ...base,
              attempt: attempts[0]!,
              severity: severityOf(common.routing, events[0]!),
              deliveryId: jobs[0]!.deliveryId,
            })
      // a vendor client that ignores the signal must not hold the slot past the time-out
      const result = await Promise.race([
        Promise.resolve(answered),
        new Promise<never>((_, reject) =>
          controller.signal.addEventListener("abort", () => reject(controller.signal.reason), { once: true }),
        ),
      ])
      const results = Array.isArray(result) ? result : jobs.map(() => result as DeliveryResult)
      if (results.length !== jobs.length)
        throw new Error(`batch.deliver answered ${results.length} results for ${jobs.length} events`)
      // Anything but ok/retry/dead (a forgotten `return ok()`, an object of its own) settled nothing: the job was
      // called again at once, for ever, each call posting to the vendor again. Kept as a dead letter instead.
      return results.map((r: unknown) =>
        isDeliveryResult(r) ? r : dead(`deliver answered no DeliveryResult (${describe(r)})`),
      )
    } catch (error) {
      const failed = isRetryable(error)
        ? retry(errorSummary(error).message, { afterMs: retryAfterMs(error) })
        : dead(errorSummary(error).message)
      return jobs.map(() => failed)
    }
  }

  const settle = (job: StoredJob, attempt: number, result: DeliveryResult, batchSize: number) => {
    const now = Date.now()
    const fields = { eventId: job.eventId, type: job.type, attempt, ...(batchSize > 1 ? { batch: batchSize } : {}) }
    switch (result.outcome) {
      case "ok":
        store.delivered(job.seq)
        stats.delivered++
        log.info("delivered", fields)
        return
      case "dead":
        stats.failedAttempts++
        if (batchSize > 1) {
          // which event of the batch was refused is unknown: each goes again alone, at once
          store.reschedule(job.seq, now, result.reason, { solo: true })
          log.warn("batch refused; each event goes again alone", { ...fields, reason: result.reason })
          return
        }
        store.deadLetter(job.seq, "non_retryable", result.reason, now)
        log.error("dead-lettered: the vendor refused it", { ...fields, reason: result.reason })
        return
      case "retry": {
        stats.failedAttempts++
        if (closing) {
          // stays queued with its attempt counted; the next start tries it again
          store.reschedule(job.seq, now, result.reason)
          log.warn("attempt failed while draining; left queued", { ...fields, reason: result.reason })
          return
        }
        if (attempt >= common.maxAttempts) {
          store.deadLetter(job.seq, "max_attempts", result.reason, now)
          log.error("dead-lettered: every attempt failed", { ...fields, reason: result.reason })
          return
        }
        const delayMs =
          result.afterMs !== undefined && Number.isFinite(result.afterMs)
            ? Math.min(Math.max(0, result.afterMs), MAX_RETRY_AFTER_MS)
            : backoff(attempt)
        store.reschedule(job.seq, now + delayMs, result.reason)
        if (result.pauseAll) store.pauseAll(now + delayMs)
        log.warn("attempt failed; will retry", {
          ...fields,
          reason: result.reason,
          delayMs,
          retryAfter: result.afterMs !== undefined,
        })
        return
      }
    }
  }

  const run = async (jobs: ReadonlyArray<StoredJob>) => {
    runs++
    const controller = new AbortController()
    controllers.add(controller)
    for (const job of jobs) busy.set(job.seq, controller)
    const timeout = setTimeout(
      () => controller.abort(new Error(`the attempt took longer than ${common.attemptTimeoutMs} ms`)),
      common.attemptTimeoutMs,
    )
    try {
      const attempts = jobs.map((job) => store.startAttempt(job.seq))
      const events = jobs.map((job) => JSON.parse(job.body) as AnyWebhookEvent)
      const results = await attemptJobs(jobs, events, attempts, controller)
      if (!store.isOpen) return
      for (const [i, job] of jobs.entries()) settle(job, attempts[i]!, results[i]!, jobs.length)
    } catch (error) {
      // the store failed (disk full, locked): the jobs stay queued and are tried again later
      log.error("cannot record a delivery attempt", { error: errorSummary(error).message })
      if (!closing) await new Promise((r) => setTimeout(r, POLL_MS))
    } finally {
      clearTimeout(timeout)
      controllers.delete(controller)
      runs--
      for (const job of jobs) busy.delete(job.seq)
    }
    if (!closing) schedule(0)
    notifyIdle()
  }

  // --- HTTP ------------------------------------------------------------------------------------

  /**
   * Group commit: the deliveries verified in one turn of the event loop are stored in one transaction (one
   * fsync, which blocks the loop: node:sqlite is synchronous), and each is answered once it is committed.
   */
  let accepting: Array<{
    readonly job: AcceptedJob
    readonly resolve: (fresh: boolean) => void
    readonly reject: (error: unknown) => void
  }> = []
  const flushAccepts = () => {
    const batch = accepting
    accepting = []
    try {
      const fresh = store.acceptAll(batch.map((b) => b.job))
      for (const [i, b] of batch.entries()) b.resolve(fresh[i]!)
    } catch (error) {
      for (const b of batch) b.reject(error)
    }
  }
  const accept = (job: AcceptedJob) =>
    new Promise<boolean>((resolve, reject) => {
      if (accepting.length === 0) setImmediate(flushAccepts)
      accepting.push({ job, resolve, reject })
    })

  const unavailable = (res: ServerResponse, seconds: number, message: string) =>
    send(res, 503, { ok: false, error: { code: "UNAVAILABLE", message } }, { "retry-after": String(seconds) })

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? "/").split("?", 1)[0]
    if (path === "/healthz" || path === "/readyz") {
      if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed(res, "GET, HEAD")
      const h = health()
      const status = path === "/healthz" ? 200 : h.ready ? 200 : 503
      return send(res, status, h, {}, req.method === "HEAD")
    }
    if (path === "/metrics") {
      if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed(res, "GET, HEAD")
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" })
      return void res.end(req.method === "HEAD" ? undefined : renderMetrics(definition.name, health()))
    }
    if (path !== "/webhooks") {
      return send(res, 404, { ok: false, error: { code: "NOT_FOUND", message: `no route ${path}` } })
    }
    if (req.method !== "POST") return methodNotAllowed(res, "POST")
    if (closing) return unavailable(res, CLOSING_RETRY_AFTER_S, "the connector is shutting down")
    const body = await readBody(req, MAX_BODY_BYTES)
    if (body === "aborted") return
    if (body === "too_large") {
      return send(
        res,
        413,
        { ok: false, error: { code: "PAYLOAD_TOO_LARGE", message: `bodies are limited to ${MAX_BODY_BYTES} bytes` } },
        { connection: "close" },
      )
    }
    let delivery: ReturnType<Webhook["verifyDelivery"]>
    try {
      delivery = webhook.verifyDelivery(body, req.headers)
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error
      log.warn("delivery refused", { code: error.code })
      if (error.code === "INVALID_PAYLOAD")
        return send(res, 400, { ok: false, error: { code: "BAD_REQUEST", message: error.message } })
      return send(res, 401, {
        ok: false,
        error: { code: "UNAUTHORIZED", message: `webhook verification failed: ${error.code}` },
      })
    }
    const { event, deliveryId } = delivery
    const now = Date.now()
    if (!routes(common.routing, event.type) || !loudEnough(common.routing, severityOf(common.routing, event))) {
      const fresh = store.markSeen(event.id, now)
      if (fresh) stats.ignored++
      return send(res, 200, { ok: true, data: { eventId: event.id, ignored: true } })
    }
    if (store.counts().queued >= common.maxQueue) {
      log.error("queue full; delivery refused with 503", { eventId: event.id })
      return unavailable(res, QUEUE_FULL_RETRY_AFTER_S, "the connector's queue is full")
    }
    let accepted: boolean
    try {
      accepted = await accept({
        eventId: event.id,
        deliveryId,
        type: event.type,
        body: JSON.stringify(event),
        orderKey: definition.orderingKey?.(event),
        now,
      })
    } catch (error) {
      // not stored, so not acknowledged: the service retries
      log.error("cannot store the event", { eventId: event.id, error: errorSummary(error).message })
      return unavailable(res, QUEUE_FULL_RETRY_AFTER_S, "the connector cannot store the event")
    }
    if (!accepted) {
      stats.duplicates++
      log.info("duplicate ignored", { eventId: event.id, deliveryId })
      return send(res, 200, { ok: true, data: { eventId: event.id, duplicate: true } })
    }
    stats.received++
    send(res, 200, { ok: true, data: { eventId: event.id, queued: true } })
    schedule(0)
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log.error("request failed", { error: errorSummary(error).message })
      if (!res.headersSent) send(res, 500, { ok: false, error: { code: "INTERNAL_ERROR", message: "internal error" } })
      else res.destroy()
    })
  })
  server.requestTimeout = 30_000
  server.headersTimeout = 15_000
  await new Promise<void>((resolveListen, reject) => {
    server.once("error", reject)
    server.listen(common.port, common.host, () => {
      server.off("error", reject)
      resolveListen()
    })
  })
  listening = true
  const address = server.address() as AddressInfo
  const urlHost = address.family === "IPv6" ? `[${address.address}]` : address.address
  const url = `http://${urlHost}:${address.port}`

  // Hourly: the event ids past de-duplication's window, and the expired state entries (a bounded number a pass).
  const prune = () => {
    if (!store.isOpen) return
    const now = Date.now()
    try {
      store.pruneSeen(now - SEEN_TTL_MS)
      store.pruneState(now)
    } catch (error) {
      // the store busy past its time-out (a `replay` writing): the next pass does it
      log.warn("pruning the store failed", { error: (error as Error).message })
    }
  }
  prune()
  const pruner = setInterval(prune, 3600_000)
  pruner.unref()
  const counts = store.counts()
  log.info("listening", {
    url,
    path: "/webhooks",
    dataDir: common.dataDir,
    events: common.routing.events,
    queued: counts.queued,
    deadLetters: counts.deadLetters + ownDeadLetters(),
    paused: common.paused,
  })
  const inClear = [
    ["AGENTGOV_URL", common.agentgovUrl],
    ["CONNECTOR_PUBLIC_URL", common.publicUrl],
  ].filter(([, u]) => u !== undefined && httpsUrlProblem(u) !== undefined)
  if (inClear.length > 0)
    log.warn(
      "http:// to a host other than loopback (AGENTGOV_CONNECTOR_ALLOW_HTTP=true): keys and events cross that network in the clear",
      {
        settings: inClear.map(([name]) => name),
      },
    )
  if (!common.paused) schedule(0)

  let closed: Promise<{ drained: boolean }> | undefined
  const close = () => {
    closed ??= (async () => {
      closing = true
      clearTimeout(timer)
      clearInterval(pruner)
      const serverClosed = new Promise<void>((r) => server.close(() => r()))
      server.closeIdleConnections()
      log.info("draining", { inFlight: busy.size })
      const deadline = Date.now() + common.drainTimeoutMs
      while (busy.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
      const drained = busy.size === 0
      for (const controller of controllers) controller.abort(new Error("the connector is shutting down"))
      stopped = true
      if (definition.stop) {
        try {
          await definition.stop(client)
        } catch (error) {
          log.error("stopping the connector's client failed", { error: (error as Error).message })
        }
      }
      server.closeAllConnections()
      await serverClosed
      store.close()
      log.info("stopped", { drained })
      for (const w of idleWaiters) w()
      idleWaiters = []
      return { drained }
    })()
    return closed
  }

  return {
    url,
    port: address.port,
    dataDir: common.dataDir,
    health,
    idle: () => (isIdle() ? Promise.resolve() : new Promise<void>((r) => idleWaiters.push(r))),
    close,
  }
}

// -----------------------------------------------------------------------------------------------
// The command line

const usage = (definition: ConnectorDefinition<any, any>) => {
  const bin = `agentgov-connector-${definition.name}`
  const own = Object.values(definition.settings as SettingsSchema)
    .map((s) => `  ${s.env}${s.required ? " (required)" : ""}: ${s.description}`)
    .join("\n")
  return `${bin}: ${definition.description}

Usage:
  ${bin} [start]            receive deliveries at POST /webhooks and forward them
  ${bin} install            register this connector's webhook (AGENTGOV_URL, AGENTGOV_API_KEY, CONNECTOR_PUBLIC_URL)
  ${bin} uninstall          delete it
  ${bin} dead-letters       list the events that failed for good (JSON lines)
  ${bin} replay --all|<id>… queue dead letters again (by dead-letter id or event id)
  ${bin} check              check the configuration and exit

Settings of this connector:
${own}
Common settings: PORT, HOST, AGENTGOV_CONNECTOR_DATA_DIR, AGENTGOV_WEBHOOK_SECRET, AGENTGOV_DASHBOARD_URL,
AGENTGOV_CONNECTOR_EVENTS, AGENTGOV_CONNECTOR_SEVERITY, AGENTGOV_CONNECTOR_MIN_SEVERITY, AGENTGOV_CONNECTOR_CONFIG
(see the README of @agentgov/connector-sdk).
`
}

/**
 * The whole command line of a connector app: `start` (default), `install`, `uninstall`,
 * `dead-letters`, `replay`, `check`. Exits 2 on a configuration problem (each one listed on
 * stderr), 1 on a failure, 0 otherwise; `start` runs until SIGTERM or SIGINT, then drains.
 *
 * @example
 * ```ts
 * #!/usr/bin/env node
 * import { runConnectorCli } from "@agentgov/connector-sdk/runtime"
 * import { slack } from "./connector.ts"
 *
 * await runConnectorCli(slack)
 * ```
 */
export const runConnectorCli = async (
  definition: ConnectorDefinition<any, any>,
  argv: ReadonlyArray<string> = process.argv.slice(2),
  env: Env = process.env,
): Promise<void> => {
  const [first = "start", ...rest] = argv
  const bin = `agentgov-connector-${definition.name}`
  const fail = (code: number, message: string): never => {
    process.stderr.write(`${bin}: ${message}\n`)
    process.exit(code)
  }
  if (first === "help" || first === "--help" || first === "-h") {
    process.stdout.write(usage(definition))
    return
  }
  const commands: ReadonlyArray<Command> = ["start", "install", "uninstall", "replay", "dead-letters", "check"]
  if (!(commands as ReadonlyArray<string>).includes(first))
    fail(2, `unknown command "${first}"\n\n${usage(definition)}`)
  const command = first as Command

  let config: ReturnType<typeof loadConfig>
  try {
    config = loadConfig(definition, env, command)
  } catch (error) {
    if (error instanceof ConfigError) return fail(2, error.message)
    throw error
  }
  const { common } = config
  const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`)

  switch (command) {
    case "check":
      out({ ok: true, dataDir: common.dataDir, events: common.routing.events })
      return
    case "install":
    case "uninstall": {
      const target: ApiTarget = { baseUrl: common.agentgovUrl!, apiKey: common.apiKey! }
      const url = `${common.publicUrl}/webhooks`
      const problem = (common.allowHttp ? httpUrlProblem : httpsUrlProblem)(url)
      if (problem !== undefined) return fail(2, `CONNECTOR_PUBLIC_URL ${problem}`)
      try {
        const result =
          command === "install"
            ? await installWebhook(
                target,
                common.dataDir,
                url,
                common.routing.events,
                `${bin}: ${definition.description}`,
              )
            : await uninstallWebhook(target, common.dataDir, url)
        out({ ok: true, ...result, dataDir: common.dataDir })
      } catch (error) {
        if (error instanceof InstallError) return fail(1, `${command} failed: ${error.message}`)
        throw error
      }
      return
    }
    case "dead-letters": {
      const store = new Store(common.dataDir)
      try {
        for (const d of store.deadLetters()) {
          out({
            id: d.id,
            eventId: d.eventId,
            type: d.type,
            attempts: d.attempts,
            reason: d.reason,
            error: d.error,
            failedAt: new Date(d.failedAt).toISOString(),
          })
        }
        for (const d of definition.ownDeadLetters?.list(common.dataDir) ?? [])
          out({ ...d, failedAt: new Date(d.failedAt).toISOString() })
      } finally {
        store.close()
      }
      return
    }
    case "replay": {
      const all = rest.includes("--all")
      const ids = rest.filter((a) => a !== "--all")
      if (!all && ids.length === 0) return fail(2, "replay: name dead letters (ids or event ids) or --all")
      const store = new Store(common.dataDir)
      try {
        const moved = store.replay(all ? "all" : ids, Date.now())
        const own = definition.ownDeadLetters?.replay(common.dataDir, all ? "all" : ids) ?? []
        const missing = all
          ? []
          : ids.filter((i) => !moved.some((d) => String(d.id) === i || d.eventId === i) && !own.some((d) => d.id === i))
        // the runtime's by event id, the connector's own by their id
        out({ ok: missing.length === 0, replayed: [...moved.map((d) => d.eventId), ...own.map((d) => d.id)], missing })
        if (missing.length > 0) process.exitCode = 1
      } finally {
        store.close()
      }
      return
    }
    case "start": {
      let running: RunningConnector
      try {
        running = await startConnector(definition, { env })
      } catch (error) {
        if (error instanceof ConfigError) return fail(2, error.message)
        return fail(1, `cannot start: ${errorSummary(error).message}`)
      }
      const stop = () => {
        void running.close().then(({ drained }) => process.exit(drained ? 0 : 1))
      }
      process.once("SIGTERM", stop)
      process.once("SIGINT", stop)
      // `npx` and `npm start` run the connector under `sh -c`, which does not pass SIGTERM on: when
      // the launcher goes away, the connector is re-parented; drain then rather than run on orphaned.
      const launcher = process.ppid
      setInterval(() => {
        if (process.ppid !== launcher) stop()
      }, 500).unref()
      return
    }
  }
}
