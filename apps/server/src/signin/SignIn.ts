import type { IncomingMessage, ServerResponse } from "node:http"
import { ApiError, cookieOf, type Runtime, sendError, sendJson } from "@agentgov/api"
import { csrfMatches, csrfTokenOf, PeopleService, Sessions, type SignInRefused } from "@agentgov/domain"
import { Effect, Exit } from "effect"
import * as oidc from "openid-client"
import type { OidcProviderConfig } from "../config.ts"
import type { Logger } from "../logger.ts"
import { clearCookie, flowCookieOf, isLoopbackUrl, sessionCookieName, setCookie } from "./cookies.ts"
import { escapeHtml, postedFromElsewhere, readForm, sendPage } from "./pages.ts"

export interface SignInOptions {
  readonly runtime: Runtime
  readonly log: Logger
  readonly publicUrl: string
  readonly providers: ReadonlyArray<OidcProviderConfig>
  /** Tests only: lets openid-client talk to http:// issuers on loopback. */
  readonly allowInsecureIssuers?: boolean
}

/**
 * A path on this server to return to after sign-in, or undefined: only `/…` (never `//host` or `/\host`,
 * which browsers read as another origin), so that the sign-in is no open redirector; and only printable
 * ASCII, as a Location header carries (a browser sends its paths percent-encoded), so that the redirect at
 * the end of a sign-in cannot fail.
 */
export const safeReturnPath = (raw: string | null): string | undefined => {
  if (!raw?.startsWith("/") || raw.startsWith("//") || raw.includes("\\") || !/^[\x21-\x7e]+$/.test(raw))
    return undefined
  return new URL(raw, "http://x").origin === "http://x" ? raw : undefined
}

/** A browser navigating (rather than a script reading JSON): it accepts HTML. */
const wantsHtml = (req: IncomingMessage): boolean => String(req.headers.accept ?? "").includes("text/html")

/** How long a sign-in may take at the provider. */
const FLOW_TTL_MS = 10 * 60_000
/** The provider id of sessions opened by the first-run link. */
export const FIRST_RUN_PROVIDER = "first-run"

/**
 * Dashboard sign-in (D16) under `/auth`: OpenID Connect with each configured
 * provider as relying party (authorization code, PKCE S256, `state` bound to
 * the browser by a cookie and kept server-side with the nonce, single use;
 * the ID token validated by openid-client against the provider's issuer and
 * keys), sessions in HttpOnly cookies rotated at every sign-in, sign-out and
 * sign-out everywhere (CSRF-checked), and the first-run link.
 */
export const makeSignIn = (options: SignInOptions) => {
  const { runtime, log } = options
  const publicUrl = options.publicUrl.replace(/\/$/, "")
  const publicOrigin = new URL(publicUrl).origin
  const secure = !(isLoopbackUrl(publicUrl) && new URL(publicUrl).protocol === "http:")
  const cookieName = sessionCookieName(publicUrl)
  const flowCookie = flowCookieOf(publicUrl)
  const providers = new Map(options.providers.map((p) => [p.id, p]))
  const configs = new Map<string, Promise<oidc.Configuration>>()

  /** The provider's metadata, discovered once (again after a failure). */
  const configOf = (p: OidcProviderConfig) => {
    let config = configs.get(p.id)
    if (!config) {
      config = oidc.discovery(new URL(p.issuer), p.clientId, undefined, oidc.ClientSecretBasic(p.clientSecret), {
        ...(options.allowInsecureIssuers || isLoopbackUrl(p.issuer) ? { execute: [oidc.allowInsecureRequests] } : {}),
        timeout: 10,
      })
      config.catch(() => configs.delete(p.id))
      configs.set(p.id, config)
    }
    return config
  }

  const callbackUrl = (id: string) => `${publicUrl}/auth/callback/${id}`
  const noStore = { "cache-control": "no-store", "referrer-policy": "no-referrer" }

  const redirect = (res: ServerResponse, location: string, requestId: string, cookies: ReadonlyArray<string>) => {
    res.writeHead(302, { location, "set-cookie": [...cookies], "x-request-id": requestId, ...noStore })
    res.end()
  }

  /** A provider's failure in the log: its code or name and message (never a code or token of the flow). */
  const warnOf = (msg: string, provider: OidcProviderConfig, e: unknown, requestId: string) =>
    log.warn(msg, {
      requestId,
      provider: provider.id,
      reason: (e as { code?: string }).code ?? (e as Error).name,
      message: (e as Error).message,
    })

  /**
   * A sign-in that cannot go on. A browser navigating (it accepts `text/html`) goes to the dashboard's sign-in
   * screen, which says why (`/?signin_error=<the code in lower case, without SIGNIN_>`); a client that is no
   * browser gets the envelope. Either way with `cookie` (the spent flow's, cleared) when given. The sign-in's
   * `returnTo` (an app's `/oauth/authorize` request, say) rides along as `return_to`, so that starting again from
   * that screen goes back where the person was going rather than to the dashboard.
   */
  const refuse = (
    req: IncomingMessage,
    res: ServerResponse,
    error: ApiError,
    requestId: string,
    options: { readonly cookie?: string; readonly returnTo?: string } = {},
  ) => {
    const { cookie, returnTo } = options
    if (!wantsHtml(req))
      return sendError(res, error, requestId, { ...noStore, ...(cookie === undefined ? {} : { "set-cookie": cookie }) })
    const query = new URLSearchParams({ signin_error: error.code.toLowerCase().replace(/^signin_/, "") })
    if (returnTo !== undefined && returnTo !== "/") query.set("return_to", returnTo)
    redirect(res, `/?${query}`, requestId, cookie === undefined ? [] : [cookie])
  }

  /** Opens a session for `userId`, revoking the one the browser came with (rotation: no fixation). */
  const startSession = async (req: IncomingMessage, userId: string, provider: string, enterprise: boolean) => {
    const replacing = cookieOf(req.headers.cookie, cookieName)
    const started = await runtime.runPromise(Sessions.use((s) => s.start(userId, provider, enterprise, replacing)))
    const maxAge = Math.max(0, Math.floor((Date.parse(started.session.expiresAt) - Date.now()) / 1000))
    return setCookie(cookieName, started.secret, { secure, maxAgeSeconds: maxAge })
  }

  const begin = async (
    req: IncomingMessage,
    res: ServerResponse,
    provider: OidcProviderConfig,
    url: URL,
    requestId: string,
  ) => {
    const returnTo = safeReturnPath(url.searchParams.get("return_to"))
    let config: oidc.Configuration
    try {
      config = await configOf(provider)
    } catch (e) {
      // The provider's metadata could not be read (down, unreachable, or not an OpenID provider): a refusal that
      // names it, not a 500; the next sign-in discovers again.
      warnOf("sign-in provider unavailable", provider, e, requestId)
      return refuse(
        req,
        res,
        new ApiError(503, "SIGNIN_PROVIDER_UNAVAILABLE", `${provider.label} cannot be reached now; try again later`),
        requestId,
        { returnTo },
      )
    }
    const codeVerifier = oidc.randomPKCECodeVerifier()
    const state = oidc.randomState()
    const nonce = oidc.randomNonce()
    await runtime.runPromise(
      Sessions.use((s) => s.beginFlow(state, { provider: provider.id, codeVerifier, nonce, returnTo }, FLOW_TTL_MS)),
    )
    const authorizeUrl = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callbackUrl(provider.id),
      scope: "openid email profile",
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
      state,
      nonce,
    })
    redirect(res, authorizeUrl.href, requestId, [
      setCookie(flowCookie.name, state, { secure, maxAgeSeconds: FLOW_TTL_MS / 1000, path: flowCookie.path }),
    ])
  }

  const refused = (code: string, message: string) => new ApiError(403, code, message)

  const callback = async (
    req: IncomingMessage,
    res: ServerResponse,
    provider: OidcProviderConfig,
    url: URL,
    requestId: string,
  ) => {
    const clearFlow = clearCookie(flowCookie.name, { secure, path: flowCookie.path })
    let returnTo: string | undefined
    const fail = (error: ApiError) => refuse(req, res, error, requestId, { cookie: clearFlow, returnTo })
    /**
     * No flow of this browser to finish: begun in another browser (login CSRF), or in another tab since, expired,
     * or already finished (a reload, the back button). A browser signed in already goes on to the dashboard.
     */
    const stale = async (message: string) =>
      wantsHtml(req) && (await currentSession(req))
        ? redirect(res, "/", requestId, [clearFlow])
        : fail(new ApiError(400, "SIGNIN_STATE_MISMATCH", message))
    const state = url.searchParams.get("state")
    const bound = cookieOf(req.headers.cookie, flowCookie.name)
    // The state must be the one this browser began with: a callback planted by someone else (login CSRF) fails.
    if (!state || !bound || state !== bound) return stale("this sign-in was not started in this browser; start again")
    const flow = await runtime.runPromise(Sessions.use((s) => s.takeFlow(state)))
    if (!flow || flow.provider !== provider.id)
      return stale("this sign-in has expired or was already used; start again")
    returnTo = flow.returnTo
    let claims: { readonly sub: string; readonly [claim: string]: unknown }
    try {
      const config = await configOf(provider)
      const current = new URL(callbackUrl(provider.id))
      current.search = url.search
      const tokens = await oidc.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: flow.codeVerifier,
        expectedState: state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      })
      const idToken = tokens.claims()!
      // Providers that keep the e-mail out of the ID token (OIDC Core 5.4) give it at userinfo, for the same `sub`.
      claims =
        idToken.email === undefined && tokens.access_token
          ? { ...(await oidc.fetchUserInfo(config, tokens.access_token, idToken.sub)), sub: idToken.sub }
          : idToken
    } catch (e) {
      // The provider's answer is not trusted: say why in the log (no code, no token), a generic refusal to the browser.
      warnOf("sign-in refused", provider, e, requestId)
      // The provider itself ended the sign-in (the person declined, or it refused them): said as such, with its
      // error code (RFC 6749 4.1.2.1) when that is one; never its free-text description.
      if (e instanceof oidc.AuthorizationResponseError) {
        const code = /^[\x21-\x7e]{1,64}$/.test(e.error) ? ` (${e.error})` : ""
        return fail(
          new ApiError(400, "SIGNIN_PROVIDER_ERROR", `${provider.label} ended the sign-in${code}; start again`),
        )
      }
      return fail(
        new ApiError(400, "SIGNIN_FAILED", "the identity provider's answer could not be verified; start again"),
      )
    }
    const program = Effect.gen(function* () {
      const people = yield* PeopleService
      const user = yield* people.userOfIdentity({
        provider: provider.id,
        subject: claims.sub,
        email: typeof claims.email === "string" ? claims.email : undefined,
        emailVerified: claims.email_verified === true,
        name: typeof claims.name === "string" ? claims.name : undefined,
      })
      if (provider.enterprise && !(yield* people.mayUseEnterpriseProvider(user)))
        return yield* Effect.fail(
          refused(
            "PROVIDER_NOT_ALLOWED",
            `${provider.label} sign-in is for workspaces on the enterprise plan; use another sign-in method`,
          ),
        )
      return user
    })
    const exit = await runtime.runPromiseExit(program)
    if (Exit.isFailure(exit)) {
      const reason = exit.cause.reasons.find((r) => r._tag === "Fail") as
        | { error: ApiError | SignInRefused }
        | undefined
      if (!reason) throw new Error("sign-in failed", { cause: exit.cause })
      const error = reason.error
      return fail(error instanceof ApiError ? error : refused(error.code, error.message))
    }
    const cookie = await startSession(req, exit.value.id, provider.id, provider.enterprise)
    redirect(res, flow.returnTo ?? "/", requestId, [cookie, clearFlow])
  }

  /** The signed-in person, their workspaces, the CSRF token for their mutations, and when the session ends. */
  const session = async (req: IncomingMessage, res: ServerResponse, requestId: string) => {
    const secret = cookieOf(req.headers.cookie, cookieName)
    // One trip through the runtime: the session, then its person and memberships (read together).
    const read = secret
      ? await runtime.runPromise(
          Effect.gen(function* () {
            const found = yield* Sessions.use((s) => s.resolve(secret))
            if (!found) return undefined
            const me = yield* PeopleService.use((p) =>
              p.me({
                workspaceId: "",
                environment: "live",
                credential: { type: "user", id: found.userId },
                keyType: "workspace",
                scopes: new Set(),
                userId: found.userId,
              }),
            )
            return { found, me }
          }),
        )
      : undefined
    if (!secret || !read) return sendError(res, new ApiError(401, "UNAUTHORIZED", "not signed in"), requestId, noStore)
    const { found, me } = read
    const memberships = found.enterprise ? me.memberships.filter((m) => m.plan === "enterprise") : me.memberships
    return sendJson(
      res,
      200,
      JSON.stringify({
        ok: true,
        data: {
          user: me.user,
          memberships,
          provider: found.provider,
          csrfToken: csrfTokenOf(secret),
          expiresAt: found.expiresAt,
        },
      }),
      requestId,
      noStore,
    )
  }

  const signOut = async (req: IncomingMessage, res: ServerResponse, everywhere: boolean, requestId: string) => {
    const secret = cookieOf(req.headers.cookie, cookieName)
    if (!secret) return sendError(res, new ApiError(401, "UNAUTHORIZED", "not signed in"), requestId)
    const csrf = req.headers["x-csrf-token"]
    if (!csrfMatches(secret, Array.isArray(csrf) ? csrf[0] : csrf))
      return sendError(res, new ApiError(403, "CSRF_FAILED", "missing or wrong X-CSRF-Token"), requestId)
    const ended = await runtime.runPromise(
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const found = yield* sessions.resolve(secret)
        if (!found) return 0
        if (everywhere) return yield* sessions.endAll(found.userId)
        yield* sessions.end(secret)
        return 1
      }),
    )
    return sendJson(res, 200, JSON.stringify({ ok: true, data: { endedSessions: ended } }), requestId, {
      ...noStore,
      "set-cookie": clearCookie(cookieName, { secure }),
    })
  }

  /** The live session of a request's cookie, with its secret (for the CSRF check), or undefined. */
  const currentSession = async (req: IncomingMessage) => {
    const secret = cookieOf(req.headers.cookie, cookieName)
    const found = secret ? await runtime.runPromise(Sessions.use((s) => s.resolve(secret))) : undefined
    return secret && found ? { secret, session: found } : undefined
  }

  /**
   * The first-run link (and `signin-link`'s) signs its person in once, in two steps: a GET shows a page naming whom it
   * signs in, with a button that POSTs the token back, so that a link-preview bot or a mail scanner fetching the
   * link spends nothing. The POST must come from this origin's page (a form posted from another site would sign the
   * victim in as the link's owner: login CSRF). Opened again once used (a reload, a double click): a browser already
   * signed in goes on to the dashboard; another browser goes to the dashboard's sign-in screen, which says why
   * (`?signin_error=link_used`); a client that is no browser gets the envelope.
   */
  const firstRun = async (req: IncomingMessage, res: ServerResponse, url: URL, requestId: string) => {
    const used = async () => {
      if (await currentSession(req)) return redirect(res, "/", requestId, [])
      return refuse(
        req,
        res,
        new ApiError(400, "SIGNIN_LINK_USED", "this sign-in link was already used or has expired"),
        requestId,
      )
    }
    if (req.method !== "POST") {
      const token = url.searchParams.get("token") ?? ""
      const holder = await runtime.runPromise(Sessions.use((s) => s.peekSignInLink(token)))
      if (!holder) return used()
      return sendPage(
        res,
        200,
        "Sign in to agentgov",
        `<p>This one-time link signs <strong>${escapeHtml(holder.email)}</strong> in to the dashboard. It works once.</p>` +
          `<form method="post" action="/auth/first-run"><input type="hidden" name="token" value="${escapeHtml(token)}">` +
          `<button type="submit">Sign in</button></form>`,
        { "x-request-id": requestId },
      )
    }
    if (postedFromElsewhere(req, publicOrigin))
      return sendError(
        res,
        new ApiError(403, "FORBIDDEN", "a sign-in link is used from its own page only", {
          field: "origin",
          issue: "posted from another site",
        }),
        requestId,
        noStore,
      )
    const token = (await readForm(req))?.token ?? ""
    const userId = await runtime.runPromise(Sessions.use((s) => s.consumeSignInLink(token)))
    if (!userId) return used()
    redirect(res, "/", requestId, [await startSession(req, userId, FIRST_RUN_PROVIDER, false)])
  }

  const methodNotAllowed = (res: ServerResponse, method: string, path: string, allow: string, requestId: string) =>
    sendError(res, new ApiError(405, "METHOD_NOT_ALLOWED", `${method} is not allowed on ${path}`), requestId, { allow })

  /** Answers a request under `/auth`. */
  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL, requestId: string): Promise<void> => {
    const method = req.method ?? "GET"
    const path = url.pathname
    const [, , action, id] = path.split("/")
    const get = method === "GET" || method === "HEAD"
    if (path === "/auth/providers") {
      if (!get) return methodNotAllowed(res, method, path, "GET", requestId)
      const list = options.providers.map((p) => ({ id: p.id, label: p.label, enterprise: p.enterprise }))
      return sendJson(res, 200, JSON.stringify({ ok: true, data: list }), requestId)
    }
    if (path === "/auth/session") {
      if (!get) return methodNotAllowed(res, method, path, "GET", requestId)
      return session(req, res, requestId)
    }
    if (path === "/auth/signout" || path === "/auth/signout-all") {
      if (method !== "POST") return methodNotAllowed(res, method, path, "POST", requestId)
      return signOut(req, res, path === "/auth/signout-all", requestId)
    }
    if (path === "/auth/first-run") {
      if (!get && method !== "POST") return methodNotAllowed(res, method, path, "GET, POST", requestId)
      return firstRun(req, res, url, requestId)
    }
    if ((action === "signin" || action === "callback") && id !== undefined && path.split("/").length === 4) {
      if (!get) return methodNotAllowed(res, method, path, "GET", requestId)
      const provider = providers.get(id)
      if (!provider)
        return refuse(req, res, new ApiError(404, "PROVIDER_NOT_FOUND", `no sign-in provider ${id}`), requestId)
      return action === "signin"
        ? begin(req, res, provider, url, requestId)
        : callback(req, res, provider, url, requestId)
    }
    return sendError(res, new ApiError(404, "NOT_FOUND", `no route for ${method} ${path}`), requestId)
  }

  return { handle, cookieName, secure, currentSession, providers: options.providers }
}
