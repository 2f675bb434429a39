import { Environment, type ParseResult } from "@marcbachmann/cel-js"
import { MAX_APPROVAL_CONTEXT_BYTES } from "../../approvals/Approval.ts"
import { AGENT_FIELDS, LIMITS } from "./language.ts"

/**
 * `{cel: "<expression>"}` conditions, on @marcbachmann/cel-js (chosen over @bufbuild/cel: it
 * type-checks, see docs/decisions.md). Expressions are parsed and type-checked once, when the
 * policy is saved or loaded; evaluation never parses.
 *
 * Variables: `action` (string), `context` (map of the request's context), `agent` (map with
 * id, name, status, labels, and version, trustScore, trustTier when known). JSON numbers are
 * CEL doubles.
 *
 * Cost limit. The library has no cost accounting of its own, so the checked expression's
 * nodes are wrapped with a meter where work can multiply: every node in the body of a
 * comprehension (`all`, `exists`, `map`, …, which run their body once per element), the range
 * of each comprehension (which pays for all its elements' bodies up front, so a comprehension
 * that cannot finish stops before it starts), and every `+` and function call (which can make
 * values bigger than their inputs, as strings doubled through `cel.bind` do). A metered node
 * costs 1 plus the size of what it produced (a list's length, a map's size, a string's
 * length / 16). The operands of `==`, `!=` and `in` that are not literals pay for their whole
 * depth instead (every element and entry, nested ones included, counted once per object per
 * evaluation), since comparing two maps or searching a list walks all of it. Past
 * {@link CEL_MAX_COST} the expression stops with an error, which the engine treats as a
 * condition that cannot be evaluated (fail closed). Any other node runs once per evaluation
 * over values no bigger than the request or than what was paid for, so it is left alone:
 * `context.amount > 100.0` runs at the library's own speed.
 * `matches` (a regular expression) is refused: no user-supplied regex anywhere.
 *
 * The receiver and arguments of a call that are not literals also pay their size
 * (`context.s.contains(x)` scans `context.s`): a call's work follows its inputs as well as its
 * result. A run may be given a lower limit than {@link CEL_MAX_COST}: what is left of the
 * evaluation's budget (see `EVALUATION_BUDGET` in evaluate.ts).
 */
export const CEL_MAX_COST = 100_000

/**
 * The largest list, map or string (in cost units, a string's length / 16) a request can bring:
 * its context is at most 32 KiB of JSON, and a list element takes at least two bytes (`0,`).
 * The static estimate takes every value read from the request to be this big.
 */
export const INPUT_SIZE_BOUND = MAX_APPROVAL_CONTEXT_BYTES / 2

const FORBIDDEN_FUNCTIONS: ReadonlyMap<string, string> = new Map([
  ["matches", "`matches` (regular expressions) is not available in policies; use startsWith, endsWith or contains"],
])

const environment = new Environment({
  limits: { maxAstNodes: 1_000, maxDepth: 32, maxListElements: 1_000, maxMapEntries: 1_000, maxCallArguments: 8 },
})
  .registerVariable("action", "string")
  .registerVariable("context", "map<string, dyn>")
  .registerVariable("agent", "map<string, dyn>")

/** What a compiled expression gives: true, false, or why it could not be evaluated. */
export type CelOutcome = true | false | string

export interface CompiledCel {
  readonly source: string
  /** Runs with at most `limit` cost units (default {@link CEL_MAX_COST}); {@link celCostSpent} then says how many it used. */
  readonly run: (activation: CelActivation, limit?: number) => CelOutcome
  /**
   * What one run can cost at most, from the expression alone, with every value from the request
   * as big as it can be ({@link INPUT_SIZE_BOUND}): never above {@link CEL_MAX_COST}, where the
   * meter stops it.
   */
  readonly worstCost: number
}

export interface CelActivation {
  readonly action: string
  readonly context: object
  readonly agent: object
}

// The library's AST, as far as the meter needs it: internal, pinned with the exact version.
type EvalFn = (this: unknown, ev: unknown, ast: unknown, ctx: unknown) => unknown
interface CelNode {
  readonly op: string
  readonly args: unknown
  readonly meta: {
    readonly alternate?: CelNode
    readonly macro?: { readonly evaluate: EvalFn; readonly [k: string]: unknown }
    readonly evaluate: EvalFn
  }
  evaluate: EvalFn
}

const meter: { cost: number; limit: number; deep: Map<object, number> | undefined } = {
  cost: 0,
  limit: CEL_MAX_COST,
  deep: undefined,
}

/** The cost units the last run used (past its limit when it was stopped). */
export const celCostSpent = (): number => meter.cost
const COST_EXCEEDED = new Error("cost limit exceeded")

/**
 * Every element, entry and string (length / 16) under `root`, each object walked once per
 * evaluation; the walk stops once the total alone passes the budget.
 */
const deepSize = (root: unknown): number => {
  if (typeof root === "string") return root.length >>> 4
  if (typeof root !== "object" || root === null) return 0
  // The usual operand, a short list of scalars (`"x" in agent.labels`): no walk, no memo.
  if (Array.isArray(root) && root.length <= 64) {
    let total = root.length
    for (let i = 0; i < root.length; i++) {
      const x = root[i]
      if (typeof x === "string") total += x.length >>> 4
      else if (typeof x === "object" && x !== null) return walk(root)
    }
    return total
  }
  return walk(root)
}

const walk = (root: object): number => {
  const known = meter.deep?.get(root)
  if (known !== undefined) return known
  let total = 0
  const stack: Array<unknown> = [root]
  while (stack.length > 0 && total <= meter.limit) {
    const v = stack.pop()
    if (typeof v === "string") total += v.length >>> 4
    else if (typeof v !== "object" || v === null) continue
    else if (Array.isArray(v)) {
      total += v.length
      if (total <= meter.limit) for (const x of v) stack.push(x)
    } else if (v instanceof Map || v instanceof Set) {
      total += v.size
      if (total <= meter.limit) for (const x of v.values()) stack.push(x)
    } else if (v instanceof Uint8Array) total += v.length >>> 4
    else
      for (const key in v) {
        total++
        stack.push((v as Record<string, unknown>)[key])
      }
  }
  if (meter.deep === undefined) meter.deep = new Map()
  meter.deep.set(root, total)
  return total
}

const sizeOf = (v: unknown): number => {
  if (typeof v === "string") return v.length >>> 4
  if (typeof v !== "object" || v === null) return 0
  if (Array.isArray(v)) return v.length
  if (v instanceof Map || v instanceof Set) return v.size
  if (v instanceof Uint8Array) return v.length >>> 4
  return 0
}

const firstLine = (e: unknown) => (e instanceof Error ? e.message : String(e)).split("\n")[0]!.trim()

/** The longest run-time error a reason repeats. */
const RUN_ERROR_MAX = 200
/** The library's run-time errors whose message ends with the value it could not use (`Invalid duration string: <value>`). */
const VALUE_CARRYING = new Set([
  "invalid_duration",
  "no_such_key",
  "bool_conversion_error",
  "invalid_regular_expression",
])

/**
 * A run-time error as a reason says it, without the request's data: the value the library names after its first
 * `: ` is left out unless the expression itself holds it (a key the policy names, `No such key: amount`), and the
 * whole is cut at {@link RUN_ERROR_MAX}. A reason is recorded in `policy.evaluated` (and `policy.denied`,
 * `policy.violated`, which webhooks and connectors forward), which never hold the context: `duration(context.s)`
 * copied up to 32 KiB of it there three times.
 */
const runError = (e: unknown, source: string): string => {
  const { code, summary } = (typeof e === "object" && e !== null ? e : {}) as { code?: unknown; summary?: unknown }
  let text = typeof summary === "string" ? summary.split("\n")[0]!.trim() : firstLine(e)
  if (typeof code === "string" && VALUE_CARRYING.has(code)) {
    const colon = text.indexOf(": ")
    if (colon >= 0 && !source.includes(text.slice(colon + 2)))
      text = `${text.slice(0, colon)}: (a value of the request, not shown)`
  }
  return text.length > RUN_ERROR_MAX ? `${text.slice(0, RUN_ERROR_MAX)}…` : text
}

/** Every node under `root` (macro expansions included), each once. */
const nodesOf = (root: CelNode): Array<CelNode> => {
  const NodeClass = (root as object).constructor
  const isNode = (x: unknown): x is CelNode => x instanceof NodeClass
  const seen = new Set<CelNode>()
  const out: Array<CelNode> = []
  const visitValue = (x: unknown): void => {
    if (isNode(x)) visit(x)
    else if (Array.isArray(x)) for (const y of x) visitValue(y)
  }
  const visit = (n: CelNode): void => {
    if (seen.has(n)) return
    seen.add(n)
    out.push(n)
    const m = n.meta
    if (m.alternate) visit(m.alternate)
    if (m.macro) for (const key of ["val", "exp", "args"]) visitValue(m.macro[key])
    if (n.op === "comprehension") {
      const a = n.args as { iterable: unknown; init: unknown; step: unknown }
      visitValue(a.iterable)
      visitValue(a.init)
      visitValue(a.step)
    } else visitValue(n.args)
  }
  visit(root)
  return out
}

/** Elements a comprehension will visit: a list's length, a map's size, an object's keys. */
const elementCount = (v: unknown): number => {
  if (typeof v !== "object" || v === null) return 0
  if (Array.isArray(v)) return v.length
  if (v instanceof Map || v instanceof Set) return v.size
  let n = 0
  for (const _ in v) n++
  return n
}

/**
 * For each comprehension's range, what one element will cost: the nodes of its body. The range
 * pays for every element up front, so a comprehension that cannot finish within the budget
 * stops before its first element instead of failing element by element.
 */
const rangeWeights = (nodes: ReadonlyArray<CelNode>): Map<CelNode, number> => {
  const weights = new Map<CelNode, number>()
  for (const n of nodes) {
    if (n.op !== "comprehension") continue
    const a = n.args as { iterable: CelNode; step: CelNode }
    const range = expanded(a.iterable)
    weights.set(range, (weights.get(range) ?? 0) + nodesOf(a.step).length)
  }
  return weights
}

/** The node that does the work: a macro call (`l.map(…)`) hands evaluation to its expansion. */
const expanded = (n: CelNode): CelNode => {
  while (n.meta.alternate) n = n.meta.alternate
  return n
}

const LITERALS = new Set(["value", "list", "map"])

/** A node's direct operands (a call's receiver and arguments), macro expansions aside. */
const operandsOf = (n: CelNode): Array<CelNode> => {
  const NodeClass = (n as object).constructor
  const out: Array<CelNode> = []
  const visit = (x: unknown): void => {
    if (x instanceof NodeClass) out.push(x as CelNode)
    else if (Array.isArray(x)) for (const y of x) visit(y)
  }
  if (n.op !== "comprehension") visit(n.args)
  return out
}

/**
 * The static bound: what a run can cost at most, in the meter's units, whatever the request.
 * Every node costs 1 plus the size of its result; a comprehension costs its range plus, for
 * each element the range can hold, its body. Sizes are bounded by the expression's literals or,
 * for anything read from the request (or made from it), by {@link INPUT_SIZE_BOUND}; `+` adds
 * its operands' sizes. Inside a comprehension's body, comparisons, `in`, `+` and calls also pay
 * their operands' sizes, since they run once per element; outside one they run once per call,
 * like a leaf's scan, and the meter charges that single pass at run time. Deliberately coarse:
 * the meter enforces the real cost, this only decides what a policy set may hold.
 */
const estimate = (root: CelNode): number => {
  const memos = [new Map<CelNode, { cost: number; size: number }>(), new Map<CelNode, { cost: number; size: number }>()]
  const est = (n0: CelNode, scan: boolean): { cost: number; size: number } => {
    const n = expanded(n0)
    const memo = memos[scan ? 1 : 0]!
    const known = memo.get(n)
    if (known) return known
    let cost = 1
    let size = INPUT_SIZE_BOUND
    if (n.op === "comprehension") {
      const a = n.args as { iterable: CelNode; init: unknown; step: CelNode }
      const range = est(a.iterable, scan)
      const init = a.init instanceof (n as object).constructor ? est(a.init as CelNode, scan).cost : 0
      cost = range.cost + init + range.size * (1 + est(a.step, true).cost) + range.size
      size = range.size
    } else if (n.op === "value") {
      cost = 0
      const v = n.args
      size = typeof v === "string" ? v.length >>> 4 : 0
    } else {
      const operands = operandsOf(n)
      let sizes = 0
      for (const o of operands) {
        const e = est(o, scan)
        cost += e.cost
        sizes += e.size
      }
      if (n.op === "list" || n.op === "map") size = operands.length
      else if (n.op === "+") size = sizes
      else if (n.op === "id" && n.args === "action") size = 0
      // Work that walks its operands: comparisons, membership, calls.
      if (
        scan &&
        (n.op === "==" || n.op === "!=" || n.op === "in" || n.op === "call" || n.op === "rcall" || n.op === "+")
      )
        cost += sizes
    }
    const out = { cost: Math.min(cost, Number.MAX_SAFE_INTEGER), size }
    memo.set(n, out)
    return out
  }
  return Math.min(CEL_MAX_COST, est(root, false).cost)
}

/**
 * The nodes that pay, and whether by depth: comprehension bodies and ranges, `+` and calls
 * by what they produce; non-literal operands of `==`, `!=` and `in` by depth.
 */
const meteredNodes = (nodes: ReadonlyArray<CelNode>): Map<CelNode, "shallow" | "deep"> => {
  const metered = new Map<CelNode, "shallow" | "deep">()
  for (const n of nodes) {
    if (n.op === "+" || n.op === "call" || n.op === "rcall") metered.set(n, "shallow")
    if (n.op === "call" || n.op === "rcall") {
      for (const operand of operandsOf(n)) {
        const node = expanded(operand)
        if (!LITERALS.has(node.op) && !metered.has(node)) metered.set(node, "shallow")
      }
    }
    if (n.op === "comprehension") {
      const a = n.args as { iterable: CelNode; step: CelNode }
      metered.set(expanded(a.iterable), "shallow")
      for (const b of nodesOf(a.step)) if (!metered.has(b)) metered.set(b, "shallow")
    }
  }
  for (const n of nodes) {
    if (n.op !== "==" && n.op !== "!=" && n.op !== "in") continue
    for (const operand of n.args as ReadonlyArray<CelNode>) {
      const node = expanded(operand)
      if (!LITERALS.has(node.op)) metered.set(node, "deep")
    }
  }
  // A macro call forwards to its expansion, which pays for itself.
  for (const n of metered.keys()) if (n.meta.alternate) metered.delete(n)
  return metered
}

/** Replaces a node's evaluator with a metered one (after type-checking has fixed the evaluators). */
const meterNode = (node: CelNode, perElement: number, deep: boolean) => {
  const m = node.meta
  const macro = m.macro
  const inner: EvalFn = macro ? (ev, _ast, ctx) => macro.evaluate(ev, macro, ctx) : m.evaluate
  if (deep) {
    node.evaluate = function meteredDeep(ev, ast, ctx) {
      if (meter.cost > meter.limit) throw COST_EXCEEDED
      const v = inner.call(this, ev, ast, ctx)
      meter.cost += 1 + deepSize(v) + (perElement === 0 ? 0 : perElement * elementCount(v))
      if (meter.cost > meter.limit) throw COST_EXCEEDED
      return v
    }
    return
  }
  node.evaluate = function metered(ev, ast, ctx) {
    // Checked on entry too: comprehensions and `||` / `&&` absorb errors and carry on.
    if (meter.cost > meter.limit) throw COST_EXCEEDED
    const v = inner.call(this, ev, ast, ctx)
    meter.cost += 1 + sizeOf(v) + (perElement === 0 ? 0 : perElement * elementCount(v))
    if (meter.cost > meter.limit) throw COST_EXCEEDED
    return v
  }
}

/** The first segment of each agent field (`trust` of `agent.trust.score`): what `agent.<name>` may name. */
const AGENT_ROOTS: ReadonlySet<string> = new Set(Object.keys(AGENT_FIELDS).map((f) => f.split(".")[1]!))

/** Problems the type checker does not see: forbidden functions, unknown agent fields. */
const lint = (nodes: ReadonlyArray<CelNode>): string | undefined => {
  for (const n of nodes) {
    if (n.op === "call" || n.op === "rcall") {
      const name = (n.args as ReadonlyArray<unknown>)[0]
      const why = typeof name === "string" ? FORBIDDEN_FUNCTIONS.get(name) : undefined
      if (why) return why
    }
    if (n.op === ".") {
      const [target, field] = n.args as [CelNode, string]
      if (target.op === "id" && target.args === "agent" && !AGENT_ROOTS.has(field)) {
        const known = [...AGENT_ROOTS].join(", ")
        return `agent has no field "${field}" (fields: ${known})`
      }
    }
  }
  return undefined
}

// Compiled programs are stateless (the meter is reset per run), so rules that share an
// expression share its program: compiled once, and warm in the JIT for all of them.
const compiledCache = new Map<string, CompiledCel | string>()
const CACHE_SIZE = 4_096

/** Parses, type-checks and meters an expression; a string says why it is refused. */
export const compileCel = (source: string): CompiledCel | string => {
  let compiled = compiledCache.get(source)
  if (compiled === undefined) {
    compiled = compileFresh(source)
    if (compiledCache.size >= CACHE_SIZE) compiledCache.clear()
    compiledCache.set(source, compiled)
  }
  return compiled
}

const compileFresh = (source: string): CompiledCel | string => {
  if (source.trim().length === 0) return "must not be empty"
  if (source.length > LIMITS.celLength) return `must be at most ${LIMITS.celLength} characters`
  let parsed: ParseResult
  try {
    parsed = environment.parse(source)
  } catch (e) {
    return `does not parse: ${firstLine(e)}`
  }
  const checked = parsed.check()
  if (!checked.valid) return `does not type-check: ${firstLine(checked.error)}`
  if (checked.type !== "bool" && checked.type !== "dyn") return `must produce a bool, not ${checked.type}`
  const nodes = nodesOf(parsed.ast as unknown as CelNode)
  const problem = lint(nodes)
  if (problem) return problem
  const weights = rangeWeights(nodes)
  for (const [n, kind] of meteredNodes(nodes)) meterNode(n, weights.get(n) ?? 0, kind === "deep")

  const worstCost = estimate(parsed.ast as unknown as CelNode)
  const run = (activation: CelActivation, limit = CEL_MAX_COST): CelOutcome => {
    meter.cost = 0
    meter.limit = limit < CEL_MAX_COST ? limit : CEL_MAX_COST
    meter.deep = undefined
    let v: unknown
    let error: unknown
    try {
      v = parsed(activation as unknown as Record<string, unknown>)
    } catch (e) {
      error = e
    }
    meter.deep = undefined
    // An exceeded budget wins even when `||`, `&&` or a comprehension absorbed the error.
    if (meter.cost > meter.limit) return `CEL cost limit of ${meter.limit} exceeded`
    if (error !== undefined) return `CEL error: ${runError(error, source)}`
    if (v === true || v === false) return v
    if (v instanceof Promise) {
      v.catch(() => undefined)
      return "CEL expression did not complete synchronously"
    }
    return `CEL expression produced ${v === null ? "null" : typeof v}, not a bool`
  }
  return { source, run, worstCost }
}
