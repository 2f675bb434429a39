import { createHash } from "node:crypto"
import { crc32 } from "node:zlib"
import { describe, expect, it } from "vitest"
import { hashKey, looksLikeApiKey, mintKey, parseKey } from "../src/apikeys/keyFormat.ts"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const KINDS = [
  { type: "workspace", env: "live", prefix: "svc_ws_live_" },
  { type: "workspace", env: "test", prefix: "svc_ws_test_" },
  { type: "agent", env: "live", prefix: "svc_ag_sk_live_" },
  { type: "agent", env: "test", prefix: "svc_ag_sk_test_" },
] as const

const FORMAT = /^svc_(?:ws|ag_sk)_(?:live|test)_[0-9A-Za-z]{32,}[0-9A-Za-z]{6}$/

/** The D4 checksum, computed independently: CRC32 of the random part as 6 base62 digits, most significant first. */
const checksum = (random: string): string => {
  let n = crc32(random)
  let out = ""
  for (let i = 0; i < 6; i++) {
    out = BASE62[n % 62] + out
    n = Math.floor(n / 62)
  }
  return out
}

const secretOf = (key: string) => key.replace(/^svc_(?:ws|ag_sk)_(?:live|test)_/, "")

describe("mintKey (D4)", () => {
  it("mints svc_ws_{env}_ and svc_ag_sk_{env}_ keys with ≥ 32 base62 characters and a 6-character checksum", () => {
    for (const { type, env, prefix } of KINDS) {
      const { key } = mintKey(type, env)
      expect(key.startsWith(prefix)).toBe(true)
      expect(key).toMatch(FORMAT)
      const secret = key.slice(prefix.length)
      expect(secret.length).toBeGreaterThanOrEqual(38)
      expect(secret).toMatch(/^[0-9A-Za-z]+$/)
      expect(parseKey(key)).toEqual({ type, environment: env })
      // the last 6 characters are the CRC32 checksum of the rest of the secret
      expect(secret.slice(-6)).toBe(checksum(secret.slice(0, -6)))
    }
  })

  it("keeps the first 6 characters of the secret as the prefix and stores the SHA-256 of the full key", () => {
    for (const { type, env, prefix } of KINDS) {
      const minted = mintKey(type, env)
      expect(minted.prefix).toBe(minted.key.slice(prefix.length, prefix.length + 6))
      expect(minted.prefix).toHaveLength(6)
      expect(minted.hash).toBe(createHash("sha256").update(minted.key, "utf8").digest("hex"))
      expect(minted.hash).toBe(hashKey(minted.key))
    }
  })

  it("mints unique keys from a uniform base62 alphabet", () => {
    const keys = Array.from({ length: 1_000 }, () => mintKey("workspace", "live"))
    expect(new Set(keys.map((k) => k.key)).size).toBe(keys.length)
    expect(new Set(keys.map((k) => k.hash)).size).toBe(keys.length)
    // the random part (secret minus checksum) uses every base62 character, with no gross bias
    const counts = new Map<string, number>()
    for (const { key } of keys) for (const c of secretOf(key).slice(0, -6)) counts.set(c, (counts.get(c) ?? 0) + 1)
    expect([...counts.keys()].sort()).toEqual([...BASE62].sort())
    const total = [...counts.values()].reduce((a, b) => a + b, 0)
    const expected = total / 62
    for (const [c, n] of counts) {
      if (n < expected * 0.75 || n > expected * 1.25)
        throw new Error(`character ${c} appears ${n} times, expected ≈ ${expected}`)
    }
  })
})

describe("parseKey", () => {
  it("accepts every minted key", () => {
    for (let i = 0; i < 200; i++) {
      const { type, env } = KINDS[i % KINDS.length]!
      expect(parseKey(mintKey(type, env).key)).toEqual({ type, environment: env })
    }
  })

  it("rejects every single-character change of the secret", () => {
    for (const { type, env, prefix } of KINDS) {
      const { key } = mintKey(type, env)
      const secret = key.slice(prefix.length)
      let tried = 0
      for (let i = 0; i < secret.length; i++) {
        for (const c of BASE62) {
          if (c === secret[i]) continue
          const changed = `${prefix}${secret.slice(0, i)}${c}${secret.slice(i + 1)}`
          tried++
          if (parseKey(changed) !== undefined) throw new Error(`accepted ${changed} (position ${i})`)
        }
      }
      expect(tried).toBe(secret.length * 61)
    }
  })

  it("rejects swapped adjacent characters, a dropped and an added character", () => {
    const { key } = mintKey("workspace", "live")
    const prefix = "svc_ws_live_"
    const secret = key.slice(prefix.length)
    for (let i = 0; i + 1 < secret.length; i++) {
      if (secret[i] === secret[i + 1]) continue
      const swapped = `${prefix}${secret.slice(0, i)}${secret[i + 1]}${secret[i]}${secret.slice(i + 2)}`
      expect(parseKey(swapped), `swap at ${i}`).toBeUndefined()
    }
    for (let i = 0; i < secret.length; i++) {
      expect(parseKey(`${prefix}${secret.slice(0, i)}${secret.slice(i + 1)}`), `drop at ${i}`).toBeUndefined()
      expect(parseKey(`${prefix}${secret.slice(0, i)}x${secret.slice(i)}`), `insert at ${i}`).toBeUndefined()
    }
  })

  it("rejects wrong prefixes", () => {
    const { key } = mintKey("workspace", "live")
    const secret = secretOf(key)
    for (const prefix of [
      "",
      "svc_",
      "svc_ws_",
      "svc_ws_prod_",
      "svc_ws_LIVE_",
      "SVC_ws_live_",
      "svc_ag_live_",
      "svc_sk_live_",
      "svc_ag_pk_live_",
      "sk_ws_live_",
      "svc-ws-live-",
      "svc_ws_live",
      "svc_ws__live_",
      " svc_ws_live_",
      "xsvc_ws_live_",
    ]) {
      expect(parseKey(`${prefix}${secret}`), prefix).toBeUndefined()
    }
    // the same secret under the right prefixes is fine
    expect(parseKey(`svc_ws_test_${secret}`)).toEqual({ type: "workspace", environment: "test" })
  })

  it("rejects short keys, non-base62 characters, whitespace and garbage", () => {
    const { key } = mintKey("agent", "test")
    const prefix = "svc_ag_sk_test_"
    const secret = key.slice(prefix.length)
    for (let n = 0; n < secret.length; n++)
      expect(parseKey(`${prefix}${secret.slice(0, n)}`), `length ${n}`).toBeUndefined()
    // fewer than 32 random characters are refused even with a valid checksum for them
    const random = secret.slice(0, -6)
    expect(parseKey(`${prefix}${random}${checksum(random)}`)).toEqual({ type: "agent", environment: "test" })
    const short = random.slice(0, 31)
    expect(parseKey(`${prefix}${short}${checksum(short)}`)).toBeUndefined()
    for (const bad of ["-", "_", "+", "/", "=", "é", " ", "\n", "\u0000"]) {
      expect(parseKey(`${prefix}${secret.slice(0, 10)}${bad}${secret.slice(11)}`), JSON.stringify(bad)).toBeUndefined()
    }
    expect(parseKey(`${key}\n`)).toBeUndefined()
    expect(parseKey(` ${key}`)).toBeUndefined()
    expect(parseKey(`${key} `)).toBeUndefined()
    expect(parseKey(`Bearer ${key}`)).toBeUndefined()
    expect(parseKey("")).toBeUndefined()
    expect(parseKey("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln")).toBeUndefined()
    expect(parseKey(`${key}${key}`)).toBeUndefined()
  })
})

describe("hashKey", () => {
  it("is SHA-256 in lowercase hex", () => {
    expect(hashKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(hashKey("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    const { key } = mintKey("agent", "live")
    expect(hashKey(key)).toMatch(/^[0-9a-f]{64}$/)
    expect(hashKey(key)).not.toBe(hashKey(key.toLowerCase()))
  })
})

describe("looksLikeApiKey", () => {
  it("tells API keys from other bearer values", () => {
    expect(looksLikeApiKey(mintKey("workspace", "live").key)).toBe(true)
    expect(looksLikeApiKey(mintKey("agent", "test").key)).toBe(true)
    expect(looksLikeApiKey("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln")).toBe(false)
    expect(looksLikeApiKey("")).toBe(false)
  })
})
