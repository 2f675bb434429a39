import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { exportJWK, generateKeyPair } from "jose"
import Provider from "oidc-provider"

/** A port free on loopback now, for a server whose public URL must be known before it starts. */
export { freePort } from "@agentgov/testing"

const listen = async (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
  const server = createServer(handler)
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

const closeServer = (server: Server) =>
  new Promise<void>((r) => {
    server.close(() => r())
    server.closeAllConnections()
  })

export interface Account {
  readonly email?: string
  readonly email_verified?: boolean
  readonly name?: string
}

export interface TestIdp {
  readonly issuer: string
  /** Who signs in at the provider's next login prompt (the test's stand-in for typing a password). */
  loginAs: (accountId: string) => void
  readonly close: () => Promise<void>
}

/**
 * The sign-in provider entry (`AGENTGOV_OIDC_PROVIDERS`) for a test IdP of {@link startIdp}: its client `agentgov`
 * with the default secret, not an enterprise provider.
 */
export const providerOf = (idp: Pick<TestIdp, "issuer">, id = "idp", label = "Test IdP") => ({
  id,
  label,
  issuer: idp.issuer,
  clientId: "agentgov",
  clientSecret: "agentgov-secret",
  enterprise: false,
})

/**
 * A real OpenID Connect provider (`oidc-provider`, a certified implementation) on loopback, with one client
 * (`agentgov`) whose only redirect URI is `redirectUri`. Its login and consent prompts complete at once as
 * the account chosen with `loginAs`; everything else (PKCE, codes, ID tokens, keys) is the provider's own.
 */
export const startIdp = async (options: {
  readonly redirectUris: ReadonlyArray<string>
  readonly accounts: Readonly<Record<string, Account>>
  readonly clientSecret?: string
}): Promise<TestIdp> => {
  let next: string | undefined
  let provider: Provider | undefined
  const { server, url } = await listen((req, res) => {
    if (req.url?.startsWith("/interaction/")) return void interact(req, res)
    provider!.callback()(req, res)
  })
  const { privateKey } = await generateKeyPair("RS256", { extractable: true })
  provider = new Provider(url, {
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: "test", alg: "RS256", use: "sig" }] as any },
    clients: [
      {
        client_id: "agentgov",
        client_secret: options.clientSecret ?? "agentgov-secret",
        redirect_uris: [...options.redirectUris],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    findAccount: async (_ctx, id) =>
      options.accounts[id] ? { accountId: id, claims: async () => ({ sub: id, ...options.accounts[id] }) } : undefined,
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    cookies: { keys: ["test-idp-cookie-key"] },
    pkce: { required: () => true },
  })
  const p = provider
  const interact = async (req: IncomingMessage, res: ServerResponse) => {
    try {
      const details = await p.interactionDetails(req, res)
      if (details.prompt.name === "login") {
        if (!next) throw new Error("the test did not say who logs in")
        return await p.interactionFinished(req, res, { login: { accountId: next } }, { mergeWithLastSubmission: false })
      }
      const grant = new p.Grant({ accountId: details.session!.accountId, clientId: details.params.client_id as string })
      grant.addOIDCScope(String(details.params.scope))
      const grantId = await grant.save()
      await p.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true })
    } catch (e) {
      res.statusCode = 500
      res.end(String(e))
    }
  }
  return {
    issuer: url,
    loginAs: (id) => {
      next = id
    },
    close: () => closeServer(server),
  }
}

/**
 * A "provider" that publishes its own issuer but hands out another's ID tokens: its discovery document names
 * itself, its authorization, token and key endpoints relay to `real`. What a mix-up or a misconfigured proxy
 * looks like to the relying party: tokens whose `iss` is not the issuer it trusts.
 */
export const startMixUpIssuer = async (real: string): Promise<{ issuer: string; close: () => Promise<void> }> => {
  let self = ""
  const { server, url } = await listen(async (req, res) => {
    try {
      const metadata = (await (await fetch(`${real}/.well-known/openid-configuration`)).json()) as Record<
        string,
        unknown
      >
      if (req.url === "/.well-known/openid-configuration") {
        res.setHeader("content-type", "application/json")
        return void res.end(
          JSON.stringify({
            ...metadata,
            issuer: self,
            token_endpoint: `${self}/token`,
            authorization_response_iss_parameter_supported: false,
          }),
        )
      }
      if (req.url === "/token") {
        const chunks: Array<Buffer> = []
        for await (const c of req) chunks.push(c as Buffer)
        const upstream = await fetch(String(metadata.token_endpoint), {
          method: "POST",
          headers: {
            "content-type": String(req.headers["content-type"]),
            ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
          },
          body: Buffer.concat(chunks),
        })
        res.statusCode = upstream.status
        res.setHeader("content-type", "application/json")
        return void res.end(await upstream.text())
      }
      res.statusCode = 404
      res.end()
    } catch (e) {
      res.statusCode = 500
      res.end(String(e))
    }
  })
  self = url
  return { issuer: url, close: () => closeServer(server) }
}

export interface Hop {
  readonly url: string
  readonly status: number
  readonly location?: string | undefined
  readonly setCookies: ReadonlyArray<string>
}

/**
 * A browser's part, over plain HTTP: a cookie jar per host (as browsers keep them: the port does not
 * separate cookies) and redirects followed by hand, so that tests can stop at a hop and look.
 */
export class Browser {
  readonly jar = new Map<string, Map<string, string>>()

  cookie(host: string, name: string): string | undefined {
    return this.jar.get(host)?.get(name)
  }
  setCookie(host: string, name: string, value: string | undefined) {
    const cookies = this.jar.get(host) ?? new Map<string, string>()
    if (value === undefined) cookies.delete(name)
    else cookies.set(name, value)
    this.jar.set(host, cookies)
  }

  /**
   * Uses a one-time sign-in link as a person does: opens it (a page naming whom it signs in, spending nothing) and
   * presses its button (a form POST of the token from the page's own origin). The POST's answer.
   */
  async useSignInLink(base: string, link: string) {
    const url = new URL(link)
    const shown = await this.fetch(`${base}${url.pathname}${url.search}`)
    if (shown.status !== 200) return shown
    const token = /name="token" value="([^"]+)"/.exec(await shown.text())?.[1] ?? ""
    return this.fetch(`${base}/auth/first-run`, {
      method: "POST",
      // What a browser sends from the page (its Origin, the public URL, is left out: the tests' differs from `base`).
      headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" },
      body: new URLSearchParams({ token }).toString(),
    })
  }

  async fetch(url: string, init: RequestInit = {}): Promise<Response & { readonly setCookies: ReadonlyArray<string> }> {
    const u = new URL(url)
    const cookies = this.jar.get(u.hostname)
    const headers = new Headers(init.headers)
    if (cookies && cookies.size > 0) headers.set("cookie", [...cookies].map(([k, v]) => `${k}=${v}`).join("; "))
    const res = await fetch(url, { ...init, headers, redirect: "manual" })
    const setCookies = res.headers.getSetCookie()
    for (const line of setCookies) {
      const [pair, ...attrs] = line.split(";")
      const eq = pair!.indexOf("=")
      const name = pair!.slice(0, eq).trim()
      const value = pair!.slice(eq + 1).trim()
      const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === ""
      this.setCookie(u.hostname, name, expired ? undefined : value)
    }
    return Object.assign(res, { setCookies })
  }

  /** GETs `url` and follows redirects until `stop` says so (or a non-redirect); every hop is returned. */
  async follow(url: string, stop: (next: URL) => boolean = () => false): Promise<{ hops: Array<Hop>; last: Response }> {
    const hops: Array<Hop> = []
    let current = url
    for (let i = 0; i < 20; i++) {
      const res = await this.fetch(current)
      const location = res.headers.get("location") ?? undefined
      hops.push({ url: current, status: res.status, location, setCookies: res.setCookies })
      if (res.status < 300 || res.status >= 400 || !location) return { hops, last: res }
      const next = new URL(location, current)
      await res.arrayBuffer()
      if (stop(next)) return { hops: [...hops, { url: next.href, status: 0, setCookies: [] }], last: res }
      current = next.href
    }
    throw new Error(`too many redirects from ${url}`)
  }
}
