import { timingSafeEqual } from "node:crypto"
import { Clock, Context, Effect, Layer } from "effect"
import { Unauthenticated } from "../apikeys/ApiKeyErrors.ts"
import { ApiKeyRepo } from "../apikeys/ApiKeyRepo.ts"
import { hashKey, looksLikeApiKey, parseKey } from "../apikeys/keyFormat.ts"
import { OAuthService } from "../oauth/OAuthService.ts"
import type { Actor } from "./Actor.ts"
import { actorOfKey, keyRefusal } from "./keyActor.ts"
import { looksLikeJwt, SdkTokens } from "./SdkTokens.ts"

const TOUCH_INTERVAL_MS = 60_000

/**
 * Whether a credential's use is due to be written (`lastUsedAt`): at most once per `intervalMs` per credential.
 * Remembers only the credentials written within the interval: an older entry decides nothing (the next use is due
 * anyway), so it is dropped, and a long-running instance that sees many keys does not grow without bound. Entries
 * are in the order they were written, so the stale ones are at the front.
 */
export const touchThrottle = (intervalMs: number) => {
  const written = new Map<string, number>()
  return {
    due: (id: string, now: number): boolean => {
      for (const [oldest, at] of written) {
        if (at + intervalMs > now) break
        written.delete(oldest)
      }
      if ((written.get(id) ?? Number.NEGATIVE_INFINITY) + intervalMs > now) return false
      written.delete(id)
      written.set(id, now)
      return true
    },
    size: () => written.size,
  }
}

/**
 * Turns a bearer credential into an Actor: an API key, an SDK token
 * (SdkTokens), or an OAuth access token (OAuthService: its grant's person with
 * the granted scopes their role holds). API keys: the checksum is checked
 * before any read, the key is looked up by its SHA-256, the stored hash is
 * compared in constant time, and revocation or expiry refuse it at once.
 * Shared by every transport.
 */
export class Authenticator extends Context.Service<
  Authenticator,
  { readonly authenticate: (bearer: string) => Effect.Effect<Actor, Unauthenticated> }
>()("@agentgov/domain/auth/Authenticator") {
  static readonly layer = Layer.effect(
    Authenticator,
    Effect.gen(function* () {
      const repo = yield* ApiKeyRepo
      const tokens = yield* SdkTokens
      const oauth = yield* OAuthService
      const touches = touchThrottle(TOUCH_INTERVAL_MS)
      const invalid = new Unauthenticated({ message: "invalid API key" })

      const authenticateKey = Effect.fn("Authenticator.apiKey")(function* (key: string) {
        if (!parseKey(key)) return yield* invalid
        const hash = hashKey(key)
        const stored = yield* repo.findByHash(hash)
        if (!stored || !timingSafeEqual(Buffer.from(stored.hash, "hex"), Buffer.from(hash, "hex")))
          return yield* invalid
        const now = yield* Clock.currentTimeMillis
        const refusal = keyRefusal(stored, now)
        if (refusal === "gone") return yield* invalid
        if (refusal === "revoked") return yield* new Unauthenticated({ message: "API key is revoked" })
        if (refusal === "expired") return yield* new Unauthenticated({ message: "API key has expired" })
        // last_used_at is for operators, not for accounting: write it at most once a minute per key.
        if (touches.due(stored.id, now)) yield* repo.touch(stored.id, new Date(now).toISOString())
        return actorOfKey(stored, "api_key")
      })

      return Authenticator.of({
        authenticate: (bearer) =>
          looksLikeApiKey(bearer)
            ? authenticateKey(bearer)
            : looksLikeJwt(bearer)
              ? tokens.verify(bearer)
              : bearer.startsWith("svc_oauth_")
                ? oauth.authenticate(bearer)
                : Effect.fail(new Unauthenticated({ message: "unrecognised credential" })),
      })
    }),
  )
}
