import type { Agent, Policy } from "@agentgov/sdk"

/**
 * The action globs of D6 as a regular expression: `*` any run without a dot, `**` any run, a lone `*`
 * everything, every other character literal. The service's engine is the authority (every call is still
 * guarded); this copy only decides what `tools/list` shows, and errs towards showing.
 */
const globMatches = (pattern: string, subject: string): boolean => {
  if (pattern === "*") return true
  let source = ""
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "*") {
      if (pattern[i + 1] === "*") {
        source += ".*"
        i++
      } else source += "[^.]*"
    } else source += c.replace(/[\\^$.|?+()[\]{}]/g, "\\$&")
  }
  return new RegExp(`^${source}$`, "s").test(subject)
}

const targets = (policy: Policy, agent: Pick<Agent, "id" | "labels">): boolean => {
  const target = policy.target
  if (target === undefined || (target.agentIds === undefined && target.labels === undefined)) return true
  return Boolean(target.agentIds?.includes(agent.id) || target.labels?.some((l) => agent.labels.includes(l)))
}

/**
 * Whether the policies deny `action` to this agent outright: an enabled, enforcing policy that targets the
 * agent has a `deny` rule without a condition whose actions match. Such a call is denied whatever its
 * arguments (a deny wins, D6), so the tool is not worth showing to the model. Conditional denies, rate limits
 * and the workspace's `guardDefault` are not read here: those tools stay listed, and the guard decides each
 * call.
 */
export const deniedOutright = (
  policies: ReadonlyArray<Policy>,
  agent: Pick<Agent, "id" | "labels">,
  action: string,
): boolean =>
  policies.some(
    (p) =>
      p.enabled &&
      p.mode === "enforce" &&
      targets(p, agent) &&
      p.rules.some((r) => r.effect === "deny" && r.when === undefined && r.actions.some((a) => globMatches(a, action))),
  )
