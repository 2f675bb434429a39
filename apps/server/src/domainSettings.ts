import { randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Counters, MasterKey, RateLimitSettings, StreamLimitSettings, TokenSettings } from "@agentgov/domain"
import { Layer } from "effect"
import type { ServerConfig } from "./config.ts"

/**
 * What the domain takes from configuration: the master key, the SDK token
 * settings, the rate and stream limits and where the rate counters live.
 */
export const domainSettings = (config: ServerConfig) =>
  Layer.mergeAll(
    MasterKey.layer(resolveMasterKey(config)),
    TokenSettings.layer({
      issuer: config.publicUrl,
      audience: config.tokenAudience,
      ttlSeconds: config.tokenTtlSeconds,
    }),
    RateLimitSettings.layer(config.rateLimits),
    Layer.succeed(StreamLimitSettings, config.streamLimits),
    config.redisUrl ? Counters.redis(config.redisUrl) : Counters.memory,
  )

/**
 * The 32-byte key that encrypts the signing keys at rest:
 * `AGENTGOV_MASTER_KEY` (base64, or 64 hex digits) when set, else a key the
 * installation generates once and keeps in `<data dir>/master.key` (mode
 * 0600). Instances that share one PostgreSQL must share the variable.
 */
export const resolveMasterKey = (config: Pick<ServerConfig, "masterKey" | "dataDir">): Buffer => {
  if (config.masterKey !== undefined) return config.masterKey
  const file = join(config.dataDir, "master.key")
  try {
    return parseMasterKey(readFileSync(file, "utf8").trim())
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
  }
  mkdirSync(config.dataDir, { recursive: true })
  const key = randomBytes(32)
  // `wx`: if another process created it first, fail here rather than overwrite its key.
  writeFileSync(file, `${key.toString("base64")}\n`, { mode: 0o600, flag: "wx" })
  return key
}

/** 64 hex digits or base64 of 32 bytes. */
export const parseMasterKey = (raw: string): Buffer => {
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, "hex") : Buffer.from(raw, "base64")
  if (key.length !== 32) throw new Error("expected 32 bytes, as 64 hex digits or base64")
  return key
}
