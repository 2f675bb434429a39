import { CEL_MAX_COST, type CelActivation, type CompiledCel, celCostSpent, compileCel } from "./cel.ts"
import { compileGlob, type Glob } from "./glob.ts"
import { type Condition, GUARD_ACTION_MAX_LENGTH, type LeafCondition, RATE_PERIOD_MS } from "./language.ts"
import type { RateCounter } from "./RateCounter.ts"
import { type CompiledWindow, compileWindow } from "./timeWindow.ts"
import { parseField } from "./validate.ts"

/** What the engine knows of the acting agent. */
export interface AgentFacts {
  readonly id: string
  readonly name: string
  readonly status: string
  readonly labels: ReadonlyArray<string>
  readonly version?: string | null | undefined
  readonly trustScore?: number | null | undefined
  readonly trustTier?: string | null | undefined
}

/** The agent as CEL sees it: the facts, plus `trust: {score, tier}` (D6's `agent.trust.*`); built only when CEL runs. */
const celAgent = (agent: AgentFacts): object =>
  agent.trustScore === undefined && agent.trustTier === undefined
    ? agent
    : { ...agent, trust: { score: agent.trustScore ?? null, tier: agent.trustTier ?? null } }

/**
 * Per-call state the compiled conditions read. One object per evaluation; `error` carries why
 * the condition that just answered {@link ERROR} could not be evaluated.
 */
export interface EvalState {
  readonly action: string
  readonly context: object
  readonly agent: AgentFacts
  readonly now: number
  readonly rate: RateCounter
  error: string | undefined
  cel: CelActivation | undefined
  /** Cost units spent so far by this evaluation, in the CEL meter's units (see {@link EVALUATION_BUDGET}). */
  steps: number
}

/**
 * The most work one evaluation may do, in the CEL meter's units (about 10–15 ns each here: a
 * metered CEL node, a leaf, an element a leaf scans, 16 characters of a string it searches):
 * summed over every rule the call reaches, so that one tenant's call holds the event loop for a
 * few milliseconds at most (measured: 1.3–2.7 ms of CPU for the costliest shapes, nested
 * comprehensions, on the 2-core machine under load). It is above one CEL expression's own limit
 * (an expression over its own limit is an unknown condition, as before). A policy set whose worst case for some action is over it is refused
 * at save ({@link conditionCost}, `CompiledPolicySet.worstCost`); at run time an evaluation that
 * goes past it stops and is denied (fail closed), which guarantees the bound even for a set saved
 * before the check or a request the estimate did not foresee.
 */
export const EVALUATION_BUDGET = 150_000

/** Three outcomes: a condition holds, does not, or cannot be evaluated. */
export const FALSE = 0
export const TRUE = 1
export const ERROR = 2
export type Outcome = typeof FALSE | typeof TRUE | typeof ERROR

/** `glob` applies to strings up to this length; a longer one cannot be evaluated (fail closed). */
export const GLOB_SUBJECT_MAX = 8_192

/*
 * A compiled condition is a tree of nodes of one shape, read by one interpreter function
 * (`evalCondition`) that switches on small integers. Every property access and call in it
 * sees one shape and one target, which V8 inlines; a tree of closures made each leaf a
 * megamorphic call and measured about twice as slow.
 */

const ALL = 0
const ANY = 1
const NOT = 2
const TIME = 3
const RATE = 4
const CEL = 5
const LEAF = 6

// Where a leaf reads its field.
const F_ACTION = 0
const F_AGENT_ID = 1
const F_AGENT_NAME = 2
const F_AGENT_STATUS = 3
const F_AGENT_LABELS = 4
const F_AGENT_VERSION = 5
const F_AGENT_TRUST_SCORE = 6
const F_AGENT_TRUST_TIER = 7
// The request's own fields come last: `field < F_CONTEXT_1` is the action or the agent (the operator's facts).
const F_CONTEXT_1 = 8 // context.a
const F_CONTEXT_N = 9 // context.a.b…

// Operators, with `eq null` / `ne null` apart.
const O_EXISTS = 0
const O_EQ = 1
const O_NE = 2
const O_IS_NULL = 3
const O_NOT_NULL = 4
const O_GT = 5
const O_GTE = 6
const O_LT = 7
const O_LTE = 8
const O_BETWEEN = 9
const O_IN = 10
const O_NIN = 11
const O_CONTAINS = 12
const O_STARTS_WITH = 13
const O_ENDS_WITH = 14
const O_GLOB = 15

interface Node {
  readonly kind: number
  readonly children: ReadonlyArray<Node>
  // leaves
  readonly op: number
  readonly opName: string
  readonly field: number
  readonly fieldName: string
  readonly key: string
  readonly keys: ReadonlyArray<string>
  /** Per path segment: its array index, or -1 when it is not a decimal. */
  readonly indexes: ReadonlyArray<number>
  readonly value: unknown
  readonly high: unknown
  /** `typeof value` for the operators that need the field to have the value's type. */
  readonly type: string
  readonly set: ReadonlySet<unknown> | undefined
  readonly types: ReadonlySet<string> | undefined
  readonly glob: Glob | undefined
  // time, rate, CEL
  readonly window: CompiledWindow | undefined
  readonly rateKey: string
  readonly windowMs: number
  readonly max: number
  readonly perAgent: boolean
  readonly cel: CompiledCel | undefined
  readonly celProblem: string
}

/** A compiled condition: evaluate it with {@link evalCondition}. */
export type CompiledCondition = Node

const node = (fields: Partial<Node> & { readonly kind: number }): Node => ({
  kind: fields.kind,
  children: fields.children ?? [],
  op: fields.op ?? 0,
  opName: fields.opName ?? "",
  field: fields.field ?? 0,
  fieldName: fields.fieldName ?? "",
  key: fields.key ?? "",
  keys: fields.keys ?? [],
  indexes: fields.indexes ?? [],
  value: fields.value,
  high: fields.high,
  type: fields.type ?? "",
  set: fields.set,
  types: fields.types,
  glob: fields.glob,
  window: fields.window,
  rateKey: fields.rateKey ?? "",
  windowMs: fields.windowMs ?? 0,
  max: fields.max ?? 0,
  perAgent: fields.perAgent ?? false,
  cel: fields.cel,
  celProblem: fields.celProblem ?? "",
})

const AGENT_FIELD_KIND: Readonly<Record<string, number>> = {
  action: F_ACTION,
  "agent.id": F_AGENT_ID,
  "agent.name": F_AGENT_NAME,
  "agent.status": F_AGENT_STATUS,
  "agent.labels": F_AGENT_LABELS,
  "agent.version": F_AGENT_VERSION,
  "agent.trustScore": F_AGENT_TRUST_SCORE,
  "agent.trustTier": F_AGENT_TRUST_TIER,
  "agent.trust.score": F_AGENT_TRUST_SCORE,
  "agent.trust.tier": F_AGENT_TRUST_TIER,
}

const OP_CODE: Readonly<Record<string, number>> = {
  exists: O_EXISTS,
  eq: O_EQ,
  ne: O_NE,
  gt: O_GT,
  gte: O_GTE,
  lt: O_LT,
  lte: O_LTE,
  between: O_BETWEEN,
  in: O_IN,
  nin: O_NIN,
  contains: O_CONTAINS,
  startsWith: O_STARTS_WITH,
  endsWith: O_ENDS_WITH,
  glob: O_GLOB,
}

const ARRAY_INDEX = /^(0|[1-9]\d{0,8})$/

const compileLeaf = (c: LeafCondition): Node => {
  const known = AGENT_FIELD_KIND[c.field]
  let where: Partial<Node>
  if (known !== undefined) where = { field: known }
  else {
    const parsed = parseField(c.field)
    if (typeof parsed === "string" || !parsed.contextPath) throw new Error(`not a field: ${c.field}`)
    const keys = parsed.contextPath
    where = {
      field: keys.length === 1 ? F_CONTEXT_1 : F_CONTEXT_N,
      key: keys[0]!,
      keys,
      indexes: keys.map((k) => (ARRAY_INDEX.test(k) ? Number(k) : -1)),
    }
  }
  const base = { kind: LEAF, opName: c.op, fieldName: c.field, ...where }
  const v = c.value
  switch (c.op) {
    case "exists":
      return node({ ...base, op: O_EXISTS, value: v !== false })
    case "eq":
    case "ne":
      if (v === null) return node({ ...base, op: c.op === "eq" ? O_IS_NULL : O_NOT_NULL })
      return node({ ...base, op: OP_CODE[c.op]!, value: v, type: typeof v })
    case "between": {
      const [low, high] = v as [number, number] | [string, string]
      return node({ ...base, op: O_BETWEEN, value: low, high, type: typeof low })
    }
    case "in":
    case "nin": {
      const values = new Set<unknown>(v as ReadonlyArray<unknown>)
      const types = new Set([...values].map((x) => (x === null ? "null" : typeof x)))
      return node({ ...base, op: OP_CODE[c.op]!, set: values, types })
    }
    case "glob":
      return node({ ...base, op: O_GLOB, glob: compileGlob(v as string) })
    default:
      return node({ ...base, op: OP_CODE[c.op]!, value: v, type: typeof v })
  }
}

/**
 * Compiles a validated condition. `rateKey` names the rule the condition belongs to; `path`
 * (e.g. `when.all[1]`) is added to it so that two rate conditions of one rule count apart.
 */
export const compileCondition = (c: Condition, rateKey: string, path = "when"): CompiledCondition => {
  if ("all" in c) {
    return node({ kind: ALL, children: c.all.map((x, i) => compileCondition(x, rateKey, `${path}.all[${i}]`)) })
  }
  if ("any" in c) {
    return node({ kind: ANY, children: c.any.map((x, i) => compileCondition(x, rateKey, `${path}.any[${i}]`)) })
  }
  if ("not" in c) return node({ kind: NOT, children: [compileCondition(c.not, rateKey, `${path}.not`)] })
  if ("time" in c) return node({ kind: TIME, window: compileWindow(c.time) })
  if ("rate" in c) {
    return node({
      kind: RATE,
      rateKey: `${rateKey}\u0000${path}`,
      windowMs: RATE_PERIOD_MS[c.rate.per],
      max: c.rate.max,
      perAgent: c.rate.scope !== "workspace",
    })
  }
  if ("cel" in c) {
    const compiled = compileCel(c.cel)
    return typeof compiled === "string"
      ? node({ kind: CEL, celProblem: `CEL expression refused: ${compiled}` })
      : node({ kind: CEL, cel: compiled })
  }
  return compileLeaf(c)
}

/**
 * What evaluating a compiled condition can cost at most, in {@link EVALUATION_BUDGET}'s units,
 * from the condition alone: a node or leaf 1, a CEL expression its static bound, a `glob` leaf
 * whose pattern runs an automaton 1 + (the longest string it applies to) × (the states the
 * automaton holds at once) (fifth pass). A leaf that scans a list or a string from the request
 * pays for it at run time; one pass over what a request can hold is not counted here, so that
 * ordinary leaves do not fill the budget. The automaton is not one pass: 16-star patterns run at
 * 10–30 ns a character (measured), 2–8 ms over a string of {@link GLOB_SUBJECT_MAX} characters,
 * where it was charged 1 here and 1 unit per 8 characters at run time.
 */
export const conditionCost = (n: Node): number => {
  switch (n.kind) {
    case ALL:
    case ANY:
    case NOT: {
      let cost = 1
      for (const child of n.children) cost += conditionCost(child)
      return cost
    }
    case CEL:
      return 1 + (n.cel?.worstCost ?? 0)
    case LEAF:
      // With an automaton, what the run time charges (the literal checks, then length × states) at the longest length.
      return n.op === O_GLOB && n.glob!.states > 0
        ? 1 + (globSubjectMax(n) >>> 4) + globSubjectMax(n) * n.glob!.states
        : 1
    default:
      return 1
  }
}

/** The longest string a `glob` leaf tests: the action and the agent's facts are bounded, the request's own fields not. */
const globSubjectMax = (n: Node): number => (n.field < F_CONTEXT_1 ? GUARD_ACTION_MAX_LENGTH : GLOB_SUBJECT_MAX)

const hasOwn = Object.prototype.hasOwnProperty

/** A leaf's field; undefined is "missing". Own properties only: `__proto__` and friends are missing. */
const readField = (s: EvalState, n: Node): unknown => {
  switch (n.field) {
    case F_CONTEXT_1: {
      const c = s.context
      return hasOwn.call(c, n.key) ? (c as Record<string, unknown>)[n.key] : undefined
    }
    case F_CONTEXT_N: {
      let cur: unknown = s.context
      const keys = n.keys
      for (let i = 0; i < keys.length; i++) {
        if (typeof cur !== "object" || cur === null) return undefined
        if (Array.isArray(cur)) {
          const idx = n.indexes[i]!
          if (idx < 0 || idx >= cur.length) return undefined
          cur = cur[idx]
        } else {
          if (!hasOwn.call(cur, keys[i]!)) return undefined
          cur = (cur as Record<string, unknown>)[keys[i]!]
        }
      }
      return cur
    }
    case F_ACTION:
      return s.action
    case F_AGENT_ID:
      return s.agent.id
    case F_AGENT_NAME:
      return s.agent.name
    case F_AGENT_STATUS:
      return s.agent.status
    case F_AGENT_LABELS:
      return s.agent.labels
    case F_AGENT_VERSION:
      return s.agent.version ?? undefined
    case F_AGENT_TRUST_SCORE:
      return s.agent.trustScore ?? undefined
    default:
      return s.agent.trustTier ?? undefined
  }
}

const jsonType = (v: unknown): string =>
  v === null ? "null" : Array.isArray(v) ? "a list" : typeof v === "object" ? "an object" : `a ${typeof v}`

const fail = (s: EvalState, message: string): Outcome => {
  s.error = message
  return ERROR
}

const mismatch = (s: EvalState, n: Node, actual: unknown, wanted: string): Outcome =>
  fail(s, `${n.fieldName} is ${jsonType(actual)}; ${n.opName} needs ${wanted}`)

const elementType = (v: unknown): string => (v === null ? "null" : typeof v)

/**
 * `in` / `nin` over a list the request brought (`context.*`). The agent chooses its shape, so it must not
 * decide the answer: every element needs a type the values hold (as a scalar does), and the list is in the
 * values when all of its elements are, not when none is; some in and some not cannot be evaluated. Otherwise
 * `to nin [allowed]` is escaped with `["allowed", "anyone"]`, and `env in ["dev"]` passed with `["dev", "prod"]`.
 * The answer for a list all in or none in is the same as for any one of its elements.
 */
const contextListIn = (s: EvalState, n: Node, a: ReadonlyArray<unknown>, hit: Outcome, miss: Outcome): Outcome => {
  const set = n.set!
  let found = 0
  for (let i = 0; i < a.length; i++) {
    const e = a[i]
    if (set.has(e)) found++
    else if (!n.types!.has(elementType(e))) {
      const wanted = [...n.types!].map((t) => (t === "null" ? "null" : `a ${t}`)).join(" or ")
      return fail(s, `${n.fieldName}[${i}] is ${jsonType(e)}; ${n.opName} needs ${wanted}`)
    }
  }
  if (found === 0) return miss
  if (found === a.length) return hit
  return fail(
    s,
    `${n.fieldName} is a list with ${found} of its ${a.length} elements in the values; ${n.opName} cannot tell whether ` +
      "the list or each element is meant",
  )
}

/**
 * `contains` over a list the request brought, when no element is the value: false, unless an element could be
 * the value sent another way, which cannot be evaluated: an element of another type (`"5"` for `5`), or, for a
 * string value, a string element that contains it (a string the rule searches, sent as a list: `["rm -rf /"]`
 * for `command contains "rm -rf"`).
 */
const contextListLacks = (s: EvalState, n: Node, a: ReadonlyArray<unknown>): Outcome => {
  const type = elementType(n.value)
  for (let i = 0; i < a.length; i++) {
    const e = a[i]
    if (elementType(e) !== type)
      return fail(s, `${n.fieldName}[${i}] is ${jsonType(e)}; contains needs ${type === "null" ? "null" : `a ${type}`}`)
    if (type === "string") {
      s.steps += (e as string).length >>> 4
      if ((e as string).includes(n.value as string))
        return fail(
          s,
          `${n.fieldName}[${i}] contains ${JSON.stringify(n.value)} but is not equal to it; contains cannot tell ` +
            "whether an element or a substring of one is meant",
        )
    }
  }
  return FALSE
}

const evalLeaf = (s: EvalState, n: Node): Outcome => {
  const a = readField(s, n)
  s.steps++
  const op = n.op
  if (op === O_EXISTS) return (a !== undefined) === n.value ? TRUE : FALSE
  if (op === O_IN || op === O_NIN) {
    const hit = op === O_IN ? TRUE : FALSE
    const set = n.set!
    if (set.has(a)) return hit
    if (a === undefined) return fail(s, `${n.fieldName} is missing`)
    const miss = op === O_IN ? FALSE : TRUE
    if (Array.isArray(a)) {
      s.steps += a.length
      // The agent's labels (the operator's): a list is in the values when any of its elements is.
      if (n.field < F_CONTEXT_1) {
        for (let i = 0; i < a.length; i++) if (set.has(a[i])) return hit
        return miss
      }
      return contextListIn(s, n, a, hit, miss)
    }
    if (n.types!.has(a === null ? "null" : typeof a)) return miss
    const wanted = [...n.types!].map((t) => (t === "null" ? "null" : `a ${t}`)).join(" or ")
    return mismatch(s, n, a, `${wanted} (or a list)`)
  }
  if (a === undefined) return fail(s, `${n.fieldName} is missing`)
  switch (op) {
    case O_EQ:
    case O_NE:
      if (typeof a !== n.type || a === null) return mismatch(s, n, a, `a ${n.type}`)
      return (a === n.value) === (op === O_EQ) ? TRUE : FALSE
    case O_IS_NULL:
      return a === null ? TRUE : FALSE
    case O_NOT_NULL:
      return a === null ? FALSE : TRUE
    case O_GT:
    case O_GTE:
    case O_LT:
    case O_LTE: {
      if (typeof a !== n.type) return mismatch(s, n, a, `a ${n.type}`)
      const x = a as number
      const y = n.value as number
      const holds = op === O_GT ? x > y : op === O_GTE ? x >= y : op === O_LT ? x < y : x <= y
      return holds ? TRUE : FALSE
    }
    case O_BETWEEN:
      if (typeof a !== n.type) return mismatch(s, n, a, `a ${n.type}`)
      return (a as number) >= (n.value as number) && (a as number) <= (n.high as number) ? TRUE : FALSE
    case O_CONTAINS:
      if (Array.isArray(a)) {
        s.steps += a.length
        if (a.includes(n.value)) return TRUE
        return n.field < F_CONTEXT_1 ? FALSE : contextListLacks(s, n, a)
      }
      if (typeof a === "string") {
        s.steps += a.length >>> 4
        if (typeof n.value !== "string") return mismatch(s, n, a, "a list when the value is not a string")
        return a.includes(n.value) ? TRUE : FALSE
      }
      return mismatch(s, n, a, "a list or a string")
    case O_STARTS_WITH:
      if (typeof a !== "string") return mismatch(s, n, a, "a string")
      return a.startsWith(n.value as string) ? TRUE : FALSE
    case O_ENDS_WITH:
      if (typeof a !== "string") return mismatch(s, n, a, "a string")
      return a.endsWith(n.value as string) ? TRUE : FALSE
    default: {
      if (typeof a !== "string") return mismatch(s, n, a, "a string")
      if (a.length > GLOB_SUBJECT_MAX)
        return fail(s, `${n.fieldName} is longer than ${GLOB_SUBJECT_MAX} characters for glob`)
      // The literal checks, at the string rate; then, when they pass, the automaton at one unit per character and
      // state, paid before it runs: past the budget it does not run (fail closed, and the call is denied).
      s.steps += 1 + (a.length >>> 4)
      const glob = n.glob!
      if (glob.automaton === undefined) return glob.test(a) ? TRUE : FALSE
      if (!glob.screen(a)) return FALSE
      s.steps += a.length * glob.states
      if (s.steps > EVALUATION_BUDGET)
        return fail(s, `glob on ${n.fieldName} would take the evaluation past its budget of ${EVALUATION_BUDGET} units`)
      return glob.automaton(a) ? TRUE : FALSE
    }
  }
}

/**
 * Evaluates a compiled condition. `all` is false as soon as a child is false and otherwise
 * cannot be evaluated when a child cannot; `any` is true as soon as a child is true (the logic
 * of SQL's and CEL's three-valued `and` / `or`); an error keeps the first child's reason.
 * Children run left to right, so a rate condition after a false leaf in an `all` is not
 * reached and does not count the call.
 */
export const evalCondition = (s: EvalState, n: Node): Outcome => {
  switch (n.kind) {
    case LEAF:
      return evalLeaf(s, n)
    case ALL:
    case ANY: {
      s.steps++
      const stop = n.kind === ALL ? FALSE : TRUE
      const children = n.children
      let error: string | undefined
      let errored = false
      for (let i = 0; i < children.length; i++) {
        const r = evalCondition(s, children[i]!)
        if (r === stop) return stop
        if (r === ERROR && !errored) {
          errored = true
          error = s.error
        }
      }
      if (!errored) return stop === FALSE ? TRUE : FALSE
      s.error = error
      return ERROR
    }
    case NOT: {
      const r = evalCondition(s, n.children[0]!)
      return r === TRUE ? FALSE : r === FALSE ? TRUE : ERROR
    }
    case TIME:
      return n.window!.holds(s.now) ? TRUE : FALSE
    case RATE: {
      const key = n.perAgent ? `${n.rateKey}\u0000${s.agent.id}` : n.rateKey
      return s.rate.hit(key, n.windowMs, n.max, s.now).exceeded ? TRUE : FALSE
    }
    default: {
      if (n.cel === undefined) return fail(s, n.celProblem)
      if (s.cel === undefined) s.cel = { action: s.action, context: s.context, agent: celAgent(s.agent) }
      const left = EVALUATION_BUDGET - s.steps
      const limit = left < CEL_MAX_COST ? left : CEL_MAX_COST
      const r = n.cel.run(s.cel, limit)
      // A range pays for its elements before running them: past the limit, they did not run.
      const spent = celCostSpent()
      s.steps += spent > limit ? limit + 1 : spent
      return r === true ? TRUE : r === false ? FALSE : fail(s, r)
    }
  }
}
