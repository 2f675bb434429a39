import type { IncomingMessage, ServerResponse } from "node:http"
import { authorizationOf, type Runtime, severalCredentials } from "@agentgov/api"
import {
  type AuthorizeRequest,
  type ClientAuthentication,
  csrfMatches,
  csrfTokenOf,
  findUnstorable,
  OAuthRefused,
  OAuthService,
} from "@agentgov/domain"
import { Cause, type Effect, Exit } from "effect"
import { escapeHtml, postedFromElsewhere, readForm, sendPage } from "../signin/pages.ts"
import type { makeSignIn } from "../signin/SignIn.ts"

type SignIn = ReturnType<typeof makeSignIn>

/**
 * The first parameter the store could not take (a NUL, an unpaired surrogate), said as an OAuth error's
 * description; undefined when every one is storable. Checked before anything is looked up.
 */
const unstorableParameter = (params: Record<string, string>): string | undefined => {
  const found = findUnstorable(params)
  return found && `${String(found.path[0] ?? "a parameter")}: ${found.issue}`
}

/**
 * Where the consent says the person goes back to: the redirect URI's origin, or for a native app's private-use
 * scheme (`com.example.app:/cb`, whose origin is the string "null") the scheme and whatever host it names.
 */
const returnsTo = (redirectUri: string): string => {
  const u = new URL(redirectUri)
  return u.origin !== "null" ? u.origin : `${u.protocol}${u.host === "" ? "" : `//${u.host}`}`
}

const authorizeRequestOf = (p: (name: string) => string | undefined): AuthorizeRequest => ({
  responseType: p("response_type"),
  clientId: p("client_id"),
  redirectUri: p("redirect_uri"),
  scope: p("scope"),
  state: p("state"),
  codeChallenge: p("code_challenge"),
  codeChallengeMethod: p("code_challenge_method"),
})

/**
 * The OAuth 2.0 authorization server's HTTP side (D16, RFC 6749, RFC 7636,
 * RFC 7009, RFC 8414, RFC 9207, RFC 9700) at `<public url>/oauth`: the
 * authorization endpoint with its consent page, the token and revocation
 * endpoints (form or JSON bodies), and the metadata. These speak the RFCs'
 * formats, not the API's envelope, so that any OAuth client library works.
 */
export const makeOAuthRoutes = (options: { runtime: Runtime; publicUrl: string; signIn: SignIn }) => {
  const { runtime, signIn } = options
  const publicUrl = options.publicUrl.replace(/\/$/, "")
  const issuer = `${publicUrl}/oauth`
  const publicOrigin = new URL(publicUrl).origin

  const metadata = JSON.stringify({
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    revocation_endpoint: `${issuer}/revoke`,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
    revocation_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
    authorization_response_iss_parameter_supported: true,
    scopes_supported: undefined,
    service_documentation: `${publicUrl}/api/v1/reference`,
  })

  const run = <A>(effect: Effect.Effect<A, OAuthRefused, any>) =>
    runtime.runPromiseExit(effect as Effect.Effect<A, OAuthRefused, never>).then((exit) => {
      if (Exit.isSuccess(exit)) return { ok: true as const, value: exit.value }
      const failure = exit.cause.reasons.find(Cause.isFailReason)
      if (failure && failure.error instanceof OAuthRefused) return { ok: false as const, error: failure.error }
      throw Cause.squash(exit.cause)
    })

  /** Back to the app: the RFC's parameters, plus `iss` (RFC 9207) against mix-up attacks. */
  const backToApp = (res: ServerResponse, redirectUri: string, params: Record<string, string | undefined>) => {
    const target = new URL(redirectUri)
    for (const [k, v] of Object.entries({ ...params, iss: issuer })) if (v !== undefined) target.searchParams.set(k, v)
    res.writeHead(302, { location: target.href, "cache-control": "no-store", "referrer-policy": "no-referrer" })
    res.end()
  }

  const refusal = (res: ServerResponse, request: AuthorizeRequest, error: OAuthRefused) =>
    error.redirect && request.redirectUri
      ? backToApp(res, request.redirectUri, {
          error: error.error,
          error_description: error.description,
          state: request.state,
        })
      : sendPage(res, error.status, "This app's request cannot be honoured", `<p>${escapeHtml(error.description)}</p>`)

  const signInPage = (res: ServerResponse, returnTo: string) => {
    const links = signIn.providers
      .map(
        (p) =>
          `<li><a href="/auth/signin/${encodeURIComponent(p.id)}?return_to=${encodeURIComponent(returnTo)}">${escapeHtml(p.label)}</a></li>`,
      )
      .join("")
    sendPage(
      res,
      200,
      "Sign in to continue",
      `<p>An app asks for access to your agentgov workspace. Sign in first:</p><ul>${links}</ul>`,
    )
  }

  const authorize = async (req: IncomingMessage, res: ServerResponse, url: URL) => {
    const unstorable = unstorableParameter(Object.fromEntries(url.searchParams))
    // Not redirected: the client and its redirect URI are not verified yet.
    if (unstorable)
      return sendPage(res, 400, "This app's request cannot be honoured", `<p>${escapeHtml(unstorable)}</p>`)
    // A parameter sent twice is refused (RFC 6749 3.1), as on the consent form: which one counts would be ambiguous.
    const names = [...url.searchParams.keys()]
    const twice = names.find((n, i) => names.indexOf(n) !== i)
    if (twice !== undefined)
      return sendPage(
        res,
        400,
        "This app's request cannot be honoured",
        `<p>${escapeHtml(twice)} is sent more than once.</p>`,
      )
    const request = authorizeRequestOf((n) => url.searchParams.get(n) ?? undefined)
    const current = await signIn.currentSession(req)
    if (!current) return signInPage(res, url.pathname + url.search)
    const checked = await run(
      OAuthService.use((s) => s.checkAuthorization(request, current.session.userId, current.session.enterprise)),
    )
    if (!checked.ok) return refusal(res, request, checked.error)
    const c = checked.value
    const hidden = Object.entries({
      response_type: "code",
      client_id: request.clientId,
      redirect_uri: request.redirectUri,
      scope: c.scopes.join(" "),
      state: request.state,
      code_challenge: request.codeChallenge,
      code_challenge_method: request.codeChallengeMethod,
      csrf_token: csrfTokenOf(current.secret),
    })
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `<input type="hidden" name="${k}" value="${escapeHtml(v!)}">`)
      .join("")
    sendPage(
      res,
      200,
      `Allow ${c.client.name}?`,
      `<p><strong>${escapeHtml(c.client.name)}</strong> asks to act for you in the workspace <strong>${escapeHtml(c.workspaceName)}</strong> with:</p>` +
        `<ul>${c.scopes.map((s) => `<li><code>${escapeHtml(s)}</code></li>`).join("")}</ul>` +
        `<p>It will be sent back to <code>${escapeHtml(returnsTo(c.redirectUri))}</code>. You can revoke this at any time.</p>` +
        `<form method="post" action="/oauth/authorize">${hidden}` +
        `<button type="submit" name="decision" value="allow">Allow</button>` +
        `<button type="submit" name="decision" value="deny">Deny</button></form>`,
    )
  }

  const decide = async (req: IncomingMessage, res: ServerResponse) => {
    const form = await readForm(req)
    if (!form || unstorableParameter(form))
      return sendPage(res, 400, "Bad request", "<p>The form could not be read.</p>")
    const request = authorizeRequestOf((n) => form[n])
    const current = await signIn.currentSession(req)
    if (!current) return sendPage(res, 401, "Signed out", "<p>Your session ended; start again from the app.</p>")
    if (postedFromElsewhere(req, publicOrigin) || !csrfMatches(current.secret, form.csrf_token))
      return sendPage(
        res,
        403,
        "Request refused",
        "<p>This consent did not come from this page; start again from the app.</p>",
      )
    if (form.decision !== "allow") {
      const checked = await run(
        OAuthService.use((s) => s.checkAuthorization(request, current.session.userId, current.session.enterprise)),
      )
      if (!checked.ok) return refusal(res, request, checked.error)
      return backToApp(res, checked.value.redirectUri, {
        error: "access_denied",
        error_description: "the person declined",
        state: request.state,
      })
    }
    const approved = await run(
      OAuthService.use((s) => s.approve(request, current.session.userId, current.session.enterprise)),
    )
    if (!approved.ok) return refusal(res, request, approved.error)
    backToApp(res, approved.value.redirectUri, { code: approved.value.code, state: approved.value.state })
  }

  const tokenHeaders = { "content-type": "application/json", "cache-control": "no-store", pragma: "no-cache" }
  const sendOAuthError = (res: ServerResponse, error: OAuthRefused) => {
    res.writeHead(error.status, {
      ...tokenHeaders,
      ...(error.status === 401 ? { "www-authenticate": 'Basic realm="agentgov-oauth"' } : {}),
    })
    res.end(JSON.stringify({ error: error.error, error_description: error.description }))
  }
  const badRequest = (description: string) =>
    new OAuthRefused({ error: "invalid_request", description, status: 400, redirect: false })

  /** client_secret_basic or client_secret_post (never both), or a public client's client_id alone. */
  const clientOf = (req: IncomingMessage, form: Record<string, string>): ClientAuthentication | OAuthRefused => {
    // Several Authorization headers are refused as on the API: node:http would keep the first, a proxy the last.
    const authorization = authorizationOf(req)
    if (severalCredentials(authorization)) return badRequest("send one Authorization header with one credential")
    const basic = /^Basic +(\S+)$/i.exec(authorization ?? "")?.[1]
    if (basic !== undefined) {
      if (form.client_secret !== undefined) return badRequest("use one client authentication method")
      const decoded = Buffer.from(basic, "base64").toString("utf8")
      const colon = decoded.indexOf(":")
      if (colon < 0) return badRequest("malformed Basic credentials")
      let id: string
      let secret: string
      try {
        id = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, "%20"))
        secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, "%20"))
      } catch {
        return badRequest("malformed Basic credentials: not form-encoded (RFC 6749 2.3.1)")
      }
      const unstorable = unstorableParameter({ client_id: id, client_secret: secret })
      if (unstorable) return badRequest(unstorable)
      if (form.client_id !== undefined && form.client_id !== id)
        return badRequest("client_id differs from the credentials")
      return { clientId: id, clientSecret: secret }
    }
    return { clientId: form.client_id, clientSecret: form.client_secret }
  }

  const token = async (req: IncomingMessage, res: ServerResponse) => {
    const form = await readForm(req)
    if (!form) return sendOAuthError(res, badRequest("expected a form (or JSON) body of string parameters, each once"))
    const unstorable = unstorableParameter(form)
    if (unstorable) return sendOAuthError(res, badRequest(unstorable))
    const client = clientOf(req, form)
    if (client instanceof OAuthRefused) return sendOAuthError(res, client)
    const result =
      form.grant_type === "authorization_code"
        ? await run(
            OAuthService.use((s) =>
              s.exchangeCode(client, {
                code: form.code,
                redirectUri: form.redirect_uri,
                codeVerifier: form.code_verifier,
              }),
            ),
          )
        : form.grant_type === "refresh_token"
          ? await run(
              OAuthService.use((s) => s.refresh(client, { refreshToken: form.refresh_token, scope: form.scope })),
            )
          : {
              ok: false as const,
              error: new OAuthRefused({
                error: "unsupported_grant_type",
                description: "grant_type must be authorization_code or refresh_token",
                status: 400,
                redirect: false,
              }),
            }
    if (!result.ok) return sendOAuthError(res, result.error)
    res.writeHead(200, tokenHeaders)
    res.end(JSON.stringify(result.value))
  }

  const revoke = async (req: IncomingMessage, res: ServerResponse) => {
    const form = await readForm(req)
    if (!form) return sendOAuthError(res, badRequest("expected a form (or JSON) body of string parameters, each once"))
    const unstorable = unstorableParameter(form)
    if (unstorable) return sendOAuthError(res, badRequest(unstorable))
    const client = clientOf(req, form)
    if (client instanceof OAuthRefused) return sendOAuthError(res, client)
    const result = await run(OAuthService.use((s) => s.revoke(client, form.token)))
    if (!result.ok) return sendOAuthError(res, result.error)
    res.writeHead(200, { "cache-control": "no-store" })
    res.end()
  }

  const notAllowed = (res: ServerResponse, allow: string) => {
    res.writeHead(405, { allow, "content-type": "application/json" })
    res.end(JSON.stringify({ error: "invalid_request", error_description: `use ${allow}` }))
  }

  /** Answers `/oauth/*` and the metadata; false for any other path. */
  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> => {
    const method = req.method ?? "GET"
    const path = url.pathname
    if (
      path === "/.well-known/oauth-authorization-server" ||
      path === "/.well-known/oauth-authorization-server/oauth"
    ) {
      if (method !== "GET" && method !== "HEAD") notAllowed(res, "GET")
      else {
        res.writeHead(200, { "content-type": "application/json", "cache-control": "public, max-age=300" })
        res.end(metadata)
      }
      return true
    }
    if (path === "/oauth/authorize") {
      if (method === "GET") await authorize(req, res, url)
      else if (method === "POST") await decide(req, res)
      else notAllowed(res, "GET, POST")
      return true
    }
    if (path === "/oauth/token" || path === "/oauth/revoke") {
      if (method !== "POST") notAllowed(res, "POST")
      else if (path === "/oauth/token") await token(req, res)
      else await revoke(req, res)
      return true
    }
    return false
  }

  return { handle, issuer }
}
