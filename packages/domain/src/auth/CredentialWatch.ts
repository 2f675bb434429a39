import { Database } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import { ApiKeyRepo, KEYS_CHANNEL } from "../apikeys/ApiKeyRepo.ts"
import { OAuthService } from "../oauth/OAuthService.ts"
import { PeopleService } from "../people/PeopleService.ts"
import { Sessions } from "../people/Sessions.ts"
import type { Actor } from "./Actor.ts"
import { keyRefusal } from "./keyActor.ts"
import { tokenExpiresAtMs } from "./SdkTokens.ts"

/**
 * Why a watched credential can no longer act; `unverifiable`: the store could not be asked (fail closed);
 * `signed_out` and `not_member`: a dashboard session ended, or its person left the workspace.
 */
export type CredentialEnd = "revoked" | "expired" | "gone" | "unverifiable" | "signed_out" | "not_member"

interface Watched {
  /** What announcements concern it: a key or grant id; for a session, its person's id and its workspace's. */
  readonly ids: ReadonlyArray<string>
  /** The token's own `exp` in ms; Infinity for an API key. */
  readonly tokenUntil: number
  readonly onEnd: (reason: CredentialEnd) => void
  readonly onConfirmed: () => void
  /** An OAuth access token: read through its grant (and its person's membership), not as a key. */
  readonly oauthBearer: string | undefined
  /** A dashboard session (its cookie's secret), read through the session and its person's membership. */
  readonly session: { readonly secret: string; readonly userId: string; readonly workspaceId: string } | undefined
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
 * process, held to the same rule as a request's (D4, D5, D16): the connection ends
 * once its API key (or the key its SDK token came from) is revoked, its
 * workspace deleted, or the key or token expires; a dashboard session's, once
 * it is signed out (here or everywhere), idles out or reaches its end, or its
 * person is no longer a member of the workspace. Revocations are heard on the
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
      const sessions = yield* Sessions
      const people = yield* PeopleService
      const byKey = new Map<string, Set<Watched>>()

      const unregister = (w: Watched) => {
        clearTimeout(w.timer)
        for (const id of w.ids) {
          const set = byKey.get(id)
          if (set?.delete(w) && set.size === 0) byKey.delete(id)
        }
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
        // A session's idle end moves while it is used: at its deadline it is read again, not ended unread.
        w.timer = setTimeout(
          () => (wait > MAX_TIMER_MS || w.session !== undefined ? check(w) : end(w, "expired")),
          Math.min(wait, MAX_TIMER_MS),
        )
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
              if (w.session !== undefined) {
                const { secret, userId, workspaceId } = w.session
                const standing = await Effect.runPromise(sessions.standing(secret))
                if (w.ended) return
                if (typeof standing === "string") return end(w, standing)
                const member = await Effect.runPromise(
                  people.actorOf(
                    userId,
                    workspaceId,
                    { type: "user", id: userId },
                    { enterpriseOnly: standing.enterprise },
                  ),
                )
                if (w.ended) return
                if (member === undefined || standing.userId !== userId) return end(w, "not_member")
                until = standing.until
                continue
              }
              if (w.oauthBearer !== undefined) {
                const tokenUntil = await Effect.runPromise(oauth.accessTokenUntil(w.oauthBearer))
                if (w.ended) return
                if (tokenUntil === undefined) return end(w, "revoked")
                until = tokenUntil
                continue
              }
              const stored = await Effect.runPromise(repo.findById(w.ids[0]!))
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
        // Keys, the tokens minted from them, OAuth access tokens (by their grant, announced on the same
        // channel) and dashboard sessions (by their person and workspace) can end; a system actor cannot.
        if (type === "system") return { checking: () => false, stop: () => {} }
        const session = type === "user" ? { secret: bearer, userId: id, workspaceId: actor.workspaceId } : undefined
        const w: Watched = {
          ids: session ? [session.userId, session.workspaceId] : [id],
          tokenUntil: type === "sdk_token" ? (tokenExpiresAtMs(bearer) ?? 0) : Number.POSITIVE_INFINITY,
          onEnd: listener.onEnd,
          onConfirmed: listener.onConfirmed,
          oauthBearer: type === "oauth" ? bearer : undefined,
          session,
          timer: undefined,
          checking: false,
          again: false,
          ended: false,
        }
        for (const key of w.ids) {
          const set = byKey.get(key) ?? new Set<Watched>()
          set.add(w)
          byKey.set(key, set)
        }
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
