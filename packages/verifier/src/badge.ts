import { createPublicKey, type JsonWebKey, type KeyObject, verify } from "node:crypto"
import type { Jwks } from "./checkpoint.ts"

/**
 * agentgov trust badges (decision D13): a compact JWS (EdDSA, `typ: agentgov-badge+jwt`, `kid`
 * in the service's JWKS) whose payload carries the badge's fields. A badge is presented as its
 * JSON (optionally inside the API's `{ok, data}` envelope), as its SVG (the JWS in `<metadata>`),
 * or as the JWS alone. The service's own `POST /badge/:agentId/verify` uses these same functions.
 */

export const BADGE_TYP = "agentgov-badge+jwt"
export const BADGE_TIERS = ["bronze", "silver", "gold", "platinum"] as const
export type BadgeTier = (typeof BADGE_TIERS)[number]
/** The fields of the badge's JSON, each also in the signed payload. */
export const BADGE_FIELDS = ["agentId", "agentName", "tier", "score", "issuedAt", "expiresAt", "issuer"] as const

/** What a badge's JSON holds: the signed fields, the certifications (also signed) and the signature. */
const SHOWN_FIELDS: ReadonlySet<string> = new Set([...BADGE_FIELDS, "certifications", "signature"])

export type BadgeFailure = "malformed" | "unknown_key" | "bad_signature" | "expired" | "other_agent"

/** A presented badge taken apart, before any check. */
export interface ParsedBadge {
  readonly jws: string
  readonly kid: string
  readonly claims: Readonly<Record<string, unknown>>
  /** The fields the badge's JSON showed beside the JWS, when it was presented as JSON. */
  readonly shown?: Readonly<Record<string, unknown>>
}

export interface BadgeClaims {
  readonly agentId: string
  readonly agentName: string
  readonly tier: BadgeTier
  readonly score: number
  readonly issuedAt: string
  readonly expiresAt: string
  readonly issuer: string
  /** The compliance frameworks the badge names (signed with the rest); [] for a badge that names none. */
  readonly certifications: ReadonlyArray<string>
}

export type BadgeCheck =
  | { readonly valid: true; readonly claims: BadgeClaims; readonly kid: string }
  | {
      readonly valid: false
      readonly reason: BadgeFailure
      /** What the badge claims, when it could be read (a refused badge's claims are not vouched for). */
      readonly claims?: Readonly<Record<string, unknown>>
    }

const COMPACT = /^[\w-]+\.[\w-]+\.[\w-]+$/

const segment = (s: string): Record<string, unknown> | undefined => {
  try {
    const v = JSON.parse(Buffer.from(s, "base64url").toString("utf8")) as unknown
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** The compact JWS a badge's SVG carries in its `<metadata>`, or undefined. */
export const jwsOfSvg = (svg: string): string | undefined =>
  // `[^<>]*`, not `[^>]*`: a try from one `<metadata` stops at the next `<`, so the tries cover disjoint
  // stretches and the match is linear; `[^>]*` rescanned to the end from every unclosed tag (quadratic, some
  // 0.7 s of a blocked event loop for one 64 KiB badge presented to the public verify route).
  /<metadata\b[^<>]*>\s*([\w-]+\.[\w-]+\.[\w-]+)\s*<\/metadata>/.exec(svg)?.[1]

/** Takes a presented badge (JSON text or object, SVG, or JWS) apart; undefined when it is none of them. */
export const parseBadge = (presented: unknown): ParsedBadge | undefined => {
  let jws: string | undefined
  let shown: Record<string, unknown> | undefined
  let value = presented
  if (typeof value === "string") {
    const text = value.trim()
    if (text.startsWith("<")) jws = jwsOfSvg(text)
    else if (text.startsWith("{")) {
      try {
        value = JSON.parse(text) as unknown
      } catch {
        return undefined
      }
    } else jws = text
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const outer = value as Record<string, unknown>
    // The API's answer as saved by curl: `{ok: true, data: badge}`.
    const enveloped = outer.ok === true && typeof outer.data === "object" && outer.data !== null
    shown = enveloped ? (outer.data as Record<string, unknown>) : outer
    jws = typeof shown.signature === "string" ? shown.signature : undefined
    // Anything beside `ok` and `data` is shown with the badge too, and no badge field: named apart (`envelope.x`),
    // checkBadge refuses it as it refuses an unknown field inside the badge.
    const beside = enveloped ? Object.keys(outer).filter((k) => k !== "ok" && k !== "data") : []
    if (beside.length > 0) shown = { ...shown, ...Object.fromEntries(beside.map((k) => [`envelope.${k}`, outer[k]])) }
  }
  if (jws === undefined || !COMPACT.test(jws)) return undefined
  const [h, p] = jws.split(".") as [string, string, string]
  const header = segment(h)
  const claims = segment(p)
  if (!header || !claims) return undefined
  if (header.alg !== "EdDSA" || header.typ !== BADGE_TYP || typeof header.kid !== "string") return undefined
  return { jws, kid: header.kid, claims, ...(shown ? { shown } : {}) }
}

/**
 * Whether the list a badge's JSON shows is the signed one: the same values in the same order, compared one by one.
 * Not by serialising both: a shown list is presented input, nested as deep as a text body allows (third pass).
 */
const sameList = (shown: unknown, signed: unknown): boolean =>
  Array.isArray(shown) &&
  Array.isArray(signed) &&
  shown.length === signed.length &&
  shown.every((v, i) => typeof v === "string" && v === signed[i])

/**
 * Checks a parsed badge with the public key of its `kid` (undefined: no such key). Valid: the
 * signature verifies, the JSON shown beside it (if any) says what was signed, the fields are
 * well-formed, it has not expired at `now` (ms), and, with `agentId`, it is that agent's.
 */
export const checkBadge = (
  parsed: ParsedBadge,
  key: KeyObject | undefined,
  options: { readonly agentId?: string; readonly now?: number } = {},
): BadgeCheck => {
  const { claims } = parsed
  if (!key) return { valid: false, reason: "unknown_key", claims }
  const [h, p, s] = parsed.jws.split(".") as [string, string, string]
  let good = false
  try {
    good = verify(null, Buffer.from(`${h}.${p}`), key, Buffer.from(s, "base64url"))
  } catch {
    good = false
  }
  if (!good) return { valid: false, reason: "bad_signature", claims }
  // JSON whose fields say other than what was signed was altered: the signature does not cover them. So does JSON
  // with a field a badge does not have ("verifiedBy": "…"): a valid answer would vouch for it too.
  const shown = parsed.shown
  if (
    shown !== undefined &&
    (Object.keys(shown).some((k) => !SHOWN_FIELDS.has(k)) ||
      BADGE_FIELDS.some((f) => f in shown && shown[f] !== claims[f]) ||
      ("certifications" in shown && !sameList(shown.certifications, claims.certifications)))
  )
    return { valid: false, reason: "bad_signature", claims }
  const expiresAt = typeof claims.expiresAt === "string" ? Date.parse(claims.expiresAt) : Number.NaN
  if (
    typeof claims.agentId !== "string" ||
    typeof claims.agentName !== "string" ||
    !BADGE_TIERS.includes(claims.tier as BadgeTier) ||
    typeof claims.score !== "number" ||
    !Number.isInteger(claims.score) ||
    typeof claims.issuedAt !== "string" ||
    typeof claims.issuer !== "string" ||
    Number.isNaN(expiresAt) ||
    !(
      claims.certifications === undefined ||
      (Array.isArray(claims.certifications) && claims.certifications.every((c) => typeof c === "string"))
    )
  )
    return { valid: false, reason: "malformed", claims }
  const now = options.now ?? Date.now()
  if (expiresAt <= now || (typeof claims.exp === "number" && claims.exp * 1000 <= now))
    return { valid: false, reason: "expired", claims }
  if (options.agentId !== undefined && (claims.agentId !== options.agentId || claims.sub !== options.agentId))
    return { valid: false, reason: "other_agent", claims }
  const { agentId, agentName, tier, score, issuedAt, issuer } = claims as unknown as BadgeClaims
  const certifications = (claims.certifications as ReadonlyArray<string> | undefined) ?? []
  return {
    valid: true,
    kid: parsed.kid,
    claims: {
      agentId,
      agentName,
      tier,
      score,
      issuedAt,
      expiresAt: claims.expiresAt as string,
      issuer,
      certifications,
    },
  }
}

/** The Ed25519 key of `kid` in a JWKS, or undefined. */
export const keyOfJwks = (jwks: Jwks, kid: string): KeyObject | undefined => {
  const jwk = Array.isArray(jwks?.keys) ? jwks.keys.find((k) => k?.kid === kid) : undefined
  if (jwk?.kty !== "OKP" || jwk.crv !== "Ed25519") return undefined
  try {
    return createPublicKey({ key: jwk as JsonWebKey, format: "jwk" })
  } catch {
    return undefined
  }
}

/** Offline verification against a JWKS saved from `<origin>/.well-known/jwks.json`; `issuer`, when given, must match. */
export const verifyBadge = (
  presented: unknown,
  jwks: Jwks,
  options: { readonly agentId?: string; readonly issuer?: string; readonly now?: number } = {},
):
  | BadgeCheck
  | { readonly valid: false; readonly reason: "wrong_issuer"; readonly claims: Readonly<Record<string, unknown>> } => {
  const parsed = parseBadge(presented)
  if (!parsed) return { valid: false, reason: "malformed" }
  const result = checkBadge(parsed, keyOfJwks(jwks, parsed.kid), options)
  if (result.valid && options.issuer !== undefined && result.claims.issuer !== options.issuer)
    return { valid: false, reason: "wrong_issuer", claims: parsed.claims }
  return result
}
