import type { Severity } from "../severity.ts"

/**
 * How each severity looks in chat: a colour (hex, for Slack attachments, Discord embeds and Teams
 * accents), an emoji, a word, and the Adaptive Card colour name.
 *
 * @example
 * ```ts
 * import { SEVERITY_STYLE } from "@agentgov/connector-sdk/format"
 *
 * const { emoji, label } = SEVERITY_STYLE[message.severity] // "🔴", "Critical"
 * ```
 */
export const SEVERITY_STYLE: Readonly<
  Record<
    Severity,
    {
      readonly colour: string
      readonly emoji: string
      readonly label: string
      readonly adaptiveColor: "Good" | "Warning" | "Attention" | "Accent"
    }
  >
> = {
  info: { colour: "#2e90fa", emoji: "🔵", label: "Info", adaptiveColor: "Accent" },
  warning: { colour: "#f79009", emoji: "🟠", label: "Warning", adaptiveColor: "Warning" },
  error: { colour: "#d92d20", emoji: "🔴", label: "Error", adaptiveColor: "Attention" },
  critical: { colour: "#7a0916", emoji: "🚨", label: "Critical", adaptiveColor: "Attention" },
}

/**
 * Cuts `text` to at most `max` UTF-16 code units (what Slack, Discord and Teams count), ending with
 * `…` when cut, never splitting a surrogate pair.
 *
 * @example
 * ```ts
 * import { truncate } from "@agentgov/connector-sdk/format"
 *
 * truncate("a long reason", 6) // "a lon…"
 * ```
 */
export const truncate = (text: string, max: number): string => {
  if (text.length <= max) return text
  if (max <= 0) return ""
  let cut = max - 1
  const code = text.charCodeAt(cut - 1)
  if (code >= 0xd800 && code <= 0xdbff) cut--
  return `${text.slice(0, cut)}…`
}

/**
 * Unicode's bidirectional embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069): in event text
 * they reverse what a reader sees (`"\u202e0001$"` reads "$1000"). Right-to-left text needs none of them to show as
 * written. Global: for `replace`.
 */
export const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g

/**
 * Event text with the bidirectional controls dropped, for any vendor's message.
 *
 * @example
 * ```ts
 * import { dropBidiControls } from "@agentgov/connector-sdk/format"
 *
 * dropBidiControls("\u202e0001$") // "0001$"
 * ```
 */
export const dropBidiControls = (text: string): string => text.replace(BIDI_CONTROLS, "")

/** Line breaks of every kind (CR, LF, VT, FF, NEL, LS, PS), runs of them. Global: for `replace`. */
export const LINE_BREAKS = /[\r\n\v\f\u0085\u2028\u2029]+/g

/**
 * Event text on one line, each run of line breaks a space: in a notification, a digest's text part or a card's
 * fallback, an event's own line breaks would forge lines of the message (a second link line).
 *
 * @example
 * ```ts
 * import { oneLine } from "@agentgov/connector-sdk/format"
 *
 * oneLine("denied\nOpen the event: https://evil.example") // "denied Open the event: https://evil.example"
 * ```
 */
export const oneLine = (text: string): string => text.replace(LINE_BREAKS, " ")
