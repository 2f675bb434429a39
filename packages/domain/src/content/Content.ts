import { Schema } from "effect"
import { Cursor, Id, Limit, Metadata, Name } from "../shared/schemas.ts"

/** Bodies of the content endpoints may be this large (the rest of the API keeps its limit). */
export const CONTENT_MAX_BODY_BYTES = 20 * 1024 * 1024
/** Largest registered text, in characters. */
export const MAX_TEXT_CHARS = 2_000_000

const EXAMPLE_TEXT =
  "Our support agent answered 1,240 customer questions this week. It escalated 37 of them to a person, " +
  "refunded 12 orders under the policy limit, and asked for approval twice before issuing a larger credit. " +
  "Every decision is in the audit trail, with the rule that allowed it and the person who approved it."

/** A 256×256 grey PNG: the smallest image every content operation takes, as the documents' example. */
const EXAMPLE_IMAGE =
  "iVBORw0KGgoAAAANSUhEUgAAAQAAAAEACAIAAADTED8xAAAACXBIWXMAAAPoAAAD6AG1e1JrAAACAElEQVR42u3TMQ0AAAgEsfevjJkZMcxooEkVXHKpHngrEmAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAOogAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAAMAAYAAwABgADgAHAAGAADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAANgABUwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADAAGAAOAAcAAYAAwABgADIABwABgADAAGAAMAAYAA4ABwABgADAAGAAMAAYAA4ABwABgADAAGAAMAAYAA4ABwABgADAAGAAMAAYAA4ABwABgADAAGAAMAAYAA4ABwABgADAAGAAMAAYAA8C1tM0k68Umoc8AAAAASUVORK5CYII="

const Base64Image = Schema.String.annotate({
  description: "the image, base64 (standard alphabet): JPEG, PNG or WebP, at most 40 megapixels",
  examples: [EXAMPLE_IMAGE],
})

export const RegisterContent = Schema.Struct({
  kind: Schema.Literals(["text", "image"]),
  title: Name,
  text: Schema.optionalKey(
    Schema.String.annotate({
      description: "the text, for `kind: text`",
    }),
  ),
  data: Schema.optionalKey(Base64Image),
  metadata: Schema.optionalKey(Metadata),
  watermark: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "embed an invisible watermark carrying the content id (still images of at least 256×256 only; 422 when it does not read back)",
    }),
  ),
  c2pa: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "sign a C2PA manifest into the asset (images): a `c2pa.created` action, the workspace as author, a hard binding, and a soft binding naming the watermark when there is one",
    }),
  ),
  agentId: Schema.optionalKey(Schema.String.annotate({ description: "the agent that produced it" })),
}).annotate({
  identifier: "RegisterContent",
  examples: [{ kind: "text", title: "Weekly support report", text: EXAMPLE_TEXT }],
})
export type RegisterContent = typeof RegisterContent.Type

export const TextFingerprintSummary = Schema.Struct({
  algorithm: Schema.Literals(["winnow-5w8-minhash64", "winnow-5w4-minhash64"]).annotate({
    description:
      "5-word shingles winnowed with a window of 8 (4 for texts registered until 2026-11-27), and a 64-slot MinHash",
  }),
  words: Schema.Int,
  fingerprints: Schema.Int.annotate({ description: "winnowed 5-word shingle hashes indexed" }),
})
export const ImageFingerprintSummary = Schema.Struct({
  algorithm: Schema.Literal("phash64+dhash64"),
  phash: Schema.String.annotate({ description: "64-bit DCT perceptual hash, hex" }),
  dhash: Schema.String.annotate({ description: "64-bit difference hash, hex" }),
  mirrorPhash: Schema.String,
  mirrorDhash: Schema.String,
  width: Schema.Int,
  height: Schema.Int,
})

export const Span = Schema.Struct({
  start: Schema.Int.annotate({ description: "UTF-16 offset of the first character" }),
  end: Schema.Int.annotate({ description: "UTF-16 offset after the last character" }),
})
export const MatchedSpan = Schema.Struct({
  candidate: Span.annotate({ description: "in the scanned text" }),
  registered: Span.annotate({ description: "in the registered text" }),
  words: Schema.Int,
})

export const MatchMethod = Schema.Literals(["text-winnowing", "text-minhash", "phash", "phash-mirror", "watermark"])

export const ContentMatch = Schema.Struct({
  id: Schema.optionalKey(Id("mch").annotate({ description: "set when the match was recorded (above threshold)" })),
  contentId: Schema.String,
  similarity: Schema.Finite.annotate({
    description:
      "0..1: for text, the share of the registered text found (for a whole-document near-duplicate, the MinHash estimate of Jaccard); for images, 1 − distance/64; for a watermark, its confidence",
  }),
  method: MatchMethod,
  spans: Schema.optionalKey(Schema.Array(MatchedSpan)),
  distance: Schema.optionalKey(Schema.Int.annotate({ description: "pHash Hamming distance (images)" })),
  watermark: Schema.optionalKey(
    Schema.Struct({ contentId: Schema.String, confidence: Schema.Finite }).annotate({
      description: "the watermark read in the candidate",
    }),
  ),
  url: Schema.optionalKey(Schema.String),
  createdAt: Schema.optionalKey(Schema.String),
}).annotate({ identifier: "ContentMatch" })
export type ContentMatch = typeof ContentMatch.Type

export const ContentItem = Schema.Struct({
  id: Id("cnt"),
  workspaceId: Schema.String,
  kind: Schema.Literals(["text", "image"]),
  title: Schema.String,
  mediaType: Schema.String,
  sha256: Schema.String.annotate({ description: "SHA-256 of the protected asset, hex" }),
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  agentId: Schema.NullOr(Schema.String),
  fingerprint: Schema.Union([TextFingerprintSummary, ImageFingerprintSummary]),
  watermark: Schema.Struct({
    embedded: Schema.Boolean,
    psnr: Schema.optionalKey(Schema.Finite.annotate({ description: "dB, of the watermarked image" })),
  }),
  c2pa: Schema.Struct({
    signed: Schema.Boolean,
    source: Schema.optionalKey(
      Schema.Literals(["issued", "operator"]).annotate({
        description: "signed by the service's own credential (`issued`) or the operator's (AGENTGOV_C2PA_CERT)",
      }),
    ),
  }),
  matches: Schema.optionalKey(Schema.Array(ContentMatch).annotate({ description: "the match history, newest first" })),
  createdAt: Schema.String,
}).annotate({ identifier: "ContentItem" })
export type ContentItem = typeof ContentItem.Type

export const ContentListQuery = Schema.Struct({
  limit: Schema.optionalKey(Limit),
  cursor: Schema.optionalKey(Cursor),
  kind: Schema.optionalKey(Schema.Literals(["text", "image"])),
})
export type ContentListQuery = typeof ContentListQuery.Type

export const ScanContent = Schema.Struct({
  text: Schema.optionalKey(Schema.String.annotate({ description: "a candidate text" })),
  data: Schema.optionalKey(Base64Image.annotate({ description: "a candidate image, base64" })),
  url: Schema.optionalKey(
    Schema.String.check(Schema.isMaxLength(2048)).annotate({
      description:
        "where the candidate was found: an http(s) URL without control characters, kept with each match and quoted in takedown notices",
    }),
  ),
}).annotate({ identifier: "ScanContent" })
export type ScanContent = typeof ScanContent.Type

export const ScanResult = Schema.Struct({
  matches: Schema.Array(ContentMatch).annotate({ description: "best first" }),
  c2pa: Schema.Struct({
    present: Schema.Boolean,
    valid: Schema.optionalKey(Schema.Boolean),
    state: Schema.optionalKey(
      Schema.String.annotate({ description: "c2pa-rs's validation state: `Invalid`, `Valid` or `Trusted`" }),
    ),
    failures: Schema.optionalKey(
      Schema.Array(Schema.String).annotate({
        description: "c2pa-rs's failure codes, e.g. `assertion.dataHash.mismatch` for a modified asset",
      }),
    ),
  }).annotate({
    description:
      "whether the candidate carries a C2PA manifest and whether it validates (`Trusted`: signed by this service's credential)",
  }),
})
export type ScanResult = typeof ScanResult.Type

export const DetectWatermark = Schema.Struct({ data: Base64Image }).annotate({ identifier: "DetectWatermark" })
export const WatermarkDetection = Schema.Struct({
  found: Schema.Boolean,
  contentId: Schema.optionalKey(Schema.String),
  confidence: Schema.optionalKey(
    Schema.Finite.annotate({ description: "share of the payload's blocks that agree, 0.7..1" }),
  ),
  registered: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "whether the id is an item of this workspace" }),
  ),
})

export const CreateTakedown = Schema.Struct({
  matchId: Schema.optionalKey(Schema.String.annotate({ description: "the recorded match (`mch_…`) it answers" })),
  targetUrl: Schema.String.check(Schema.isMaxLength(2048)).annotate({ description: "the infringing location" }),
  recipient: Schema.String.check(Schema.isMaxLength(320)).annotate({ description: "the e-mail address to notify" }),
  note: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(4000))),
}).annotate({ identifier: "CreateTakedown" })
export type CreateTakedown = typeof CreateTakedown.Type

export const Takedown = Schema.Struct({
  id: Id("tkd"),
  contentId: Schema.String,
  matchId: Schema.NullOr(Schema.String),
  targetUrl: Schema.String,
  recipient: Schema.String,
  note: Schema.NullOr(Schema.String),
  notice: Schema.String.annotate({ description: "the notice as sent, with its evidence" }),
  status: Schema.Literals(["pending", "sent", "failed"]).annotate({
    description:
      "`pending` when no SMTP server is configured (SMTP_URL) or the sending was cut short, `failed` when the server refused the notice or did not take it in time (`error` says which)",
  }),
  error: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  sentAt: Schema.NullOr(Schema.String),
}).annotate({ identifier: "Takedown" })
export type Takedown = typeof Takedown.Type
