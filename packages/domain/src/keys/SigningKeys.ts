import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
} from "node:crypto"
import { jsonb } from "@agentgov/db"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { newId } from "../shared/ids.ts"

/** The operator's 32-byte master key: it encrypts the private parts of the signing keys at rest. */
export class MasterKey extends Context.Service<MasterKey, { readonly key: Buffer }>()(
  "@agentgov/domain/keys/MasterKey",
) {
  static readonly layer = (key: Buffer) => {
    if (key.length !== 32) throw new Error("the master key must be 32 bytes")
    return Layer.succeed(MasterKey, MasterKey.of({ key }))
  }
}

/** A public Ed25519 key as published in the JWKS. */
export type PublicJwk = {
  readonly kty: "OKP"
  readonly crv: "Ed25519"
  readonly x: string
  readonly kid: string
  readonly alg: "EdDSA"
  readonly use: "sig"
}

export interface SigningKey {
  readonly kid: string
  readonly privateKey: KeyObject
}

interface KeyRow {
  readonly kid: string
  readonly public_jwk: PublicJwk
  readonly private_key: string | null
  readonly activates_at: Date
}

/** How long an instance signs with the key it loaded before it looks again (a rotation takes effect within this). */
const CACHE_MS = 60_000

const encrypt = (master: Buffer, kid: string, plain: Buffer): string => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", master, iv).setAAD(Buffer.from(kid))
  const body = Buffer.concat([cipher.update(plain), cipher.final()])
  return ["v1", iv, cipher.getAuthTag(), body]
    .map((p) => (typeof p === "string" ? p : p.toString("base64url")))
    .join(".")
}

/** The private key, or undefined when this master key did not encrypt it (another installation's key). */
const decrypt = (master: Buffer, kid: string, stored: string): KeyObject | undefined => {
  const [version, iv, tag, body] = stored.split(".")
  if (version !== "v1" || !iv || !tag || !body) return undefined
  try {
    const decipher = createDecipheriv("aes-256-gcm", master, Buffer.from(iv, "base64url"))
      .setAAD(Buffer.from(kid))
      .setAuthTag(Buffer.from(tag, "base64url"))
    const der = Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()])
    return createPrivateKey({ key: der, format: "der", type: "pkcs8" })
  } catch {
    return undefined
  }
}

/**
 * The service's Ed25519 signing keys: they sign audit checkpoints (and SDK
 * tokens). Public parts are published in the JWKS; private parts are stored
 * encrypted with the master key. The first use creates a key. An instance
 * whose master key cannot open the stored keys makes its own (and says so in
 * the docs: instances of one deployment share AGENTGOV_MASTER_KEY).
 */
export class SigningKeys extends Context.Service<
  SigningKeys,
  {
    /** The key to sign with now. */
    readonly current: Effect.Effect<SigningKey>
    /** Every published public key. */
    readonly jwks: Effect.Effect<{ readonly keys: ReadonlyArray<PublicJwk> }>
    /** The public key of `kid`, or undefined when no such key was ever published. */
    readonly publicKey: (kid: string) => Effect.Effect<KeyObject | undefined>
    /** Publishes a new key that signs from `activatesInMs` on; the previous ones retire then. */
    readonly rotate: (activatesInMs: number) => Effect.Effect<{ readonly kid: string; readonly activatesAt: string }>
  }
>()("@agentgov/domain/keys/SigningKeys") {
  static readonly layer = Layer.effect(
    SigningKeys,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { key: master } = yield* MasterKey
      let cached: { key: SigningKey; until: number } | undefined
      // Public keys never change for a kid: cached for good. Unknown kids are looked up at most once a second.
      const publicKeys = new Map<string, KeyObject>()
      let lastMiss = 0

      const create = (activatesAt: Date) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const kid = newId("key", now)
          const { publicKey, privateKey } = generateKeyPairSync("ed25519")
          const { x } = publicKey.export({ format: "jwk" })
          const jwk: PublicJwk = { kty: "OKP", crv: "Ed25519", x: x!, kid, alg: "EdDSA", use: "sig" }
          const sealed = encrypt(master, kid, privateKey.export({ format: "der", type: "pkcs8" }))
          publicKeys.set(kid, publicKey)
          yield* sql`INSERT INTO signing_keys (kid, public_jwk, private_key, created_at, activates_at)
              VALUES (${kid}, ${jsonb(sql, jwk)}, ${sealed}, ${new Date(now).toISOString()}::timestamptz,
                      ${activatesAt.toISOString()}::timestamptz)`
          return { kid, privateKey, activatesAt }
        })

      const load = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* sql<KeyRow>`SELECT kid, public_jwk, private_key, activates_at FROM signing_keys
            WHERE private_key IS NOT NULL ORDER BY activates_at DESC, kid DESC`
        const pending = rows.filter((r) => r.activates_at.getTime() > now)
        for (const row of rows) {
          if (row.activates_at.getTime() > now) continue
          const privateKey = decrypt(master, row.kid, row.private_key!)
          if (privateKey) {
            const next = Math.min(...pending.map((r) => r.activates_at.getTime()), now + CACHE_MS)
            return { key: { kid: row.kid, privateKey }, until: next }
          }
        }
        const made = yield* create(new Date(now))
        return { key: { kid: made.kid, privateKey: made.privateKey }, until: now + CACHE_MS }
      })

      const current = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        if (cached && cached.until > now) return cached.key
        cached = yield* load
        return cached.key
      }).pipe(Effect.orDie)

      const jwks = sql<{ public_jwk: PublicJwk }>`SELECT public_jwk FROM signing_keys ORDER BY created_at, kid`.pipe(
        Effect.map((rows) => ({ keys: rows.map((r) => r.public_jwk) })),
        Effect.orDie,
      )

      const rotate = (activatesInMs: number) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const made = yield* create(new Date(now + activatesInMs))
          cached = undefined
          return { kid: made.kid, activatesAt: made.activatesAt.toISOString() }
        }).pipe(Effect.orDie)

      const publicKey = (kid: string) =>
        Effect.gen(function* () {
          const known = publicKeys.get(kid)
          if (known) return known
          const now = yield* Clock.currentTimeMillis
          if (now - lastMiss < 1_000) return undefined
          const rows = yield* sql<{ kid: string; public_jwk: PublicJwk }>`SELECT kid, public_jwk FROM signing_keys`
          for (const r of rows) publicKeys.set(r.kid, createPublicKey({ key: r.public_jwk, format: "jwk" }))
          if (!publicKeys.has(kid)) lastMiss = now
          return publicKeys.get(kid)
        }).pipe(Effect.orDie)

      return SigningKeys.of({ current, jwks, publicKey, rotate })
    }),
  )
}
