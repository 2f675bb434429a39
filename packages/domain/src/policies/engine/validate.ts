import { Schema } from "effect"
import { ENFORCEMENT_TYPES } from "../../enforcement/Enforcement.ts"
import { isJsonObject, Label } from "../../shared/schemas.ts"
import { compileCel } from "./cel.ts"
import { globProblem } from "./glob.ts"
import {
  AGENT_FIELDS,
  type Approval,
  type Condition,
  EFFECTS,
  LIMITS,
  MODES,
  type Mode,
  OPERATORS,
  type Operator,
  type PolicyDocument,
  RATE_PERIODS,
  RATE_SCOPES,
  type RateLimit,
  type Rule,
  type RuleEffect,
  type RuleEnforcement,
  type Target,
  type TimeWindow,
  WEEKDAYS,
  type Weekday,
} from "./language.ts"
import { parseHhMm, zoneFormatter } from "./timeWindow.ts"

/** One problem of a policy document: `field` is a path like `rules[2].when.all[0].op` ("" is the document itself). */
export interface PolicyIssue {
  readonly field: string
  readonly issue: string
}

export type PolicyValidation =
  | { readonly ok: true; readonly document: PolicyDocument }
  | { readonly ok: false; readonly issues: ReadonlyArray<PolicyIssue> }

/** The JSON type a leaf's field holds, when the field says so. */
export type FieldType = "string" | "number" | "array" | "any"

/**
 * The JSON type of a leaf field (`action`, `agent.*`, `context.<path>`), the path of a
 * `context.` field, or why the field is not one.
 */
export const parseField = (
  field: string,
): { readonly type: FieldType; readonly contextPath?: ReadonlyArray<string> } | string => {
  if (field === "action") return { type: "string" }
  if (field in AGENT_FIELDS) return { type: AGENT_FIELDS[field as keyof typeof AGENT_FIELDS] }
  if (field.startsWith("context.")) {
    const segments = field.slice("context.".length).split(".")
    if (segments.some((s) => s.length === 0)) return `"${field}" has an empty path segment`
    if (segments.length > LIMITS.contextPathSegments)
      return `"${field}" has more than ${LIMITS.contextPathSegments} path segments`
    return { type: "any", contextPath: segments }
  }
  return `unknown field "${field}": use action, context.<path> or one of ${Object.keys(AGENT_FIELDS).join(", ")}`
}

const typeName = (v: unknown): string =>
  v === null ? "null" : Array.isArray(v) ? "a list" : typeof v === "object" ? "an object" : `a ${typeof v}`

const isScalar = (v: unknown): v is string | number | boolean | null =>
  v === null || typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v))

const at = (path: string, key: string) => (path === "" ? key : `${path}.${key}`)
const isLabel = Schema.is(Label)

/** A leaf value that failed its checks (undefined already means "no value", for exists). */
const INVALID: unique symbol = Symbol("invalid")

const CONDITION_KINDS = ["all", "any", "not", "time", "rate", "cel"] as const
const LEAF_KEYS = ["field", "op", "value"] as const
const CONDITION_SHAPES = "{all: […]}, {any: […]}, {not: …}, {field, op, value}, {time: …}, {rate: …} or {cel: …}"

/** Collects issues in document order; every check names the exact field it is about. */
class Validator {
  readonly issues: Array<PolicyIssue> = []
  nodes = 0

  add(field: string, issue: string) {
    if (this.issues.length < LIMITS.issues) this.issues.push({ field, issue })
  }

  unknownKeys(o: Record<string, unknown>, path: string, allowed: ReadonlyArray<string>) {
    for (const key of Object.keys(o)) {
      if (!allowed.includes(key)) this.add(at(path, key), `unknown field (allowed here: ${allowed.join(", ")})`)
    }
  }

  string(v: unknown, path: string, max: number, required: boolean): string | undefined {
    if (v === undefined) {
      if (required) this.add(path, "is required")
      return undefined
    }
    if (typeof v !== "string") return void this.add(path, `must be a string, not ${typeName(v)}`)
    if (v.length === 0) return void this.add(path, "must not be empty")
    if (v.length > max) return void this.add(path, `must be at most ${max} characters`)
    return v
  }

  literal<T extends string>(v: unknown, path: string, allowed: ReadonlyArray<T>): T | undefined {
    if (typeof v === "string" && (allowed as ReadonlyArray<string>).includes(v)) return v as T
    this.add(path, `must be one of ${allowed.join(", ")}`)
    return undefined
  }

  list(v: unknown, path: string, min: number, max: number): ReadonlyArray<unknown> | undefined {
    if (!Array.isArray(v)) return void this.add(path, `must be a list, not ${typeName(v)}`)
    if (v.length < min)
      return void this.add(path, min === 1 ? "must not be empty" : `must have at least ${min} entries`)
    if (v.length > max) return void this.add(path, `must have at most ${max} entries`)
    return v
  }

  document(input: unknown): PolicyDocument | undefined {
    if (!isJsonObject(input)) return void this.add("", `a policy document must be an object, not ${typeName(input)}`)
    this.unknownKeys(input, "", ["name", "description", "enabled", "mode", "target", "rules"])
    const name = this.string(input.name, "name", LIMITS.nameLength, true)
    const description = this.string(input.description, "description", LIMITS.descriptionLength, false)
    let enabled = true
    if (input.enabled !== undefined) {
      if (typeof input.enabled === "boolean") enabled = input.enabled
      else this.add("enabled", `must be true or false, not ${typeName(input.enabled)}`)
    }
    let mode: Mode = "enforce"
    if (input.mode !== undefined) mode = this.literal(input.mode, "mode", MODES) ?? mode
    const target = input.target === undefined ? undefined : this.target(input.target, "target")
    const rules: Array<Rule> = []
    if (input.rules === undefined) this.add("rules", "is required: a policy has 1 to 1000 rules")
    else {
      const list = this.list(input.rules, "rules", 1, LIMITS.rules)
      const firstUse = new Map<string, number>()
      list?.forEach((r, i) => {
        const rule = this.rule(r, `rules[${i}]`)
        if (rule === undefined) return
        const first = firstUse.get(rule.id)
        if (first !== undefined) this.add(`rules[${i}].id`, `duplicate rule id "${rule.id}" (also rules[${first}].id)`)
        else firstUse.set(rule.id, i)
        rules.push(rule)
      })
    }
    if (this.issues.length > 0 || name === undefined) return undefined
    return {
      name,
      ...(description === undefined ? {} : { description }),
      enabled,
      mode,
      ...(target === undefined ? {} : { target }),
      rules,
    }
  }

  target(v: unknown, path: string): Target | undefined {
    if (!isJsonObject(v)) return void this.add(path, `must be an object {agentIds?, labels?}, not ${typeName(v)}`)
    this.unknownKeys(v, path, ["agentIds", "labels"])
    if (v.agentIds === undefined && v.labels === undefined) {
      return void this.add(path, "names no agent: give agentIds, labels or both (omit target for every agent)")
    }
    const out: { agentIds?: Array<string>; labels?: Array<string> } = {}
    if (v.agentIds !== undefined) {
      const list = this.list(v.agentIds, at(path, "agentIds"), 1, LIMITS.targetEntries)
      if (list) out.agentIds = list.map((id, i) => this.string(id, `${path}.agentIds[${i}]`, 200, true) ?? "")
    }
    if (v.labels !== undefined) {
      const list = this.list(v.labels, at(path, "labels"), 1, LIMITS.targetEntries)
      if (list)
        out.labels = list.map((label, i) => {
          if (isLabel(label)) return label
          this.add(`${path}.labels[${i}]`, "must be a label: lowercase letters, digits and _ . : / -, at most 63")
          return ""
        })
    }
    return out
  }

  rule(v: unknown, path: string): Rule | undefined {
    if (!isJsonObject(v)) return void this.add(path, `a rule must be an object, not ${typeName(v)}`)
    this.unknownKeys(v, path, ["id", "effect", "actions", "when", "reason", "approval", "enforce"])
    let id: string | undefined
    if (v.id === undefined) this.add(at(path, "id"), "is required")
    else if (typeof v.id !== "string" || !LIMITS.ruleIdPattern.test(v.id))
      this.add(at(path, "id"), "must be 1 to 64 letters, digits, _ . or -")
    else id = v.id
    const effect: RuleEffect | undefined =
      v.effect === undefined
        ? void this.add(at(path, "effect"), `is required: one of ${EFFECTS.join(", ")}`)
        : this.literal(v.effect, at(path, "effect"), EFFECTS)
    const actions: Array<string> = []
    if (v.actions === undefined) this.add(at(path, "actions"), 'is required: a list of action globs, e.g. ["tool.*"]')
    else {
      this.list(v.actions, at(path, "actions"), 1, LIMITS.actionsPerRule)?.forEach((a, i) => {
        const p = `${path}.actions[${i}]`
        const problem = typeof a !== "string" ? `must be a glob string, not ${typeName(a)}` : globProblem(a)
        if (problem) this.add(p, problem)
        else actions.push(a as string)
      })
    }
    const when = v.when === undefined ? undefined : this.condition(v.when, at(path, "when"), 1)
    const reason = this.string(v.reason, at(path, "reason"), LIMITS.reasonLength, false)
    let approval: Approval | undefined
    if (v.approval !== undefined) {
      if (effect !== undefined && effect !== "require_approval")
        this.add(at(path, "approval"), "applies only to rules whose effect is require_approval")
      else approval = this.approval(v.approval, at(path, "approval"))
    }
    if (effect === "require_approval" && approval === undefined && v.approval === undefined)
      approval = { timeoutSeconds: LIMITS.approvalTimeoutSeconds.default }
    let enforce: RuleEnforcement | undefined
    if (v.enforce !== undefined) {
      if (effect !== undefined && effect !== "deny")
        this.add(at(path, "enforce"), "applies only to rules whose effect is deny")
      else enforce = this.enforce(v.enforce, at(path, "enforce"))
    }
    if (id === undefined || effect === undefined) return undefined
    return {
      id,
      effect,
      actions,
      ...(when === undefined ? {} : { when }),
      ...(reason === undefined ? {} : { reason }),
      ...(approval === undefined ? {} : { approval }),
      ...(enforce === undefined ? {} : { enforce }),
    }
  }

  /** A whole number within `bounds`, or undefined (with an issue when it was given but is not). */
  integer(v: unknown, path: string, bounds: { readonly min: number; readonly max: number }, unit: string) {
    if (v === undefined) return undefined
    if (typeof v !== "number" || !Number.isInteger(v))
      return void this.add(path, `must be a whole number of ${unit}, not ${typeName(v)}`)
    if (v < bounds.min || v > bounds.max)
      return void this.add(path, `must be between ${bounds.min} and ${bounds.max} ${unit}`)
    return v
  }

  enforce(v: unknown, path: string): RuleEnforcement | undefined {
    if (!isJsonObject(v))
      return void this.add(
        path,
        `must be an object {type, after?, withinSeconds?, durationSeconds?, limitPerMinute?, reason?}, not ${typeName(v)}`,
      )
    this.unknownKeys(v, path, ["type", "after", "withinSeconds", "durationSeconds", "limitPerMinute", "reason"])
    const type =
      v.type === undefined
        ? void this.add(at(path, "type"), `is required: one of ${ENFORCEMENT_TYPES.join(", ")}`)
        : this.literal(v.type, at(path, "type"), ENFORCEMENT_TYPES)
    const after = this.integer(v.after, at(path, "after"), LIMITS.enforceAfter, "denials")
    const withinSeconds = this.integer(
      v.withinSeconds,
      at(path, "withinSeconds"),
      LIMITS.enforceWithinSeconds,
      "seconds",
    )
    const durationSeconds = this.integer(
      v.durationSeconds,
      at(path, "durationSeconds"),
      LIMITS.enforceDurationSeconds,
      "seconds",
    )
    const limitPerMinute = this.integer(
      v.limitPerMinute,
      at(path, "limitPerMinute"),
      LIMITS.enforceLimitPerMinute,
      "calls",
    )
    const reason = this.string(v.reason, at(path, "reason"), LIMITS.reasonLength, false)
    if (type === "throttle" && v.limitPerMinute === undefined)
      this.add(at(path, "limitPerMinute"), "is required for a throttle")
    if (type !== undefined && type !== "throttle" && v.limitPerMinute !== undefined)
      this.add(at(path, "limitPerMinute"), "only a throttle takes a limit")
    if (type === "revocation" && v.durationSeconds !== undefined)
      this.add(at(path, "durationSeconds"), "a revocation does not expire; resolve it to reinstate the agent")
    if (type === undefined) return undefined
    return {
      type,
      after: after ?? LIMITS.enforceAfter.default,
      withinSeconds: withinSeconds ?? LIMITS.enforceWithinSeconds.default,
      ...(durationSeconds === undefined ? {} : { durationSeconds }),
      ...(limitPerMinute === undefined ? {} : { limitPerMinute }),
      ...(reason === undefined ? {} : { reason }),
    }
  }

  approval(v: unknown, path: string): Approval | undefined {
    if (!isJsonObject(v))
      return void this.add(path, `must be an object {timeoutSeconds?, approvers?}, not ${typeName(v)}`)
    this.unknownKeys(v, path, ["timeoutSeconds", "approvers"])
    const timeoutSeconds =
      this.integer(v.timeoutSeconds, at(path, "timeoutSeconds"), LIMITS.approvalTimeoutSeconds, "seconds") ??
      LIMITS.approvalTimeoutSeconds.default
    if (v.approvers === undefined) return { timeoutSeconds }
    const approvers = this.list(v.approvers, at(path, "approvers"), 1, LIMITS.approvers)?.map(
      (a, i) => this.string(a, `${path}.approvers[${i}]`, LIMITS.approverLength, true) ?? "",
    )
    return approvers === undefined ? { timeoutSeconds } : { timeoutSeconds, approvers }
  }

  condition(v: unknown, path: string, depth: number): Condition | undefined {
    if (++this.nodes === LIMITS.conditionNodes + 1)
      this.add(path, `the policy has more than ${LIMITS.conditionNodes} condition nodes`)
    if (this.nodes > LIMITS.conditionNodes) return undefined
    if (depth > LIMITS.conditionDepth) {
      this.add(path, `conditions may nest at most ${LIMITS.conditionDepth} levels deep`)
      return undefined
    }
    if (!isJsonObject(v)) return void this.add(path, `must be a condition ${CONDITION_SHAPES}, not ${typeName(v)}`)
    const kinds: Array<string> = CONDITION_KINDS.filter((k) => k in v)
    if (LEAF_KEYS.some((k) => k in v)) kinds.push("field")
    if (kinds.length === 0) {
      const keys = Object.keys(v)
      const found = keys.length === 0 ? "it is empty" : `found ${keys.map((k) => `"${k}"`).join(", ")}`
      return void this.add(path, `is not a condition: expected ${CONDITION_SHAPES}; ${found}`)
    }
    if (kinds.length > 1) {
      return void this.add(
        path,
        `is both "${kinds[0]}" and "${kinds[1]}": a condition is exactly one of ${CONDITION_SHAPES}`,
      )
    }
    const kind = kinds[0]!
    switch (kind) {
      case "all":
      case "any": {
        this.unknownKeys(v, path, [kind])
        const list = this.list(v[kind], at(path, kind), 1, Number.POSITIVE_INFINITY)
        if (!list) return undefined
        const children: Array<Condition> = []
        for (let i = 0; i < list.length; i++) {
          const c = this.condition(list[i], `${path}.${kind}[${i}]`, depth + 1)
          if (c) children.push(c)
        }
        return kind === "all" ? { all: children } : { any: children }
      }
      case "not": {
        this.unknownKeys(v, path, ["not"])
        const inner = this.condition(v.not, at(path, "not"), depth + 1)
        return inner && { not: inner }
      }
      case "time": {
        this.unknownKeys(v, path, ["time"])
        const time = this.time(v.time, at(path, "time"))
        return time && { time }
      }
      case "rate": {
        this.unknownKeys(v, path, ["rate"])
        const rate = this.rate(v.rate, at(path, "rate"))
        return rate && { rate }
      }
      case "cel": {
        this.unknownKeys(v, path, ["cel"])
        if (typeof v.cel !== "string") return void this.add(at(path, "cel"), `must be a string, not ${typeName(v.cel)}`)
        const compiled = compileCel(v.cel)
        if (typeof compiled === "string") return void this.add(at(path, "cel"), compiled)
        return { cel: v.cel }
      }
      default:
        this.unknownKeys(v, path, LEAF_KEYS)
        return this.leaf(v, path)
    }
  }

  leaf(v: Record<string, unknown>, path: string): Condition | undefined {
    let type: FieldType | undefined
    let field: string | undefined
    if (v.field === undefined) this.add(at(path, "field"), "is required: action, context.<path> or agent.<field>")
    else if (typeof v.field !== "string") this.add(at(path, "field"), `must be a string, not ${typeName(v.field)}`)
    else {
      const parsed = parseField(v.field)
      if (typeof parsed === "string") this.add(at(path, "field"), parsed)
      else {
        type = parsed.type
        field = v.field
      }
    }
    let op: Operator | undefined
    if (v.op === undefined) this.add(at(path, "op"), `is required: one of ${OPERATORS.join(", ")}`)
    else if (typeof v.op !== "string" || !(OPERATORS as ReadonlyArray<string>).includes(v.op))
      this.add(at(path, "op"), `unknown operator ${JSON.stringify(v.op)}: use one of ${OPERATORS.join(", ")}`)
    else op = v.op as Operator
    if (op === undefined) return undefined
    const value = this.leafValue(op, v.value, "value" in v, at(path, "value"), field, type)
    if (field === undefined || value === INVALID) return undefined
    return value === undefined ? { field, op } : { field, op, value }
  }

  /** Checks a leaf's value against its operator and, when known, its field's type. */
  leafValue(
    op: Operator,
    value: unknown,
    present: boolean,
    path: string,
    field: string | undefined,
    type: FieldType | undefined,
  ): unknown {
    const fail = (issue: string) => {
      this.add(path, issue)
      return INVALID
    }
    const name = field ?? "the field"
    const typed = (t: FieldType | undefined): t is "string" | "number" | "array" => t !== undefined && t !== "any"
    if (op === "exists") {
      if (!present) return undefined
      return typeof value === "boolean" ? value : fail(`exists takes true or false, not ${typeName(value)}`)
    }
    if (!present || value === undefined) return fail(`is required: ${op} compares the field with a value`)
    const stringTooLong = (s: unknown) => typeof s === "string" && s.length > LIMITS.stringValueLength
    switch (op) {
      case "eq":
      case "ne": {
        if (!isScalar(value)) return fail(`${op} takes a string, number, boolean or null, not ${typeName(value)}`)
        if (stringTooLong(value)) return fail(`must be at most ${LIMITS.stringValueLength} characters`)
        if (type === "array") return fail(`${name} is a list: use contains, in or nin`)
        if (typed(type) && typeof value !== type)
          return fail(`${name} is a ${type}: ${op} needs a ${type} value, not ${typeName(value)}`)
        return value
      }
      case "gt":
      case "gte":
      case "lt":
      case "lte": {
        if (typeof value !== "string" && !(typeof value === "number" && Number.isFinite(value)))
          return fail(`${op} takes a number or a string, not ${typeName(value)}`)
        if (stringTooLong(value)) return fail(`must be at most ${LIMITS.stringValueLength} characters`)
        if (type === "array") return fail(`${name} is a list: ${op} compares numbers or strings`)
        if (typed(type) && typeof value !== type)
          return fail(`${name} is a ${type}: ${op} needs a ${type} value, not ${typeName(value)}`)
        return value
      }
      case "between": {
        if (!Array.isArray(value) || value.length !== 2)
          return fail("between takes [low, high]: two numbers or two strings, both ends included")
        const [lo, hi] = value as [unknown, unknown]
        const bothNumbers =
          typeof lo === "number" && typeof hi === "number" && Number.isFinite(lo) && Number.isFinite(hi)
        const bothStrings = typeof lo === "string" && typeof hi === "string"
        if (!bothNumbers && !bothStrings) return fail("between takes [low, high]: two numbers or two strings")
        if (stringTooLong(lo) || stringTooLong(hi))
          return fail(`must be at most ${LIMITS.stringValueLength} characters`)
        if ((lo as number | string) > (hi as number | string)) return fail("between needs low ≤ high")
        if (type === "array") return fail(`${name} is a list: between compares numbers or strings`)
        if (typed(type) && typeof lo !== type) return fail(`${name} is a ${type}: between needs ${type} ends`)
        return [lo, hi]
      }
      case "in":
      case "nin": {
        if (!Array.isArray(value)) return fail(`${op} takes a list of values, not ${typeName(value)}`)
        if (value.length === 0) return fail(`${op} needs at least one value`)
        if (value.length > LIMITS.listValues) return fail(`${op} takes at most ${LIMITS.listValues} values`)
        let ok = true
        value.forEach((x, i) => {
          if (!isScalar(x)) {
            ok = false
            this.add(`${path}[${i}]`, `must be a string, number, boolean or null, not ${typeName(x)}`)
          } else if (stringTooLong(x)) {
            ok = false
            this.add(`${path}[${i}]`, `must be at most ${LIMITS.stringValueLength} characters`)
          } else if ((type === "string" || type === "number") && typeof x !== type) {
            ok = false
            this.add(`${path}[${i}]`, `${name} is a ${type}: every value must be a ${type}, not ${typeName(x)}`)
          } else if (type === "array" && typeof x !== "string") {
            ok = false
            this.add(`${path}[${i}]`, `${name} holds strings: every value must be a string, not ${typeName(x)}`)
          }
        })
        return ok ? [...value] : INVALID
      }
      case "contains": {
        if (!isScalar(value)) return fail(`contains takes a string, number, boolean or null, not ${typeName(value)}`)
        if (stringTooLong(value)) return fail(`must be at most ${LIMITS.stringValueLength} characters`)
        if (type === "number") return fail(`${name} is a number: contains applies to lists and strings`)
        if ((type === "string" || type === "array") && typeof value !== "string")
          return fail(`${name} ${type === "array" ? "holds strings" : "is a string"}: contains needs a string value`)
        return value
      }
      case "startsWith":
      case "endsWith": {
        if (typeof value !== "string") return fail(`${op} takes a string, not ${typeName(value)}`)
        if (value.length === 0) return fail(`${op} needs a non-empty string`)
        if (stringTooLong(value)) return fail(`must be at most ${LIMITS.stringValueLength} characters`)
        if (type === "number" || type === "array")
          return fail(`${name} is a ${type === "array" ? "list" : type}: ${op} applies to strings`)
        return value
      }
      case "glob": {
        if (typeof value !== "string") return fail(`glob takes a glob pattern string, not ${typeName(value)}`)
        const problem = globProblem(value)
        if (problem) return fail(`glob pattern ${problem}`)
        if (type === "number" || type === "array")
          return fail(`${name} is a ${type === "array" ? "list" : type}: glob applies to strings`)
        return value
      }
    }
  }

  time(v: unknown, path: string): TimeWindow | undefined {
    if (!isJsonObject(v)) return void this.add(path, `must be an object {days?, from, to, tz}, not ${typeName(v)}`)
    this.unknownKeys(v, path, ["days", "from", "to", "tz"])
    let days: Array<Weekday> | undefined
    if (v.days !== undefined) {
      const list = this.list(v.days, at(path, "days"), 1, 7)
      if (list) {
        days = []
        const seen = new Set<unknown>()
        list.forEach((d, i) => {
          if (!(WEEKDAYS as ReadonlyArray<unknown>).includes(d))
            this.add(`${path}.days[${i}]`, `must be one of ${WEEKDAYS.join(", ")}`)
          else if (seen.has(d)) this.add(`${path}.days[${i}]`, `"${d}" is listed twice`)
          else {
            seen.add(d)
            days!.push(d as Weekday)
          }
        })
      }
    }
    const hhmm = (key: "from" | "to") => {
      const s = v[key]
      if (s === undefined) return void this.add(at(path, key), `is required: "HH:MM"`)
      const minutes = typeof s === "string" ? parseHhMm(s, key === "to") : undefined
      if (minutes === undefined)
        return void this.add(
          at(path, key),
          key === "to" ? `must be "HH:MM", 00:00 to 24:00` : `must be "HH:MM", 00:00 to 23:59`,
        )
      return minutes
    }
    const from = hhmm("from")
    const to = hhmm("to")
    if (from !== undefined && to !== undefined && from === to)
      this.add(at(path, "to"), "must differ from `from` (a whole day is 00:00 to 24:00)")
    let tz: string | undefined
    if (v.tz === undefined) this.add(at(path, "tz"), "is required: an IANA time zone such as UTC or America/New_York")
    else if (typeof v.tz !== "string" || v.tz.length === 0 || v.tz.length > 64 || zoneFormatter(v.tz) === undefined)
      this.add(
        at(path, "tz"),
        `unknown time zone ${JSON.stringify(v.tz)}: use an IANA name such as UTC or America/New_York`,
      )
    else tz = v.tz
    if (from === undefined || to === undefined || tz === undefined || (v.days !== undefined && days === undefined))
      return undefined
    return { ...(days === undefined ? {} : { days }), from: v.from as string, to: v.to as string, tz }
  }

  rate(v: unknown, path: string): RateLimit | undefined {
    if (!isJsonObject(v)) return void this.add(path, `must be an object {max, per, scope?}, not ${typeName(v)}`)
    this.unknownKeys(v, path, ["max", "per", "scope"])
    let max: number | undefined
    if (v.max === undefined) this.add(at(path, "max"), "is required: the most calls allowed per period")
    else if (typeof v.max !== "number" || !Number.isInteger(v.max) || v.max < 1 || v.max > LIMITS.rateMax)
      this.add(at(path, "max"), `must be a whole number from 1 to ${LIMITS.rateMax}`)
    else max = v.max
    const per =
      v.per === undefined
        ? void this.add(at(path, "per"), `is required: one of ${RATE_PERIODS.join(", ")}`)
        : this.literal(v.per, at(path, "per"), RATE_PERIODS)
    const scope = v.scope === undefined ? undefined : this.literal(v.scope, at(path, "scope"), RATE_SCOPES)
    if (max === undefined || per === undefined || (v.scope !== undefined && scope === undefined)) return undefined
    return scope === undefined ? { max, per } : { max, per, scope }
  }
}

/**
 * Validates a policy document as a client sent it: every problem, each with the exact path
 * of the field it is about, in document order (at most 100). A valid document comes back with
 * its defaults applied (`enabled: true`, `mode: "enforce"`, `approval.timeoutSeconds: 3600`).
 */
export const validatePolicyDocument = (input: unknown): PolicyValidation => {
  const v = new Validator()
  const document = v.document(input)
  if (document === undefined || v.issues.length > 0) {
    return {
      ok: false,
      issues: v.issues.length > 0 ? v.issues : [{ field: "", issue: "is not a valid policy document" }],
    }
  }
  return { ok: true, document }
}
