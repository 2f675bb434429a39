import type { AgentgovRouter } from "@agentgov/trpc-types"
import { createTRPCClient, httpLink, TRPCClientError } from "@trpc/client"
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server"

/**
 * The dashboard's only way to the service: a tRPC client typed by the router (`AgentgovRouter`), so a
 * renamed procedure or field fails `npm run typecheck` and the build. It authenticates with the session
 * cookie (HttpOnly: this code never sees it); mutations carry the session's CSRF token, kept in memory only,
 * and every call names the workspace the operator is looking at.
 */
export type Inputs = inferRouterInputs<AgentgovRouter>
export type Outputs = inferRouterOutputs<AgentgovRouter>

/** The server's cap on one page (`limit` 1..100): no list in the dashboard asks for more. */
export const MAX_PAGE_SIZE = 100
export const PAGE_SIZES = [10, 25, 50, 100] as const

const context: { csrfToken?: string | undefined; workspaceId?: string | undefined } = {}

/** Set by the session provider: the CSRF token of `GET /auth/session` and the workspace in view. */
export const setRequestContext = (csrfToken: string | undefined, workspaceId: string | undefined) => {
  context.csrfToken = csrfToken
  context.workspaceId = workspaceId
}

/**
 * What to do when the service answers 401 (the session expired, or was ended by signing out in another tab or
 * everywhere, or by an owner): set by the session provider, which reads the session again and, signed out, shows
 * the sign-in screen instead of pages whose every call and "Try again" would fail the same way.
 */
let onUnauthorized: (() => void) | undefined
export const setUnauthorizedHandler = (handler: (() => void) | undefined) => {
  onUnauthorized = handler
}
/** Tells the session provider that a call was refused 401 (the tRPC client and the live feed call it). */
export const noteUnauthorized = (status: number) => {
  if (status === 401) onUnauthorized?.()
}

/**
 * What to do when the service answers 403 `NOT_A_MEMBER` (the person was removed from the workspace in view, or it
 * was deleted): set by the session provider, which reads the memberships again and moves to another workspace, or
 * to "You are in no workspace yet", instead of pages that all fail the same way.
 */
let onNotAMember: (() => void) | undefined
export const setNotAMemberHandler = (handler: (() => void) | undefined) => {
  onNotAMember = handler
}
const noteNotAMember = (res: Response) => {
  if (res.status !== 403 || onNotAMember === undefined) return
  res
    .clone()
    .json()
    .then((body: { error?: { data?: { apiError?: { code?: string } } } }) => {
      if (body.error?.data?.apiError?.code === "NOT_A_MEMBER") onNotAMember?.()
    })
    .catch(() => {})
}

export const api = createTRPCClient<AgentgovRouter>({
  links: [
    httpLink({
      url: "/trpc",
      headers: () => ({
        ...(context.csrfToken ? { "x-csrf-token": context.csrfToken } : {}),
        ...(context.workspaceId ? { "x-agentgov-workspace": context.workspaceId } : {}),
      }),
      fetch: async (url, init) => {
        const res = await fetch(url, { ...init, credentials: "same-origin" })
        noteUnauthorized(res.status)
        noteNotAMember(res)
        return res
      },
    }),
  ],
})

/**
 * The first reads, started by `public/early.js` before this code loaded (a read needs no CSRF token, so they go
 * out at once, side by side, instead of one after another): the session, and on the overview the overview's data
 * for the workspace remembered from the last visit. Each is taken once; a page whose workspace is another, or an
 * answer that is not a success, asks again through the client.
 */
interface Early {
  session?: Promise<Response> | undefined
  overview?: { readonly workspaceId: string; readonly response: Promise<Response> } | undefined
}
const early: Early = (globalThis as { __agentgovEarly?: Early }).__agentgovEarly ?? {}

export const takeOverview = (workspaceId: string | undefined): Promise<Outputs["overview"]["get"]> | undefined => {
  const taken = early.overview
  early.overview = undefined
  if (taken === undefined || taken.workspaceId !== workspaceId) return undefined
  return taken.response.then(
    async (res) => {
      if (!res.ok) return api.overview.get.query()
      return ((await res.json()) as { result: { data: Outputs["overview"]["get"] } }).result.data
    },
    () => api.overview.get.query(),
  )
}

export type ApiErrorInfo = { code: string; message: string; status?: number; field?: string; issue?: string }

/** What a failed call says, in the REST envelope's words. */
export const errorInfo = (e: unknown): ApiErrorInfo => {
  if (e instanceof TRPCClientError) {
    const data = (e as TRPCClientError<AgentgovRouter>).data
    const apiError = data?.apiError
    if (apiError)
      return {
        code: apiError.code,
        message: apiError.message,
        status: data?.httpStatus,
        ...(apiError.details ? { field: apiError.details.field, issue: apiError.details.issue } : {}),
      }
    return { code: "NETWORK_ERROR", message: e.message || "the service could not be reached" }
  }
  return { code: "ERROR", message: e instanceof Error ? e.message : String(e) }
}

/** Sign-in endpoints (not operations: `/auth` is the browser's side of OpenID Connect, D16). */
export interface SessionInfo {
  readonly user: { readonly id: string; readonly email: string; readonly name: string | null }
  readonly memberships: ReadonlyArray<Outputs["users"]["me"]["memberships"][number]>
  readonly provider: string
  readonly csrfToken: string
  readonly expiresAt: string
}
export interface Provider {
  readonly id: string
  readonly label: string
  readonly enterprise: boolean
}

export const fetchSession = async (): Promise<SessionInfo | undefined> => {
  const started = early.session
  early.session = undefined
  const read = () => fetch("/auth/session", { credentials: "same-origin", headers: { accept: "application/json" } })
  const res = await (started ?? read()).catch(read)
  if (res.status === 401) return undefined
  if (!res.ok) throw new Error(`the session could not be read (${res.status})`)
  return ((await res.json()) as { data: SessionInfo }).data
}

export const fetchProviders = async (): Promise<ReadonlyArray<Provider>> => {
  const res = await fetch("/auth/providers", { headers: { accept: "application/json" } })
  if (!res.ok) throw new Error(`the sign-in providers could not be read (${res.status})`)
  return ((await res.json()) as { data: ReadonlyArray<Provider> }).data
}

export const signOut = async (everywhere = false) => {
  await fetch(everywhere ? "/auth/signout-all" : "/auth/signout", {
    method: "POST",
    credentials: "same-origin",
    headers: context.csrfToken ? { "x-csrf-token": context.csrfToken } : {},
  })
}

/** Saves `data` as a file the browser downloads (a Blob URL: nothing leaves the page). */
export const download = (filename: string, data: BlobPart, type: string) => {
  const url = URL.createObjectURL(new Blob([data], { type }))
  const a = document.createElement("a")
  a.href = url
  a.download = filename
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

export const base64ToBytes = (b64: string) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))
