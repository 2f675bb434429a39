import { Schema, SchemaTransformation } from "effect"

/** Names and labels people type: trimmed of nothing, 1..200 characters. */
export const Name = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))
export const Description = Schema.String.check(Schema.isMaxLength(2000))
/** Whitespace, control characters and the invisible format characters (zero-width, bidi controls, BOM, soft hyphen). */
const UNSEEN_CLASS = String.raw`[\s\p{Cc}\p{Cf}\p{Zl}\p{Zp}]`
/** One such character (the guard's action names refuse any). */
export const UNSEEN = new RegExp(UNSEEN_CLASS, "u")
/** Nothing but such characters (or nothing at all). */
const BLANK = new RegExp(`^${UNSEEN_CLASS}*$`, "u")

/**
 * A reason or note a person can read: not empty, nor only whitespace or invisible characters. An optional note is
 * left out for none; a blank one was stored as a note that says nothing (`""` beside `null`).
 */
export const isReadable = Schema.makeFilter(
  (s: string) => !BLANK.test(s) || "must not be empty, nor only whitespace or invisible characters",
)

/**
 * What a displayed name must not hold: C0 and C1 controls (ESC starts a terminal escape sequence, a newline
 * forges a line in a log or a chat message), the line and paragraph separators, and the bidirectional
 * embeddings, overrides and isolates (they reorder what is shown: "Trojan Source").
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are what is refused
export const UNSHOWABLE_CHARS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

/** A stored name as text for a terminal or a log line: each unshowable character written as a `\u` escape. */
export const escapeUnshowable = (name: string): string =>
  name.replace(UNSHOWABLE_CHARS, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** The checks of a string people read as one line (a name, a version): none of UNSHOWABLE_CHARS, not padded. */
export const showable = () =>
  [
    Schema.makeFilter(
      (s: string) =>
        s.search(UNSHOWABLE_CHARS) === -1 ||
        "must not contain control characters, line separators or bidirectional controls",
    ),
    Schema.makeFilter((s: string) => s.trim() === s || "must not begin or end with whitespace"),
  ] as const

/**
 * The name of a workspace or an agent: shown in the dashboard, on public badges, in chat messages and on the
 * operator's terminal. 1..200 characters, none of UNSHOWABLE_CHARS, no whitespace at either end (so not
 * blank). Services store it in Unicode NFC, so names that look alike are equal.
 */
export const DisplayName = Name.check(...showable()).annotate({
  description:
    "1..200 characters, without control characters, line separators or bidirectional controls, and without whitespace at either end; stored in Unicode NFC",
})

export const Label = Schema.String.check(Schema.isPattern(/^[a-z0-9][a-z0-9_.:/-]{0,62}$/)).annotate({
  description: "lowercase letters, digits and _ . : / -, at most 63 characters",
})
export const Labels = Schema.Array(Label).check(Schema.isMaxLength(50))

type JsonObjectType = { readonly [key: string]: unknown }
/** A JSON object: an object, not an array or null. */
export const isJsonObject = (u: unknown): u is JsonObjectType =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * An input field that holds any JSON object (event data, a guard's context, metadata). Checked as one
 * value: `Schema.Record(String, Unknown)` runs a parser per key and copies the object, which was two
 * thirds of decoding an ingest call of 100 events. Documented (OpenAPI) as that record, with
 * `annotations`; the size limits are the services' to check.
 */
export const jsonObject = (annotations: { readonly description: string }) =>
  Schema.declare(isJsonObject, {
    expected: "object",
    toCodecJson: () =>
      Schema.link<JsonObjectType>()(
        Schema.Record(Schema.String, Schema.Unknown).annotate(annotations),
        SchemaTransformation.passthrough(),
      ),
  })

export const Metadata = jsonObject({ description: "free-form JSON object, at most 16 KiB encoded" })
const ISO_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-](\d{2}):(\d{2}))$/

/**
 * A real calendar instant in ISO 8601 with a zone (`Z` or `±hh:mm`), years
 * 1970..9999. `Date.parse` alone would roll 2030-02-30 over to March and
 * accept years PostgreSQL cannot store.
 */
export const isTimestamp = (s: string): boolean => {
  const m = ISO_TIMESTAMP.exec(s)
  if (!m) return false
  const [y, mo, d, h, mi, sec] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? "0"].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  if (y < 1970 || mo < 1 || mo > 12 || h > 23 || mi > 59 || sec > 59) return false
  if (m[8] !== undefined && (Number(m[8]) > 23 || Number(m[9]) > 59)) return false
  const day = new Date(Date.UTC(y, mo - 1, d))
  if (day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d) return false
  // The instant, not the year as written, must be within 1970..9999 in UTC: an offset can cross either end.
  const utcYear = new Date(Date.parse(s)).getUTCFullYear()
  return utcYear >= 1970 && utcYear <= 9999
}

export const Timestamp = Schema.String.check(
  Schema.makeFilter(
    (s: string) => isTimestamp(s) || "expected an ISO 8601 timestamp with a zone, e.g. 2026-11-20T23:59:59.123Z",
  ),
).annotate({ description: "ISO 8601 UTC with milliseconds", format: "date-time" })
/**
 * A timestamp field (D3) with its own description (and examples). Unlike `Timestamp`, whose filter has no
 * JSON Schema form (so a description given to it is dropped from the document), this one shows as
 * `format: date-time` with its description.
 */
export const DateTime = (description: string, examples?: ReadonlyArray<string>) =>
  Schema.String.annotate({ description, ...(examples ? { examples: [...examples] } : {}) }).check(
    Schema.makeFilter(
      (s: string) => isTimestamp(s) || "expected an ISO 8601 timestamp with a zone, e.g. 2026-11-20T23:59:59.123Z",
      { toJsonSchema: () => ({ format: "date-time" }) },
    ),
  )
export const Id = (prefix: string) => Schema.String.annotate({ description: `opaque id with prefix \`${prefix}_\`` })

export const Limit = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })).annotate({
  description: "page size, 1..100, default 25",
})
export const Cursor = Schema.String.annotate({ description: "`meta.cursor` of the previous page" })

/** The page envelope of a list operation. */
export const PageOf = <S extends Schema.Top>(item: S) =>
  Schema.Struct({
    data: Schema.Array(item),
    meta: Schema.Struct({ cursor: Schema.NullOr(Schema.String), hasMore: Schema.Boolean }),
  })

export const METADATA_MAX_BYTES = 16 * 1024
