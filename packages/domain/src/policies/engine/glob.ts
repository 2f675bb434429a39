/**
 * Globs over dotted names (`tool.fs.read`), used for rule actions and the `glob` operator.
 *
 * - `*` matches any run of characters except `.`, the empty run included: `tool.*` matches
 *   `tool.read`, not `tool.fs.read`.
 * - `**` matches any run of characters, dots included: `tool.**` matches `tool.read` and
 *   `tool.fs.read`; `db.**.drop` matches `db.main.users.drop`.
 * - A pattern that is exactly `*` matches everything (it reads as "any action").
 * - Every other character is literal; there is no escaping, no `?`, no classes and no
 *   regular expression anywhere.
 *
 * Matching is a simulation of the pattern's automaton over the subject, one pass, no
 * backtracking: time is at most (subject length) × (number of active states), and the
 * number of active states is bounded by the number of stars (at most {@link GLOB_MAX_STARS}).
 */

export const GLOB_MAX_LENGTH = 256
export const GLOB_MAX_STARS = 16

/** One step of a compiled pattern: a literal character code, or a star. */
const STAR = -1 // `*`: any character but `.`
const GLOBSTAR = -2 // `**`: any character
const DOT = 46

export interface Glob {
  readonly source: string
  readonly kind: "all" | "exact" | "segment" | "deep" | "general"
  /** exact: the literal; segment (`P.*`) and deep (`P.**`): the prefix `P.`; otherwise the literal text before the first star. */
  readonly prefix: string
  /** Literal text after the last star ("" for exact and all). */
  readonly suffix: string
  readonly test: (subject: string) => boolean
  /**
   * The automaton's part of `test`, for a pattern of two stars or more (`states` > 0): `screen` is its literal checks
   * (prefix, suffix, the longest inner literal; a subject they refuse does not match), `automaton` the run that
   * decides the rest. `test(s)` is `screen(s) && automaton(s)`. A caller that meters its work (a `glob` condition)
   * pays `subject.length × states` before running the automaton. For other patterns `screen` is `test`, `automaton`
   * is undefined and `states` 0.
   */
  readonly screen: (subject: string) => boolean
  readonly automaton: ((subject: string) => boolean) | undefined
  /** The most states the automaton holds active at once (see `cost`); 0 when the pattern has no automaton. */
  readonly states: number
  /**
   * What one `test` of a subject of this length can cost at most, in the evaluation budget's units (about 10 ns
   * each): 1, plus 1 for every 16 characters its literal checks may compare, plus, for a pattern of two stars or more
   * whose literal checks a subject may pass, one per character and state the automaton may hold active at once.
   */
  readonly cost: (subjectLength: number) => number
}

/** Literal checks: a comparison or a scan of the subject, 1 unit per 16 characters (the engine's string rate). */
const literalCost = (subjectLength: number) => 1 + Math.ceil(subjectLength / 16)

/**
 * How many of the automaton's states can be active at once, at most: one in the literal text before the first star;
 * then, for each star, the star itself and, in the literal run after it, the positions `j` such that the run's first
 * `j` characters end the subject read so far. Two such positions are borders of one another, so they lie on one
 * chain of the run's borders (its KMP failure links): at most the longest such chain. `*a*a*a` holds every state;
 * `*.delete` two.
 */
const activeStatesBound = (tokens: Int32Array): number => {
  let bound = 1
  let i = 0
  while (i < tokens.length && tokens[i]! >= 0) i++
  while (i < tokens.length) {
    i++ // the star
    let end = i
    while (end < tokens.length && tokens[end]! >= 0) end++
    const run = tokens.subarray(i, end)
    // depth[j]: the length of the border chain of the run's first j characters (j itself included).
    const fail = new Int32Array(run.length + 1)
    const depth = new Int32Array(run.length + 1)
    let longest = 0
    for (let j = 1; j <= run.length; j++) {
      let k = j === 1 ? 0 : fail[j - 1]!
      while (k > 0 && run[k] !== run[j - 1]) k = fail[k]!
      fail[j] = j > 1 && run[k] === run[j - 1] ? k + 1 : 0
      depth[j] = 1 + depth[fail[j]!]!
      if (depth[j]! > longest) longest = depth[j]!
    }
    bound += 1 + longest
    i = end
  }
  return bound
}

/** Why a pattern is refused, or undefined when it is a valid glob. */
export const globProblem = (pattern: string): string | undefined => {
  if (pattern.length === 0) return "must not be empty"
  if (pattern.length > GLOB_MAX_LENGTH) return `must be at most ${GLOB_MAX_LENGTH} characters`
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\s\u0000-\u001f\u007f]/.test(pattern)) return "must not contain whitespace or control characters"
  if (pattern.includes("***")) return "`***` is not a glob: use `*` (within a segment) or `**` (across segments)"
  let stars = 0
  for (let i = 0; i < pattern.length; i++) {
    if (pattern.charCodeAt(i) === 42) {
      stars++
      if (pattern.charCodeAt(i + 1) === 42) i++
    }
  }
  if (stars > GLOB_MAX_STARS) return `must have at most ${GLOB_MAX_STARS} wildcards`
  return undefined
}

const tokenize = (pattern: string): Int32Array => {
  const out: Array<number> = []
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern.charCodeAt(i)
    if (c === 42) {
      if (pattern.charCodeAt(i + 1) === 42) {
        out.push(GLOBSTAR)
        i++
      } else out.push(STAR)
    } else out.push(c)
  }
  return Int32Array.from(out)
}

let automatonRunCount = 0
/**
 * How many times an automaton has run in this process, any pattern's (`test` past the literal checks, or a `glob`
 * condition's `automaton`): what tests count to show that a path does not run one per pattern, instead of timing it.
 * One increment a run, on the path that then reads the whole subject.
 */
export const automatonRuns = (): number => automatonRunCount

/**
 * The automaton: state i means "tokens[0..i) consumed". Star states loop on themselves and
 * may be skipped (an empty run). Two preallocated state lists are swapped per character,
 * with a generation stamp per state instead of clearing a set.
 */
const automaton = (tokens: Int32Array) => {
  const m = tokens.length
  let current = new Int32Array(m + 1)
  let next = new Int32Array(m + 1)
  const stamp = new Uint32Array(m + 1)
  let generation = 0

  // Adds state s and everything reachable from it by skipping stars, once per generation.
  const add = (list: Int32Array, size: number, s: number): number => {
    while (true) {
      if (stamp[s] === generation) return size
      stamp[s] = generation
      list[size++] = s
      if (s < m && tokens[s]! < 0) s++
      else return size
    }
  }
  const nextGeneration = () => {
    if (++generation === 0xffffffff) {
      stamp.fill(0)
      generation = 1
    }
  }

  return (subject: string): boolean => {
    automatonRunCount++
    nextGeneration()
    let currentSize = add(current, 0, 0)
    let nextSize = 0
    for (let i = 0; i < subject.length && currentSize > 0; i++) {
      const c = subject.charCodeAt(i)
      nextGeneration()
      nextSize = 0
      for (let k = 0; k < currentSize; k++) {
        const s = current[k]!
        if (s === m) continue
        const t = tokens[s]!
        if (t === GLOBSTAR || (t === STAR && c !== DOT)) nextSize = add(next, nextSize, s)
        else if (t === c) nextSize = add(next, nextSize, s + 1)
      }
      const swap = current
      current = next
      next = swap
      currentSize = nextSize
    }
    for (let k = 0; k < currentSize; k++) if (current[k] === m) return true
    return false
  }
}

/** A pattern decided by its literal checks alone: no automaton. */
const literalGlob = (g: Omit<Glob, "screen" | "automaton" | "states">): Glob => ({
  ...g,
  screen: g.test,
  automaton: undefined,
  states: 0,
})

/** Compiles a valid pattern (see {@link globProblem}); the result is safe to call on any string. */
export const compileGlob = (source: string): Glob => {
  if (source === "*" || source === "**")
    return literalGlob({ source, kind: "all", prefix: "", suffix: "", test: () => true, cost: () => 1 })
  const first = source.indexOf("*")
  if (first === -1)
    return literalGlob({
      source,
      kind: "exact",
      prefix: source,
      suffix: "",
      test: (s) => s === source,
      cost: literalCost,
    })
  const last = source.lastIndexOf("*")
  const prefix = source.slice(0, first)
  const suffix = source.slice(last + 1)
  const rest = source.slice(first)
  const lastDotBeforeStar = prefix.endsWith(".")
  if (lastDotBeforeStar && suffix === "" && (rest === "*" || rest === "**")) {
    const deep = rest === "**"
    const n = prefix.length
    return literalGlob({
      source,
      kind: deep ? "deep" : "segment",
      prefix,
      suffix,
      test: deep
        ? (s) => s.length >= n && s.startsWith(prefix)
        : (s) => s.length >= n && s.startsWith(prefix) && s.indexOf(".", n) === -1,
      cost: literalCost,
    })
  }
  const tokens = tokenize(source)
  let stars = 0
  for (const t of tokens) if (t < 0) stars++
  if (stars === 1) {
    // `P*S` or `P**S`: the literal ends decide, and a `*` only that the text between them has no dot. No automaton.
    const deep = rest.startsWith("**")
    const n = prefix.length
    return literalGlob({
      source,
      kind: "general",
      prefix,
      suffix,
      test: (s) => {
        if (s.length < n + suffix.length || !s.startsWith(prefix) || !s.endsWith(suffix)) return false
        if (deep) return true
        const dot = s.indexOf(".", n)
        return dot === -1 || dot >= s.length - suffix.length
      },
      cost: literalCost,
    })
  }
  const run = automaton(tokens)
  const active = activeStatesBound(tokens)
  const minLength = prefix.length + suffix.length
  // The longest literal between two stars: a subject that lacks it cannot match. The automaton costs tens of
  // nanoseconds a character, and the action index tries every such pattern on each action it has not seen: 50,000
  // patterns like `*3.7.12*` took a second per new 200-character action, which any guard caller chooses.
  let inner = ""
  for (const piece of source.slice(first, last + 1).split("*")) if (piece.length > inner.length) inner = piece
  // The literal ends and the longest inner literal rule most subjects out before the automaton runs.
  const screen =
    inner === ""
      ? (s: string) => s.length >= minLength && s.startsWith(prefix) && s.endsWith(suffix)
      : (s: string) =>
          s.length >= minLength + inner.length && s.startsWith(prefix) && s.endsWith(suffix) && s.includes(inner)
  return {
    source,
    kind: "general",
    prefix,
    suffix,
    test: (s) => screen(s) && run(s),
    screen,
    automaton: run,
    states: active,
    cost: (subjectLength) => literalCost(subjectLength) + subjectLength * active,
  }
}
