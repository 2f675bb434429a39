import { createHash } from "node:crypto"
import type { BadgeTier } from "./Tier.ts"

/** One colour per tier (D13), dark enough for white text (WCAG AA at 11px bold). */
export const TIER_COLOURS: Readonly<Record<BadgeTier, string>> = {
  bronze: "#8c4f1f",
  silver: "#5b6770",
  gold: "#8a6400",
  platinum: "#2f5d8a",
}
const LABEL_COLOUR = "#3b3b3b"
const NONE_COLOUR = "#6e6e6e"

/** Longest name shown, in characters; longer names end in `…`. */
export const MAX_SHOWN_NAME = 40

/**
 * Characters that must never reach the SVG: C0/C1 controls (not allowed in XML or invisible),
 * bidirectional overrides, embeddings, isolates and marks (U+061C, U+200E, U+200F: they could reorder the
 * badge's own text and spoof a tier), zero-width marks and the BOM, and the noncharacters U+FFFE and U+FFFF
 * (outside XML 1.0's Char: one makes the whole SVG ill-formed, a broken image).
 */
const UNSAFE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point: they are removed
  /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\ufffe\uffff]/g
/** Unpaired surrogates cannot be written as UTF-8. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g

const ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
}

/** Text for an XML text node or attribute value: every markup character escaped. */
export const escapeXml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c]!)

/** A name as shown: unsafe characters removed, at most MAX_SHOWN_NAME characters (code points). */
export const shownName = (name: string): string => {
  const clean = [...name.replace(UNSAFE, "").replace(LONE_SURROGATE, "\ufffd")]
  const text = clean.length > MAX_SHOWN_NAME ? `${clean.slice(0, MAX_SHOWN_NAME - 1).join("")}…` : clean.join("")
  return text.trim() === "" ? "agent" : text
}

/** Width in px of text at 11px Verdana, near enough: wide (CJK, emoji) characters count double. */
const textWidth = (text: string): number => {
  let w = 0
  for (const ch of text) {
    const cp = ch.codePointAt(0)!
    w += cp >= 0x1100 ? 11 : /[mwMW@%]/.test(ch) ? 10 : /[il.,:;'|!]/.test(ch) ? 4 : 7
  }
  return Math.ceil(w)
}

const flat = (label: string, message: string, colour: string, title: string, metadata: string): string => {
  const lw = textWidth(label) + 12
  const mw = textWidth(message) + 12
  const width = lw + mw
  const l = escapeXml(label)
  const m = escapeXml(message)
  // Ids of their own: badges inlined side by side in one HTML page share one id space, and the first
  // badge's clip path would cut every other one to its width.
  const id = `agb-${createHash("sha256").update(`${label}\u0000${message}\u0000${colour}`).digest("hex").slice(0, 10)}`
  // Label and message are separate text elements: a right-to-left name cannot reorder the tier beside it.
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="20" role="img" aria-label="${escapeXml(title)}">
<title>${escapeXml(title)}</title>${metadata}
<linearGradient id="${id}-s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>
<clipPath id="${id}-r"><rect width="${width}" height="20" rx="3" fill="#fff"/></clipPath>
<g clip-path="url(#${id}-r)"><rect width="${lw}" height="20" fill="${LABEL_COLOUR}"/><rect x="${lw}" width="${mw}" height="20" fill="${colour}"/><rect width="${width}" height="20" fill="url(#${id}-s)"/></g>
<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">
<text x="${lw / 2}" y="14" direction="ltr" unicode-bidi="embed">${l}</text>
<text x="${lw + mw / 2}" y="14" font-weight="bold">${m}</text>
</g>
</svg>
`
}

/** D13's badge as SVG: the agent's name, tier and score in the tier's colour, with the JWS in `<metadata>`. */
export const renderBadgeSvg = (badge: {
  readonly agentName: string
  readonly tier: BadgeTier
  readonly score: number
  readonly signature: string
}): string => {
  const name = shownName(badge.agentName)
  const message = `${badge.tier} ${badge.score}`
  // The JWS is base64url and dots only; escaped all the same.
  const metadata = `\n<metadata id="agentgov-badge">${escapeXml(badge.signature)}</metadata>`
  return flat(name, message, TIER_COLOURS[badge.tier], `agentgov trust badge: ${name}, ${message}`, metadata)
}

/** D13: the grey badge of an agent without one; it names nothing, so unknown and deregistered agents look alike. */
export const NOT_VERIFIED_SVG = flat("agentgov", "not verified", NONE_COLOUR, "agentgov trust badge: not verified", "")
