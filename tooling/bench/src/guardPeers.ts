import type { AgentFacts, Decision } from "@agentgov/domain"
import * as cedar from "@cedar-policy/cedar-wasm/nodejs"
import { newEnforcer, newModelFromString } from "casbin"

/**
 * Two peers of the guard engine (issue 25), given the same rules and requests: Cedar
 * (@cedar-policy/cedar-wasm, `statefulIsAuthorized` over a preparsed policy set) and casbin
 * (node-casbin, ABAC with `eval()` conditions).
 *
 * The rule set they share is restricted to what all three express with the same meaning:
 * - actions: exact names and globs with a single `*` per segment. Every request action has three
 *   dot-separated segments (or two, matched by no rule), so `*` spanning dots in Cedar's `like` and
 *   in the regular expressions given to casbin never matches more than the engine's one segment;
 * - condition leaves: `gt` / `lt` / `eq` / `between` / `in` over the number and string fields every
 *   request carries (`context.amount`, `context.region`, `context.env`, `agent.trustScore`), so no
 *   leaf can fail to evaluate (the engine's fail-closed rule never comes into play), nested as
 *   `all` or `any: [leaf, all: [...]]`;
 * - every policy enforced and untargeted; the workspace's `guardDefault` is `deny`.
 *
 * The three-way decision (deny over require_approval over allow, else deny) maps as follows:
 * - Cedar: deny and require_approval rules are `forbid` policies with ids `deny-N` / `appr-N`,
 *   allow rules `permit` policies (`allow-N`); Cedar's own semantics (forbid overrides permit,
 *   default deny) then give allow/deny, and the determining policies of a Deny (which are every
 *   satisfied forbid) say whether a deny rule was among them: deny, else require_approval if an
 *   `appr-` one was, else no rule matched (default deny).
 * - casbin: one policy line `(kind, action regexp, condition, id)` per rule, ordered deny rules,
 *   then require_approval, then allow; matcher `regexMatch(r.act, p.act) && eval(p.cond)` with the
 *   effect `some(where (p.eft == allow))`, which stops at the first matching line; `enforceExSync`
 *   names that line, whose kind is the decision; no line matched is the default deny.
 */

type Leaf = { field: string; op: string; value: unknown }
type Condition = Leaf | { all: Array<Condition> } | { any: Array<Condition> }
export interface PortableRule {
  readonly id: string
  readonly effect: "deny" | "require_approval" | "allow"
  readonly actions: ReadonlyArray<string>
  readonly when?: Condition
}

export interface PeerRequest {
  readonly action: string
  readonly context: Record<string, unknown>
  readonly agent: AgentFacts
}

type Kind = Decision["decision"]

const str = (s: string) => JSON.stringify(s)

/** A condition as a boolean expression, written by `leaf` for each leaf. */
const expression = (c: Condition, leaf: (l: Leaf) => string): string => {
  if ("all" in c) return `(${c.all.map((x) => expression(x, leaf)).join(" && ")})`
  if ("any" in c) return `(${c.any.map((x) => expression(x, leaf)).join(" || ")})`
  return leaf(c)
}

const comparison = (subject: string, op: string, value: unknown, quote: (s: string) => string) => {
  const literal = (v: unknown) => (typeof v === "string" ? quote(v) : String(v))
  switch (op) {
    case "gt":
      return `${subject} > ${literal(value)}`
    case "lt":
      return `${subject} < ${literal(value)}`
    case "eq":
      return `${subject} == ${literal(value)}`
    case "between": {
      const [lo, hi] = value as [number, number]
      return `(${subject} >= ${lo} && ${subject} <= ${hi})`
    }
    case "in":
      return `(${(value as Array<unknown>).map((v) => `${subject} == ${literal(v)}`).join(" || ")})`
  }
  throw new Error(`no portable translation of the operator ${op}`)
}

// ── Cedar ──────────────────────────────────────────────────────────────────
const cedarLeaf = (l: Leaf) => {
  const [root, key] = l.field.split(".") as [string, string]
  return comparison(`${root === "agent" ? "principal" : "context"}.${key}`, l.op, l.value, str)
}
const cedarAction = (pattern: string) =>
  pattern.includes("*") ? `context.action like ${str(pattern)}` : `context.action == ${str(pattern)}`

const CEDAR_PREFIX: Record<Kind, string> = { deny: "deny", require_approval: "appr", allow: "allow" }

export const cedarPolicies = (rules: ReadonlyArray<PortableRule>): Record<string, string> =>
  Object.fromEntries(
    rules.map((rule, i) => {
      const actions = `(${rule.actions.map(cedarAction).join(" || ")})`
      const when = rule.when ? ` && ${expression(rule.when, cedarLeaf)}` : ""
      const effect = rule.effect === "allow" ? "permit" : "forbid"
      return [
        `${CEDAR_PREFIX[rule.effect]}-${i}`,
        `${effect} (principal, action, resource) when { ${actions}${when} };`,
      ]
    }),
  )

/** Preparses the policies once; the returned function decides one prebuilt request. */
export const cedarEngine = (rules: ReadonlyArray<PortableRule>) => {
  const id = `bench-${Date.now()}`
  const parsed = cedar.preparsePolicySet(id, { staticPolicies: cedarPolicies(rules) })
  if (parsed.type !== "success") throw new Error(`cedar: ${JSON.stringify(parsed.errors[0])}`)
  /** The call, built outside the timed part: what a caller holding the request would pass. */
  const callOf = (q: PeerRequest): cedar.StatefulAuthorizationCall => ({
    principal: { type: "Agent", id: q.agent.id },
    action: { type: "Action", id: "guard" },
    resource: { type: "Tool", id: "any" },
    context: { ...(q.context as Record<string, cedar.CedarValueJson>), action: q.action },
    preparsedPolicySetId: id,
    entities: [
      {
        uid: { type: "Agent", id: q.agent.id },
        attrs: { trustScore: q.agent.trustScore ?? 0, labels: [...(q.agent.labels ?? [])] },
        parents: [],
      },
    ],
  })
  const decide = (call: cedar.StatefulAuthorizationCall): Kind => {
    const answer = cedar.statefulIsAuthorized(call)
    if (answer.type !== "success") throw new Error(`cedar: ${JSON.stringify(answer.errors[0])}`)
    const { decision, diagnostics } = answer.response
    if (diagnostics.errors.length > 0) throw new Error(`cedar: ${JSON.stringify(diagnostics.errors[0])}`)
    if (decision === "allow") return "allow"
    if (diagnostics.reason.some((p) => p.startsWith("deny-"))) return "deny"
    return diagnostics.reason.length > 0 ? "require_approval" : "deny"
  }
  return { callOf, decide }
}

// ── casbin ─────────────────────────────────────────────────────────────────
const CASBIN_MODEL = `
[request_definition]
r = act, ctx, agent

[policy_definition]
p = kind, act, cond, id

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = regexMatch(r.act, p.act) && eval(p.cond)
`

const casbinLeaf = (l: Leaf) => {
  const [root, key] = l.field.split(".") as [string, string]
  return comparison(`r.${root === "agent" ? "agent" : "ctx"}.${key}`, l.op, l.value, (s) => `'${s}'`)
}
/** A glob as the regular expression casbin's regexMatch takes: `*` is one segment. */
const casbinAction = (pattern: string) =>
  pattern
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join("[^.]*")

const ORDER: Record<Kind, number> = { deny: 0, require_approval: 1, allow: 2 }

export const casbinPolicies = (rules: ReadonlyArray<PortableRule>): Array<Array<string>> =>
  rules
    .map((rule, i) => [
      rule.effect,
      `^(${rule.actions.map(casbinAction).join("|")})$`,
      rule.when ? expression(rule.when, casbinLeaf) : "true",
      `r${i}`,
    ])
    .sort((a, b) => ORDER[a[0] as Kind] - ORDER[b[0] as Kind])

export const casbinEngine = async (rules: ReadonlyArray<PortableRule>) => {
  const enforcer = await newEnforcer(newModelFromString(CASBIN_MODEL))
  const rows = casbinPolicies(rules)
  if (!(await enforcer.addPolicies(rows))) throw new Error("casbin refused the policies")
  const agents = new Map<string, { trustScore: number }>()
  /** The request's arguments, built outside the timed part. */
  const argsOf = (q: PeerRequest): [string, Record<string, unknown>, { trustScore: number }] => {
    const agent = agents.get(q.agent.id) ?? { trustScore: q.agent.trustScore ?? 0 }
    agents.set(q.agent.id, agent)
    return [q.action, q.context, agent]
  }
  const decide = (args: ReturnType<typeof argsOf>): Kind => {
    const [ok, line] = enforcer.enforceExSync(...args)
    return ok ? (line[0] as Kind) : "deny"
  }
  return { argsOf, decide }
}
