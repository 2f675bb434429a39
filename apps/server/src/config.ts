import { resolve } from "node:path"
import {
  DEFAULT_RATE_LIMITS,
  DEFAULT_STREAM_LIMITS,
  parseAllowlist,
  type RateLimitConfig,
  type StreamLimitConfig,
} from "@agentgov/domain"
import { parseMasterKey } from "./domainSettings.ts"
import { tracingWanted } from "./tracing.ts"

export type LogLevel = "debug" | "info" | "warn" | "error"

export interface ServerConfig {
  readonly port: number
  readonly host: string
  readonly dataDir: string
  readonly databaseUrl: string | undefined
  readonly redisUrl: string | undefined
  readonly logLevel: LogLevel
  readonly publicUrl: string
  readonly maxBodyBytes: number
  readonly sweepIntervalMs: number
  /** How often every workspace's chain is verified (D8: 6 hours). */
  readonly verifyIntervalMs: number
  readonly bootstrap: boolean
  /** AGENTGOV_MASTER_KEY; when unset, a key kept in the data directory (domainSettings.ts). */
  readonly masterKey: Buffer | undefined
  /** SDK tokens (D5): lifetime, and the `aud` claim (`iss` is the public URL). */
  readonly tokenTtlSeconds: number
  readonly tokenAudience: string
  /** How often a checkpoint is signed for every workspace whose chain grew. */
  readonly checkpointIntervalMs: number
  /** D10's limits, per minute by default; counters in Redis when `redisUrl` is set. */
  readonly rateLimits: RateLimitConfig
  /** Open event streams at once, per workspace by plan and per API key; counted per instance. */
  readonly streamLimits: StreamLimitConfig
  /** AGENTGOV_ROLES: `api` serves requests, `worker` delivers webhooks and generates compliance reports; default both. */
  readonly roles?: ReadonlyArray<ServerRole>
  /** Tests only: multiplies webhook retry delays and time-outs (AGENTGOV_WEBHOOK_TIME_SCALE, default 1). */
  readonly webhookTimeScale?: number
  /**
   * AGENTGOV_WEBHOOK_ALLOWLIST: CIDRs, addresses and host names webhooks may target although not public.
   * The only way to admit one, loopback included (`127.0.0.1,::1` on a developer's machine).
   */
  readonly webhookAllowlist?: ReadonlyArray<string>
  /**
   * Prometheus metrics (issue 34), off unless one of these is set. AGENTGOV_METRICS_TOKEN: GET /metrics on the
   * API's port answers only `Authorization: Bearer <token>`. AGENTGOV_METRICS_PORT: /metrics on a port of its own
   * (on AGENTGOV_METRICS_HOST, default 127.0.0.1), and not on the API's; with a token too, that port asks for it.
   */
  readonly metrics?: MetricsConfig
  /** OpenTelemetry tracing, switched on by the standard OTEL_* variables (tracing.ts: tracingWanted). */
  readonly tracing?: boolean
}

export interface MetricsConfig {
  readonly token: string | undefined
  readonly port: number | undefined
  readonly host: string
}

/** A metrics token shorter than this is refused: it is a bearer credential. */
export const MIN_METRICS_TOKEN_LENGTH = 24

export type ServerRole = "api" | "worker"

export class ConfigError extends Error {
  readonly problems: ReadonlyArray<string>
  constructor(problems: ReadonlyArray<string>) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`)
    this.problems = problems
  }
}

/**
 * Reads and validates the environment once, at start; every problem is
 * reported together. The only place that reads `process.env`.
 */
export const loadConfig = (env: Record<string, string | undefined> = process.env): ServerConfig => {
  const problems: Array<string> = []
  const int = (name: string, fallback: number, min: number, max: number) => {
    const raw = env[name]
    if (raw === undefined || raw === "") return fallback
    const n = Number(raw)
    if (!/^\d+$/.test(raw) || n < min || n > max) {
      problems.push(`${name}=${JSON.stringify(raw)}: expected a whole number from ${min} to ${max}`)
      return fallback
    }
    return n
  }
  const url = (name: string, protocols: ReadonlyArray<string>) => {
    const raw = env[name]
    if (raw === undefined || raw === "") return undefined
    try {
      const u = new URL(raw)
      if (!protocols.includes(u.protocol)) throw new Error()
      return raw
    } catch {
      problems.push(`${name}: expected a URL starting with ${protocols.map((p) => `${p}//`).join(" or ")}`)
      return undefined
    }
  }

  const masterKey = () => {
    const raw = env.AGENTGOV_MASTER_KEY
    if (raw === undefined || raw === "") return undefined
    try {
      return parseMasterKey(raw)
    } catch (e) {
      problems.push(`AGENTGOV_MASTER_KEY: ${(e as Error).message}`)
      return undefined
    }
  }

  const port = int("PORT", 3000, 0, 65535)
  const level = (env.LOG_LEVEL ?? "info").toLowerCase()
  if (!["debug", "info", "warn", "error"].includes(level))
    problems.push(`LOG_LEVEL=${JSON.stringify(env.LOG_LEVEL)}: expected debug, info, warn or error`)
  const bootstrapRaw = (env.AGENTGOV_BOOTSTRAP ?? "true").toLowerCase()
  if (!["true", "false", "1", "0"].includes(bootstrapRaw)) problems.push("AGENTGOV_BOOTSTRAP: expected true or false")
  const flag = (name: string, fallback: boolean) => {
    const raw = env[name]
    if (raw === undefined || raw === "") return fallback
    const v = raw.toLowerCase()
    if (["true", "1", "on"].includes(v)) return true
    if (["false", "0", "off"].includes(v)) return false
    problems.push(`${name}=${JSON.stringify(raw)}: expected true or false`)
    return fallback
  }
  const d = DEFAULT_RATE_LIMITS
  const rateLimits: RateLimitConfig = {
    enabled: flag("AGENTGOV_RATE_LIMITS", d.enabled),
    windowMs: int("AGENTGOV_RATE_LIMIT_WINDOW_MS", d.windowMs, 1_000, 86_400_000),
    plans: {
      free: int("AGENTGOV_RATE_LIMIT_FREE", d.plans.free, 1, 1e9),
      pro: int("AGENTGOV_RATE_LIMIT_PRO", d.plans.pro, 1, 1e9),
      enterprise: int("AGENTGOV_RATE_LIMIT_ENTERPRISE", d.plans.enterprise, 1, 1e9),
    },
    agent: int("AGENTGOV_RATE_LIMIT_AGENT", d.agent, 1, 1e9),
    anonymous: int("AGENTGOV_RATE_LIMIT_ANONYMOUS", d.anonymous, 1, 1e9),
  }
  const s = DEFAULT_STREAM_LIMITS
  const streamLimits: StreamLimitConfig = {
    plans: {
      free: int("AGENTGOV_STREAM_LIMIT_FREE", s.plans.free, 1, 1e6),
      pro: int("AGENTGOV_STREAM_LIMIT_PRO", s.plans.pro, 1, 1e6),
      enterprise: int("AGENTGOV_STREAM_LIMIT_ENTERPRISE", s.plans.enterprise, 1, 1e6),
    },
    key: int("AGENTGOV_STREAM_LIMIT_KEY", s.key, 1, 1e6),
  }
  const list = (name: string) =>
    (env[name] ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "")
  const roles = list("AGENTGOV_ROLES")
  for (const r of roles)
    if (r !== "api" && r !== "worker")
      problems.push(`AGENTGOV_ROLES: unknown role ${JSON.stringify(r)}; expected api, worker`)
  const webhookAllowlist = list("AGENTGOV_WEBHOOK_ALLOWLIST")
  for (const p of parseAllowlist(webhookAllowlist).problems) problems.push(`AGENTGOV_WEBHOOK_ALLOWLIST: ${p}`)
  const scaleRaw = env.AGENTGOV_WEBHOOK_TIME_SCALE
  const webhookTimeScale = scaleRaw === undefined || scaleRaw === "" ? 1 : Number(scaleRaw)
  if (!(webhookTimeScale >= 0.00001 && webhookTimeScale <= 1))
    problems.push("AGENTGOV_WEBHOOK_TIME_SCALE: expected a number from 0.00001 to 1 (tests only)")
  const metricsToken = env.AGENTGOV_METRICS_TOKEN === "" ? undefined : env.AGENTGOV_METRICS_TOKEN
  if (metricsToken !== undefined && (metricsToken.length < MIN_METRICS_TOKEN_LENGTH || /\s/.test(metricsToken)))
    problems.push(
      `AGENTGOV_METRICS_TOKEN: expected at least ${MIN_METRICS_TOKEN_LENGTH} characters without spaces (e.g. openssl rand -hex 24)`,
    )
  const metricsPort =
    env.AGENTGOV_METRICS_PORT === undefined || env.AGENTGOV_METRICS_PORT === ""
      ? undefined
      : int("AGENTGOV_METRICS_PORT", 0, 0, 65535)
  const metricsHost =
    env.AGENTGOV_METRICS_HOST && env.AGENTGOV_METRICS_HOST !== "" ? env.AGENTGOV_METRICS_HOST : "127.0.0.1"
  if (env.AGENTGOV_METRICS_HOST && metricsPort === undefined)
    problems.push("AGENTGOV_METRICS_HOST: applies only with AGENTGOV_METRICS_PORT")
  const host = env.HOST && env.HOST !== "" ? env.HOST : "127.0.0.1"
  const publicUrl =
    url("AGENTGOV_PUBLIC_URL", ["http:", "https:"]) ?? `http://${host === "0.0.0.0" ? "localhost" : host}:${port}`

  const config: ServerConfig = {
    port,
    host,
    dataDir: resolve(env.AGENTGOV_DATA_DIR && env.AGENTGOV_DATA_DIR !== "" ? env.AGENTGOV_DATA_DIR : ".data"),
    databaseUrl: url("DATABASE_URL", ["postgres:", "postgresql:"]),
    redisUrl: url("REDIS_URL", ["redis:", "rediss:"]),
    logLevel: level as LogLevel,
    publicUrl: publicUrl.replace(/\/$/, ""),
    maxBodyBytes: int("AGENTGOV_MAX_BODY_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024),
    sweepIntervalMs: int("AGENTGOV_SWEEP_INTERVAL_MS", 30_000, 100, 86_400_000),
    verifyIntervalMs: int("AGENTGOV_VERIFY_INTERVAL_MS", 6 * 3_600_000, 1_000, 30 * 86_400_000),
    bootstrap: bootstrapRaw === "true" || bootstrapRaw === "1",
    masterKey: masterKey(),
    tokenTtlSeconds: int("AGENTGOV_TOKEN_TTL_SECONDS", 900, 1, 86_400),
    tokenAudience:
      env.AGENTGOV_TOKEN_AUDIENCE && env.AGENTGOV_TOKEN_AUDIENCE !== "" ? env.AGENTGOV_TOKEN_AUDIENCE : "agentgov",
    checkpointIntervalMs: int("AGENTGOV_CHECKPOINT_INTERVAL_MS", 60_000, 1_000, 86_400_000),
    rateLimits,
    streamLimits,
    roles: roles.length === 0 ? ["api", "worker"] : (roles as Array<ServerRole>),
    webhookTimeScale,
    webhookAllowlist,
    ...(metricsToken !== undefined || metricsPort !== undefined
      ? { metrics: { token: metricsToken, port: metricsPort, host: metricsHost } }
      : {}),
    tracing: tracingWanted(env),
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return config
}
