import { hash, randomBytes } from "node:crypto"
import { crc32 } from "node:zlib"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const RANDOM_LENGTH = 32
const CHECKSUM_LENGTH = 6

export type KeyType = "workspace" | "agent"
export type Environment = "live" | "test"

/** CSPRNG base62 by rejection sampling (248 = 4 × 62), so every character is uniform. */
const randomBase62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62]
      if (out.length === length) break
    }
  }
  return out
}

const checksum = (random: string): string => {
  let n = crc32(random)
  let out = ""
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out
    n = Math.floor(n / 62)
  }
  return out
}

const prefixOf = (type: KeyType, env: Environment) => (type === "workspace" ? `svc_ws_${env}_` : `svc_ag_sk_${env}_`)

const KEY_PATTERN = /^svc_(ws|ag_sk)_(live|test)_([0-9A-Za-z]{38,128})$/

export interface MintedKey {
  /** The full key: shown once, never stored. */
  readonly key: string
  /** First 6 characters of the secret, kept for display. */
  readonly prefix: string
  readonly hash: string
}

/** SHA-256 of the full key, hex: the only form in which a key is stored. */
export const hashKey = (key: string): string => hash("sha256", key, "hex")

/** Mints `svc_ws_{env}_<secret>` or `svc_ag_sk_{env}_<secret>` (decision D4). */
export const mintKey = (type: KeyType, env: Environment): MintedKey => {
  const random = randomBase62(RANDOM_LENGTH)
  const key = `${prefixOf(type, env)}${random}${checksum(random)}`
  return { key, prefix: random.slice(0, 6), hash: hashKey(key) }
}

export interface ParsedKey {
  readonly type: KeyType
  readonly environment: Environment
}

/**
 * Recognises a well-formed key whose checksum holds, without any I/O; garbage
 * and typos are rejected before the database is asked.
 */
export const parseKey = (candidate: string): ParsedKey | undefined => {
  const m = KEY_PATTERN.exec(candidate)
  if (!m) return undefined
  const secret = m[3]!
  const random = secret.slice(0, -CHECKSUM_LENGTH)
  if (checksum(random) !== secret.slice(-CHECKSUM_LENGTH)) return undefined
  return { type: m[1] === "ws" ? "workspace" : "agent", environment: m[2] as Environment }
}

/** Whether a bearer value looks like one of our API keys at all (vs. a JWT or OAuth token). */
export const looksLikeApiKey = (candidate: string): boolean =>
  candidate.startsWith("svc_ws_") || candidate.startsWith("svc_ag_")

/**
 * Mints another opaque secret of the project (`svc_oauth_at_…`, an invitation, a session): `prefix`, 32
 * CSPRNG base62 characters and the D4 checksum, so that garbage is refused before any read.
 */
export const mintSecret = (prefix: string): { readonly secret: string; readonly hash: string } => {
  const random = randomBase62(RANDOM_LENGTH)
  const secret = `${prefix}${random}${checksum(random)}`
  return { secret, hash: hashKey(secret) }
}

/** Whether `candidate` is a well-formed secret of `prefix` whose checksum holds (no I/O). */
export const isSecretOf = (prefix: string, candidate: string): boolean => {
  if (!candidate.startsWith(prefix)) return false
  const body = candidate.slice(prefix.length)
  if (!/^[0-9A-Za-z]{38}$/.test(body)) return false
  return checksum(body.slice(0, -CHECKSUM_LENGTH)) === body.slice(-CHECKSUM_LENGTH)
}
