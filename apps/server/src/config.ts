import { readFileSync } from "node:fs"
import { isIP } from "node:net"
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
  /** Whether publicUrl was derived from HOST and PORT (AGENTGOV_PUBLIC_URL unset): then PORT=0 takes the bound port. */
  readonly publicUrlDerived?: boolean
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
  /** How often the trust worker recomputes every agent for decay and tenure (AGENTGOV_TRUST_SWEEP_INTERVAL_MS, 1 h). */
  readonly trustSweepIntervalMs?: number
  /**
   * How often the report worker looks for requested reports besides being notified of them (default 5 s); set by
   * tests only, to show that a request wakes it.
   */
  readonly compliancePollMs?: number
  /**
   * Whether a `worker` instance keeps trust scores (trustWorker.ts); AGENTGOV_TRUST_WORKER=false turns it off
   * (scores then stay as they are until an instance runs it; nothing is lost, the cursor waits).
   */
  readonly trustWorker?: boolean
  /**
   * AGENTGOV_ROLES: `api` serves requests, `worker` delivers webhooks, generates compliance reports and keeps trust
   * scores; default both (webhookWorker.ts, complianceWorker.ts, trustWorker.ts).
   */
  readonly roles?: ReadonlyArray<ServerRole>
  /** Tests only: multiplies webhook retry delays and time-outs (AGENTGOV_WEBHOOK_TIME_SCALE, default 1). */
  readonly webhookTimeScale?: number
  /**
   * AGENTGOV_WEBHOOK_ALLOWLIST: CIDRs, addresses and host names webhooks may target although not public.
   * The only way to admit one, loopback included (`127.0.0.1,::1` on a developer's machine).
   */
  readonly webhookAllowlist?: ReadonlyArray<string>
  /**
   * SMTP_URL: takedown notices and invitations are sent through it; unset, notices are kept `pending` and an
   * invitation's link is shown to the inviter.
   */
  readonly smtpUrl?: string | undefined
  /** AGENTGOV_TAKEDOWN_FROM: the From address of takedown notices. */
  readonly takedownFrom?: string | undefined
  /**
   * AGENTGOV_CONTENT_MATCH_RETENTION_DAYS: days a recorded content match no takedown cites is kept (1,095 when
   * unset; ContentService.MATCH_RETENTION_DAYS); the housekeeping sweep purges it after.
   */
  readonly contentMatchRetentionDays?: number | undefined
  /** AGENTGOV_C2PA_CERT / AGENTGOV_C2PA_KEY: the operator's C2PA chain and key (PEM text, or a path to it). */
  readonly c2paCertPem?: string | undefined
  readonly c2paKeyPem?: string | undefined
  /** AGENTGOV_OIDC_PROVIDERS: the identity providers people sign in to the dashboard with (D16). */
  readonly oidcProviders?: ReadonlyArray<OidcProviderConfig>
  /** SMTP_FROM: the invitations' sender address. */
  readonly smtpFrom?: string | undefined
  /** Dashboard sessions: idle and absolute time-outs (AGENTGOV_SESSION_IDLE_SECONDS, _ABSOLUTE_SECONDS). */
  readonly sessionIdleSeconds?: number
  readonly sessionAbsoluteSeconds?: number
  /**
   * Prometheus metrics (issue 34), off unless one of these is set. AGENTGOV_METRICS_TOKEN: GET /metrics on the
   * API's port answers only `Authorization: Bearer <token>`. AGENTGOV_METRICS_PORT: /metrics on a port of its own
   * (on AGENTGOV_METRICS_HOST, default 127.0.0.1), and not on the API's; with a token too, that port asks for it.
   */
  readonly metrics?: MetricsConfig
  /** OpenTelemetry tracing, switched on by the standard OTEL_* variables (tracing.ts: tracingWanted). */
  readonly tracing?: boolean
}

/** One OpenID Connect provider of AGENTGOV_OIDC_PROVIDERS. */
export interface OidcProviderConfig {
  /** In the callback's path: `/auth/callback/<id>`; letters, digits, `-` and `_`. */
  readonly id: string
  readonly label: string
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** Offered only for workspaces on the enterprise plan (D16). */
  readonly enterprise: boolean
}

/** Parses AGENTGOV_OIDC_PROVIDERS (a JSON array); each problem is pushed to `problems`. */
export const parseOidcProviders = (raw: string | undefined, problems: Array<string>): Array<OidcProviderConfig> => {
  if (raw === undefined || raw.trim() === "") return []
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    problems.push("AGENTGOV_OIDC_PROVIDERS: expected a JSON array")
    return []
  }
  if (!Array.isArray(parsed)) {
    problems.push("AGENTGOV_OIDC_PROVIDERS: expected a JSON array")
    return []
  }
  const out: Array<OidcProviderConfig> = []
  const seen = new Set<string>()
  for (const [i, p] of (parsed as Array<Record<string, unknown>>).entries()) {
    const where = `AGENTGOV_OIDC_PROVIDERS[${i}]`
    const str = (k: string) => (typeof p?.[k] === "string" && (p[k] as string) !== "" ? (p[k] as string) : undefined)
    const id = str("id")
    const issuer = str("issuer")
    const clientId = str("clientId")
    const clientSecret = str("clientSecret")
    const missing = [
      ["id", id],
      ["issuer", issuer],
      ["clientId", clientId],
      ["clientSecret", clientSecret],
    ].filter(([, v]) => v === undefined)
    if (missing.length > 0) {
      problems.push(`${where}: missing ${missing.map(([k]) => k).join(", ")}`)
      continue
    }
    if (!/^[A-Za-z0-9_-]{1,40}$/.test(id!)) {
      problems.push(`${where}.id: letters, digits, - and _ only`)
      continue
    }
    if (seen.has(id!)) {
      problems.push(`${where}.id: ${id} is listed twice`)
      continue
    }
    seen.add(id!)
    try {
      const u = new URL(issuer!)
      if (u.protocol !== "https:" && !["127.0.0.1", "localhost", "[::1]"].includes(u.hostname)) throw new Error()
    } catch {
      problems.push(`${where}.issuer: expected an https:// URL (http:// on loopback only)`)
      continue
    }
    if (p.enterprise !== undefined && typeof p.enterprise !== "boolean") {
      problems.push(`${where}.enterprise: expected true or false`)
      continue
    }
    out.push({
      id: id!,
      label: str("label") ?? id!,
      issuer: issuer!,
      clientId: clientId!,
      clientSecret: clientSecret!,
      enterprise: p.enterprise === true,
    })
  }
  return out
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
 * A listening address as the host of a URL that reaches it from this machine: an IPv6 literal in brackets
 * (`http://::1:3000` is no URL), and the any-addresses as loopback.
 */
export const urlHostOf = (host: string): string =>
  host === "0.0.0.0"
    ? "127.0.0.1"
    : host === "::"
      ? "[::1]"
      : host.includes(":") && !host.startsWith("[")
        ? `[${host}]`
        : host

/** An address to listen on: an IP address, or a host name (labels of letters, digits and hyphens). */
const listenHost = (name: string, value: string, problems: Array<string>): void => {
  const label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
  if (isIP(value) === 0 && !(value.length <= 253 && new RegExp(`^${label}(\\.${label})*\\.?$`).test(value)))
    problems.push(`${name}=${JSON.stringify(value)}: expected an IP address or a host name`)
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

  /** Both or neither; each PEM text or the path of a PEM file. */
  const c2pa = () => {
    const read = (name: string) => {
      const raw = env[name]
      if (raw === undefined || raw === "") return undefined
      if (raw.includes("-----BEGIN")) return raw
      try {
        return readFileSync(raw, "utf8")
      } catch {
        problems.push(`${name}: neither PEM text nor a readable file`)
        return undefined
      }
    }
    const cert = read("AGENTGOV_C2PA_CERT")
    const key = read("AGENTGOV_C2PA_KEY")
    if ((cert === undefined) !== (key === undefined))
      problems.push("AGENTGOV_C2PA_CERT and AGENTGOV_C2PA_KEY: set both or neither")
    if (cert !== undefined && !cert.includes("BEGIN CERTIFICATE"))
      problems.push("AGENTGOV_C2PA_CERT: no certificate in it")
    if (key !== undefined && !key.includes("PRIVATE KEY")) problems.push("AGENTGOV_C2PA_KEY: no private key in it")
    return cert !== undefined && key !== undefined ? { c2paCertPem: cert, c2paKeyPem: key } : {}
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
    process: int("AGENTGOV_STREAM_LIMIT_PROCESS", s.process, 1, 1e6),
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
  // Printable ASCII only: a header carries bytes, and a token of other characters arrives as other ones (never matching).
  if (
    metricsToken !== undefined &&
    (metricsToken.length < MIN_METRICS_TOKEN_LENGTH || !/^[\x21-\x7e]+$/.test(metricsToken))
  )
    problems.push(
      `AGENTGOV_METRICS_TOKEN: expected at least ${MIN_METRICS_TOKEN_LENGTH} printable ASCII characters without spaces (e.g. openssl rand -hex 24)`,
    )
  const metricsPort =
    env.AGENTGOV_METRICS_PORT === undefined || env.AGENTGOV_METRICS_PORT === ""
      ? undefined
      : int("AGENTGOV_METRICS_PORT", 0, 0, 65535)
  const metricsHost =
    env.AGENTGOV_METRICS_HOST && env.AGENTGOV_METRICS_HOST !== "" ? env.AGENTGOV_METRICS_HOST : "127.0.0.1"
  if (env.AGENTGOV_METRICS_HOST && metricsPort === undefined)
    problems.push("AGENTGOV_METRICS_HOST: applies only with AGENTGOV_METRICS_PORT")
  else if (env.AGENTGOV_METRICS_HOST) listenHost("AGENTGOV_METRICS_HOST", metricsHost, problems)
  const tracing = tracingWanted(env)
  // An endpoint the exporter cannot use would switch tracing on and export nothing, silently.
  if (tracing)
    for (const name of ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
      url(name, ["http:", "https:"])
  const host = env.HOST && env.HOST !== "" ? env.HOST : "127.0.0.1"
  if (env.HOST) listenHost("HOST", host, problems)
  // The same port on the same address (or on every address) cannot be bound twice; on two addresses it can.
  const everywhere = (h: string) => h === "0.0.0.0" || h === "::"
  if (
    metricsPort !== undefined &&
    metricsPort !== 0 &&
    metricsPort === port &&
    (metricsHost === host || everywhere(metricsHost) || everywhere(host))
  )
    problems.push(
      `AGENTGOV_METRICS_PORT=${JSON.stringify(env.AGENTGOV_METRICS_PORT)}: the API's PORT on the same address; choose another, or unset it to serve /metrics on the API's port`,
    )
  const givenPublicUrl = url("AGENTGOV_PUBLIC_URL", ["http:", "https:"])
  if (givenPublicUrl !== undefined) {
    // The tokens' issuer and the base of every link (sign-in, invitations, OAuth callbacks): paths are appended to it.
    const u = new URL(givenPublicUrl)
    if (u.search !== "" || u.hash !== "" || givenPublicUrl.includes("?") || givenPublicUrl.includes("#"))
      problems.push("AGENTGOV_PUBLIC_URL: expected no query (?) or fragment (#): links are built by appending paths")
    if (u.username !== "" || u.password !== "")
      problems.push("AGENTGOV_PUBLIC_URL: expected no user or password in it: it is shown in links and tokens")
  }
  const publicUrl =
    givenPublicUrl ?? `http://${host === "0.0.0.0" || host === "::" ? "localhost" : urlHostOf(host)}:${port}`

  const config: ServerConfig = {
    port,
    host,
    dataDir: resolve(env.AGENTGOV_DATA_DIR && env.AGENTGOV_DATA_DIR !== "" ? env.AGENTGOV_DATA_DIR : ".data"),
    databaseUrl: url("DATABASE_URL", ["postgres:", "postgresql:"]),
    redisUrl: url("REDIS_URL", ["redis:", "rediss:"]),
    logLevel: level as LogLevel,
    publicUrl: publicUrl.replace(/\/$/, ""),
    publicUrlDerived: !env.AGENTGOV_PUBLIC_URL,
    maxBodyBytes: int("AGENTGOV_MAX_BODY_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024),
    sweepIntervalMs: int("AGENTGOV_SWEEP_INTERVAL_MS", 30_000, 100, 86_400_000),
    verifyIntervalMs: int("AGENTGOV_VERIFY_INTERVAL_MS", 6 * 3_600_000, 1_000, 30 * 86_400_000),
    bootstrap: bootstrapRaw === "true" || bootstrapRaw === "1",
    masterKey: masterKey(),
    tokenTtlSeconds: int("AGENTGOV_TOKEN_TTL_SECONDS", 900, 1, 86_400),
    tokenAudience:
      env.AGENTGOV_TOKEN_AUDIENCE && env.AGENTGOV_TOKEN_AUDIENCE !== "" ? env.AGENTGOV_TOKEN_AUDIENCE : "agentgov",
    checkpointIntervalMs: int("AGENTGOV_CHECKPOINT_INTERVAL_MS", 60_000, 1_000, 86_400_000),
    trustSweepIntervalMs: int("AGENTGOV_TRUST_SWEEP_INTERVAL_MS", 3_600_000, 1_000, 7 * 86_400_000),
    trustWorker: flag("AGENTGOV_TRUST_WORKER", true),
    rateLimits,
    streamLimits,
    roles: roles.length === 0 ? ["api", "worker"] : (roles as Array<ServerRole>),
    webhookTimeScale,
    webhookAllowlist,
    smtpUrl: url("SMTP_URL", ["smtp:", "smtps:"]),
    takedownFrom:
      env.AGENTGOV_TAKEDOWN_FROM && env.AGENTGOV_TAKEDOWN_FROM !== "" ? env.AGENTGOV_TAKEDOWN_FROM : undefined,
    contentMatchRetentionDays: int("AGENTGOV_CONTENT_MATCH_RETENTION_DAYS", 1_095, 1, 36_500),
    ...c2pa(),
    oidcProviders: parseOidcProviders(env.AGENTGOV_OIDC_PROVIDERS, problems),
    smtpFrom: env.SMTP_FROM && env.SMTP_FROM !== "" ? env.SMTP_FROM : undefined,
    sessionIdleSeconds: int("AGENTGOV_SESSION_IDLE_SECONDS", 2 * 3600, 60, 30 * 86_400),
    sessionAbsoluteSeconds: int("AGENTGOV_SESSION_ABSOLUTE_SECONDS", 12 * 3600, 60, 90 * 86_400),
    ...(metricsToken !== undefined || metricsPort !== undefined
      ? { metrics: { token: metricsToken, port: metricsPort, host: metricsHost } }
      : {}),
    tracing,
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return config
}
