import { randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  Counters,
  DEFAULT_INVITATION_TTL_MS,
  DEFAULT_SESSION_SETTINGS,
  MasterKey,
  PeopleSettings,
  type PeopleSettingsShape,
  RateLimitSettings,
  SessionSettings,
  SMTP_TIMEOUT_MS,
  StreamLimitSettings,
  sealedNotOpening,
  sendMail,
  TokenSettings,
} from "@agentgov/domain"
import { Effect, Layer } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { ServerConfig } from "./config.ts"
import { StartupError } from "./startupError.ts"

/**
 * What the domain takes from configuration: the master key, the SDK token
 * settings, the rate and stream limits and where the rate counters live.
 */
export const domainSettings = (config: ServerConfig, masterKey: Buffer) =>
  Layer.mergeAll(
    MasterKey.layer(masterKey),
    TokenSettings.layer({
      issuer: config.publicUrl,
      audience: config.tokenAudience,
      ttlSeconds: config.tokenTtlSeconds,
    }),
    RateLimitSettings.layer(config.rateLimits),
    Layer.succeed(StreamLimitSettings, config.streamLimits),
    config.redisUrl ? Counters.redis(config.redisUrl) : Counters.memory,
    Layer.succeed(PeopleSettings, {
      publicUrl: config.publicUrl,
      invitationTtlMs: DEFAULT_INVITATION_TTL_MS,
      sendInvitation: config.smtpUrl ? invitationMailer(config.smtpUrl, config.smtpFrom) : undefined,
    }),
    Layer.succeed(SessionSettings, {
      idleMs: (config.sessionIdleSeconds ?? DEFAULT_SESSION_SETTINGS.idleMs / 1000) * 1000,
      absoluteMs: (config.sessionAbsoluteSeconds ?? DEFAULT_SESSION_SETTINGS.absoluteMs / 1000) * 1000,
    }),
  )

/**
 * Invitations over SMTP, bounded like takedown notices (`sendMail`: connection, greeting, each reply and the whole
 * delivery end at `timeoutMs`): a server that accepts and stalls held the invitation's request for nodemailer's
 * defaults (30 s for a greeting, 10 min on a silent socket). A failed delivery throws: the invitation is then
 * answered with its link.
 */
export const invitationMailer =
  (smtpUrl: string, from: string | undefined, timeoutMs = SMTP_TIMEOUT_MS): PeopleSettingsShape["sendInvitation"] =>
  async ({ to, workspaceName, role, link }) => {
    const delivery = await sendMail(
      { smtpUrl, from: from ?? "agentgov <no-reply@localhost>", smtpTimeoutMs: timeoutMs },
      {
        to,
        subject: `You are invited to ${workspaceName} on agentgov`,
        text: `You are invited to join the workspace ${workspaceName} as ${role}.\n\nOpen this link and sign in with this e-mail address to accept:\n${link}\n\nThe link works once and expires in 7 days.\n`,
      },
    )
    if (delivery.status === "failed") throw new Error(delivery.error)
  }

/** The configured or kept master key and where it came from, or undefined when there is none yet. */
const readMasterKey = (
  config: Pick<ServerConfig, "masterKey" | "dataDir">,
): { readonly key: Buffer; readonly source: string } | undefined => {
  if (config.masterKey !== undefined) return { key: config.masterKey, source: "AGENTGOV_MASTER_KEY" }
  const file = join(config.dataDir, "master.key")
  let text: string
  try {
    text = readFileSync(file, "utf8").trim()
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw new StartupError(`${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`)
  }
  try {
    return { key: parseMasterKey(text), source: file }
  } catch {
    throw new StartupError(`${file} does not hold a master key (32 bytes, as 64 hex digits or base64)`)
  }
}

/**
 * The 32-byte key that encrypts the signing keys at rest, as a start (the server's, or a CLI command's) uses it:
 * `AGENTGOV_MASTER_KEY` (base64, or 64 hex digits) when set, else the one kept in `<data dir>/master.key` (mode
 * 0600), else a new one, written there only once `admitMasterKey` found nothing in the store it cannot open.
 * Instances that share one PostgreSQL must share the variable.
 */
export const chooseMasterKey = (config: Pick<ServerConfig, "masterKey" | "dataDir">) => {
  const kept = readMasterKey(config)
  return { key: kept?.key ?? randomBytes(32), kept }
}

/**
 * Refuses (dies with a StartupError) a store whose sealed secrets the chosen key does not open, before anything is
 * written: a restored store started without its master.key would otherwise get a second master key, and signing keys
 * sealed with it. Then keeps a new installation's key.
 */
export const admitMasterKey = (
  config: Pick<ServerConfig, "dataDir">,
  chosen: ReturnType<typeof chooseMasterKey>,
  keep = true,
): Effect.Effect<void, never, SqlClient.SqlClient> =>
  Effect.flatMap(sealedNotOpening(chosen.key), (foreign) => {
    if (foreign.length > 0)
      return Effect.die(
        new StartupError(
          `this store's sealed secrets (${foreign.join(", ")}) do not open with ` +
            (chosen.kept
              ? `the master key of ${chosen.kept.source}`
              : `a new master key (there is no ${join(config.dataDir, "master.key")} and no AGENTGOV_MASTER_KEY)`) +
            ": start with the key this store was made with (after a restore, the old data directory's master.key or " +
            "the AGENTGOV_MASTER_KEY it ran with); no key was written",
        ),
      )
    if (keep && !chosen.kept) keepMasterKey(config, chosen.key)
    return Effect.void
  })

/** Writes a new installation's master key to `<data dir>/master.key` (0600). */
const keepMasterKey = (config: Pick<ServerConfig, "dataDir">, key: Buffer): void => {
  mkdirSync(config.dataDir, { recursive: true })
  // `wx`: if another process created it first, fail here rather than overwrite its key.
  writeFileSync(join(config.dataDir, "master.key"), `${key.toString("base64")}\n`, { mode: 0o600, flag: "wx" })
}

/** 64 hex digits or base64 of 32 bytes. */
export const parseMasterKey = (raw: string): Buffer => {
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, "hex") : Buffer.from(raw, "base64")
  if (key.length !== 32) throw new Error("expected 32 bytes, as 64 hex digits or base64")
  return key
}
