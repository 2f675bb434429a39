import { randomFillSync } from "node:crypto"

/** Drawn from the system's CSPRNG 4 KiB at a time: one call per ~300 ids instead of one per id. */
const pool = Buffer.allocUnsafe(4096)
let offset = pool.length

/**
 * `n` (≤ 256) cryptographically random bytes, for identifiers (record and
 * request ids). The bytes are a copy, handed out once. Secrets (keys, IVs)
 * draw from `randomBytes` directly, so that no pool of them stays in memory.
 */
export const randomId = (n: number): Buffer => {
  if (n > 256) throw new RangeError("randomId: at most 256 bytes")
  if (offset + n > pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  const out = Buffer.from(pool.subarray(offset, offset + n))
  offset += n
  return out
}
