/**
 * Settings read from the environment, described once per connector so that a bad start lists every
 * problem (exit 2) instead of failing on the first.
 */

/**
 * One setting a connector reads from an environment variable.
 *
 * @example
 * ```ts
 * import type { SettingSpec } from "@agentgov/connector-sdk/runtime"
 *
 * const token: SettingSpec = { env: "SLACK_BOT_TOKEN", description: "the bot's xoxb- token", required: true, secret: true }
 * ```
 */
export interface SettingSpec {
  readonly env: string
  /** Said in the error when the setting is missing or bad. */
  readonly description: string
  readonly required?: boolean
  /** Never logged or echoed back in an error. */
  readonly secret?: boolean
  /**
   * `url`: an absolute http(s) URL; `https`: an absolute https URL, or http to a loopback host only (for a URL that
   * carries a credential or is sent one: a vendor's endpoint); `integer`: ≥ `min` (default 0); `boolean`:
   * true/false. Default `string`.
   */
  readonly kind?: "string" | "url" | "https" | "integer" | "boolean"
  readonly default?: string
  readonly min?: number
  /** A further check: the problem, or undefined when the value is fine. */
  readonly check?: (value: string) => string | undefined
}

/**
 * A connector's settings: a record of {@link SettingSpec}s by the name the code uses.
 *
 * @example
 * ```ts
 * import type { SettingsSchema } from "@agentgov/connector-sdk/runtime"
 *
 * const settings = { webhookUrl: { env: "TEAMS_WEBHOOK_URL", description: "…", kind: "url", required: true } } satisfies SettingsSchema
 * ```
 */
export type SettingsSchema = Readonly<Record<string, SettingSpec>>

type ValueOf<S extends SettingSpec> = S extends { readonly kind: "integer" }
  ? number
  : S extends { readonly kind: "boolean" }
    ? boolean
    : string

/**
 * The values of a schema: a required setting, or one with a default, is always there.
 *
 * @example
 * ```ts
 * import type { SettingsOf } from "@agentgov/connector-sdk/runtime"
 *
 * type Teams = SettingsOf<{ webhookUrl: { env: "TEAMS_WEBHOOK_URL"; description: ""; required: true } }> // { webhookUrl: string }
 * ```
 */
export type SettingsOf<S extends SettingsSchema> = {
  readonly [K in keyof S]: S[K] extends { readonly required: true } | { readonly default: string }
    ? ValueOf<S[K]>
    : ValueOf<S[K]> | undefined
}

/** The environment, as `process.env` is. */
export type Env = Readonly<Record<string, string | undefined>>

const parseBoolean = (v: string): boolean | undefined => {
  const t = v.trim().toLowerCase()
  if (t === "true" || t === "1" || t === "yes") return true
  if (t === "false" || t === "0" || t === "no") return false
  return undefined
}

/** Whether `value` is an absolute http(s) URL without credentials. */
export const httpUrlProblem = (value: string): string | undefined => {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return "is not an absolute URL"
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "must be an http(s) URL"
  if (url.username !== "" || url.password !== "") return "must not carry credentials"
  return undefined
}

/**
 * Whether `hostname` (as `URL` gives it) is a loopback host: `localhost`, 127.0.0.0/8 or `[::1]` (also `::1`, as
 * Node's legacy `url.parse` gives it). Anything else, an unusual spelling of one of these included, is not.
 *
 * @example
 * ```ts
 * import { isLoopbackHost } from "@agentgov/connector-sdk/runtime"
 *
 * isLoopbackHost(new URL("http://127.0.0.1:3000").hostname) // true
 * isLoopbackHost("mail.example.com") // false
 * ```
 */
export const isLoopbackHost = (hostname: string): boolean => {
  const host = hostname.toLowerCase()
  // `URL` writes an IPv4 host in dotted decimal whatever its spelling (`127.1`, `0x7f.1`), and an IPv6 one compressed
  return host === "localhost" || host === "[::1]" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
}

/**
 * {@link httpUrlProblem}, and https unless the host is a loopback one (a test's fake, a sidecar proxy): what a URL that
 * carries a credential (a webhook URL's signature) or is sent one (a bot token, an API key) must be, so that it never
 * crosses a network in the clear.
 */
export const httpsUrlProblem = (value: string): string | undefined => {
  const problem = httpUrlProblem(value)
  if (problem !== undefined) return problem
  const url = new URL(value)
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname))
    return "must be an https URL (http only to localhost, 127.0.0.0/8 or [::1])"
  return undefined
}

/**
 * Reads `schema` from `env`, collecting every problem. Values are trimmed; an empty variable counts
 * as unset.
 */
export const readSettings = <S extends SettingsSchema>(
  schema: S,
  env: Env,
  problems: Array<string>,
  options: { readonly requireAll?: boolean } = {},
): SettingsOf<S> => {
  const out: Record<string, unknown> = {}
  for (const [key, spec] of Object.entries(schema)) {
    const raw = env[spec.env]?.trim()
    const value = raw === undefined || raw === "" ? spec.default : raw
    if (value === undefined) {
      if (spec.required && options.requireAll !== false) problems.push(`${spec.env} is required: ${spec.description}`)
      continue
    }
    const shown = spec.secret ? "" : ` (got "${value.length > 80 ? `${value.slice(0, 80)}…` : value}")`
    switch (spec.kind ?? "string") {
      case "integer": {
        const min = spec.min ?? 0
        if (!/^\d+$/.test(value) || Number(value) < min) {
          problems.push(`${spec.env} must be an integer ≥ ${min}${shown}`)
          continue
        }
        out[key] = Number(value)
        continue
      }
      case "boolean": {
        const b = parseBoolean(value)
        if (b === undefined) {
          problems.push(`${spec.env} must be true or false${shown}`)
          continue
        }
        out[key] = b
        continue
      }
      case "url":
      case "https": {
        const problem = (spec.kind === "https" ? httpsUrlProblem : httpUrlProblem)(value)
        if (problem !== undefined) {
          problems.push(`${spec.env} ${problem}${shown}: ${spec.description}`)
          continue
        }
        break
      }
      default:
        break
    }
    const extra = spec.check?.(value)
    if (extra !== undefined) {
      problems.push(`${spec.env} ${extra}${shown}`)
      continue
    }
    out[key] = value
  }
  return out as SettingsOf<S>
}
