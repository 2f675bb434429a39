import { createContext, type ReactNode, useContext, useEffect, useState } from "react"
import {
  fetchSession,
  type SessionInfo,
  setNotAMemberHandler,
  setRequestContext,
  setUnauthorizedHandler,
} from "./api.ts"
import { type Role, roleCan } from "./scopes.ts"

/**
 * Who is signed in (from `GET /auth/session`; the cookie itself is HttpOnly) and which workspace is in view.
 * The CSRF token lives in memory only; the workspace id (not a secret) is remembered in localStorage.
 */
const WORKSPACE_KEY = "agentgov.workspace"
let currentWorkspace: string | undefined
export const getRequestWorkspace = () => currentWorkspace

interface SessionContextValue {
  readonly session: SessionInfo
  readonly workspaceId: string | undefined
  readonly membership: SessionInfo["memberships"][number] | undefined
  /**
   * Whether the signed-in person's role in the workspace in view holds `scope` (`ROLE_SCOPES`). Only to stop
   * offering what the role cannot do: the service decides on every call.
   */
  readonly can: (scope: Scope) => boolean
  readonly setWorkspace: (id: string) => void
  readonly refresh: () => Promise<void>
}

const Ctx = createContext<SessionContextValue | undefined>(undefined)

export const useSession = () => {
  const v = useContext(Ctx)
  if (!v) throw new Error("useSession outside SessionProvider")
  return v
}

type Scope = Parameters<typeof roleCan>[1]

/** `can(scope)` of the session (see SessionContextValue). */
export const useCan = () => useSession().can

/** `can` where there may be no session (the shared controls; undefined outside one: nothing is turned off). */
export const useContextCan = () => useContext(Ctx)?.can

/**
 * The role to name in a refusal for a missing `scope`, or undefined outside a session. When the role as this page
 * read it holds the scope, the page is stale (the person's role was changed since): the session is read again, once
 * for this refusal, so that the message and the controls follow the role the service applied; until then no role is
 * named.
 */
export const useRefusedRole = (scope: string | undefined): Role | undefined => {
  const ctx = useContext(Ctx)
  const stale = scope !== undefined && ctx?.can(scope as Scope) === true
  // biome-ignore lint/correctness/useExhaustiveDependencies: once per refusal the page's role does not explain
  useEffect(() => {
    if (stale) void ctx?.refresh()
  }, [stale, scope])
  return stale ? undefined : (ctx?.membership?.role as Role | undefined)
}

export type SessionLoad =
  | { readonly state: "loading" }
  /** `ended`: the page was signed in, and a call was refused 401 (the session expired or was ended). */
  | { readonly state: "signed-out"; readonly ended: boolean }
  | { readonly state: "error"; readonly message: string }
  | { readonly state: "ready"; readonly value: SessionContextValue }

const pickWorkspace = (s: SessionInfo, wanted: string | null) =>
  s.memberships.find((m) => m.workspaceId === wanted)?.workspaceId ?? s.memberships[0]?.workspaceId

/** The first read of the session, started when this module loads (before React renders): one round trip sooner. */
let firstRead: Promise<SessionInfo | undefined> | undefined = fetchSession()
firstRead.catch(() => {})

export function SessionProvider({ children }: { children: (load: SessionLoad) => ReactNode }) {
  const [session, setSession] = useState<SessionInfo | undefined | null>(null)
  const [error, setError] = useState<string | undefined>()
  const [workspaceId, setWorkspaceId] = useState<string | undefined>()
  const [ended, setEnded] = useState(false)

  const refresh = async () => {
    try {
      const read = firstRead ?? fetchSession()
      firstRead = undefined
      const s = await read
      setSession(s)
      if (s) {
        const ws = pickWorkspace(s, localStorage.getItem(WORKSPACE_KEY))
        currentWorkspace = ws
        setRequestContext(s.csrfToken, ws)
        setWorkspaceId(ws)
      } else setRequestContext(undefined, undefined)
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    }
  }
  // biome-ignore lint/correctness/useExhaustiveDependencies: once, at load
  useEffect(() => {
    void refresh()
    // A call refused 401: the session is read again (once at a time); signed out, the sign-in screen says why.
    let checking = false
    setUnauthorizedHandler(() => {
      if (checking) return
      checking = true
      void fetchSession()
        .then((s) => {
          if (s !== undefined) return
          setRequestContext(undefined, undefined)
          setEnded(true)
          setSession(undefined)
        })
        .catch(() => {})
        .finally(() => {
          checking = false
        })
    })
    // A call refused NOT_A_MEMBER: the memberships are read again (the workspace in view is then another, or none).
    let rereading = false
    setNotAMemberHandler(() => {
      if (rereading) return
      rereading = true
      void refresh().finally(() => {
        rereading = false
      })
    })
    return () => {
      setUnauthorizedHandler(undefined)
      setNotAMemberHandler(undefined)
    }
  }, [])

  if (error) return <>{children({ state: "error", message: error })}</>
  if (session === null) return <>{children({ state: "loading" })}</>
  if (session === undefined) return <>{children({ state: "signed-out", ended })}</>
  const membership = session.memberships.find((m) => m.workspaceId === workspaceId)
  const value: SessionContextValue = {
    session,
    workspaceId,
    membership,
    can: (scope) => roleCan(membership?.role as Role | undefined, scope),
    setWorkspace: (id) => {
      localStorage.setItem(WORKSPACE_KEY, id)
      currentWorkspace = id
      setRequestContext(session.csrfToken, id)
      setWorkspaceId(id)
    },
    refresh,
  }
  return <Ctx.Provider value={value}>{children({ state: "ready", value })}</Ctx.Provider>
}
