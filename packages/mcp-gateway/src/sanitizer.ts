export interface Redaction {
  readonly kind: "credential" | "url"
  /** The pattern's name, or the URL's host. */
  readonly rule: string
  readonly count: number
}

export interface SanitizerOptions {
  /**
   * Hosts a URL in a result may point to (`example.com`, `*.example.com`). When set, URLs to any other host are
   * replaced by `[REDACTED:url]`; when absent, URLs pass.
   */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /** Extra credential patterns, by name (global flag added when missing). */
  readonly extraPatterns?: Readonly<Record<string, RegExp>> | undefined
}

/** The names of settings that hold secrets, anywhere in a name: `password`, `DB_PASSWORD`, `spring.datasource.password`. */
const SECRET_NAME =
  "(?:password|passwd|secret|api[_-]?key|access[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|private[_-]?key)"

/**
 * Credentials by their published shapes (prefixes that vendors made recognisable so that scanners can find
 * leaks), plus JWTs, the password of a URL (`postgres://user:password@host`), and `name=value` or `name: value`
 * assignments whose name holds a secret-looking word (`.env` lines, config files, JSON). PEM private keys are
 * found without a pattern (see `redactPrivateKeys`), up to their END line or, cut off, to the end of the text.
 * A pattern with a `keep` group replaces only what follows that group. Every pattern reads a text in linear
 * time: what can repeat is bounded, so a crafted result cannot stall the gateway.
 */
export const CREDENTIAL_PATTERNS: Readonly<Record<string, RegExp>> = {
  aws_access_key: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  github_token: /\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b/g,
  slack_token: /\bxox[abprs]-[A-Za-z0-9-]{10,}\b/g,
  openai_key: /\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}\b/g,
  anthropic_key: /\bsk-ant-[A-Za-z0-9_-]{20,}\b/g,
  stripe_key: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b/g,
  google_api_key: /\bAIza[0-9A-Za-z_-]{35}\b/g,
  agentgov_key: /\bsvc_(?:ws|ag_sk)_(?:live|test)_[A-Za-z0-9]{20,}\b/g,
  jwt: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b/g,
  bearer_token: /\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*/g,
  url_credentials: /(?<keep>\b[A-Za-z][A-Za-z0-9+.-]{0,30}:\/\/[^\s:@/?#]{0,256}:)[^\s@/?#]{1,256}(?=@)/g,
  secret_assignment: new RegExp(
    `(?<![A-Za-z0-9_.-])(?=[A-Za-z0-9_.-]{0,64}?${SECRET_NAME})[A-Za-z0-9_.-]{1,64}["']?[ \\t]{0,16}[:=][ \\t]{0,16}["']?(?!\\[REDACTED:)[^\\s"',;]{8,}`,
    "gi",
  ),
}

/**
 * A key of structured content whose string value is a secret: `{"password": "…"}`, `{"DB_PASSWORD": "…"}`. Its
 * value is redacted whatever its length (only the empty string is left): a short password or PIN is still one.
 */
const SECRET_KEY = new RegExp(`^[A-Za-z0-9_.-]{0,64}?${SECRET_NAME}[A-Za-z0-9_.-]{0,64}$`, "i")

const PEM_BEGIN = /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----/g
const PEM_END = /-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----/g

/**
 * Every PEM private key in `text`, from its BEGIN line to its END line, or to the end of the text when the key was
 * cut off (a truncated result still leaks most of a key). In one pass: each search starts where the last ended.
 */
const redactPrivateKeys = (text: string, onHit: () => void): string => {
  if (!text.includes("PRIVATE KEY-----")) return text
  let out = ""
  let at = 0
  for (;;) {
    PEM_BEGIN.lastIndex = at
    const begin = PEM_BEGIN.exec(text)
    if (begin === null) break
    PEM_END.lastIndex = begin.index + begin[0].length
    const end = PEM_END.exec(text)
    out += `${text.slice(at, begin.index)}[REDACTED:private_key]`
    onHit()
    if (end === null) return out
    at = end.index + end[0].length
  }
  return out + text.slice(at)
}

/** What a part nested deeper than this is replaced by, whole: it is not read, so it cannot pass unread. */
const MAX_DEPTH = 64

const URL_PATTERN = /\bhttps?:\/\/[^\s"'<>()\]]+/gi

const hostAllowed = (host: string, allowed: ReadonlyArray<string>) =>
  allowed.some((a) => {
    const pattern = a.toLowerCase()
    return pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern
  })

/**
 * Cleans tool results before they reach the model: credentials by pattern, and URLs to hosts that are not
 * allowlisted. Works on every string of the result (text content, structured content, resource text, `_meta`,
 * keys the server added) and of an error it returns, and reports what it removed, by rule and count, never the
 * removed text. A part nested deeper than 64 levels is replaced whole (rule `too_deep`).
 */
export class Sanitizer {
  private readonly patterns: ReadonlyArray<readonly [string, RegExp]>
  private readonly allowedHosts: ReadonlyArray<string> | undefined

  constructor(options: SanitizerOptions = {}) {
    this.patterns = Object.entries({ ...CREDENTIAL_PATTERNS, ...options.extraPatterns }).map(
      ([name, re]) => [name, re.global ? re : new RegExp(re.source, `${re.flags}g`)] as const,
    )
    this.allowedHosts = options.allowedHosts
  }

  /**
   * A copy of `value` (a tool result, or any JSON value) with every string cleaned, and what was removed. The
   * items of a top-level `content` array are read as MCP content blocks, whose binaries pass as they are.
   */
  sanitize<T>(value: T): { readonly value: T; readonly redactions: ReadonlyArray<Redaction> } {
    return this.clean(value, true)
  }

  /**
   * A copy of a tool call's arguments with the credentials in them redacted, as in a result (patterns and
   * secret-named keys), for what the gateway sends the service about a call: the guard's context, which the
   * service records and shows approvers. Every string is read (no content blocks, no binary passes), and URLs
   * stay as they are whatever the allowlist, so that policies can still read the hosts a call names.
   */
  redactArguments<T>(value: T): { readonly value: T; readonly redactions: ReadonlyArray<Redaction> } {
    return this.clean(value, false)
  }

  private clean<T>(value: T, result: boolean): { readonly value: T; readonly redactions: ReadonlyArray<Redaction> } {
    const counts = new Map<string, { kind: Redaction["kind"]; rule: string; count: number }>()
    const count = (kind: Redaction["kind"], rule: string) => {
      const key = `${kind}\u0000${rule}`
      const hit = counts.get(key)
      if (hit) hit.count++
      else counts.set(key, { kind, rule, count: 1 })
    }
    const clean = (text: string): string => {
      let out = redactPrivateKeys(text, () => count("credential", "private_key"))
      for (const [name, re] of this.patterns)
        out = out.replace(re, (...args) => {
          count("credential", name)
          const groups = args.at(-1) as Record<string, string | undefined> | string
          const keep = typeof groups === "object" ? (groups.keep ?? "") : ""
          return `${keep}[REDACTED:${name}]`
        })
      const allowed = this.allowedHosts
      if (allowed !== undefined && result)
        out = out.replace(URL_PATTERN, (url) => {
          let host: string
          try {
            host = new URL(url).hostname.toLowerCase()
          } catch {
            host = "invalid"
          }
          if (hostAllowed(host, allowed)) return url
          count("url", host)
          return "[REDACTED:url]"
        })
      return out
    }
    const secretValue = () => {
      count("credential", "secret_assignment")
      return "[REDACTED:secret_assignment]"
    }
    /**
     * `block` is set for the items of a result's `content` (MCP content blocks) and an embedded resource: only
     * there is base64 of binary content (`data` of image and audio content, `blob` of a blob resource) left as
     * it is. A `data` or `blob` key anywhere else is text like any other.
     */
    const walk = (v: unknown, depth: number, block = false): unknown => {
      if (typeof v === "string") return clean(v)
      if (v === null || typeof v !== "object") return v
      if (depth > MAX_DEPTH) {
        count("credential", "too_deep")
        return "[REDACTED:too_deep]"
      }
      if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1))
      const o = v as Record<string, unknown>
      const binary = !block
        ? undefined
        : (o.type === "image" || o.type === "audio") && typeof o.data === "string"
          ? "data"
          : typeof o.blob === "string" && typeof o.uri === "string"
            ? "blob"
            : undefined
      return Object.fromEntries(
        Object.entries(o).map(([k, x]) => [
          k,
          k === binary
            ? x
            : typeof x === "string" && x !== "" && SECRET_KEY.test(k)
              ? secretValue()
              : block && k === "resource" && o.type === "resource"
                ? walk(x, depth + 1, true)
                : walk(x, depth + 1),
        ]),
      )
    }
    /** A tool result: its `content` items are content blocks; everything else (structured content, `_meta`) is read whole. */
    const walkResult = (v: unknown): unknown => {
      if (v === null || typeof v !== "object" || Array.isArray(v)) return walk(v, 0)
      return Object.fromEntries(
        Object.entries(v as Record<string, unknown>).map(([k, x]) => [
          k,
          k === "content" && Array.isArray(x) ? x.map((item) => walk(item, 2, true)) : walk(x, 1),
        ]),
      )
    }
    return { value: (result ? walkResult(value) : walk(value, 0)) as T, redactions: [...counts.values()] }
  }
}
