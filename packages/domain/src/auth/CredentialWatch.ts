import { Database } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import { ApiKeyRepo, KEYS_CHANNEL } from "../apikeys/ApiKeyRepo.ts"
import { OAuthService } from "../oauth/OAuthService.ts"
import type { Actor } from "./Actor.ts"
import { keyRefusal } from "./keyActor.ts"
import { tokenExpiresAtMs } from "./SdkTokens.ts"

/** Why a watched credential can no longer act; `unverifiable`: the store could not be asked (fail closed). */
export type CredentialEnd = "revoked" | "expired" | "gone" | "unverifiable"

interface Watched {
  readonly keyId: string
  /** The token's own `exp` in ms; Infinity for an API key. */
  readonly tokenUntil: number
  readonly onEnd: (reason: CredentialEnd) => void
  readonly onConfirmed: () => void
  /** An OAuth access token: read through its grant (and its person's membership), not as a key. */
  readonly oauthBearer: string | undefined
  timer: ReturnType<typeof setTimeout> | undefined
  checking: boolean
  again: boolean
  ended: boolean
}

/** A connection's side of a watch. */
export interface CredentialListener {
  /** The credential stopped (called at most once): the connection must end. */
  readonly onEnd: (reason: CredentialEnd) => void
  /** A check found the credential still good: what the connection held back meanwhile may go out. */
  readonly onConfirmed: () => void
}

export interface CredentialWatchHandle {
  /** While true the credential is in question (a revocation or a gap was announced): send nothing. */
  readonly checking: () => boolean
  /** Stops watching (the connection closed). */
  readonly stop: () => void
}

/** setTimeout's longest delay: a later deadline is checked again when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * The credential of every long-lived connection (an event stream) in this
 * process, held to the same rule as a request's (D4, D5): the connection ends
 * once its API key (or the key its SDK token came from) is revoked, its
 * workspace deleted, or the key or token expires. Revocations are heard on the
 * keys channel, from every instance; when the listening connection drops,
 * every credential is checked against the store again, and one that cannot be
 * checked ends (fail closed). Expiry is a timer per connection. While a
 * check is under way the connection holds back what it would send: events
 * committed after a revocation are announced after it (one LISTEN connection
 * carries every channel in commit order), so they are never sent.
 */
export class CredentialWatch extends Context.Service<
  CredentialWatch,
  {
    /** Watches the credential `bearer` that authenticated `actor`, until the handle is stopped. */
    readonly watch: (actor: Actor, bearer: string, listener: CredentialListener) => CredentialWatchHandle
  }
>()("@agentgov/domain/auth/CredentialWatch") {
  static readonly layer = Layer.effect(
    CredentialWatch,
    Effect.gen(function* () {
      const repo = yield* ApiKeyRepo
      const db = yield* Database
      const oauth = yield* OAuthService
      const byKey = new Map<string, Set<Watched>>()

      const unregister = (w: Watched) => {
        clearTimeout(w.timer)
        const set = byKey.get(w.keyId)
        if (set?.delete(w) && set.size === 0) byKey.delete(w.keyId)
      }

      const end = (w: Watched, reason: CredentialEnd) => {
        if (w.ended) return
        w.ended = true
        unregister(w)
        try {
          w.onEnd(reason)
        } catch {
          // The connection's own failure to close is its own; the watch is over either way.
        }
      }

      const arm = (w: Watched, until: number) => {
        clearTimeout(w.timer)
        w.timer = undefined
        if (until === Number.POSITIVE_INFINITY) return
        const wait = until - Date.now()
        if (wait <= 0) return end(w, "expired")
        w.timer = setTimeout(() => (wait > MAX_TIMER_MS ? check(w) : end(w, "expired")), Math.min(wait, MAX_TIMER_MS))
      }

      /** Reads the key again; an announcement during the read means another read, as it may predate the change. */
      const check = (w: Watched) => {
        if (w.ended) return
        if (w.checking) {
          w.again = true
          return
        }
        w.checking = true
        void (async () => {
          let until = Number.POSITIVE_INFINITY
          try {
            do {
              w.again = false
              if (w.oauthBearer !== undefined) {
                const tokenUntil = await Effect.runPromise(oauth.accessTokenUntil(w.oauthBearer))
                if (w.ended) return
                if (tokenUntil === undefined) return end(w, "revoked")
                until = tokenUntil
                continue
              }
              const stored = await Effect.runPromise(repo.findById(w.keyId))
              if (w.ended) return
              const refusal = stored ? keyRefusal(stored, Date.now()) : "gone"
              if (refusal) return end(w, refusal)
              const keyUntil = stored!.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(stored!.expiresAt)
              until = Math.min(w.tokenUntil, keyUntil)
            } while (w.again)
          } catch {
            return end(w, "unverifiable")
          }
          w.checking = false
          arm(w, until)
          if (!w.ended) w.onConfirmed()
        })()
      }

      yield* Effect.acquireRelease(
        Effect.promise(() =>
          db.listen(
            KEYS_CHANNEL,
            (keyId) => {
              for (const w of byKey.get(keyId) ?? []) check(w)
            },
            // Revocations may have been announced while the connection was down: every credential is read again.
            () => {
              for (const set of byKey.values()) for (const w of set) check(w)
            },
          ),
        ),
        (stop) => Effect.promise(() => stop()),
      )

      const watch = (actor: Actor, bearer: string, listener: CredentialListener): CredentialWatchHandle => {
        const { type, id } = actor.credential
        // Keys, the tokens minted from them, and OAuth access tokens (by their grant, announced on the same
        // channel) can be revoked; a system actor cannot.
        if (type !== "api_key" && type !== "sdk_token" && type !== "oauth")
          return { checking: () => false, stop: () => {} }
        const w: Watched = {
          keyId: id,
          tokenUntil: type === "sdk_token" ? (tokenExpiresAtMs(bearer) ?? 0) : Number.POSITIVE_INFINITY,
          onEnd: listener.onEnd,
          onConfirmed: listener.onConfirmed,
          oauthBearer: type === "oauth" ? bearer : undefined,
          timer: undefined,
          checking: false,
          again: false,
          ended: false,
        }
        const set = byKey.get(id) ?? new Set<Watched>()
        set.add(w)
        byKey.set(id, set)
        // Registered first, then read: a revocation between the request's authentication and here is not lost.
        check(w)
        return {
          checking: () => w.checking,
          stop: () => {
            w.ended = true
            unregister(w)
          },
        }
      }

      return CredentialWatch.of({ watch })
    }),
  )
}
