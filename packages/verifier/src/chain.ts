import { createHash } from "node:crypto"
import { canonicalize } from "./jcs.ts"

/** prevHash of the first event of every chain. */
export const GENESIS_HASH = "0".repeat(64)

/**
 * hash = hex(SHA-256(prevHash ‖ type ‖ JCS(data) ‖ timestamp)), UTF-8, no
 * separators; `timestamp` is the exact string the API returns.
 */
export const chainHash = (prevHash: string, type: string, data: unknown, timestamp: string): string =>
  createHash("sha256").update(prevHash).update(type).update(canonicalize(data)).update(timestamp).digest("hex")
