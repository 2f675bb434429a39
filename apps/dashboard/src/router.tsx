import { type AnchorHTMLAttributes, type MouseEvent, useEffect, useSyncExternalStore } from "react"

/** A small history router: paths are the dashboard's URLs, query strings hold list filters. */
const listeners = new Set<() => void>()
const subscribe = (f: () => void) => {
  listeners.add(f)
  return () => listeners.delete(f)
}
if (typeof window !== "undefined")
  window.addEventListener("popstate", () => {
    for (const f of listeners) f()
  })

const snapshot = () => window.location.pathname + window.location.search

export const navigate = (to: string, options: { replace?: boolean } = {}) => {
  if (to === snapshot()) return
  if (options.replace) window.history.replaceState(null, "", to)
  else window.history.pushState(null, "", to)
  for (const f of listeners) f()
  if (!options.replace) window.scrollTo(0, 0)
}

export const useLocation = () => {
  const href = useSyncExternalStore(subscribe, snapshot)
  const url = new URL(href, "http://x")
  return { path: url.pathname, query: url.searchParams }
}

/** The query string as state: `set` replaces the given keys (empty values are removed). */
export const useQueryState = () => {
  const { path, query } = useLocation()
  const set = (changes: Record<string, string | undefined>) => {
    const next = new URLSearchParams(query)
    for (const [k, v] of Object.entries(changes)) {
      if (v === undefined || v === "") next.delete(k)
      else next.set(k, v)
    }
    const qs = next.toString()
    navigate(qs ? `${path}?${qs}` : path, { replace: true })
  }
  return [query, set] as const
}

export const matchPath = (pattern: string, path: string): Record<string, string> | undefined => {
  const p = pattern.split("/")
  const s = path.replace(/\/$/, "").split("/")
  if (path === "/" && pattern === "/") return {}
  if (p.length !== s.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < p.length; i++) {
    const seg = p[i]!
    if (seg.startsWith(":")) {
      // A malformed escape (`/agents/%E0%A4%A`, a link cut short) matches nothing: "Page not found", not a throw.
      try {
        params[seg.slice(1)] = decodeURIComponent(s[i]!)
      } catch {
        return undefined
      }
    } else if (seg !== s[i]) return undefined
  }
  return params
}

export function Link({ to, ...rest }: { to: string } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    rest.onClick?.(e)
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
    e.preventDefault()
    navigate(to)
  }
  return <a href={to} {...rest} onClick={onClick} />
}

export const useTitle = (title: string) => {
  useEffect(() => {
    document.title = `${title} · agentgov`
  }, [title])
}
