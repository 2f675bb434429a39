import { hash, sign, verify } from "node:crypto"
import { Database } from "@agentgov/db"
import { Clock, Context, Effect, Layer } from "effect"
import { Unauthenticated } from "../apikeys/ApiKeyErrors.ts"
import { ApiKeyRepo, KEYS_CHANNEL } from "../apikeys/ApiKeyRepo.ts"
import { b64json, parseSegment } from "../keys/jws.ts"
import { SigningKeys } from "../keys/SigningKeys.ts"
import { PermissionDenied } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import type { Actor } from "./Actor.ts"
import { actorOfKey, keyRefusal } from "./keyActor.ts"

/** Issuer, audience and lifetime of SDK tokens (D5: 900 s), from the operator's configuration. */
export class TokenSettings extends Context.Service<
  TokenSettings,
  { readonly issuer: string; readonly audience: string; readonly ttlSeconds: number }
>()("@agentgov/domain/auth/TokenSettings") {
  static readonly layer = (settings: { issuer: string; audience: string; ttlSeconds: number }) =>
    Layer.succeed(TokenSettings, TokenSettings.of(settings))
}

/** The claims of an SDK token (D5). */
export interface TokenClaims {
  readonly iss: string
  readonly aud: string
  /** The API key the token was exchanged for. */
  readonly sub: string
  readonly jti: string
  readonly iat: number
  readonly nbf: number
  readonly exp: number
  readonly workspaceId: string
  readonly agentId?: string
  readonly environment: "live" | "test"
  readonly scopes: ReadonlyArray<string>
}

interface Cached {
  readonly actor: Actor
  readonly exp: number
  readonly keyId: string
  readonly keyExpiresAt: number | null
}

/** Verified tokens kept at most; the oldest entry goes first beyond it. */
const CACHE_LIMIT = 100_000
/**
 * The JWS `typ` of an SDK token, and of nothing else: the same signing keys sign badges (`agentgov-badge+jwt`),
 * compliance reports and certifications (`agentgov-report+jcs`, `agentgov-certification+jcs`, detached) and
 * checkpoints (no JWS: a prefixed payload), and each names its kind. Tokens have carried it since the first.
 */
export const SDK_TOKEN_TYP = "JWT"
/** Clock skew tolerated on `nbf` and `exp`. */
const LEEWAY_S = 5

/**
 * When a token verified before stops (its `exp`, in ms), for a connection that holds it past its
 * verification; undefined if it has no readable `exp`.
 */
export const tokenExpiresAtMs = (token: string): number | undefined => {
  const exp = parseSegment(token.split(".")[1] ?? "")?.exp
  return typeof exp === "number" ? exp * 1000 : undefined
}

/** Verified tokens are remembered by their SHA-256, never as themselves (one-shot: no Hash object per call). */
const cacheKeyOf = (token: string) => hash("sha256", token, "base64url")

/** Three base64url segments, the first an encoded JSON object (`eyJ`). */
export const looksLikeJwt = (credential: string) => /^eyJ[\w-]*\.[\w-]+\.[\w-]*$/.test(credential)

/**
 * SDK tokens (D5): an API key is exchanged for an Ed25519-signed JWT, which
 * then authenticates like the key it came from. Verified tokens are cached
 * until they expire, keyed by a hash of the token. When a key is revoked or
 * rotated, every instance hears it (LISTEN on the keys channel) and drops its
 * tokens at once; when that connection drops, every instance drops all its
 * tokens (notifications may have been missed). A token is also refused once
 * its key has expired.
 */
export class SdkTokens extends Context.Service<
  SdkTokens,
  {
    readonly issue: (actor: Actor) => Effect.Effect<{ token: string; expiresAt: string }, PermissionDenied>
    readonly verify: (token: string) => Effect.Effect<Actor, Unauthenticated>
    /**
     * The hot path, outside any fiber: the Actor of a token verified before
     * and still good at `nowMs`, else undefined (then `verify` decides).
     */
    readonly cached: (token: string, nowMs: number) => Actor | undefined
  }
>()("@agentgov/domain/auth/SdkTokens") {
  static readonly layer = Layer.effect(
    SdkTokens,
    Effect.gen(function* () {
      const settings = yield* TokenSettings
      const keys = yield* SigningKeys
      const apiKeys = yield* ApiKeyRepo
      const db = yield* Database
      const cache = new Map<string, Cached>()
      const byKey = new Map<string, Set<string>>()

      // Bumped by every announcement: a token verified against a key read before one must not be cached after.
      let epoch = 0
      const forget = (keyId: string) => {
        epoch += 1
        for (const digest of byKey.get(keyId) ?? []) cache.delete(digest)
        byKey.delete(keyId)
      }
      // Notifications may have been missed (the listening connection dropped): every cached token is checked again.
      const forgetAll = () => {
        epoch += 1
        cache.clear()
        byKey.clear()
      }
      const remember = (digest: string, entry: Cached) => {
        if (cache.size >= CACHE_LIMIT) {
          const oldest = cache.keys().next().value as string
          const old = cache.get(oldest)!
          cache.delete(oldest)
          byKey.get(old.keyId)?.delete(oldest)
        }
        cache.set(digest, entry)
        const set = byKey.get(entry.keyId) ?? new Set<string>()
        set.add(digest)
        byKey.set(entry.keyId, set)
      }

      yield* Effect.acquireRelease(
        Effect.promise(() => db.listen(KEYS_CHANNEL, forget, forgetAll)),
        (stop) => Effect.promise(() => stop()),
      )

      const issue = Effect.fn("SdkTokens.issue")(function* (actor: Actor) {
        if (actor.credential.type !== "api_key")
          return yield* new PermissionDenied({
            message: "SDK tokens are exchanged for an API key, not another token",
            field: "Authorization",
            issue: "an SDK token; send the API key it was minted from",
          })
        const key = yield* keys.current
        const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        // A token never outlives its key: `exp` (and `expiresAt`) stop at the key's expiry or the end of its
        // rotation overlap, so a client refreshes when the token really stops, not up to 15 min later.
        const stored = yield* apiKeys.findById(actor.credential.id)
        const keyEnds = stored?.expiresAt == null ? Infinity : Math.floor(Date.parse(stored.expiresAt) / 1000)
        const claims: TokenClaims = {
          iss: settings.issuer,
          aud: settings.audience,
          sub: actor.credential.id,
          jti: newId("tok"),
          iat: now,
          nbf: now,
          exp: Math.min(now + settings.ttlSeconds, keyEnds),
          workspaceId: actor.workspaceId,
          ...(actor.agentId !== undefined ? { agentId: actor.agentId } : {}),
          environment: actor.environment,
          scopes: [...actor.scopes],
        }
        const input = `${b64json({ alg: "EdDSA", typ: SDK_TOKEN_TYP, kid: key.kid })}.${b64json(claims)}`
        const signature = sign(null, Buffer.from(input), key.privateKey).toString("base64url")
        return { token: `${input}.${signature}`, expiresAt: new Date(claims.exp * 1000).toISOString() }
      })

      const refuse = (message: string) => Effect.fail(new Unauthenticated({ message: `invalid SDK token: ${message}` }))

      const verifyToken = Effect.fn("SdkTokens.verify")(function* (token: string) {
        const nowMs = yield* Clock.currentTimeMillis
        const now = nowMs / 1000
        const digest = cacheKeyOf(token)
        const hit = cache.get(digest)
        if (hit) {
          if (hit.exp + LEEWAY_S <= now) return yield* refuse("expired")
          if (hit.keyExpiresAt !== null && hit.keyExpiresAt <= nowMs) return yield* refuse("its API key has expired")
          return hit.actor
        }
        const [h = "", p = "", s = ""] = token.split(".")
        const header = parseSegment(h)
        const claims = parseSegment(p) as Partial<TokenClaims> | undefined
        if (!header || !claims) return yield* refuse("malformed")
        // Only EdDSA: `none`, HMAC with the public key as secret and every other algorithm are refused here.
        if (header.alg !== "EdDSA") return yield* refuse(`algorithm ${JSON.stringify(header.alg)} is not accepted`)
        // A JWS of another kind signed with the same keys (a badge, a report's signature) is not a token, whatever
        // its claims.
        if (header.typ !== SDK_TOKEN_TYP)
          return yield* refuse(`typ ${JSON.stringify(header.typ)} is not an SDK token's`)
        if (typeof header.kid !== "string") return yield* refuse("no kid")
        const publicKey = yield* keys.publicKey(header.kid)
        if (!publicKey) return yield* refuse("unknown signing key")
        if (!verify(null, Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, "base64url")))
          return yield* refuse("bad signature")
        if (claims.iss !== settings.issuer) return yield* refuse("wrong issuer")
        if (claims.aud !== settings.audience) return yield* refuse("wrong audience")
        if (typeof claims.exp !== "number" || claims.exp + LEEWAY_S <= now) return yield* refuse("expired")
        if (typeof claims.nbf !== "number" || claims.nbf - LEEWAY_S > now) return yield* refuse("not yet valid")
        // Defence in depth, should a signing key ever leak: no token lives longer than this service issues them,
        // and none claims to come from the future.
        if (typeof claims.iat !== "number" || claims.iat - LEEWAY_S > now) return yield* refuse("issued in the future")
        if (claims.exp - claims.iat > settings.ttlSeconds)
          return yield* refuse("lifetime longer than this service issues")
        if (typeof claims.sub !== "string" || typeof claims.workspaceId !== "string" || !Array.isArray(claims.scopes))
          return yield* refuse("missing claims")
        const startedIn = epoch
        const stored = yield* apiKeys.findById(claims.sub)
        if (!stored || stored.workspaceId !== claims.workspaceId) return yield* refuse("its API key no longer exists")
        const refusal = keyRefusal(stored, nowMs)
        if (refusal === "gone") return yield* refuse("its API key no longer exists")
        if (refusal === "revoked") return yield* refuse("its API key is revoked")
        if (refusal === "expired") return yield* refuse("its API key has expired")
        const actor = actorOfKey(stored, "sdk_token", claims.scopes)
        const keyExpiresAt = stored.expiresAt === null ? null : Date.parse(stored.expiresAt)
        if (epoch === startedIn) remember(digest, { actor, exp: claims.exp, keyId: stored.id, keyExpiresAt })
        return actor
      })

      const cached = (token: string, nowMs: number) => {
        const hit = cache.get(cacheKeyOf(token))
        if (!hit || hit.exp + LEEWAY_S <= nowMs / 1000) return undefined
        if (hit.keyExpiresAt !== null && hit.keyExpiresAt <= nowMs) return undefined
        return hit.actor
      }

      return SdkTokens.of({ issue, verify: verifyToken, cached })
    }),
  )
}
