import { type ComponentType, lazy } from "react"
import { matchPath } from "./router.tsx"

/** Every page, code-split: the initial bundle holds the shell only. */
export interface RouteDef {
  readonly pattern: string
  readonly component: ComponentType<{ params: Record<string, string> }>
}

type PageModule = { default: ComponentType<{ params: Record<string, string> }> }
/** The loader of each page's chunk, so that the first page's can start before the session is known. */
const loaders = new Map<ComponentType<{ params: Record<string, string> }>, () => Promise<PageModule>>()
const page = (load: () => Promise<PageModule>) => {
  const component = lazy(load)
  loaders.set(component, load)
  return component
}

const Overview = page(() => import("./pages/Overview.tsx"))
const Agents = page(() => import("./pages/Agents.tsx"))
const AgentDetail = page(() => import("./pages/AgentDetail.tsx"))
const Approvals = page(() => import("./pages/Approvals.tsx"))
const Audit = page(() => import("./pages/Audit.tsx"))
const Policies = page(() => import("./pages/Policies.tsx"))
const PolicyEditor = page(() => import("./pages/PolicyEditor.tsx"))
const ApiKeys = page(() => import("./pages/ApiKeys.tsx"))
const Enforcement = page(() => import("./pages/Enforcement.tsx"))
const Webhooks = page(() => import("./pages/Webhooks.tsx"))
const Compliance = page(() => import("./pages/Compliance.tsx"))
const Content = page(() => import("./pages/Content.tsx"))
const Members = page(() => import("./pages/Members.tsx"))
const Connectors = page(() => import("./pages/Connectors.tsx"))
const Settings = page(() => import("./pages/Settings.tsx"))

export const ROUTES: ReadonlyArray<RouteDef> = [
  { pattern: "/", component: Overview },
  { pattern: "/agents", component: Agents },
  { pattern: "/agents/:id", component: AgentDetail },
  { pattern: "/approvals", component: Approvals },
  { pattern: "/audit", component: Audit },
  { pattern: "/policies", component: Policies },
  { pattern: "/policies/new", component: PolicyEditor },
  { pattern: "/policies/:id", component: PolicyEditor },
  { pattern: "/keys", component: ApiKeys },
  { pattern: "/enforcement", component: Enforcement },
  { pattern: "/webhooks", component: Webhooks },
  { pattern: "/compliance", component: Compliance },
  { pattern: "/content", component: Content },
  { pattern: "/members", component: Members },
  { pattern: "/connectors", component: Connectors },
  { pattern: "/settings", component: Settings },
]

export const NAV: ReadonlyArray<readonly [group: string, items: ReadonlyArray<readonly [string, string, string]>]> = [
  [
    "Monitor",
    [
      ["/", "Overview", "◎"],
      ["/approvals", "Approvals", "✓"],
      ["/audit", "Audit trail", "≡"],
    ],
  ],
  [
    "Govern",
    [
      ["/agents", "Agents", "◇"],
      ["/policies", "Policies", "§"],
      ["/enforcement", "Enforcement", "⚑"],
      ["/compliance", "Compliance", "☑"],
      ["/content", "Content", "▣"],
    ],
  ],
  [
    "Configure",
    [
      ["/keys", "API keys", "◈"],
      ["/webhooks", "Webhooks", "↯"],
      ["/connectors", "Connectors", "⇄"],
      ["/members", "Members & apps", "☺"],
      ["/settings", "Settings", "⚙"],
    ],
  ],
]

/**
 * Starts loading the chunk of the page at `path` (the import is cached, so React.lazy finds it loaded): called at
 * start-up, so that the page's code arrives while the session is being read rather than after it.
 */
export const preloadPage = (path: string) => {
  const route = ROUTES.find((r) => matchPath(r.pattern, path))
  if (route)
    void loaders
      .get(route.component)?.()
      .catch(() => {})
}
