import type { HttpMethod, Operation } from "../Operation.ts"

interface Route {
  readonly pattern: RegExp
  readonly params: ReadonlyArray<string>
  readonly byMethod: Map<HttpMethod, Operation>
}

export type Match =
  | { readonly kind: "found"; readonly op: Operation; readonly params: Record<string, string> }
  | { readonly kind: "method"; readonly allow: ReadonlyArray<string> }
  | { readonly kind: "none" }

/**
 * Matches a path (already stripped of `/api/v1` or `/v1`) to an operation.
 * Literal segments beat parameters (`/policies/evaluate` before `/policies/:id`).
 */
export const makeRouter = (operations: ReadonlyArray<Operation>) => {
  const routes = new Map<string, Route>()
  for (const op of operations) {
    let route = routes.get(op.path)
    if (!route) {
      const params: Array<string> = []
      const source = op.path
        .split("/")
        .map((seg) => {
          if (!seg.startsWith(":")) return seg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
          params.push(seg.slice(1))
          return "([^/]+)"
        })
        .join("/")
      route = { pattern: new RegExp(`^${source}/?$`), params, byMethod: new Map() }
      routes.set(op.path, route)
    }
    if (route.byMethod.has(op.method)) throw new Error(`two operations for ${op.method} ${op.path}`)
    route.byMethod.set(op.method, op)
  }
  // Fewer parameters first: literal routes win over parameterised ones of the same shape.
  const ordered = [...routes.values()].sort((a, b) => a.params.length - b.params.length)

  return (method: string, path: string): Match => {
    for (const route of ordered) {
      const m = route.pattern.exec(path)
      if (!m) continue
      const op = route.byMethod.get(method as HttpMethod)
      if (!op) {
        const allow: Array<string> = [...route.byMethod.keys()]
        if (route.byMethod.has("GET")) allow.push("HEAD")
        return { kind: "method", allow }
      }
      const params: Record<string, string> = {}
      for (const [i, name] of route.params.entries()) {
        let value: string
        try {
          value = decodeURIComponent(m[i + 1]!)
        } catch {
          value = m[i + 1]!
        }
        params[name] = value
      }
      return { kind: "found", op, params }
    }
    return { kind: "none" }
  }
}
