import { hash, timingSafeEqual } from "node:crypto"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { KEYS_CHANNEL } from "../apikeys/ApiKeyRepo.ts"
import { hashKey, isSecretOf, mintSecret } from "../apikeys/keyFormat.ts"
import { newId } from "../shared/ids.ts"
import { isoOf } from "../shared/time.ts"

export const SESSION_PREFIX = "svc_sess_"
export const SIGNIN_LINK_PREFIX = "svc_signin_"

export interface SessionSettingsShape {
  /** A session unused this long ends. */
  readonly idleMs: number
  /** A session ends this long after sign-in, used or not. */
  readonly absoluteMs: number
}

export const DEFAULT_SESSION_SETTINGS: SessionSettingsShape = { idleMs: 2 * 3600_000, absoluteMs: 12 * 3600_000 }

export const SessionSettings = Context.Reference<SessionSettingsShape>("@agentgov/domain/people/SessionSettings", {
  defaultValue: () => DEFAULT_SESSION_SETTINGS,
})

/** A live session, as a request sees it. */
export interface ActiveSession {
  readonly id: string
  readonly userId: string
  readonly provider: string
  /** Signed in through an enterprise-only provider: acts only in enterprise workspaces. */
  readonly enterprise: boolean
  readonly expiresAt: string
}

export interface StartedSession {
  /** The cookie's value: shown to the browser, stored only as its hash. */
  readonly secret: string
  readonly session: ActiveSession
}

/**
 * Where a session stands, read without touching it (a long-lived connection's re-check): live until `until`
 * (its idle or absolute end, whichever is first, as of now), or why it can no longer act.
 */
export type SessionStanding =
  | { readonly userId: string; readonly enterprise: boolean; readonly until: number }
  | "signed_out"
  | "expired"

/** A sign-in under way at a provider, as its callback takes it back. */
export interface SignInFlow {
  readonly provider: string
  readonly codeVerifier: string
  readonly nonce: string
  /** A path on this server to return to after sign-in. */
  readonly returnTo?: string | undefined
}

/** Touching a session (moving its idle deadline) is a write: at most once a minute per session. */
const TOUCH_INTERVAL_MS = 60_000

/**
 * How long a session's row is kept after it ended (idle, past its end, or signed out): for that long `standing`
 * still tells a re-check "expired" from "signed_out"; then the sweep deletes it.
 */
export const ENDED_SESSIONS_KEPT_MS = 86_400_000

/** Ended sessions one sweep deletes at most; the rest wait for the next. */
const SESSION_PURGE_LIMIT = 5_000

/**
 * The CSRF token of a session: derived from its secret, so it needs no storage, and it is worthless without
 * the cookie. The dashboard reads it from `GET /auth/session` (the cookie itself is HttpOnly) and sends it
 * as `X-CSRF-Token` with every cookie-authenticated request that changes something.
 */
export const csrfTokenOf = (secret: string): string => hash("sha256", `agentgov-csrf\0${secret}`, "base64url")

export const csrfMatches = (secret: string, candidate: string | undefined): boolean => {
  if (candidate === undefined) return false
  const expected = Buffer.from(csrfTokenOf(secret))
  const given = Buffer.from(candidate)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * Dashboard sessions (D16), the sign-in flows under way at providers, and the
 * first-run sign-in link. Secrets (the session cookie, the state, the link)
 * are stored as SHA-256 only. A session is read from the store on every
 * request, so that revoking it, or removing the membership it acts through,
 * holds at once on every instance.
 */
export class Sessions extends Context.Service<
  Sessions,
  {
    /** A new session for `userId`; `replacing` (the cookie the browser came with) is revoked: rotation at sign-in. */
    readonly start: (
      userId: string,
      provider: string,
      enterprise: boolean,
      replacing?: string | undefined,
    ) => Effect.Effect<StartedSession>
    /** The live session of a cookie value, or undefined (garbage, unknown, revoked, idle or past its end). */
    readonly resolve: (secret: string) => Effect.Effect<ActiveSession | undefined>
    /** Where a session stands, without moving its idle deadline; a secret of no session is `signed_out`. */
    readonly standing: (secret: string) => Effect.Effect<SessionStanding>
    /** Sign-out: announced on the keys channel by the user's id, so that their open event streams check again. */
    readonly end: (secret: string) => Effect.Effect<void>
    /** Sign-out everywhere: every session of the user (announced likewise). */
    readonly endAll: (userId: string) => Effect.Effect<number>
    readonly beginFlow: (state: string, flow: SignInFlow, ttlMs: number) => Effect.Effect<void>
    /** Takes a flow back once: a second callback with the same state finds nothing. */
    readonly takeFlow: (state: string) => Effect.Effect<SignInFlow | undefined>
    /** A one-time link for `userId`; their earlier unused links stop working (one valid link per person). */
    readonly createSignInLink: (userId: string, ttlMs: number) => Effect.Effect<string>
    /** The user of a one-time link, once: every later use finds nothing. */
    readonly consumeSignInLink: (token: string) => Effect.Effect<string | undefined>
    /**
     * Whose a one-time link is while it can still be used, without using it: what the confirmation page a GET of
     * the link shows (a link-preview bot that fetches it spends nothing).
     */
    readonly peekSignInLink: (token: string) => Effect.Effect<{ readonly email: string } | undefined>
    /**
     * Deletes the sessions that ended over {@link ENDED_SESSIONS_KEPT_MS} ago (idle, past their end, or signed
     * out), at most a few thousand a call; returns how many. Run by the sweep.
     */
    readonly purgeEnded: Effect.Effect<number>
    /**
     * Deletes the sign-in links that were used, or expired (replaced by a newer one, or past their end), at most a
     * few thousand a call; returns how many. Run by the sweep.
     */
    readonly purgeSignInLinks: Effect.Effect<number>
  }
>()("@agentgov/domain/people/Sessions") {
  static readonly layer = Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const orDie = Effect.orDie

      const start = Effect.fn("Sessions.start")(function* (
        userId: string,
        provider: string,
        enterprise: boolean,
        replacing?: string,
      ) {
        const settings = yield* SessionSettings
        const now = yield* Clock.currentTimeMillis
        const { secret, hash: secretHash } = mintSecret(SESSION_PREFIX)
        const session: ActiveSession = {
          id: newId("ses", now),
          userId,
          provider,
          enterprise,
          expiresAt: isoOf(now + settings.absoluteMs),
        }
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              if (replacing !== undefined && isSecretOf(SESSION_PREFIX, replacing))
                yield* sql`UPDATE sessions SET revoked_at = ${isoOf(now)}::timestamptz
                  WHERE secret_hash = ${hashKey(replacing)} AND revoked_at IS NULL`
              yield* sql`INSERT INTO sessions (id, secret_hash, user_id, provider, enterprise, created_at, last_seen_at,
                  idle_expires_at, expires_at)
                VALUES (${session.id}, ${secretHash}, ${userId}, ${provider}, ${enterprise}, ${isoOf(now)}::timestamptz,
                  ${isoOf(now)}::timestamptz, ${isoOf(Math.min(now + settings.idleMs, now + settings.absoluteMs))}::timestamptz,
                  ${session.expiresAt}::timestamptz)`
            }),
          )
          .pipe(orDie)
        return { secret, session }
      })

      const resolve = Effect.fn("Sessions.resolve")(function* (secret: string) {
        if (!isSecretOf(SESSION_PREFIX, secret)) return undefined
        const now = yield* Clock.currentTimeMillis
        const rows = yield* sql<{
          id: string
          user_id: string
          provider: string
          enterprise: boolean
          last_seen_at: Date
          idle_expires_at: Date
          expires_at: Date
          revoked_at: Date | null
        }>`SELECT id, user_id, provider, enterprise, last_seen_at, idle_expires_at, expires_at, revoked_at
            FROM sessions WHERE secret_hash = ${hashKey(secret)}`.pipe(orDie)
        const row = rows[0]
        if (!row || row.revoked_at !== null) return undefined
        if (row.expires_at.getTime() <= now || row.idle_expires_at.getTime() <= now) return undefined
        if (row.last_seen_at.getTime() + TOUCH_INTERVAL_MS <= now) {
          const settings = yield* SessionSettings
          const idle = Math.min(now + settings.idleMs, row.expires_at.getTime())
          yield* sql`UPDATE sessions SET last_seen_at = ${isoOf(now)}::timestamptz, idle_expires_at = ${isoOf(idle)}::timestamptz
              WHERE id = ${row.id}`.pipe(orDie)
        }
        return {
          id: row.id,
          userId: row.user_id,
          provider: row.provider,
          enterprise: row.enterprise,
          expiresAt: row.expires_at.toISOString(),
        } satisfies ActiveSession
      })

      const standing = (secret: string) =>
        isSecretOf(SESSION_PREFIX, secret)
          ? Effect.flatMap(Clock.currentTimeMillis, (now) =>
              sql<{
                user_id: string
                enterprise: boolean
                idle_expires_at: Date
                expires_at: Date
                revoked_at: Date | null
              }>`
                  SELECT user_id, enterprise, idle_expires_at, expires_at, revoked_at
                  FROM sessions WHERE secret_hash = ${hashKey(secret)}`.pipe(
                Effect.map((rows): SessionStanding => {
                  const row = rows[0]
                  if (!row || row.revoked_at !== null) return "signed_out"
                  const until = Math.min(row.idle_expires_at.getTime(), row.expires_at.getTime())
                  if (until <= now) return "expired"
                  return { userId: row.user_id, enterprise: row.enterprise, until }
                }),
                orDie,
              ),
            )
          : Effect.succeed<SessionStanding>("signed_out")

      const end = (secret: string) =>
        isSecretOf(SESSION_PREFIX, secret)
          ? Effect.flatMap(Clock.currentTimeMillis, (now) =>
              sql`WITH r AS (UPDATE sessions SET revoked_at = ${isoOf(now)}::timestamptz
                  WHERE secret_hash = ${hashKey(secret)} AND revoked_at IS NULL RETURNING user_id)
                  SELECT pg_notify(${KEYS_CHANNEL}, user_id) FROM r`.pipe(Effect.asVoid, orDie),
            )
          : Effect.void

      const endAll = (userId: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          sql<{ n: number }>`WITH r AS (UPDATE sessions SET revoked_at = ${isoOf(now)}::timestamptz
              WHERE user_id = ${userId} AND revoked_at IS NULL RETURNING id)
              SELECT (SELECT count(*)::int FROM r) AS n, pg_notify(${KEYS_CHANNEL}, ${userId})`.pipe(
            Effect.map((r) => r[0]?.n ?? 0),
            orDie,
          ),
        )

      const beginFlow = (state: string, flow: SignInFlow, ttlMs: number) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.gen(function* () {
            // Abandoned flows are cleared as new ones begin.
            yield* sql`DELETE FROM signin_flows WHERE expires_at < ${isoOf(now)}::timestamptz`
            yield* sql`INSERT INTO signin_flows (state_hash, provider, code_verifier, nonce, return_to, expires_at)
                VALUES (${hashKey(state)}, ${flow.provider}, ${flow.codeVerifier}, ${flow.nonce}, ${flow.returnTo ?? null},
                  ${isoOf(now + ttlMs)}::timestamptz)`
          }).pipe(orDie),
        )

      const takeFlow = (state: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          sql<{ provider: string; code_verifier: string; nonce: string; return_to: string | null; expires_at: Date }>`
              DELETE FROM signin_flows WHERE state_hash = ${hashKey(state)}
              RETURNING provider, code_verifier, nonce, return_to, expires_at`.pipe(
            Effect.map((rows) => {
              const row = rows[0]
              if (!row || row.expires_at.getTime() <= now) return undefined
              return {
                provider: row.provider,
                codeVerifier: row.code_verifier,
                nonce: row.nonce,
                returnTo: row.return_to ?? undefined,
              }
            }),
            orDie,
          ),
        )

      const createSignInLink = (userId: string, ttlMs: number) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const { secret, hash: tokenHash } = mintSecret(SIGNIN_LINK_PREFIX)
          return Effect.gen(function* () {
            yield* sql`UPDATE signin_links SET expires_at = ${isoOf(now)}::timestamptz
                WHERE user_id = ${userId} AND used_at IS NULL AND expires_at > ${isoOf(now)}::timestamptz`
            yield* sql`INSERT INTO signin_links (token_hash, user_id, expires_at, created_at)
                VALUES (${tokenHash}, ${userId}, ${isoOf(now + ttlMs)}::timestamptz, ${isoOf(now)}::timestamptz)`
            return secret
          }).pipe(orDie)
        })

      const consumeSignInLink = (token: string) =>
        isSecretOf(SIGNIN_LINK_PREFIX, token)
          ? Effect.flatMap(Clock.currentTimeMillis, (now) =>
              sql<{ user_id: string }>`UPDATE signin_links SET used_at = ${isoOf(now)}::timestamptz
                  WHERE token_hash = ${hashKey(token)} AND used_at IS NULL AND expires_at > ${isoOf(now)}::timestamptz
                  RETURNING user_id`.pipe(
                Effect.map((r) => r[0]?.user_id),
                orDie,
              ),
            )
          : Effect.succeed(undefined)

      const peekSignInLink = (token: string) =>
        isSecretOf(SIGNIN_LINK_PREFIX, token)
          ? Effect.flatMap(Clock.currentTimeMillis, (now) =>
              sql<{ email: string }>`SELECT u.email FROM signin_links l JOIN users u ON u.id = l.user_id
                  WHERE l.token_hash = ${hashKey(token)} AND l.used_at IS NULL AND l.expires_at > ${isoOf(now)}::timestamptz`.pipe(
                Effect.map((r) => (r[0] ? { email: r[0].email } : undefined)),
                orDie,
              ),
            )
          : Effect.succeed(undefined)

      // An ended session never moves again (only a live one is touched), so what is deleted stays ended. SKIP
      // LOCKED: a sweep on another instance, or a sign-out under way, is never waited for.
      const purgeEnded = Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const before = isoOf(now - ENDED_SESSIONS_KEPT_MS)
        return sql<{ n: number }>`WITH gone AS (DELETE FROM sessions WHERE id IN (
              SELECT id FROM sessions
              WHERE least(expires_at, idle_expires_at, coalesce(revoked_at, 'infinity'::timestamptz)) < ${before}::timestamptz
              LIMIT ${SESSION_PURGE_LIMIT} FOR UPDATE SKIP LOCKED) RETURNING 1)
            SELECT count(*)::int AS n FROM gone`.pipe(
          Effect.map((r) => r[0]?.n ?? 0),
          orDie,
        )
      }).pipe(Effect.withSpan("Sessions.purgeEnded"))

      // A used or expired link is refused exactly as an unknown one (consume and peek read neither), so it goes at
      // once; each sign-in link (the CLI's `signin-link`, issue after issue) was kept for ever. SKIP LOCKED: a
      // consumption under way is not waited for.
      const purgeSignInLinks = Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql<{ n: number }>`WITH gone AS (DELETE FROM signin_links WHERE token_hash IN (
              SELECT token_hash FROM signin_links
              WHERE used_at IS NOT NULL OR expires_at <= ${isoOf(now)}::timestamptz
              LIMIT ${SESSION_PURGE_LIMIT} FOR UPDATE SKIP LOCKED) RETURNING 1)
            SELECT count(*)::int AS n FROM gone`.pipe(
          Effect.map((r) => r[0]?.n ?? 0),
          orDie,
        ),
      ).pipe(Effect.withSpan("Sessions.purgeSignInLinks"))

      return Sessions.of({
        purgeEnded,
        purgeSignInLinks,
        start,
        resolve,
        standing,
        end,
        endAll,
        beginFlow,
        takeFlow,
        createSignInLink,
        consumeSignInLink,
        peekSignInLink,
      })
    }),
  )
}
