import { createHash } from "node:crypto"

/** What a tool definition looks like to the scanner: the parts the model reads. */
export interface ToolDefinition {
  readonly name: string
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly inputSchema?: unknown
  readonly outputSchema?: unknown
  readonly annotations?: unknown
}

/**
 * `instructions`: text addressed to the model; `hidden_unicode`: characters a reviewer does not see;
 * `definition_changed`: not the definition first seen (a rug pull); `duplicate_name`: the listing names the tool
 * more than once; `too_deep`: nested deeper than the scanner reads, so not all of it was checked.
 */
export type FindingKind = "instructions" | "hidden_unicode" | "definition_changed" | "duplicate_name" | "too_deep"

export interface Finding {
  readonly kind: FindingKind
  /** What matched, quoted short (never more than 120 characters). */
  readonly detail: string
}

/**
 * Phrases that address the model rather than describe the tool: the shapes of the published tool-poisoning
 * attacks (hidden `<IMPORTANT>` blocks, "ignore previous instructions", "do not tell the user", reading
 * `~/.ssh` or `.env` "before using this tool"). A description is for the user's model to learn what the tool
 * does; an imperative aimed at the model's other behaviour is the tell.
 */
const INSTRUCTION_PATTERNS: ReadonlyArray<readonly [string, RegExp]> = [
  [
    "ignore instructions",
    /\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|other|all|system)\b[^.\n]{0,20}\b(instructions?|prompts?|rules?|messages?)\b/i,
  ],
  ["hidden tag", /<\s*\/?\s*(important|system|instructions?|secret|hidden|admin)\s*>/i],
  [
    "secrecy toward the user",
    /\b(do not|don't|never)\b[^.\n]{0,30}\b(tell|inform|mention|reveal|show|notify|alert)\b[^.\n]{0,30}\b(user|human|anyone)\b/i,
  ],
  [
    "other tools",
    /\b(before|after|instead of|when)\b[^.\n]{0,30}\b(using|calling|call|use|invoking)\b[^.\n]{0,40}\b(any other|other|every|all)\b[^.\n]{0,10}\btools?\b/i,
  ],
  [
    "sensitive files",
    /(~\/\.ssh|id_rsa|\.aws\/credentials|\.env\b|\/etc\/passwd|mcp\.json|\.cursor\/|claude_desktop_config)/i,
  ],
  [
    "model directives",
    /\b(you (must|should|will) (now |always )?(first )?(read|send|include|pass|call|forward|exfiltrate|upload))\b/i,
  ],
  ["system prompt", /\b(system prompt|your instructions|as an ai( language)? model)\b/i],
]

/**
 * Invisible and direction-changing characters: zero-width characters, bidirectional controls (Trojan
 * Source), the Unicode tag block and the variation selectors (ASCII smuggling: one invisible character a byte),
 * the blank Hangul fillers and other format characters a reviewer does not see. U+FE0E and U+FE0F, the text and
 * emoji presentation selectors, are left out: every emoji written as text-or-emoji carries one (⚠️).
 */
const HIDDEN_CLASS =
  "[\\u00ad\\u034f\\u115f\\u1160\\u180e\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\u3164\\ufe00-\\ufe0d\\ufeff\\uffa0\\ufff9-\\ufffb\\u{E0000}-\\u{E007F}\\u{E0100}-\\u{E01EF}]"
const HIDDEN_UNICODE = new RegExp(HIDDEN_CLASS, "u")
const HIDDEN_UNICODE_ALL = new RegExp(HIDDEN_CLASS, "gu")

const quote = (text: string, index: number, length: number) => {
  const start = Math.max(0, index - 20)
  const out = text.slice(start, index + length + 20).replace(/\s+/g, " ")
  return out.length > 120 ? `${out.slice(0, 117)}…` : out
}

/** How deep the scanner reads a definition; a part below is a finding (`too_deep`), not a pass. */
const MAX_DEPTH = 32

/**
 * Every string a model would read in a definition (the description, the title, schema descriptions and titles,
 * property names), and whether some of it lies deeper than `MAX_DEPTH`.
 */
const texts = (definition: ToolDefinition): { readonly texts: Array<string>; readonly tooDeep: boolean } => {
  const out: Array<string> = []
  let tooDeep = false
  const walk = (value: unknown, depth: number) => {
    if (depth > MAX_DEPTH) {
      if (value !== null && value !== undefined) tooDeep = true
      return
    }
    if (typeof value === "string") out.push(value)
    else if (Array.isArray(value)) for (const v of value) walk(v, depth + 1)
    else if (value !== null && typeof value === "object")
      for (const [k, v] of Object.entries(value)) {
        out.push(k)
        walk(v, depth + 1)
      }
  }
  walk(
    [
      definition.name,
      definition.title,
      definition.description,
      definition.inputSchema,
      definition.outputSchema,
      definition.annotations,
    ],
    0,
  )
  return { texts: out, tooDeep }
}

/** The findings of one definition's own text (not its history: see {@link DefinitionStore}). */
export const scanDefinition = (definition: ToolDefinition): Array<Finding> => {
  const findings: Array<Finding> = []
  const read = texts(definition)
  if (read.tooDeep)
    findings.push({ kind: "too_deep", detail: `nested deeper than ${MAX_DEPTH} levels: not all of it was checked` })
  for (const text of read.texts) {
    const hidden = HIDDEN_UNICODE.exec(text)
    if (hidden && !findings.some((f) => f.kind === "hidden_unicode")) {
      const code = hidden[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")
      findings.push({
        kind: "hidden_unicode",
        detail: `U+${code} in "${quote(text, hidden.index, hidden[0].length).replace(HIDDEN_UNICODE_ALL, "�")}"`,
      })
    }
    for (const [name, pattern] of INSTRUCTION_PATTERNS) {
      const m = pattern.exec(text)
      if (m && !findings.some((f) => f.kind === "instructions" && f.detail.startsWith(name)))
        findings.push({ kind: "instructions", detail: `${name}: "${quote(text, m.index, m[0].length)}"` })
    }
  }
  return findings
}

/**
 * JSON with every object's keys sorted (JCS's order for plain JSON), `undefined` members left out: the same definition
 * hashes the same whatever the server's key order, and so do a call's arguments (Gateway's argumentsDigest).
 */
export const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (value !== null && typeof value === "object")
    return `{${Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`
  return JSON.stringify(value) ?? "null"
}

/** SHA-256 of what the model reads of a definition (name, title, description, schemas, annotations). */
export const definitionHash = (d: ToolDefinition): string =>
  createHash("sha256")
    .update(
      canonicalJson({
        name: d.name,
        title: d.title,
        description: d.description,
        inputSchema: d.inputSchema,
        outputSchema: d.outputSchema,
        annotations: d.annotations,
      }),
    )
    .digest("hex")
