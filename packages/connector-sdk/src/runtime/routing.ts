import { readFileSync } from "node:fs"
import { type AnyWebhookEvent, canonicalEventName, matchesEventPattern } from "../events.ts"
import { atLeast, defaultSeverity, isSeverity, SEVERITIES, type Severity } from "../severity.ts"
import type { Env } from "./settings.ts"

/**
 * Which events a connector forwards and how loud each is: the event filters (also the webhook's
 * subscription at `install`), a severity map by pattern, and a minimum severity. From environment
 * variables, or from an optional JSON file (`AGENTGOV_CONNECTOR_CONFIG`) whose keys the variables
 * override.
 */
export interface Routing {
  /** Patterns: an exact name, `prefix.*` or `*`. */
  readonly events: ReadonlyArray<string>
  /** Checked in order; the first pattern that matches sets the severity. */
  readonly severity: ReadonlyArray<readonly [pattern: string, severity: Severity]>
  /** Events below it are acknowledged and dropped. */
  readonly minSeverity: Severity
}

const PATTERN = /^(\*|[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?)$/

const patternProblem = (p: string): string | undefined =>
  PATTERN.test(p) ? undefined : `"${p}" is not an event name, a "prefix.*" pattern or "*"`

const list = (text: string): Array<string> =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")

interface FileConfig {
  readonly events?: ReadonlyArray<string>
  readonly severity?: Readonly<Record<string, string>>
  readonly minSeverity?: string
}

const readFile = (path: string, problems: Array<string>): FileConfig => {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"))
  } catch (error) {
    problems.push(`AGENTGOV_CONNECTOR_CONFIG: cannot read ${path} as JSON (${(error as Error).message})`)
    return {}
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    problems.push(`AGENTGOV_CONNECTOR_CONFIG: ${path} must hold a JSON object {events, severity, minSeverity}`)
    return {}
  }
  const o = parsed as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (!["events", "severity", "minSeverity"].includes(key))
      problems.push(`AGENTGOV_CONNECTOR_CONFIG: unknown key "${key}" in ${path} (known: events, severity, minSeverity)`)
  }
  if (o.events !== undefined && !(Array.isArray(o.events) && o.events.every((e) => typeof e === "string")))
    problems.push(`AGENTGOV_CONNECTOR_CONFIG: "events" in ${path} must be an array of strings`)
  if (
    o.severity !== undefined &&
    (typeof o.severity !== "object" ||
      o.severity === null ||
      Array.isArray(o.severity) ||
      !Object.values(o.severity).every((v) => typeof v === "string"))
  )
    problems.push(`AGENTGOV_CONNECTOR_CONFIG: "severity" in ${path} must map patterns to severities`)
  if (o.minSeverity !== undefined && typeof o.minSeverity !== "string")
    problems.push(`AGENTGOV_CONNECTOR_CONFIG: "minSeverity" in ${path} must be a string`)
  return o as FileConfig
}

/**
 * Reads the routing: `AGENTGOV_CONNECTOR_EVENTS` (comma-separated patterns; default the connector's
 * own), `AGENTGOV_CONNECTOR_SEVERITY` (`pattern=severity,…`), `AGENTGOV_CONNECTOR_MIN_SEVERITY`
 * (default `info`), over the file named by `AGENTGOV_CONNECTOR_CONFIG`.
 */
export const readRouting = (env: Env, defaultEvents: ReadonlyArray<string>, problems: Array<string>): Routing => {
  const path = env.AGENTGOV_CONNECTOR_CONFIG?.trim()
  const file = path ? readFile(path, problems) : {}

  const eventsText = env.AGENTGOV_CONNECTOR_EVENTS?.trim()
  const events = eventsText ? list(eventsText) : Array.isArray(file.events) ? [...file.events] : [...defaultEvents]
  if (events.length === 0) problems.push("AGENTGOV_CONNECTOR_EVENTS names no event")
  for (const e of events) {
    const problem = patternProblem(e)
    if (problem !== undefined) problems.push(`AGENTGOV_CONNECTOR_EVENTS: ${problem}`)
  }

  const severity: Array<readonly [string, Severity]> = []
  const addSeverity = (source: string, pattern: string, level: string) => {
    const problem = patternProblem(pattern)
    if (problem !== undefined) problems.push(`${source}: ${problem}`)
    else if (!isSeverity(level))
      problems.push(`${source}: "${level}" for "${pattern}" is not a severity (${SEVERITIES.join(", ")})`)
    else severity.push([pattern, level])
  }
  const severityText = env.AGENTGOV_CONNECTOR_SEVERITY?.trim()
  if (severityText) {
    for (const entry of list(severityText)) {
      const eq = entry.indexOf("=")
      if (eq <= 0) {
        problems.push(`AGENTGOV_CONNECTOR_SEVERITY: "${entry}" is not pattern=severity`)
        continue
      }
      addSeverity("AGENTGOV_CONNECTOR_SEVERITY", entry.slice(0, eq).trim(), entry.slice(eq + 1).trim())
    }
  }
  if (file.severity && typeof file.severity === "object") {
    for (const [pattern, level] of Object.entries(file.severity))
      if (typeof level === "string") addSeverity("AGENTGOV_CONNECTOR_CONFIG severity", pattern, level)
  }
  // exact names before prefixes before "*", so that the most specific entry wins whatever the order written
  const rank = (p: string) => (p === "*" ? 2 : p.endsWith(".*") ? 1 : 0)
  severity.sort((a, b) => rank(a[0]) - rank(b[0]) || b[0].length - a[0].length)

  const minText = env.AGENTGOV_CONNECTOR_MIN_SEVERITY?.trim() || file.minSeverity || "info"
  let minSeverity: Severity = "info"
  if (isSeverity(minText)) minSeverity = minText
  else problems.push(`AGENTGOV_CONNECTOR_MIN_SEVERITY: "${minText}" is not a severity (${SEVERITIES.join(", ")})`)

  return { events, severity, minSeverity }
}

/** Whether the routing forwards events of `type` at all. */
export const routes = (routing: Routing, type: string): boolean =>
  routing.events.some((p) => matchesEventPattern(p, type))

/** The event's severity after the operator's map. */
export const severityOf = (routing: Routing, event: AnyWebhookEvent): Severity => {
  const type = canonicalEventName(event.type)
  for (const [pattern, level] of routing.severity) if (matchesEventPattern(pattern, type)) return level
  return defaultSeverity(event)
}

/** Whether the event passes the minimum severity. */
export const loudEnough = (routing: Routing, severity: Severity): boolean => atLeast(severity, routing.minSeverity)
