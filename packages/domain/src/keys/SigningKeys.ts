import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto"
import { jsonb } from "@agentgov/db"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { newId } from "../shared/ids.ts"
import { seal, unseal } from "./sealed.ts"

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

export interface SigningKeyInfo {
  readonly kid: string
  readonly state: "pending" | "active" | "retiring" | "retired"
  readonly createdAt: string
  readonly activatesAt: string
  readonly retiresAt: string | null
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

const encrypt = (master: Buffer, kid: string, plain: Buffer): string => seal(master, kid, plain)

/** The private key, or undefined when this master key did not encrypt it (another installation's key). */
const decrypt = (master: Buffer, kid: string, stored: string): KeyObject | undefined => {
  const der = unseal(master, kid, stored)
  if (der === undefined) return undefined
  try {
    return createPrivateKey({ key: der, format: "der", type: "pkcs8" })
  } catch {
    return undefined
  }
}

/**
 * The service's Ed25519 signing keys: they sign audit checkpoints (and SDK
 * tokens). Public parts are published in the JWKS; private parts are stored
 * encrypted with the master key. The first use creates a key. The server
 * refuses to start with a master key that opens none of the stored keys
 * (masterKeyCheck.ts): instances of one deployment share AGENTGOV_MASTER_KEY.
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
    /**
     * Publishes a new key now that signs from `activatesInMs` on (clients that
     * cache the JWKS see it before the first token it signs); the keys signing
     * until then are scheduled to retire shortly after.
     */
    readonly rotate: (activatesInMs: number) => Effect.Effect<{ readonly kid: string; readonly activatesAt: string }>
    /**
     * Erases the private part of every key past its retirement (a successor
     * signs by then). The public part stays published: tokens it signed
     * verify until they expire, and checkpoints it signed stay verifiable for good.
     */
    readonly retire: Effect.Effect<ReadonlyArray<string>>
    /** Every key, newest first, with its state at `now`. */
    readonly list: Effect.Effect<ReadonlyArray<SigningKeyInfo>>
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
        sql
          .withTransaction(
            Effect.gen(function* () {
              const now = yield* Clock.currentTimeMillis
              const activatesAt = new Date(now + activatesInMs)
              // Instances pick the successor up at its activation (load() caches no longer than that);
              // CACHE_MS more covers one whose clock runs behind.
              const retiresAt = new Date(activatesAt.getTime() + CACHE_MS).toISOString()
              yield* sql`UPDATE signing_keys SET retires_at = ${retiresAt}::timestamptz
                WHERE private_key IS NOT NULL AND activates_at <= ${activatesAt.toISOString()}::timestamptz
                  AND (retires_at IS NULL OR retires_at > ${retiresAt}::timestamptz)`
              const made = yield* create(activatesAt)
              cached = undefined
              return { kid: made.kid, activatesAt: made.activatesAt.toISOString() }
            }),
          )
          .pipe(Effect.orDie)

      const retire = Effect.gen(function* () {
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        // Never the last key that can sign: a retirement always has an active successor.
        const rows = yield* sql<{ kid: string }>`UPDATE signing_keys SET private_key = NULL
            WHERE private_key IS NOT NULL AND retires_at <= ${now}::timestamptz
              AND EXISTS (SELECT 1 FROM signing_keys s WHERE s.private_key IS NOT NULL AND s.retires_at IS NULL
                            AND s.activates_at <= ${now}::timestamptz)
            RETURNING kid`
        return rows.map((r) => r.kid)
      }).pipe(Effect.orDie)

      const list = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* sql<{
          kid: string
          private_key: string | null
          created_at: Date
          activates_at: Date
          retires_at: Date | null
        }>`SELECT kid, private_key, created_at, activates_at, retires_at FROM signing_keys
            ORDER BY activates_at DESC, kid DESC`
        return rows.map(
          (r): SigningKeyInfo => ({
            kid: r.kid,
            state:
              r.private_key === null
                ? "retired"
                : r.activates_at.getTime() > now
                  ? "pending"
                  : r.retires_at !== null
                    ? "retiring"
                    : "active",
            createdAt: r.created_at.toISOString(),
            activatesAt: r.activates_at.toISOString(),
            retiresAt: r.retires_at?.toISOString() ?? null,
          }),
        )
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

      return SigningKeys.of({ current, jwks, publicKey, rotate, retire, list })
    }),
  )
}
