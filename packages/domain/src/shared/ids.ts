import { randomId } from "./random.ts"

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"

/** Record id prefixes of decision D3 (and the project's own additions). */
export type IdPrefix =
  | "ws"
  | "agt"
  | "ver"
  | "pol"
  | "evt"
  | "enf"
  | "apr"
  | "cnt"
  | "whk"
  | "dlv"
  | "key"
  | "rpt"
  | "crt"
  | "tok"
  | "adj"
  | "mch"
  | "tkd"
  | "usr"
  | "inv"
  | "ses"
  | "oac"
  | "grt"

/** An id's first ten characters: the millisecond it was minted at, in Crockford base32 (48 bits). */
const timePart = (ms: number): string => {
  let time = ""
  let t = ms
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time
    t = Math.floor(t / 32)
  }
  return time
}

let lastMs = 0
let lastRandom: Buffer = Buffer.alloc(10)

/**
 * A prefixed, time-sortable, opaque id: 48 bits of milliseconds and 80 random
 * bits in Crockford base32 (a ULID in lowercase). Within one millisecond the
 * random part is incremented, so ids minted by one process sort in mint order.
 */
export const newId = (prefix: IdPrefix, now: number = Date.now()): string => {
  let random: Buffer
  if (now <= lastMs) {
    random = Buffer.from(lastRandom)
    for (let i = random.length - 1; i >= 0; i--) {
      if (random[i]! < 255) {
        random[i]! += 1
        break
      }
      random[i] = 0
    }
    now = lastMs
  } else {
    random = randomId(10)
  }
  lastMs = now
  lastRandom = random
  const time = timePart(now)
  let rand = ""
  let bits = 0
  let value = 0
  for (const byte of random) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      rand += CROCKFORD[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
    value &= (1 << bits) - 1
  }
  return `${prefix}_${time}${rand}`
}

/**
 * The smallest id `newId(prefix, ms)` can mint: ids sort by the millisecond they were minted at, so `id < firstIdAt`
 * is "minted before ms", and bounds an index range on a column of ids by time.
 */
export const firstIdAt = (prefix: IdPrefix, ms: number): string => `${prefix}_${timePart(ms)}`
