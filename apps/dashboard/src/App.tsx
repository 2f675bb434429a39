import { Component, type ReactNode, Suspense, useEffect, useState, useSyncExternalStore } from "react"
import { api, fetchProviders, type Provider, signOut } from "./api.ts"
import { useAction, useQuery } from "./hooks.ts"
import { Link, matchPath, navigate, useLocation } from "./router.tsx"
import { NAV, ROUTES } from "./routes.ts"
import { SessionProvider, useSession } from "./session.tsx"
import { applyTheme, storedTheme, type Theme } from "./theme.ts"
import { Button, Empty, ErrorState, InlineError, Loading } from "./ui/index.tsx"

/** The URL's fragment, followed as it changes (an invitation link opened in a tab already on the dashboard). */
const useHash = () =>
  useSyncExternalStore(
    (f) => {
      window.addEventListener("hashchange", f)
      return () => window.removeEventListener("hashchange", f)
    },
    () => location.hash,
  )

export function App() {
  const hash = useHash()
  return (
    <SessionProvider>
      {(load) => {
        if (load.state === "loading")
          return (
            <div className="signin">
              <Loading rows={3} label="Loading your session" />
            </div>
          )
        if (load.state === "error")
          return (
            <div className="signin">
              <ErrorState error={{ code: "SESSION", message: load.message }} retry={() => location.reload()} />
            </div>
          )
        if (load.state === "signed-out") return <SignIn hash={hash} ended={load.ended} />
        if (hash.startsWith("#invitation=")) return <AcceptInvitation />
        return <Shell />
      }}
    </SessionProvider>
  )
}

/**
 * Why the service sent the browser back to sign in (`/?signin_error=<reason>`, the error code in lower case without
 * `SIGNIN_`): the first-run link opened again in a browser it had not signed in (a reload or a double click in the
 * one it had goes on to the dashboard), or a sign-in at a provider that could not finish. `why` is said to everyone;
 * `next` only on the sign-in screen (a browser still signed in has nothing to start again).
 */
const SIGNIN_ERRORS: Readonly<Record<string, { why: ReactNode; next?: ReactNode }>> = {
  link_used: {
    why: "That sign-in link was already used or has expired: each link signs in once.",
    next: (
      <>
        Sign in below, or have the operator print a fresh link with <code>npm run cli -- signin-link</code>.
      </>
    ),
  },
  state_mismatch: {
    why: "That sign-in was not started in this browser, or it expired or was already finished (another tab, the back button).",
    next: "Start again below.",
  },
  failed: { why: "The identity provider's answer could not be verified.", next: "Start again below." },
  provider_error: {
    why: "The identity provider ended the sign-in (it was declined there, or it refused it).",
    next: "Start again below.",
  },
  provider_unavailable: { why: "The identity provider cannot be reached now.", next: "Try again in a moment." },
  provider_not_found: { why: "That sign-in method is not configured here.", next: "Choose one below." },
  email_unverified: {
    why: "The identity provider did not vouch for your e-mail address.",
    next: "Verify it there, then sign in again.",
  },
  account_unverified: {
    why: "An account with this e-mail address exists, but its address was never verified.",
    next: "Sign in as it did before, or ask an owner.",
  },
  email_ambiguous: {
    why: "Your e-mail address has a capital letter outside ASCII, which could make it another person's.",
    next: "Sign in with an address without one.",
  },
  provider_not_allowed: {
    why: "That sign-in method is for workspaces on the enterprise plan.",
    next: "Use another one below.",
  },
}

/**
 * The `signin_error` and `return_to` the service sent the browser back with, read once and taken out of the address
 * bar (a reload or a shared link does not repeat them). `return_to` is where the refused sign-in was going (an app's
 * `/oauth/authorize` request): starting again goes there; the service checks it again at sign-in.
 */
const signInReturn = (() => {
  const query = new URLSearchParams(location.search)
  const reason = query.get("signin_error") ?? undefined
  const back = query.get("return_to")
  query.delete("signin_error")
  query.delete("return_to")
  if (reason !== undefined || back !== null) {
    const search = query.size ? `?${query}` : ""
    history.replaceState(history.state, "", location.pathname + search + location.hash)
  }
  return { reason, returnTo: back?.startsWith("/") && !back.startsWith("//") ? back : undefined }
})()

function SignIn({ hash, ended }: { hash: string; ended: boolean }) {
  const providers = useQuery<ReadonlyArray<Provider>>(fetchProviders, [])
  const { reason } = signInReturn
  // The invitation link's token rides in the fragment, back to this page after sign-in (never to a server log).
  const returnTo = signInReturn.returnTo ?? location.pathname + location.search + hash
  return (
    <main className="signin">
      <div className="card signin-card">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true">
            ▲
          </span>
          agentgov
        </div>
        <div>
          <h1>Sign in</h1>
          <p className="muted">Sign in to govern your workspace's agents.</p>
        </div>
        {ended ? (
          <p className="notice" role="alert">
            Your session has ended (it expired, or you signed out elsewhere). Sign in again to go on where you were.
          </p>
        ) : null}
        {reason ? (
          <p className="notice" role="alert">
            {SIGNIN_ERRORS[reason] ? (
              <>
                {SIGNIN_ERRORS[reason].why} {SIGNIN_ERRORS[reason].next}
              </>
            ) : (
              "The sign-in did not complete. Start again."
            )}
          </p>
        ) : null}
        {providers.error ? <ErrorState error={providers.error} retry={providers.reload} /> : null}
        {providers.loading ? <Loading rows={2} /> : null}
        {providers.data?.length === 0 ? (
          <p className="notice">
            No identity provider is configured. Use the one-time sign-in link <code>npm start</code> printed, or add a
            provider in <code>AGENTGOV_OIDC_PROVIDERS</code>.
          </p>
        ) : null}
        {providers.data?.map((p) => (
          <a
            key={p.id}
            className="btn btn-primary"
            href={`/auth/signin/${encodeURIComponent(p.id)}?return_to=${encodeURIComponent(returnTo)}`}
          >
            Continue with {p.label}
            {p.enterprise ? " (enterprise)" : ""}
          </a>
        ))}
      </div>
    </main>
  )
}

/** An invitation link (`/#invitation=<token>`): the signed-in person joins the workspace. */
function AcceptInvitation() {
  const { session, refresh, setWorkspace } = useSession()
  const raw = location.hash.slice("#invitation=".length)
  // A token cut short in a mail client (a malformed escape) goes as it is: the service refuses it, in words.
  const token = (() => {
    try {
      return decodeURIComponent(raw)
    } catch {
      return raw
    }
  })()
  const accept = useAction(() => api.invitations.accept.mutate({ token }))
  const leave = () => {
    history.replaceState(null, "", location.pathname + location.search)
    window.dispatchEvent(new HashChangeEvent("hashchange"))
  }
  return (
    <main className="signin">
      <div className="card signin-card">
        <h1>Join a workspace</h1>
        <p className="muted">
          You are signed in as <strong>{session.user.email}</strong>. Accept the invitation to join its workspace.
        </p>
        <InlineError error={accept.error} />
        <Button
          variant="primary"
          busy={accept.pending}
          onClick={async () => {
            const member = await accept.call()
            if (!member) return
            leave()
            await refresh()
            setWorkspace(member.workspaceId)
          }}
        >
          Accept invitation
        </Button>
        <Button
          variant="ghost"
          onClick={() => {
            leave()
            location.reload()
          }}
        >
          Not now
        </Button>
      </div>
    </main>
  )
}

/**
 * A page that throws while it renders (its code could not be loaded: the service is down or was updated since this
 * tab opened; or a value it cannot show) fails alone: the error is said in the content area, the navigation stays,
 * and moving to another page (a new key) starts again. Without it React unmounts the whole app: a blank tab.
 */
class PageBoundary extends Component<{ children: ReactNode }, { error: unknown }> {
  override state: { error: unknown } = { error: undefined }
  static getDerivedStateFromError(error: unknown) {
    return { error }
  }
  override render() {
    const { error } = this.state
    if (error === undefined) return this.props.children
    const message = error instanceof Error ? error.message : String(error)
    const unloaded = /dynamically imported module|importing a module script failed|failed to fetch/i.test(message)
    return (
      <ErrorState
        error={
          unloaded
            ? {
                code: "PAGE_NOT_LOADED",
                message: "This page's code could not be loaded: the service may be down, or was updated since.",
              }
            : { code: "PAGE_FAILED", message: `This page could not be shown: ${message}` }
        }
        retry={() => location.reload()}
      />
    )
  }
}

function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>(storedTheme)
  const next: Record<Theme, Theme> = { system: "light", light: "dark", dark: "system" }
  return (
    <Button
      size="sm"
      variant="ghost"
      aria-label={`Theme: ${theme}. Switch to ${next[theme]}`}
      onClick={() => {
        applyTheme(next[theme])
        setTheme(next[theme])
      }}
    >
      {theme === "dark" ? "☾" : theme === "light" ? "☀" : "◐"} <span className="user-name">{theme}</span>
    </Button>
  )
}

function Shell() {
  const { path } = useLocation()
  const { session, workspaceId, setWorkspace } = useSession()
  const [navOpen, setNavOpen] = useState(false)
  // A sign-in that did not complete in a browser signed in already (a used first-run link, another account's
  // sign-in declined at the provider): said, with whom the browser is still signed in as.
  const [signInFailure, setSignInFailure] = useState(signInReturn.reason)
  // biome-ignore lint/correctness/useExhaustiveDependencies: close the drawer on navigation
  useEffect(() => setNavOpen(false), [path])
  let match: { component: (typeof ROUTES)[number]["component"]; params: Record<string, string> } | undefined
  for (const r of ROUTES) {
    const params = matchPath(r.pattern, path)
    if (params) {
      match = { component: r.component, params }
      break
    }
  }
  const isCurrent = (to: string) => (to === "/" ? path === "/" : path === to || path.startsWith(`${to}/`))
  const initials = (session.user.name ?? session.user.email).slice(0, 1).toUpperCase()
  return (
    <div className="shell" data-nav-open={navOpen}>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <aside className="sidebar" aria-label="Sidebar">
        <Link to="/" className="brand">
          <span className="brand-mark" aria-hidden="true">
            ▲
          </span>
          agentgov
        </Link>
        <nav className="nav" aria-label="Main">
          {NAV.map(([group, items]) => (
            <div key={group} className="nav">
              <div className="nav-group" id={`nav-${group}`}>
                {group}
              </div>
              {items.map(([to, label, icon]) => (
                <Link key={to} to={to} aria-current={isCurrent(to) ? "page" : undefined}>
                  <span className="nav-icon" aria-hidden="true">
                    {icon}
                  </span>
                  {label}
                </Link>
              ))}
            </div>
          ))}
        </nav>
      </aside>
      <div className="main">
        <header className="topbar">
          <Button
            size="sm"
            variant="ghost"
            className="menu-btn"
            aria-label="Open navigation"
            aria-expanded={navOpen}
            onClick={() => setNavOpen((o) => !o)}
          >
            ☰
          </Button>
          {session.memberships.length > 0 ? (
            <>
              <label htmlFor="workspace" className="sr-only">
                Workspace
              </label>
              <select id="workspace" value={workspaceId} onChange={(e) => setWorkspace(e.target.value)}>
                {session.memberships.map((m) => (
                  <option key={m.workspaceId} value={m.workspaceId}>
                    {m.workspaceName} · {m.role}
                  </option>
                ))}
              </select>
            </>
          ) : null}
          <span className="spacer" />
          <ThemeToggle />
          <div className="user-chip">
            <span className="avatar" aria-hidden="true">
              {initials}
            </span>
            <span className="user-name">{session.user.name ?? session.user.email}</span>
          </div>
          <Button
            size="sm"
            onClick={async () => {
              await signOut()
              navigate("/")
              location.reload()
            }}
          >
            Sign out
          </Button>
        </header>
        <main id="main" className="content" tabIndex={-1}>
          {signInFailure ? (
            <div className="notice notice-dismissable" role="alert">
              <p>
                A sign-in in this browser did not complete: you are still signed in as{" "}
                <strong>{session.user.email}</strong>.{" "}
                {SIGNIN_ERRORS[signInFailure]?.why ?? "The identity provider's answer was refused."}
              </p>
              <Button size="sm" variant="ghost" onClick={() => setSignInFailure(undefined)}>
                Dismiss
              </Button>
            </div>
          ) : null}
          {session.memberships.length === 0 ? (
            <Empty title="You are in no workspace yet">
              Ask an owner of a workspace for an invitation, then open its link.
            </Empty>
          ) : match ? (
            <PageBoundary key={`${workspaceId}:${path}`}>
              <Suspense fallback={<Loading rows={6} label="Loading the page" />}>
                <match.component params={match.params} />
              </Suspense>
            </PageBoundary>
          ) : (
            <Empty title="Page not found" action={<Link to="/">Go to the overview</Link>}>
              Nothing lives at <code>{path}</code>.
            </Empty>
          )}
        </main>
      </div>
    </div>
  )
}
