/** Loopback hosts: the only ones where the session cookie may go without `Secure` (D16). */
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"])

export const isLoopbackUrl = (url: string): boolean => LOOPBACK.has(new URL(url).hostname)

/**
 * The session cookie's name. Served over HTTPS it is `__Host-` prefixed: the browser then keeps it Secure,
 * host-only and on `/`, so no sibling subdomain can plant one (session fixation by cookie tossing).
 */
export const sessionCookieName = (publicUrl: string): string =>
  isLoopbackUrl(publicUrl) && new URL(publicUrl).protocol === "http:" ? "agentgov_session" : "__Host-agentgov_session"

/**
 * The cookie that binds a sign-in under way to the browser that began it (its `state`), and its path. Served over
 * HTTPS it is `__Host-` prefixed (and so on `/`) like the session's: a sibling subdomain could otherwise set its
 * own sign-in's state in a victim's browser and finish that sign-in there (login CSRF by cookie tossing).
 */
export const flowCookieOf = (publicUrl: string): { readonly name: string; readonly path: string } =>
  isLoopbackUrl(publicUrl) && new URL(publicUrl).protocol === "http:"
    ? { name: "agentgov_signin", path: "/auth/callback" }
    : { name: "__Host-agentgov_signin", path: "/" }

export interface CookieOptions {
  readonly secure: boolean
  readonly maxAgeSeconds?: number
  readonly path?: string
}

/** A Set-Cookie value: always HttpOnly and SameSite=Lax; Secure unless on loopback. */
export const setCookie = (name: string, value: string, options: CookieOptions): string =>
  [
    `${name}=${value}`,
    `Path=${options.path ?? "/"}`,
    "HttpOnly",
    "SameSite=Lax",
    ...(options.secure ? ["Secure"] : []),
    ...(options.maxAgeSeconds !== undefined ? [`Max-Age=${options.maxAgeSeconds}`] : []),
  ].join("; ")

export const clearCookie = (name: string, options: Omit<CookieOptions, "maxAgeSeconds">): string =>
  setCookie(name, "", { ...options, maxAgeSeconds: 0 })
