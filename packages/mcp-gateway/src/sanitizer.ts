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

/**
 * Credentials by their published shapes (prefixes that vendors made recognisable so that scanners can find
 * leaks), plus PEM private keys, JWTs, and `key=value` assignments of secret-looking names.
 */
export const CREDENTIAL_PATTERNS: Readonly<Record<string, RegExp>> = {
  private_key: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
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
  secret_assignment:
    /\b(?:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)\b["']?\s*[:=]\s*["']?[^\s"',;]{8,}/gi,
}

const URL_PATTERN = /\bhttps?:\/\/[^\s"'<>()\]]+/gi

const hostAllowed = (host: string, allowed: ReadonlyArray<string>) =>
  allowed.some((a) => {
    const pattern = a.toLowerCase()
    return pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern
  })

/**
 * Cleans tool results before they reach the model: credentials by pattern, and URLs to hosts that are not
 * allowlisted. Works on every string of the result (text content, structured content, resource text), and
 * reports what it removed, by rule and count, never the removed text.
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

  /** A copy of `value` with every string cleaned, and what was removed. */
  sanitize<T>(value: T): { readonly value: T; readonly redactions: ReadonlyArray<Redaction> } {
    const counts = new Map<string, { kind: Redaction["kind"]; rule: string; count: number }>()
    const count = (kind: Redaction["kind"], rule: string) => {
      const key = `${kind}\u0000${rule}`
      const hit = counts.get(key)
      if (hit) hit.count++
      else counts.set(key, { kind, rule, count: 1 })
    }
    const clean = (text: string): string => {
      let out = text
      for (const [name, re] of this.patterns)
        out = out.replace(re, () => {
          count("credential", name)
          return `[REDACTED:${name}]`
        })
      const allowed = this.allowedHosts
      if (allowed !== undefined)
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
    const walk = (v: unknown, depth: number): unknown => {
      if (typeof v === "string") return clean(v)
      if (depth > 64 || v === null || typeof v !== "object") return v
      if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1))
      // Binary content (images, audio, blobs) is base64: not text a credential pattern should read.
      return Object.fromEntries(
        Object.entries(v).map(([k, x]) => [k, k === "data" || k === "blob" ? x : walk(x, depth + 1)]),
      )
    }
    return { value: walk(value, 0) as T, redactions: [...counts.values()] }
  }
}
