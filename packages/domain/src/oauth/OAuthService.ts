import { createHash, timingSafeEqual } from "node:crypto"
import { Database, jsonb } from "@agentgov/db"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { Unauthenticated } from "../apikeys/ApiKeyErrors.ts"
import { KEYS_CHANNEL } from "../apikeys/ApiKeyRepo.ts"
import { hashKey, isSecretOf, mintSecret } from "../apikeys/keyFormat.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import type { OAUTH_GRANT_REVOKE_REASONS } from "../audit/eventCatalog.ts"
import type { Actor } from "../auth/Actor.ts"
import { SCOPES, type Scope } from "../auth/scopes.ts"
import { PeopleService } from "../people/PeopleService.ts"
import { PermissionDenied } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { idCursor, type Page, type PageRequest, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { isoOf } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { WorkspaceRepo } from "../workspaces/WorkspaceRepo.ts"
import type { CreatedOAuthClient, CreateOAuthClient, OAuthClient, OAuthGrant } from "./OAuthClient.ts"
import { OAuthClientNotFound, OAuthGrantNotFound, OAuthRefused } from "./OAuthErrors.ts"

export const ACCESS_TOKEN_PREFIX = "svc_oauth_at_"
export const REFRESH_TOKEN_PREFIX = "svc_oauth_rt_"
const CLIENT_SECRET_PREFIX = "svc_oauth_cs_"
const CODE_PREFIX = "svc_oauth_code_"
export const ACCESS_TOKEN_TTL_S = 3600
export const REFRESH_TOKEN_TTL_S = 30 * 86_400
const CODE_TTL_MS = 60_000
/**
 * How long a grant's expired tokens are kept (so that a late use is told "expired"), then deleted at its next refresh
 * or by the sweep. A revoked grant's tokens too: they are refused at once, and go as long after they expire. Each
 * grant's current (unused) refresh token is kept: revoking it ends the grant, however long ago it expired.
 */
export const EXPIRED_TOKENS_KEPT_MS = 86_400_000
/** Tokens one sweep deletes at most; the rest wait for the next. */
const TOKEN_PURGE_LIMIT = 5_000
/**
 * How long a grant whose code was never exchanged is kept after its code expired (or was spent on a refused
 * exchange): a late exchange is told the code expired, as any; then the sweep deletes the grant and its code.
 */
const ABANDONED_GRANTS_KEPT_MS = 3_600_000
/** Grants one sweep looks at most (deleting the abandoned, marking the exchanged); the rest wait for the next. */
const GRANT_PURGE_LIMIT = 5_000
/** Access tokens whose authentication is kept in memory, at most (the oldest goes first). */
const ACCESS_CACHE_LIMIT = 100_000

/** An access token authenticated before: its person's actor as of then, until a change is announced. */
interface CachedAccess {
  readonly actor: Actor
  readonly grantId: string
  readonly expiresMs: number
}

const DEFAULT_CLIENT_SCOPES = SCOPES.filter((s) => s !== "workspaces:admin")

/** The parameters of an authorization request (RFC 6749 4.1.1, RFC 7636 4.3). */
export interface AuthorizeRequest {
  readonly responseType: string | undefined
  readonly clientId: string | undefined
  readonly redirectUri: string | undefined
  readonly scope: string | undefined
  readonly state: string | undefined
  readonly codeChallenge: string | undefined
  readonly codeChallengeMethod: string | undefined
}

/** An authorization request checked for this person: what the consent screen shows. */
export interface CheckedAuthorization {
  readonly client: OAuthClient
  readonly workspaceName: string
  readonly redirectUri: string
  readonly state: string
  /** What the person may grant: requested ∩ the client's ∩ their role's. */
  readonly scopes: ReadonlyArray<string>
}

export interface ClientAuthentication {
  readonly clientId: string | undefined
  readonly clientSecret: string | undefined
}

export interface TokenResponse {
  readonly access_token: string
  readonly token_type: "Bearer"
  readonly expires_in: number
  readonly refresh_token: string
  readonly scope: string
}

/** A grant `revokeGrantsWhere` ended. */
interface RevokedGrant {
  readonly id: string
  readonly client_id: string
  readonly user_id: string
}

interface ClientRow {
  readonly id: string
  readonly workspace_id: string
  readonly name: string
  readonly secret_hash: string | null
  readonly redirect_uris: ReadonlyArray<string>
  readonly scopes: ReadonlyArray<string>
  readonly created_at: Date
  readonly revoked_at: Date | null
}
const toClient = (r: ClientRow): OAuthClient => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  type: r.secret_hash === null ? "public" : "confidential",
  redirectUris: r.redirect_uris,
  scopes: r.scopes,
  createdAt: r.created_at.toISOString(),
})

const refused = (error: string, description: string, redirect: boolean, status = 400) =>
  new OAuthRefused({ error, description, redirect, status })

/** A loopback IP literal on http: a native app's redirect URI (RFC 8252 7.3), whose port it picks at each request. */
const loopbackIp = (u: URL) => u.protocol === "http:" && (u.hostname === "127.0.0.1" || u.hostname === "[::1]")

/**
 * Whether a request's redirect URI is a registered one: character for character; for a loopback IP literal on http,
 * but for the port (RFC 8252 7.3: "MUST allow any port"; a native app listens on an ephemeral port). The code is then
 * bound to the URI as requested, port included, and the token request must name it exactly.
 */
const redirectMatches = (registered: string, requested: string): boolean => {
  if (registered === requested) return true
  let r: URL
  let q: URL
  try {
    r = new URL(registered)
    q = new URL(requested)
  } catch {
    return false
  }
  if (!loopbackIp(r) || !loopbackIp(q)) return false
  // Compared as written but for the port: the request must spell the rest as registered.
  const withoutPort = (raw: string, u: URL) =>
    u.port === "" ? raw : raw.replace(`${u.hostname}:${u.port}`, u.hostname)
  return q.hostname === r.hostname && withoutPort(requested, q) === withoutPort(registered, r)
}

const sameHash = (a: string, b: string) => timingSafeEqual(Buffer.from(a, "hex"), Buffer.from(b, "hex"))
const s256 = (verifier: string) => createHash("sha256").update(verifier).digest("base64url")

/**
 * The OAuth 2.0 authorization server of D16 for third-party apps, as domain
 * verbs: client registration per workspace, the checks of an authorization
 * request, codes, tokens (opaque, D4 checksum, stored hashed), refresh
 * rotation with reuse detection, revocation, and the authentication of access
 * tokens. A token acts as its grant's person in its workspace with the
 * granted scopes that their role still holds: a role change narrows it and a
 * removal stops it at once, on every instance (the grant and the membership
 * are read with the token). Revoking a grant is announced on the keys
 * channel, like a key's revocation.
 */
export class OAuthService extends Context.Service<
  OAuthService,
  {
    readonly createClient: (actor: Actor, input: CreateOAuthClient) => Effect.Effect<CreatedOAuthClient>
    readonly listClients: (actor: Actor, page: PageRequest) => Effect.Effect<Page<OAuthClient>, InvalidCursor>
    readonly deleteClient: (actor: Actor, id: string) => Effect.Effect<OAuthClient, OAuthClientNotFound>
    readonly listGrants: (actor: Actor, page: PageRequest) => Effect.Effect<Page<OAuthGrant>, InvalidCursor>
    readonly revokeGrant: (actor: Actor, id: string) => Effect.Effect<OAuthGrant, OAuthGrantNotFound | PermissionDenied>
    readonly checkAuthorization: (
      request: AuthorizeRequest,
      userId: string,
      enterpriseOnly: boolean,
    ) => Effect.Effect<CheckedAuthorization, OAuthRefused>
    /** The person allowed: a grant and its code, as the redirect's query. */
    readonly approve: (
      request: AuthorizeRequest,
      userId: string,
      enterpriseOnly: boolean,
    ) => Effect.Effect<{ readonly redirectUri: string; readonly code: string; readonly state: string }, OAuthRefused>
    readonly exchangeCode: (
      client: ClientAuthentication,
      params: { code?: string | undefined; redirectUri?: string | undefined; codeVerifier?: string | undefined },
    ) => Effect.Effect<TokenResponse, OAuthRefused>
    readonly refresh: (
      client: ClientAuthentication,
      params: { refreshToken?: string | undefined; scope?: string | undefined },
    ) => Effect.Effect<TokenResponse, OAuthRefused>
    /** RFC 7009: revokes an access token, or a refresh token and its grant; an unknown token is no error. */
    readonly revoke: (client: ClientAuthentication, token: string | undefined) => Effect.Effect<void, OAuthRefused>
    readonly authenticate: (bearer: string) => Effect.Effect<Actor, Unauthenticated>
    /**
     * The hot path, outside any fiber: the Actor of an access token authenticated before and unexpired at
     * `nowMs`, while no change to its grant, client, membership or workspace has been announced since; else
     * undefined (then `authenticate` decides).
     */
    readonly cached: (bearer: string, nowMs: number) => Actor | undefined
    /** When a usable access token expires (epoch ms), or undefined when it can no longer act. */
    readonly accessTokenUntil: (bearer: string) => Effect.Effect<number | undefined>
    /**
     * Deletes the grants whose code was never exchanged, once it expired (or was spent on a refused exchange)
     * over an hour ago, with their codes, at most a few thousand a call; returns how many. Run by the sweep.
     */
    readonly purgeAbandonedGrants: Effect.Effect<number>
    /**
     * Deletes the access tokens and used refresh tokens that expired over {@link EXPIRED_TOKENS_KEPT_MS} ago,
     * revoked grants' alike, but those of a grant not marked exchanged yet (its tokens are how the sweep of abandoned
     * consents tells it was); at most a few thousand a call; returns how many. Each grant's current refresh token
     * stays (revoking it ends the grant), and so do the grants (the trail's OAuth actors are their person's). Run by
     * the sweep.
     */
    readonly purgeExpiredTokens: Effect.Effect<number>
  }
>()("@agentgov/domain/oauth/OAuthService") {
  static readonly layer = Layer.effect(
    OAuthService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const people = yield* PeopleService
      const workspaces = yield* WorkspaceRepo
      const db = yield* Database
      const audit = yield* AuditLog
      const tx = transactional(sql)
      const orDie = Effect.orDie

      // Authenticated access tokens by hash, and the hashes of each grant. Every change that narrows or ends what
      // a token may do (its grant or client revoked, its person's membership changed or removed, the workspace
      // deleted) is announced on the keys channel with the grant's id, from every instance: the grant's tokens are
      // forgotten at once, and read again on their next use. When the listening connection drops, announcements
      // may have been missed, and every token is forgotten.
      const accessCache = new Map<string, CachedAccess>()
      const byGrant = new Map<string, Set<string>>()
      // Bumped by every announcement: a token read before one must not be cached after it.
      let epoch = 0
      const forget = (id: string) => {
        epoch += 1
        for (const hash of byGrant.get(id) ?? []) accessCache.delete(hash)
        byGrant.delete(id)
      }
      const forgetAll = () => {
        epoch += 1
        accessCache.clear()
        byGrant.clear()
      }
      const remember = (hash: string, entry: CachedAccess) => {
        if (accessCache.size >= ACCESS_CACHE_LIMIT) {
          const oldest = accessCache.keys().next().value as string
          const grantId = accessCache.get(oldest)!.grantId
          accessCache.delete(oldest)
          byGrant.get(grantId)?.delete(oldest)
        }
        accessCache.set(hash, entry)
        const set = byGrant.get(entry.grantId) ?? new Set<string>()
        set.add(hash)
        byGrant.set(entry.grantId, set)
      }
      yield* Effect.acquireRelease(
        Effect.promise(() => db.listen(KEYS_CHANNEL, forget, forgetAll)),
        (stop) => Effect.promise(() => stop()),
      )

      const findClient = (id: string) =>
        sql<ClientRow>`SELECT c.* FROM oauth_clients c JOIN workspaces w ON w.id = c.workspace_id
            WHERE c.id = ${id} AND c.revoked_at IS NULL AND w.deleted_at IS NULL`.pipe(
          Effect.map((r) => r[0]),
          orDie,
        )

      /**
       * Revokes grants and announces each on the keys channel (open event streams re-check their credential).
       * The caller records it in the trail, in its transaction: `oauth.grant.revoked` (grantsRevoked), or a count
       * in the event of what ended them.
       */
      const revokeGrantsWhere = (
        which: { readonly grantId: string } | { readonly clientId: string },
        reason: string,
        at: string,
      ) =>
        sql<RevokedGrant>`WITH r AS (UPDATE oauth_grants SET revoked_at = ${at}::timestamptz, revoked_reason = ${reason}
            WHERE revoked_at IS NULL AND ${"grantId" in which ? sql`id = ${which.grantId}` : sql`client_id = ${which.clientId}`}
            RETURNING id, client_id, user_id)
            SELECT id, client_id, user_id, pg_notify(${KEYS_CHANNEL}, id) FROM r`.pipe(
          // Forgotten here at once as well: the announcement reaches this instance only after the commit, and the
          // caller's next request may come first. (It forgets them again, should a read re-cache one meanwhile.)
          Effect.tap((r) =>
            Effect.sync(() => {
              for (const { id } of r) forget(id)
            }),
          ),
          orDie,
        )

      /**
       * Forgets the revoked grants' tokens again once their transaction committed: `revokeGrantsWhere` forgets them
       * inside it, and a request authenticated meanwhile (before the commit, while the audit append waits for the
       * chain's head) read the grant as still active and cached it.
       */
      const forgetAfterCommit = (grants: ReadonlyArray<RevokedGrant>) => {
        for (const g of grants) forget(g.id)
      }

      /** `oauth.grant.revoked` for each grant `revokeGrantsWhere` ended, by `actor`. */
      const grantsRevoked = (
        actor: Actor,
        grants: ReadonlyArray<RevokedGrant>,
        reason: (typeof OAUTH_GRANT_REVOKE_REASONS)[number],
      ) =>
        grants.length === 0
          ? Effect.void
          : audit
              .append(
                actor,
                grants.map((g) => ({
                  type: "oauth.grant.revoked" as const,
                  data: { grantId: g.id, clientId: g.client_id, userId: g.user_id, reason },
                })),
              )
              .pipe(Effect.asVoid)

      /**
       * `oauth.grant.revoked` for a grant the app's own request to /oauth/token or /oauth/revoke ended. The actor
       * is the app through that grant: `oauth` with the grant's id, as every act of an app's token is recorded.
       */
      const revokedByApp = (
        workspaceId: string,
        grants: ReadonlyArray<RevokedGrant>,
        reason: (typeof OAUTH_GRANT_REVOKE_REASONS)[number],
      ) =>
        Effect.gen(function* () {
          if (grants.length === 0) return
          const workspace = yield* workspaces.find(workspaceId)
          for (const grant of grants)
            yield* grantsRevoked(
              {
                workspaceId,
                environment: workspace?.environment ?? "live",
                credential: { type: "oauth", id: grant.id },
                keyType: "workspace",
                scopes: new Set(),
              },
              [grant],
              reason,
            )
        })

      const createClient = Effect.fn("OAuthService.createClient")(function* (actor: Actor, input: CreateOAuthClient) {
        const now = yield* Clock.currentTimeMillis
        const isPublic = input.type === "public"
        const secret = isPublic ? undefined : mintSecret(CLIENT_SECRET_PREFIX)
        const client: OAuthClient = {
          id: newId("oac", now),
          workspaceId: actor.workspaceId,
          name: input.name,
          type: isPublic ? "public" : "confidential",
          redirectUris: [...new Set(input.redirectUris)],
          scopes: [...new Set(input.scopes ?? DEFAULT_CLIENT_SCOPES)],
          createdAt: isoOf(now),
        }
        yield* tx(
          Effect.gen(function* () {
            yield* sql`INSERT INTO oauth_clients (id, workspace_id, name, secret_hash, redirect_uris, scopes, created_by, created_at)
                VALUES (${client.id}, ${client.workspaceId}, ${client.name}, ${secret?.hash ?? null},
                  ${jsonb(sql, client.redirectUris)}, ${jsonb(sql, client.scopes)},
                  ${actor.userId ?? actor.credential.id}, ${client.createdAt}::timestamptz)`.pipe(orDie)
            yield* audit.append(actor, [
              {
                type: "oauth.client.created",
                data: {
                  clientId: client.id,
                  name: client.name,
                  type: client.type,
                  redirectUris: client.redirectUris,
                  scopes: client.scopes,
                },
              },
            ])
          }),
        )
        return secret ? { client, clientSecret: secret.secret } : { client }
      })

      const listClients = Effect.fn("OAuthService.listClients")(function* (actor: Actor, page: PageRequest) {
        const { limit, before } = yield* pageWindow(page, idCursor("oac"))
        const rows = yield* sql<ClientRow>`SELECT * FROM oauth_clients WHERE workspace_id = ${actor.workspaceId}
            AND revoked_at IS NULL ${before ? sql`AND id < ${before}` : sql``} ORDER BY id DESC LIMIT ${limit + 1}`.pipe(
          orDie,
        )
        return toPage(rows.map(toClient), limit)
      })

      const deleteClient = Effect.fn("OAuthService.deleteClient")(function* (actor: Actor, id: string) {
        const { client, revoked } = yield* tx(
          Effect.gen(function* () {
            const row = yield* findClient(id)
            if (!row || row.workspace_id !== actor.workspaceId) return yield* new OAuthClientNotFound({ clientId: id })
            const at = isoOf(yield* Clock.currentTimeMillis)
            // Only the delete that ends the client goes on: a concurrent one finds it gone (404), and records nothing.
            const ended = yield* sql`UPDATE oauth_clients SET revoked_at = ${at}::timestamptz
                WHERE id = ${id} AND revoked_at IS NULL RETURNING id`.pipe(orDie)
            if (ended.length === 0) return yield* new OAuthClientNotFound({ clientId: id })
            const revoked = yield* revokeGrantsWhere({ clientId: id }, "client_deleted", at)
            yield* audit.append(actor, [
              {
                type: "oauth.client.deleted",
                data: { clientId: id, name: row.name, revokedGrants: revoked.length },
              },
            ])
            return { client: toClient(row), revoked }
          }),
        )
        forgetAfterCommit(revoked)
        return client
      })

      interface GrantRow {
        id: string
        client_id: string
        client_name: string
        user_id: string
        workspace_id: string
        scopes: ReadonlyArray<string>
        created_at: Date
      }
      const toGrant = (r: GrantRow): OAuthGrant => ({
        id: r.id,
        clientId: r.client_id,
        clientName: r.client_name,
        userId: r.user_id,
        workspaceId: r.workspace_id,
        scopes: r.scopes,
        createdAt: r.created_at.toISOString(),
      })
      const grantSelect = sql`SELECT g.id, g.client_id, c.name AS client_name, g.user_id, g.workspace_id, g.scopes, g.created_at
          FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id`

      /**
       * SQL: grant `g` is in use at `at`: its code was exchanged (marked so, or holding tokens: exchanged before
       * migration 0037 and not marked yet), or it is still unused and unexpired. Else the consent was abandoned (the
       * app never came back for the code, or its exchange was refused): the grant can never act, is not listed, and
       * the sweep deletes it.
       */
      const grantInUse = (at: number) =>
        sql`(g.exchanged_at IS NOT NULL OR EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.grant_id = g.id)
            OR EXISTS (SELECT 1 FROM oauth_codes k WHERE k.grant_id = g.id AND k.used_at IS NULL
              AND k.expires_at > ${isoOf(at)}::timestamptz))`

      /** A person sees their own grants; a credential with apikeys:write, every grant of the workspace. */
      const listGrants = Effect.fn("OAuthService.listGrants")(function* (actor: Actor, page: PageRequest) {
        const { limit, before } = yield* pageWindow(page, idCursor("grt"))
        const everyone = actor.scopes.has("apikeys:write")
        const now = yield* Clock.currentTimeMillis
        const rows =
          yield* sql<GrantRow>`${grantSelect} WHERE g.workspace_id = ${actor.workspaceId} AND g.revoked_at IS NULL
            AND ${grantInUse(now)}
            ${everyone ? sql`` : sql`AND g.user_id = ${actor.userId ?? ""}`}
            ${before ? sql`AND g.id < ${before}` : sql``} ORDER BY g.id DESC LIMIT ${limit + 1}`.pipe(orDie)
        return toPage(rows.map(toGrant), limit)
      })

      const revokeGrant = Effect.fn("OAuthService.revokeGrant")(function* (actor: Actor, id: string) {
        const rows = yield* sql<GrantRow>`${grantSelect} WHERE g.id = ${id} AND g.workspace_id = ${actor.workspaceId}
            AND g.revoked_at IS NULL`.pipe(orDie)
        const grant = rows[0]
        if (!grant) return yield* new OAuthGrantNotFound({ grantId: id })
        // Managing grants is managing credentials (apikeys:write). Without it, only the person in the dashboard (a
        // session) revokes a grant of their own: an app's token, whatever it was granted, is not the person.
        const ownInPerson = grant.user_id === actor.userId && actor.credential.type === "user"
        if (!ownInPerson && !actor.scopes.has("apikeys:write"))
          return yield* new PermissionDenied({
            message:
              grant.user_id === actor.userId
                ? "revoking a grant with an app's token needs apikeys:write; revoke your own in the dashboard"
                : "revoking another person's grant needs apikeys:write",
            scope: "apikeys:write",
          })
        const at = isoOf(yield* Clock.currentTimeMillis)
        const revoked = yield* tx(
          Effect.gen(function* () {
            const revoked = yield* revokeGrantsWhere({ grantId: id }, "revoked", at)
            yield* grantsRevoked(actor, revoked, "revoked")
            return revoked
          }),
        )
        forgetAfterCommit(revoked)
        return toGrant(grant)
      })

      /** The checked request, and the person as a member of the app's workspace (who consents, in approve). */
      const checkRequest = Effect.fn("OAuthService.checkAuthorization")(function* (
        request: AuthorizeRequest,
        userId: string,
        enterpriseOnly: boolean,
      ) {
        // Until the client and its redirect URI are verified, a refusal is shown, never redirected.
        if (!request.clientId) return yield* refused("invalid_request", "client_id is missing", false)
        const row = yield* findClient(request.clientId)
        if (!row) return yield* refused("invalid_client", "unknown client", false)
        const client = toClient(row)
        if (!request.redirectUri || !client.redirectUris.some((r) => redirectMatches(r, request.redirectUri!)))
          return yield* refused("invalid_request", "redirect_uri is not one registered for this client", false)
        // Redirected only to an app of a workspace the person belongs to (RFC 9700 4.11.2): any admin of any
        // workspace on this server registers apps, and one of a workspace the person is not in would otherwise use
        // our address to send them (after signing in here, even) to a site of its choosing, with an error.
        const member = yield* people.actorOf(
          userId,
          client.workspaceId,
          { type: "oauth", id: client.id },
          { enterpriseOnly },
        )
        if (!member)
          return yield* refused(
            "access_denied",
            "this app is registered in a workspace you are not a member of; you were not sent back to it",
            false,
            403,
          )
        if (!request.state) return yield* refused("invalid_request", "state is required", true)
        if (request.responseType !== "code")
          return yield* refused(
            "unsupported_response_type",
            "only the authorization code flow (response_type=code)",
            true,
          )
        // PKCE (RFC 7636, RFC 9700 2.1.1): S256 only, never `plain`; required of public clients.
        if (request.codeChallengeMethod !== undefined && request.codeChallengeMethod !== "S256")
          return yield* refused("invalid_request", "code_challenge_method must be S256", true)
        if (request.codeChallenge !== undefined && !/^[A-Za-z0-9_-]{43}$/.test(request.codeChallenge))
          return yield* refused("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters)", true)
        if (request.codeChallenge !== undefined && request.codeChallengeMethod === undefined)
          return yield* refused("invalid_request", "code_challenge_method=S256 is required with code_challenge", true)
        if (client.type === "public" && request.codeChallenge === undefined)
          return yield* refused("invalid_request", "PKCE with S256 is required for public clients", true)
        // Each scope once: `agents:read agents:read` is one scope, granted and answered once (RFC 6749 3.3).
        const requested = request.scope?.trim() ? [...new Set(request.scope.trim().split(/\s+/))] : client.scopes
        const unknown = requested.find((s) => !client.scopes.includes(s))
        if (unknown !== undefined)
          return yield* refused("invalid_scope", `scope ${unknown} is not one this client may ask for`, true)
        const scopes = requested.filter((s) => member.scopes.has(s as never))
        if (scopes.length === 0)
          return yield* refused("invalid_scope", "your role holds none of the scopes this app asks for", true)
        const workspace = yield* workspaces.find(client.workspaceId)
        const checked = {
          client,
          workspaceName: workspace?.name ?? client.workspaceId,
          redirectUri: request.redirectUri,
          state: request.state,
          scopes,
        } satisfies CheckedAuthorization
        return {
          checked,
          member: {
            ...member,
            scopes: new Set(scopes as ReadonlyArray<Scope>),
            credential: { type: "user" as const, id: userId },
          } satisfies Actor,
        }
      })

      const checkAuthorization = (request: AuthorizeRequest, userId: string, enterpriseOnly: boolean) =>
        checkRequest(request, userId, enterpriseOnly).pipe(Effect.map((r) => r.checked))

      const approve = Effect.fn("OAuthService.approve")(function* (
        request: AuthorizeRequest,
        userId: string,
        enterpriseOnly: boolean,
      ) {
        const { checked, member } = yield* checkRequest(request, userId, enterpriseOnly)
        const now = yield* Clock.currentTimeMillis
        const grantId = newId("grt", now)
        const code = mintSecret(CODE_PREFIX)
        yield* tx(
          Effect.gen(function* () {
            // The membership is held (FOR SHARE) until the grant commits, as a key's creation holds it: a removal that
            // committed since the check above leaves nothing to grant, and one that starts now waits and then revokes
            // this grant too. Without it a grant made during a removal outlived it, and came back with an invitation.
            const held = yield* sql`SELECT 1 FROM memberships
                WHERE workspace_id = ${checked.client.workspaceId} AND user_id = ${userId} FOR SHARE`.pipe(orDie)
            if (held.length === 0)
              return yield* refused(
                "access_denied",
                "you are no longer a member of the workspace this app is registered in",
                true,
              )
            yield* sql`INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at)
                VALUES (${grantId}, ${checked.client.id}, ${userId}, ${checked.client.workspaceId},
                  ${jsonb(sql, checked.scopes)}, ${isoOf(now)}::timestamptz)`.pipe(orDie)
            yield* sql`INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at)
                VALUES (${code.hash}, ${grantId}, ${checked.redirectUri}, ${request.codeChallenge ?? null},
                  ${isoOf(now + CODE_TTL_MS)}::timestamptz)`.pipe(orDie)
            yield* audit.append(member, [
              {
                type: "oauth.grant.created",
                data: {
                  grantId,
                  clientId: checked.client.id,
                  clientName: checked.client.name,
                  userId,
                  scopes: checked.scopes,
                },
              },
            ])
          }),
        )
        return { redirectUri: checked.redirectUri, code: code.secret, state: checked.state }
      })

      /** The client the token endpoint talks to (RFC 6749 2.3): a confidential one proves its secret. */
      const authenticateClient = (auth: ClientAuthentication) =>
        Effect.gen(function* () {
          const invalid = refused("invalid_client", "client authentication failed", false, 401)
          if (!auth.clientId) return yield* invalid
          const row = yield* findClient(auth.clientId)
          if (!row) return yield* invalid
          if (row.secret_hash === null) {
            if (auth.clientSecret !== undefined) return yield* invalid
          } else if (
            auth.clientSecret === undefined ||
            !isSecretOf(CLIENT_SECRET_PREFIX, auth.clientSecret) ||
            !sameHash(row.secret_hash, hashKey(auth.clientSecret))
          )
            return yield* invalid
          return row
        })

      /** An access token acting with `scopes`, and a refresh token that may ask for up to `refreshScopes`. */
      const issue = (
        grantId: string,
        scopes: ReadonlyArray<string>,
        now: number,
        refreshScopes: ReadonlyArray<string> = scopes,
      ) =>
        Effect.gen(function* () {
          const access = mintSecret(ACCESS_TOKEN_PREFIX)
          const refresh = mintSecret(REFRESH_TOKEN_PREFIX)
          yield* sql`INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at, created_at, scopes) VALUES
              (${access.hash}, ${grantId}, 'access', ${isoOf(now + ACCESS_TOKEN_TTL_S * 1000)}::timestamptz, ${isoOf(now)}::timestamptz,
                ${jsonb(sql, scopes)}),
              (${refresh.hash}, ${grantId}, 'refresh', ${isoOf(now + REFRESH_TOKEN_TTL_S * 1000)}::timestamptz, ${isoOf(now)}::timestamptz,
                ${jsonb(sql, refreshScopes)})`
          return {
            access_token: access.secret,
            token_type: "Bearer",
            expires_in: ACCESS_TOKEN_TTL_S,
            refresh_token: refresh.secret,
            scope: scopes.join(" "),
          } satisfies TokenResponse
        }).pipe(orDie)

      const exchangeCode = Effect.fn("OAuthService.exchangeCode")(function* (
        auth: ClientAuthentication,
        params: { code?: string | undefined; redirectUri?: string | undefined; codeVerifier?: string | undefined },
      ) {
        const client = yield* authenticateClient(auth)
        const badGrant = refused("invalid_grant", "the code is invalid, expired, used, or not this client's", false)
        if (!params.code || !isSecretOf(CODE_PREFIX, params.code)) return yield* badGrant
        type Outcome =
          | { readonly error: OAuthRefused; readonly revoked?: ReadonlyArray<RevokedGrant> }
          | { readonly tokens: TokenResponse }
        const outcome: Outcome = yield* tx(
          Effect.gen(function* (): Effect.fn.Return<Outcome> {
            const now = yield* Clock.currentTimeMillis
            const rows = yield* sql<{
              grant_id: string
              redirect_uri: string
              code_challenge: string | null
              expires_at: Date
              used_at: Date | null
              client_id: string
              scopes: ReadonlyArray<string>
              revoked_at: Date | null
            }>`SELECT k.grant_id, k.redirect_uri, k.code_challenge, k.expires_at, k.used_at, g.client_id, g.scopes, g.revoked_at
                FROM oauth_codes k JOIN oauth_grants g ON g.id = k.grant_id
                WHERE k.code_hash = ${hashKey(params.code!)} FOR UPDATE OF k`.pipe(orDie)
            const row = rows[0]
            if (!row || row.client_id !== client.id) return { error: badGrant }
            if (row.used_at !== null) {
              // A code used twice was stolen or replayed: what it granted is revoked (RFC 6749 4.1.2).
              const revoked = yield* revokeGrantsWhere({ grantId: row.grant_id }, "code_reused", isoOf(now))
              yield* revokedByApp(client.workspace_id, revoked, "code_reused")
              return { error: badGrant, revoked }
            }
            yield* sql`UPDATE oauth_codes SET used_at = ${isoOf(now)}::timestamptz WHERE code_hash = ${hashKey(params.code!)}`.pipe(
              orDie,
            )
            if (row.revoked_at !== null || row.expires_at.getTime() <= now) return { error: badGrant }
            if (params.redirectUri !== row.redirect_uri)
              return { error: refused("invalid_grant", "redirect_uri differs from the authorization request's", false) }
            if (row.code_challenge === null) {
              // PKCE downgrade: a verifier for a code issued without a challenge (RFC 9700 2.1.1).
              if (params.codeVerifier !== undefined)
                return { error: refused("invalid_grant", "code_verifier sent for a code issued without PKCE", false) }
            } else if (
              params.codeVerifier === undefined ||
              !/^[A-Za-z0-9._~-]{43,128}$/.test(params.codeVerifier) ||
              s256(params.codeVerifier) !== row.code_challenge
            )
              return { error: refused("invalid_grant", "code_verifier does not match the code_challenge", false) }
            // From now on the grant is in use for good: the sweep of abandoned consents no longer looks at it.
            yield* sql`UPDATE oauth_grants SET exchanged_at = ${isoOf(now)}::timestamptz
                WHERE id = ${row.grant_id} AND exchanged_at IS NULL`.pipe(orDie)
            return { tokens: yield* issue(row.grant_id, row.scopes, now) }
          }),
        )
        // A refusal still commits what it did: the code is spent, a replay's grant revoked (and recorded).
        if ("error" in outcome) {
          forgetAfterCommit(outcome.revoked ?? [])
          return yield* outcome.error
        }
        return outcome.tokens
      })

      const refresh = Effect.fn("OAuthService.refresh")(function* (
        auth: ClientAuthentication,
        params: { refreshToken?: string | undefined; scope?: string | undefined },
      ) {
        const client = yield* authenticateClient(auth)
        const badGrant = refused("invalid_grant", "the refresh token is invalid, expired, revoked or used", false)
        if (!params.refreshToken || !isSecretOf(REFRESH_TOKEN_PREFIX, params.refreshToken)) return yield* badGrant
        const tokenHash = hashKey(params.refreshToken)
        type Outcome =
          | { readonly error: OAuthRefused; readonly revoked?: ReadonlyArray<RevokedGrant> }
          | { readonly tokens: TokenResponse }
        const outcome: Outcome = yield* tx(
          Effect.gen(function* (): Effect.fn.Return<Outcome> {
            const now = yield* Clock.currentTimeMillis
            const rows = yield* sql<{
              grant_id: string
              expires_at: Date
              used_at: Date | null
              client_id: string
              user_id: string
              workspace_id: string
              scopes: ReadonlyArray<string>
              revoked_at: Date | null
            }>`SELECT t.grant_id, t.expires_at, t.used_at, g.client_id, g.user_id, g.workspace_id,
                  coalesce(t.scopes, g.scopes) AS scopes, g.revoked_at
                FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
                WHERE t.token_hash = ${tokenHash} AND t.kind = 'refresh' FOR UPDATE OF t`.pipe(orDie)
            const row = rows[0]
            // Bound to its client: another client presenting it learns nothing.
            if (!row || row.client_id !== client.id) return { error: badGrant }
            if (row.revoked_at !== null || row.expires_at.getTime() <= now) return { error: badGrant }
            if (row.used_at !== null) {
              // Reuse of a rotated refresh token (RFC 9700 4.14.2): the grant and every token of it end.
              const revoked = yield* revokeGrantsWhere({ grantId: row.grant_id }, "refresh_token_reused", isoOf(now))
              yield* revokedByApp(client.workspace_id, revoked, "refresh_token_reused")
              return { error: badGrant, revoked }
            }
            let scopes = row.scopes
            if (params.scope?.trim()) {
              const asked = params.scope.trim().split(/\s+/)
              const extra = asked.find((s) => !row.scopes.includes(s))
              // Refused before the token is spent: a bad request changes nothing, and the token still works.
              if (extra !== undefined)
                return { error: refused("invalid_scope", `scope ${extra} was not granted`, false) }
              scopes = [...new Set(asked)]
            }
            yield* sql`UPDATE oauth_tokens SET used_at = ${isoOf(now)}::timestamptz WHERE token_hash = ${tokenHash}`.pipe(
              orDie,
            )
            // The access token acts with what was asked; the new refresh token keeps the old one's scope (RFC 6749 6).
            const tokens = yield* issue(row.grant_id, scopes, now, row.scopes)
            // Each refresh adds two rows: the grant's tokens expired a day ago go, so that an app refreshing hourly
            // keeps about a month of refresh tokens (what reuse detection needs: an expired one is refused before it
            // is looked at as used) instead of adding 17,520 rows a year for ever.
            yield* sql`DELETE FROM oauth_tokens WHERE grant_id = ${row.grant_id}
                AND expires_at < ${isoOf(now - EXPIRED_TOKENS_KEPT_MS)}::timestamptz`.pipe(orDie)
            return { tokens }
          }),
        )
        // The revocation above is committed (and recorded) even though the answer is a refusal.
        if ("error" in outcome) {
          forgetAfterCommit(outcome.revoked ?? [])
          return yield* outcome.error
        }
        return outcome.tokens
      })

      const revoke = Effect.fn("OAuthService.revoke")(function* (
        auth: ClientAuthentication,
        token: string | undefined,
      ) {
        const client = yield* authenticateClient(auth)
        if (!token) return yield* refused("invalid_request", "token is missing", false)
        if (!isSecretOf(ACCESS_TOKEN_PREFIX, token) && !isSecretOf(REFRESH_TOKEN_PREFIX, token)) return
        const rows = yield* sql<{ grant_id: string; kind: string; client_id: string }>`
            SELECT t.grant_id, t.kind, g.client_id FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
            WHERE t.token_hash = ${hashKey(token)}`.pipe(orDie)
        const row = rows[0]
        if (!row || row.client_id !== client.id) return
        const at = isoOf(yield* Clock.currentTimeMillis)
        if (row.kind === "refresh") {
          const revoked = yield* tx(
            Effect.gen(function* () {
              const revoked = yield* revokeGrantsWhere({ grantId: row.grant_id }, "revoked_by_client", at)
              yield* revokedByApp(client.workspace_id, revoked, "revoked_by_client")
              return revoked
            }),
          )
          forgetAfterCommit(revoked)
          return
        }
        // An access token alone: expire it now.
        yield* sql`UPDATE oauth_tokens SET expires_at = ${at}::timestamptz WHERE token_hash = ${hashKey(token)}`.pipe(
          orDie,
        )
        yield* sql`SELECT pg_notify(${KEYS_CHANNEL}, ${row.grant_id})`.pipe(orDie)
        forget(row.grant_id)
      })

      /** The token read from the store (`fresh`), or from the cache while nothing about it was announced. */
      const authenticateWith = Effect.fn("OAuthService.authenticate")(function* (bearer: string, fresh: boolean) {
        const invalid = new Unauthenticated({ message: "invalid OAuth access token" })
        if (!isSecretOf(ACCESS_TOKEN_PREFIX, bearer)) return yield* invalid
        const hash = hashKey(bearer)
        const now = yield* Clock.currentTimeMillis
        const hit = fresh ? undefined : accessCache.get(hash)
        if (hit !== undefined && hit.expiresMs > now) return hit.actor
        const startedIn = epoch
        const rows = yield* sql<{
          token_hash: string
          grant_id: string
          expires_at: Date
          user_id: string
          workspace_id: string
          scopes: ReadonlyArray<string>
        }>`SELECT t.token_hash, t.grant_id, t.expires_at, g.user_id, g.workspace_id, coalesce(t.scopes, g.scopes) AS scopes
            FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN oauth_clients c ON c.id = g.client_id
            WHERE t.token_hash = ${hash} AND t.kind = 'access' AND g.revoked_at IS NULL AND c.revoked_at IS NULL`.pipe(
          orDie,
        )
        const row = rows[0]
        if (!row || !sameHash(row.token_hash, hash)) return yield* invalid
        if (row.expires_at.getTime() <= now)
          return yield* new Unauthenticated({ message: "OAuth access token has expired; refresh it" })
        // The person's role now bounds the grant: a demotion narrows it, a removal ends it.
        const actor = yield* people.actorOf(
          row.user_id,
          row.workspace_id,
          { type: "oauth", id: row.grant_id },
          { within: new Set(row.scopes) },
        )
        if (!actor) return yield* invalid
        if (epoch === startedIn) remember(hash, { actor, grantId: row.grant_id, expiresMs: row.expires_at.getTime() })
        return actor
      })
      const authenticate = (bearer: string) => authenticateWith(bearer, false)

      const cached = (bearer: string, nowMs: number) => {
        // Only authenticated tokens are in the cache: a hit proves the token's shape.
        const hit = accessCache.get(hashKey(bearer))
        return hit !== undefined && hit.expiresMs > nowMs ? hit.actor : undefined
      }

      // A watched connection re-checks its token after an announcement: from the store, never the cache.
      const accessTokenUntil = (bearer: string) =>
        authenticateWith(bearer, true).pipe(
          Effect.flatMap(() =>
            sql<{ expires_at: Date }>`SELECT expires_at FROM oauth_tokens WHERE token_hash = ${hashKey(bearer)}`.pipe(
              orDie,
            ),
          ),
          Effect.map((rows) => rows[0]?.expires_at.getTime()),
          Effect.catchTag("Unauthenticated", () => Effect.succeed(undefined)),
        )

      // A grant deleted here, made over an hour ago, could never act: no code of it can be exchanged any more
      // (expired over an hour ago, or spent on a refused exchange), and it has no token. Only grants never marked
      // exchanged are read (`exchanged_at`, migration 0037; through its index once the statistics say few grants are
      // unmarked): one that was is in use for good. A grant read here that holds a token was exchanged before the
      // migration, or by an instance of the release before it: it is marked now (at its creation: when is not known)
      // and leaves the index (its dead entry is read until a vacuum: on every run by a bitmap scan).
      // The two tests are probes of the grant's own rows through their grant index: `OFFSET 0` keeps each a subplan
      // run per grant (written as `grantInUse`, or as NOT EXISTS, the planner hashed them, reading every token and
      // every live code of the store once a run). SKIP LOCKED: a revocation under way, or another instance's sweep, is
      // not waited for; nor is an exchange holding a doomed grant's code (a replay of a spent code, which then revokes
      // the grant): that grant waits for the next run. Waiting for the code deadlocked, the sweep holding the grant
      // and the replay the code.
      const purgeAbandonedGrants = Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const cutoff = isoOf(now - ABANDONED_GRANTS_KEPT_MS)
        return sql<{ n: number }>`WITH candidates AS (
              SELECT g.id FROM oauth_grants g
              WHERE g.exchanged_at IS NULL AND g.created_at < ${cutoff}::timestamptz
              LIMIT ${GRANT_PURGE_LIMIT} FOR UPDATE OF g SKIP LOCKED),
            -- Apart from the read of the candidates: with these in its select list, the planner (whose costs they
            -- dominate alike) took the seq scan for its lower start-up under the LIMIT.
            looked AS (
              SELECT c.id,
                EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.grant_id = c.id OFFSET 0) AS exchanged,
                EXISTS (SELECT 1 FROM oauth_codes k WHERE k.grant_id = c.id AND k.used_at IS NULL
                  AND k.expires_at > ${cutoff}::timestamptz OFFSET 0) AS pending
              FROM candidates c),
            marked AS (UPDATE oauth_grants SET exchanged_at = created_at
              WHERE id = ANY (ARRAY(SELECT id FROM looked WHERE exchanged))),
            doomed AS (SELECT id FROM looked WHERE NOT exchanged AND NOT pending),
            -- The ids as one array (an init plan): probes of the codes' grant index and the grants' key, where
            -- "IN (SELECT …)" may hash the ids and read every code beside them.
            held AS (SELECT code_hash FROM oauth_codes WHERE grant_id = ANY (ARRAY(SELECT id FROM doomed))
              FOR UPDATE SKIP LOCKED),
            -- The grants with a code another transaction holds, and the others, all of whose codes this one holds.
            -- Joined, not compared with an array of the held codes: an array from a subquery is not hashed, and a
            -- batch of 5,000 took 0.6 s where it takes 0.16.
            kept AS (SELECT k.grant_id FROM oauth_codes k WHERE k.grant_id = ANY (ARRAY(SELECT id FROM doomed))
              AND NOT EXISTS (SELECT 1 FROM held h WHERE h.code_hash = k.code_hash)),
            free AS (SELECT d.id FROM doomed d WHERE d.id NOT IN (SELECT grant_id FROM kept)),
            codes AS (DELETE FROM oauth_codes WHERE grant_id = ANY (ARRAY(SELECT id FROM free))),
            gone AS (DELETE FROM oauth_grants WHERE id = ANY (ARRAY(SELECT id FROM free)) RETURNING id)
            SELECT count(*)::int AS n FROM gone`.pipe(
          Effect.map((r) => r[0]?.n ?? 0),
          orDie,
        )
      }).pipe(Effect.withSpan("OAuthService.purgeAbandonedGrants"))

      // The tokens of apps that stopped refreshing (or whose grant was revoked) were deleted only at a refresh of
      // the same grant, which never came: they stayed for ever. Nothing deleted here can act or be told apart from
      // an unknown token: an expired token is refused before its use is looked at (so reuse detection loses nothing).
      // Each grant's current refresh token is kept, expired or not: an app revoking it (RFC 7009) ends its grant.
      // The candidates come from the index of the spent tokens by expiry (migration 0038: access tokens, and refresh
      // tokens used; the current refresh token is not in it, so is never read here), and each one read is deleted but
      // those of a grant not marked exchanged yet: such a grant (exchanged before migration 0037, or by an instance
      // of the release before it) is told from an abandoned consent by its tokens until the sweep of abandoned
      // consents marks it: a probe of the grant's key per candidate (`OFFSET 0` keeps it a subplan; as a join, the
      // planner hashed every grant of the store). A revoked grant's spent tokens are refused at once and go a day
      // after they expire (at most 31 days after the revocation); its current refresh token and its code stay with
      // the grant. SKIP LOCKED: a refresh under way, or another instance's sweep, is not waited for. The ids as one
      // array: probes of the key.
      const purgeExpiredTokens = Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const before = isoOf(now - EXPIRED_TOKENS_KEPT_MS)
        return sql<{ n: number }>`WITH doomed AS (
              SELECT t.token_hash FROM oauth_tokens t
              WHERE (t.kind = 'access' OR t.used_at IS NOT NULL) AND t.expires_at < ${before}::timestamptz
                AND EXISTS (SELECT 1 FROM oauth_grants g
                  WHERE g.id = t.grant_id AND g.exchanged_at IS NOT NULL OFFSET 0)
              LIMIT ${TOKEN_PURGE_LIMIT} FOR UPDATE SKIP LOCKED),
            gone AS (DELETE FROM oauth_tokens WHERE token_hash = ANY (ARRAY(SELECT token_hash FROM doomed)) RETURNING 1)
            SELECT count(*)::int AS n FROM gone`.pipe(
          Effect.map((r) => r[0]?.n ?? 0),
          orDie,
        )
      }).pipe(Effect.withSpan("OAuthService.purgeExpiredTokens"))

      return OAuthService.of({
        purgeAbandonedGrants,
        purgeExpiredTokens,
        accessTokenUntil,
        cached,
        createClient,
        listClients,
        deleteClient,
        listGrants,
        revokeGrant,
        checkAuthorization,
        approve,
        exchangeCode,
        refresh,
        revoke,
        authenticate,
      })
    }),
  )
}
