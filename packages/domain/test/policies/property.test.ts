import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  type AgentFacts,
  compilePolicies,
  evaluate,
  InMemoryRateCounter,
  OPERATORS,
  validatePolicyDocument,
} from "../../src/policies/engine/index.ts"

/**
 * The compiled, indexed evaluator against a reference that reads the raw documents directly:
 * a linear scan over every rule, a backtracking glob straight from the definition, and
 * three-valued logic written out. Random policy sets, random requests; they must agree on
 * the decision, every reason's code and rule, the matched rules in order, and the approval.
 * (Rate conditions are left out: their counts depend on evaluation order by design. CEL is
 * left out: the reference would need a second CEL.)
 */

type Outcome = "T" | "F" | "E"
type Json = unknown

// ── the reference ──────────────────────────────────────────────────────────
const refGlob = (p: string, s: string): boolean => {
  if (p === "*") return true
  const go = (i: number, j: number): boolean => {
    if (i === p.length) return j === s.length
    if (p.startsWith("**", i)) {
      for (let k = j; k <= s.length; k++) if (go(i + 2, k)) return true
      return false
    }
    if (p[i] === "*") {
      for (let k = j; k <= s.length; k++) {
        if (go(i + 1, k)) return true
        if (s[k] === ".") return false
      }
      return false
    }
    return j < s.length && p[i] === s[j] && go(i + 1, j + 1)
  }
  return go(0, 0)
}

const refField = (field: string, req: RefRequest): Json => {
  if (field === "action") return req.action
  if (field.startsWith("agent.")) {
    const v = (req.agent as unknown as Record<string, Json>)[field.slice(6)]
    return v === null ? undefined : v
  }
  let cur: Json = req.context
  for (const key of field.slice("context.".length).split(".")) {
    if (Array.isArray(cur)) cur = /^\d+$/.test(key) ? cur[Number(key)] : undefined
    else if (typeof cur === "object" && cur !== null && Object.hasOwn(cur, key))
      cur = (cur as Record<string, Json>)[key]
    else return undefined
  }
  return cur
}

const jsonKind = (v: Json) => (v === null ? "null" : typeof v)

const refLeaf = (c: { field: string; op: string; value?: Json }, req: RefRequest): Outcome => {
  const v = refField(c.field, req)
  const fromRequest = c.field.startsWith("context.")
  const b = (x: boolean): Outcome => (x ? "T" : "F")
  if (c.op === "exists") return b((v !== undefined) === (c.value ?? true))
  if (v === undefined) return "E"
  const w = c.value
  switch (c.op) {
    case "eq":
    case "ne": {
      const same = w === null ? v === null : jsonKind(v) !== jsonKind(w) ? undefined : v === w
      if (same === undefined) return "E"
      return b(c.op === "eq" ? same : !same)
    }
    case "gt":
    case "gte":
    case "lt":
    case "lte": {
      if (typeof v !== typeof w) return "E"
      const [x, y] = [v as number, w as number]
      return b(c.op === "gt" ? x > y : c.op === "gte" ? x >= y : c.op === "lt" ? x < y : x <= y)
    }
    case "between": {
      const [lo, hi] = w as [number, number]
      if (typeof v !== typeof lo) return "E"
      return b((v as number) >= lo && (v as number) <= hi)
    }
    case "in":
    case "nin": {
      const list = w as Array<Json>
      const typed = (x: Json) => list.some((y) => jsonKind(y) === jsonKind(x))
      let found: boolean
      if (Array.isArray(v) && !fromRequest) found = v.some((x) => list.includes(x))
      else if (Array.isArray(v)) {
        // The request's list: each element typed as a scalar would be; all in or none in, else unknown.
        if (v.some((x) => !list.includes(x) && !typed(x))) return "E"
        const inside = v.filter((x) => list.includes(x)).length
        if (inside > 0 && inside < v.length) return "E"
        found = v.length > 0 && inside === v.length
      } else if (!typed(v)) return "E"
      else found = list.includes(v)
      return b(c.op === "in" ? found : !found)
    }
    case "contains":
      if (Array.isArray(v)) {
        if (v.includes(w) || !fromRequest) return b(v.includes(w))
        // The request's list lacks the value: unknown when an element could be it sent another way.
        if (v.some((x) => jsonKind(x) !== jsonKind(w))) return "E"
        if (typeof w === "string" && v.some((x) => (x as string).includes(w))) return "E"
        return "F"
      }
      if (typeof v === "string" && typeof w === "string") return b(v.includes(w))
      return "E"
    case "startsWith":
      return typeof v === "string" ? b(v.startsWith(w as string)) : "E"
    case "endsWith":
      return typeof v === "string" ? b(v.endsWith(w as string)) : "E"
    case "glob":
      return typeof v === "string" ? b(refGlob(w as string, v)) : "E"
  }
  throw new Error(`no such op ${c.op}`)
}

const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
const minutesOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3))

/** UTC windows only, computed from the Date's UTC fields (the engine goes through Intl). */
const refWindow = (w: { days?: Array<string>; from: string; to: string }, now: number): boolean => {
  const d = new Date(now)
  const t = d.getUTCHours() * 60 + d.getUTCMinutes()
  const today = DAYS[d.getUTCDay()]!
  const yesterday = DAYS[(d.getUTCDay() + 6) % 7]!
  const on = (day: string) => w.days === undefined || w.days.includes(day)
  const [from, to] = [minutesOf(w.from), minutesOf(w.to)]
  if (from < to) return t >= from && t < to && on(today)
  return (t >= from && on(today)) || (t < to && on(yesterday))
}

const refCondition = (c: any, req: RefRequest): Outcome => {
  if (c.all) {
    const rs = c.all.map((x: unknown) => refCondition(x, req))
    return rs.includes("F") ? "F" : rs.includes("E") ? "E" : "T"
  }
  if (c.any) {
    const rs = c.any.map((x: unknown) => refCondition(x, req))
    return rs.includes("T") ? "T" : rs.includes("E") ? "E" : "F"
  }
  if (c.not) {
    const r = refCondition(c.not, req)
    return r === "E" ? "E" : r === "T" ? "F" : "T"
  }
  if (c.time) return refWindow(c.time, req.now) ? "T" : "F"
  return refLeaf(c, req)
}

interface RefRequest {
  action: string
  context: Record<string, Json>
  agent: AgentFacts
  now: number
}

interface Summary {
  decision: string
  reasons: Array<string>
  matched: Array<string>
  approval?: unknown
}

const reference = (docs: Array<any>, req: RefRequest, guardDefault: "allow" | "deny"): Summary => {
  if (req.agent.status === "suspended") return { decision: "deny", reasons: ["AGENT_SUSPENDED"], matched: [] }
  if (req.agent.status === "deregistered") return { decision: "deny", reasons: ["AGENT_DEREGISTERED"], matched: [] }
  const matched: Array<string> = []
  const deny: Array<string> = []
  const approve: Array<string> = []
  const allow: Array<string> = []
  const notes: Array<string> = []
  let approval: unknown
  const asking: Array<{ pid: string; tag: string; rule: any }> = []
  docs.forEach((doc, i) => {
    const pid = `pol_${i + 1}`
    if (doc.enabled === false) return
    const mode = doc.mode ?? "enforce"
    const t = doc.target
    if (t && !(t.agentIds?.includes(req.agent.id) || t.labels?.some((l: string) => req.agent.labels.includes(l))))
      return
    for (const r of doc.rules) {
      if (!r.actions.some((p: string) => refGlob(p, req.action))) continue
      const outcome = r.when ? refCondition(r.when, req) : "T"
      if (outcome === "F") continue
      const tag = `${pid}/${r.id}`
      let code = r.effect === "deny" ? "POLICY_DENIED" : r.effect === "allow" ? "POLICY_ALLOWED" : "APPROVAL_REQUIRED"
      if (outcome === "E") {
        if (r.effect === "allow" || mode === "monitor") notes.push(`CONDITION_ERROR ${tag}`)
        if (r.effect === "allow") continue
        code = "CONDITION_ERROR"
      }
      matched.push(`${tag}/${r.effect}/${mode}`)
      if (mode === "monitor") {
        notes.push(`POLICY_MONITORED ${tag}`)
        continue
      }
      if (r.effect === "deny") deny.push(`${code} ${tag}`)
      else if (r.effect === "allow") allow.push(`${code} ${tag}`)
      else {
        approve.push(`${code} ${tag}`)
        asking.push({ pid, tag, rule: r })
      }
    }
  })
  // Every matched approval rule binds the approval: the first names it, the shortest time-out applies, and only a
  // credential every rule naming approvers names may decide; rules naming nobody in common deny (fail closed).
  if (deny.length === 0 && asking.length > 0) {
    let approvers: Array<string> | undefined
    for (const { tag, rule } of asking) {
      const named: Array<string> | undefined = rule.approval?.approvers
      if (named === undefined) continue
      approvers = approvers === undefined ? [...named] : approvers.filter((x) => named.includes(x))
      if (approvers.length === 0) {
        deny.push(`CONDITION_ERROR ${tag}`)
        break
      }
    }
    approval = {
      policyId: asking[0]!.pid,
      ruleId: asking[0]!.rule.id,
      timeoutSeconds: Math.min(...asking.map((a) => a.rule.approval?.timeoutSeconds ?? 3600)),
      ...(approvers ? { approvers } : {}),
    }
  }
  const [decision, deciding] =
    deny.length > 0
      ? ["deny", deny]
      : approve.length > 0
        ? ["require_approval", approve]
        : allow.length > 0
          ? ["allow", allow]
          : [guardDefault, ["NO_MATCHING_POLICY"]]
  return {
    decision,
    reasons: [...deciding, ...notes],
    matched,
    ...(decision === "require_approval" ? { approval } : {}),
  }
}

// ── generators ─────────────────────────────────────────────────────────────
const ACTIONS = [
  "tool.read",
  "tool.fs.read",
  "tool.fs.write",
  "db.main.drop",
  "db.users.drop",
  "payments.transfer",
  "email.send",
  "x",
  "tool.",
]
const segment = fc.constantFrom(
  "tool",
  "fs",
  "read",
  "write",
  "db",
  "main",
  "drop",
  "payments",
  "transfer",
  "email",
  "send",
  "x",
  "*",
  "**",
  "t*",
  "*s",
  "*.*",
  "d**p",
)
const pattern = fc
  .array(segment, { minLength: 1, maxLength: 4 })
  .map((s) => s.join("."))
  .filter((p) => !p.includes("***"))
const glob = fc.oneof(pattern, fc.constantFrom("*", "**", "tool.*", "tool.**", "db.**.drop", "*.send"))

const scalar = fc.oneof(
  fc.constantFrom(0, 1, 5, 10, 100, -3, 2.5),
  fc.constantFrom("a", "b", "prod", "dev", "2026-01-01", "2026-06-30", "tool.fs.read", ""),
  fc.boolean(),
  fc.constant(null),
)
const value: fc.Arbitrary<Json> = fc.oneof(
  { weight: 4, arbitrary: scalar },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.record({ x: scalar }, { requiredKeys: [] }) },
)
const context = fc.record({ a: value, b: value, n: value }, { requiredKeys: [] })

const FIELDS = [
  "context.a",
  "context.b",
  "context.n.x",
  "context.a.0",
  "action",
  "agent.labels",
  "agent.trustScore",
  "agent.version",
  "agent.id",
  "agent.trustTier",
]
const opValue = (op: string): fc.Arbitrary<Json> => {
  switch (op) {
    case "exists":
      return fc.option(fc.boolean(), { nil: undefined })
    case "gt":
    case "gte":
    case "lt":
    case "lte":
      return fc.oneof(fc.constantFrom(0, 5, 10, 2.5), fc.constantFrom("2026-01-01", "b", "m"))
    case "between":
      return fc.oneof(
        fc.tuple(fc.constantFrom(0, 1, 5), fc.constantFrom(5, 10, 100)),
        fc.tuple(fc.constantFrom("2026-01-01", "a"), fc.constantFrom("2026-12-31", "prod")),
      )
    case "in":
    case "nin":
      return fc.array(scalar, { minLength: 1, maxLength: 4 })
    case "startsWith":
    case "endsWith":
      return fc.constantFrom("a", "pro", "tool.", "01", "v")
    case "glob":
      return glob
    default:
      return scalar
  }
}
const leafCondition = fc
  .tuple(fc.constantFrom(...FIELDS), fc.constantFrom(...OPERATORS))
  .chain(([field, op]) => opValue(op).map((v) => (v === undefined ? { field, op } : { field, op, value: v })))
  // A typed field (action, agent.*) with a value of another type is refused at save: not a case to evaluate.
  .filter(
    (when) => validatePolicyDocument({ name: "x", rules: [{ id: "r", effect: "deny", actions: ["x"], when }] }).ok,
  )
const timeCondition = fc
  .record({
    days: fc.option(fc.subarray(DAYS, { minLength: 1 }), { nil: undefined }),
    from: fc.constantFrom("00:00", "06:30", "09:00", "22:00"),
    to: fc.constantFrom("00:00", "06:00", "17:00", "23:59", "24:00"),
  })
  .filter((w) => w.from !== w.to)
  .map((w) => ({ time: { ...(w.days ? { days: w.days } : {}), from: w.from, to: w.to, tz: "UTC" } }))

const condition: fc.Arbitrary<unknown> = fc.letrec<{ c: unknown }>((tie) => ({
  c: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    { weight: 5, arbitrary: leafCondition },
    { weight: 1, arbitrary: timeCondition },
    { weight: 2, arbitrary: fc.array(tie("c"), { minLength: 1, maxLength: 3 }).map((all) => ({ all })) },
    { weight: 2, arbitrary: fc.array(tie("c"), { minLength: 1, maxLength: 3 }).map((any) => ({ any })) },
    { weight: 1, arbitrary: tie("c").map((not) => ({ not })) },
  ),
})).c

const ruleArb = fc.record(
  {
    effect: fc.constantFrom("allow", "deny", "require_approval"),
    actions: fc.array(glob, { minLength: 1, maxLength: 3 }),
    when: condition,
    timeoutSeconds: fc.constantFrom(60, 600, 3600),
    approvers: fc.constantFrom(["ops"], ["a", "b"]),
  },
  { requiredKeys: ["effect", "actions"] },
)

const policyArb = fc
  .record(
    {
      name: fc.constantFrom("alpha", "beta"),
      enabled: fc.boolean(),
      mode: fc.constantFrom("enforce", "monitor"),
      target: fc.oneof(
        fc.record({ agentIds: fc.subarray(["agt_1", "agt_2"], { minLength: 1 }) }),
        fc.record({ labels: fc.subarray(["prod", "dev"], { minLength: 1 }) }),
      ),
      rules: fc.array(ruleArb, { minLength: 1, maxLength: 5 }),
    },
    { requiredKeys: ["name", "rules"] },
  )
  .map((p) => ({
    ...p,
    rules: p.rules.map((r, i) => {
      const { timeoutSeconds, approvers, ...rest } = r
      const approval =
        r.effect === "require_approval" && timeoutSeconds !== undefined
          ? { approval: { timeoutSeconds, ...(approvers ? { approvers } : {}) } }
          : {}
      return { id: `r${i}`, ...rest, ...approval }
    }),
  }))

/** Only documents the validator accepts: a leaf may pair a typed field with a value of another type. */
const policies = fc
  .array(policyArb, { minLength: 1, maxLength: 4 })
  .filter((docs) => docs.every((d) => validatePolicyDocument(d).ok))

const agentArb = fc.record({
  id: fc.constantFrom("agt_1", "agt_2", "agt_3"),
  name: fc.constant("bot"),
  status: fc.constantFrom("active", "active", "active", "active", "suspended", "deregistered"),
  labels: fc.subarray(["prod", "dev", "a"]),
  version: fc.option(fc.constantFrom("1.0.0", "prod"), { nil: undefined }),
  trustScore: fc.option(fc.constantFrom(0, 5, 400, 900), { nil: undefined }),
  trustTier: fc.option(fc.constantFrom("a", "prod"), { nil: null }),
})

const request = fc.record({
  action: fc.oneof(
    fc.constantFrom(...ACTIONS),
    pattern.map((p) => p.replaceAll("*", "z")),
  ),
  context,
  agent: agentArb,
  now: fc.integer({ min: Date.parse("2026-01-01T00:00:00Z"), max: Date.parse("2026-12-31T23:59:59Z") }),
})

describe("the compiled evaluator agrees with the reference", () => {
  it("on random policy sets and requests", () => {
    fc.assert(
      fc.property(
        policies,
        fc.array(request, { minLength: 1, maxLength: 8 }),
        fc.constantFrom("allow", "deny"),
        (docs, requests, guardDefault) => {
          const set = compilePolicies(
            docs.map((d, i) => {
              const r = validatePolicyDocument(d)
              if (!r.ok) throw new Error("filtered above")
              return { id: `pol_${i + 1}`, version: 1, document: r.document }
            }),
          )
          const rate = new InMemoryRateCounter()
          for (const req of requests) {
            const got = evaluate(set, req, { now: req.now, guardDefault, rate })
            const want = reference(docs, req, guardDefault as "allow" | "deny")
            expect({
              decision: got.decision,
              reasons: got.reasons.map((r) => (r.ruleId ? `${r.code} ${r.policyId}/${r.ruleId}` : r.code)),
              matched: got.matched.map((m) => `${m.policyId}/${m.ruleId}/${m.effect}/${m.mode}`),
              ...(got.approval ? { approval: got.approval } : {}),
            }).toEqual(want)
            expect(got.allowed).toBe(got.decision === "allow")
          }
        },
      ),
      { numRuns: 400 },
    )
  })

  it("the glob matcher agrees with the backtracking definition", () => {
    const subject = fc.oneof(
      fc.constantFrom(...ACTIONS),
      fc.stringMatching(/^[a-z.]{0,12}$/),
      pattern.map((p) => p.replaceAll("*", "")),
    )
    fc.assert(
      fc.property(glob, subject, (p, s) => {
        const set = compilePolicies([
          {
            id: "pol_1",
            version: 1,
            document: { name: "g", enabled: true, mode: "enforce", rules: [{ id: "r", effect: "deny", actions: [p] }] },
          },
        ])
        const got = evaluate(
          set,
          { action: s, context: {}, agent: { id: "a", name: "a", status: "active", labels: [] } },
          { now: 0, guardDefault: "allow", rate: new InMemoryRateCounter() },
        )
        expect(got.decision === "deny").toBe(refGlob(p, s))
      }),
      { numRuns: 2_000 },
    )
  })
})
