import { createHash } from "node:crypto"
import { jsonb, storeUnreachable } from "@agentgov/db"
import { Cause, Clock, Context, Effect, Exit, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { AgentNotFound } from "../agents/AgentErrors.ts"
import { AgentRepo } from "../agents/AgentRepo.ts"
import type { NewEvent } from "../audit/AuditEvent.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import type { Actor } from "../auth/Actor.ts"
import { dailyCapReached } from "../shared/dailyCap.ts"
import { InvalidInput, PermissionDenied, StateConflict } from "../shared/errors.ts"
import { firstIdAt, newId } from "../shared/ids.ts"
import { idCursor, type Page, type PageRequest, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { METADATA_MAX_BYTES } from "../shared/schemas.ts"
import { DAY_MS, isoOf } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { C2paSigner } from "./C2paSigner.ts"
import {
  type ContentItem,
  type ContentListQuery,
  type ContentMatch,
  type CreateTakedown,
  MAX_TEXT_CHARS,
  type RegisterContent,
  type ScanContent,
  type ScanResult,
  type Takedown,
} from "./Content.ts"
import { ContentNotFound, TakedownLimitReached } from "./ContentErrors.ts"
import { ContentSettings } from "./ContentSettings.ts"
import { type ManifestReading, readManifest, signManifest } from "./c2pa.ts"
import {
  hamming,
  hashImage,
  IMAGE_INDEX_INSERT_SQL,
  IMAGE_MEDIA_TYPES,
  IMAGE_RADIUS,
  indexRows,
  inspectImage,
} from "./imageHash.ts"
import { type ImageHit, type ImageQuery, lookupImage } from "./imageIndex.ts"
import { withImageSlot } from "./loadSharp.ts"
import { composeNotice, sendNotice } from "./takedownNotice.ts"
import {
  candidateFingerprints,
  copiedSpans,
  coverage,
  distinctCount,
  FOLD_VERSION,
  fingerprintText,
  LEGACY_WINDOW,
  minHashOf,
  minHashSimilarity,
  SHINGLE_WORDS,
  seedPairs,
  shingleHashes,
  type Token,
  tokenize,
  tokenizeLegacy,
  WINDOW,
} from "./textFingerprint.ts"
import { detectWatermark, embedWatermark, MIN_WATERMARK_SIDE } from "./watermark.ts"

interface ItemRow {
  readonly id: string
  readonly workspace_id: string
  readonly kind: "text" | "image"
  readonly title: string
  readonly media_type: string
  readonly metadata: Record<string, unknown>
  readonly asset: string
  readonly sha256: string
  readonly width: number | null
  readonly height: number | null
  readonly words: number | null
  /** Texts: the winnowing window their fingerprints were kept with (4 until 2026-11-27, then WINDOW). */
  readonly fingerprint_window: number | null
  readonly minhash: ReadonlyArray<number> | null
  readonly phash: string | null
  readonly dhash: string | null
  readonly mirror_phash: string | null
  readonly mirror_dhash: string | null
  readonly watermarked: boolean
  readonly watermark_psnr: number | null
  readonly c2pa: unknown
  readonly agent_id: string | null
  readonly created_at: Date
  readonly fingerprints?: number | string
}

interface MatchRow {
  readonly id: string
  readonly content_id: string
  readonly method: ContentMatch["method"]
  readonly similarity: number
  readonly evidence: Omit<ContentMatch, "id" | "contentId" | "similarity" | "method" | "url" | "createdAt">
  readonly url: string | null
  readonly created_at: Date
}

interface TakedownRow {
  readonly id: string
  readonly content_id: string
  readonly match_id: string | null
  readonly target_url: string
  readonly recipient: string
  readonly note: string | null
  readonly notice: string
  readonly status: Takedown["status"]
  readonly error: string | null
  readonly created_at: Date
  readonly sent_at: Date | null
}

/** A text match is recorded from this share of the registered text found (or MinHash Jaccard). */
export const TEXT_RECORD_THRESHOLD = 0.05
/** An image match is recorded at this similarity (pHash distance ≤ 10 of 64 bits). */
export const IMAGE_RECORD_THRESHOLD = 1 - IMAGE_RADIUS / 64
/** Items a text scan verifies at most, the ones sharing most fingerprints first. */
const MAX_TEXT_CANDIDATES = 50
/** Takedown notices a workspace may submit in any 24 hours (TakedownLimitReached beyond). */
export const TAKEDOWNS_PER_DAY = 100
const MINHASH_NEAR_DUPLICATE = 0.5
/** Stored text (base64 characters) a text scan loads at most in one statement; an item larger goes alone. */
const TEXT_BATCH_CHARS = 8 * 1024 * 1024

/**
 * The inverted-index lookup of a text scan (`$1` workspace, `$2` the candidate's fingerprint hashes, `$3` one
 * item or null): one probe of the hash index (migration 0022) per fingerprint, keyed by the hash combined with a
 * 32-bit hash of the workspace; the workspace itself is checked on the rows found, the key not being unique.
 *
 * A join with the hashes, an index probe a hash in a nested loop, not `= ANY(ARRAY(…))`: a hash index is lossy, so
 * a bitmap scan rechecks each row it finds against the array, and that array (not a constant) is searched one
 * element after another. Rows found × fingerprints sent: a 2,000,000-character candidate (62,000 fingerprints)
 * that shares its own rows spent 7.9 s in that recheck, the join 0.09 s (EXPLAIN ANALYZE, review "content").
 */
export const TEXT_LOOKUP_SQL = `SELECT f.content_id, f.hash, f.pos
  FROM (SELECT DISTINCT h FROM unnest($2::bigint[]) AS h) AS c
  JOIN content_text_fingerprints f
    ON (f.hash # (hashtext(f.workspace_id)::bigint << 32)) = (c.h # (hashtext($1)::bigint << 32))
  WHERE f.workspace_id = $1 AND ($3::text IS NULL OR f.content_id = $3)`

/**
 * TEXT_LOOKUP_SQL while texts fingerprinted under an older fold remain (the refold worker has not finished): `$4`
 * holds the candidate's hashes cut as those texts were (`tokenizeLegacy`), and each row found is kept only when
 * found by the hashes of its item's fold, which the row says (`legacy`). One statement: a text's rows and its fold
 * are read in one snapshot, and the worker changes both in one transaction.
 */
export const TEXT_LOOKUP_REFOLDING_SQL = `SELECT f.content_id, f.hash, f.pos, c.legacy
  FROM (SELECT DISTINCT h, false AS legacy FROM unnest($2::bigint[]) AS h
    UNION SELECT DISTINCT h, true FROM unnest($4::bigint[]) AS h) AS c
  JOIN content_text_fingerprints f
    ON (f.hash # (hashtext(f.workspace_id)::bigint << 32)) = (c.h # (hashtext($1)::bigint << 32))
  JOIN content_items i ON i.id = f.content_id
  WHERE f.workspace_id = $1 AND ($3::text IS NULL OR f.content_id = $3)
    AND (coalesce(i.fingerprint_fold, ${FOLD_VERSION}) < ${FOLD_VERSION}) = c.legacy`

/** Texts the refold worker fingerprints again in one transaction (their rows locked, SKIP LOCKED by the others). */
export const REFOLD_BATCH = 16
/** How long the refold worker waits while another instance holds the last texts, or after a failure (ms). */
const REFOLD_PAUSE_MS = 1_000
/** How long a text that failed to be fingerprinted again waits before the worker tries it once more (ms). */
const STUCK_RETRY_MS = 600_000
/** Texts set aside in a row, each failing alone, past which the failure is taken as the store's, not theirs. */
const STUCK_IN_A_ROW = 3
/** A wait on a real timer, cleared when interrupted (a worker's 10 minutes must not hold a closing process). */
const pause = (ms: number) =>
  Effect.promise(
    (signal) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms)
        signal.addEventListener("abort", () => {
          clearTimeout(timer)
          resolve()
        })
      }),
  )

/**
 * Days a recorded match no takedown cites is kept (ContentSettings.matchRetentionDays overrides): three years, the
 * time within which a civil claim for a copyright infringement must be brought in the United States (17 U.S.C.
 * § 507(b)), so the evidence of a copy found is there for as long as it can be acted on. A match a takedown cites
 * is kept as long as the takedown, whose notice quotes it; the audit trail keeps every `content.match.detected`.
 */
export const MATCH_RETENTION_DAYS = 1_095
/** Matches one purge deletes at most (the sweep runs every 30 s by default). */
const MATCH_PURGE_LIMIT = 10_000

/** Image work (sharp, c2pa-rs) in one of the process's few slots: see IMAGE_SLOTS. */
const imaging = <A>(work: () => Promise<A>) => Effect.promise(() => withImageSlot(work))

const STRICT_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** The bytes of a base64 field, or why they are not. */
const decodeBase64 = (field: string, value: string): Buffer | InvalidInput => {
  const compact = value.replace(/\s+/g, "")
  if (compact.length === 0 || compact.length % 4 !== 0 || !STRICT_BASE64.test(compact))
    return new InvalidInput({ field, message: "is not valid base64" })
  return Buffer.from(compact, "base64")
}

const toMatch = (m: MatchRow): ContentMatch => ({
  id: m.id,
  contentId: m.content_id,
  similarity: m.similarity,
  method: m.method,
  ...m.evidence,
  ...(m.url !== null ? { url: m.url } : {}),
  createdAt: m.created_at.toISOString(),
})

const toItem = (r: ItemRow, matches?: ReadonlyArray<MatchRow>): ContentItem => ({
  id: r.id,
  workspaceId: r.workspace_id,
  kind: r.kind,
  title: r.title,
  mediaType: r.media_type,
  sha256: r.sha256,
  metadata: r.metadata,
  agentId: r.agent_id,
  fingerprint:
    r.kind === "text"
      ? {
          algorithm: r.fingerprint_window === LEGACY_WINDOW ? "winnow-5w4-minhash64" : "winnow-5w8-minhash64",
          words: r.words ?? 0,
          fingerprints: Number(r.fingerprints ?? 0),
        }
      : {
          algorithm: "phash64+dhash64",
          phash: r.phash!,
          dhash: r.dhash!,
          mirrorPhash: r.mirror_phash!,
          mirrorDhash: r.mirror_dhash!,
          width: r.width!,
          height: r.height!,
        },
  watermark: { embedded: r.watermarked, ...(r.watermark_psnr !== null ? { psnr: r.watermark_psnr } : {}) },
  c2pa:
    r.c2pa === null
      ? { signed: false }
      : { signed: true, source: (r.c2pa as { source: "issued" | "operator" }).source },
  ...(matches ? { matches: matches.map(toMatch) } : {}),
  createdAt: r.created_at.toISOString(),
})

const toTakedown = (t: TakedownRow): Takedown => ({
  id: t.id,
  contentId: t.content_id,
  matchId: t.match_id,
  targetUrl: t.target_url,
  recipient: t.recipient,
  note: t.note,
  notice: t.notice,
  status: t.status,
  error: t.error,
  createdAt: t.created_at.toISOString(),
  sentAt: t.sent_at?.toISOString() ?? null,
})

const ITEM_COLUMNS = `id, workspace_id, kind, title, media_type, metadata, sha256, width, height, words, fingerprint_window, minhash, phash,
  dhash, mirror_phash, mirror_dhash, watermarked, watermark_psnr, c2pa, agent_id, created_at`

const EMAIL = /^[^\s@<>(),;:"[\]]+@[^\s@<>(),;:"[\]]+\.[^\s@<>(),;:"[\]]+$/
/**
 * Control and format characters (C0, DEL, C1, U+202E and the other bidi controls, zero-width characters): no
 * address holds one, nodemailer drops some from the To header while sending them in RCPT TO, and a reader sees
 * the address reordered or hiding a part.
 */
const ADDRESS_INVISIBLE = /[\p{Cc}\p{Cf}]/u

/**
 * Content protection (decision D15): registers texts and images with their fingerprints (and, for images,
 * an invisible watermark), scans candidates against them, records matches and sends takedown notices.
 */
export class ContentService extends Context.Service<
  ContentService,
  {
    readonly register: (
      actor: Actor,
      input: RegisterContent,
    ) => Effect.Effect<ContentItem, InvalidInput | PermissionDenied | AgentNotFound | StateConflict>
    readonly list: (actor: Actor, query: ContentListQuery) => Effect.Effect<Page<ContentItem>, InvalidCursor>
    readonly get: (actor: Actor, id: string) => Effect.Effect<ContentItem, ContentNotFound>
    readonly asset: (actor: Actor, id: string) => Effect.Effect<{ mediaType: string; data: Buffer }, ContentNotFound>
    readonly scan: (
      actor: Actor,
      input: ScanContent,
      contentId?: string,
    ) => Effect.Effect<ScanResult, InvalidInput | ContentNotFound>
    readonly detectWatermark: (
      actor: Actor,
      data: string,
    ) => Effect.Effect<{ found: boolean; contentId?: string; confidence?: number; registered?: boolean }, InvalidInput>
    readonly createTakedown: (
      actor: Actor,
      contentId: string,
      input: CreateTakedown,
    ) => Effect.Effect<Takedown, InvalidInput | ContentNotFound | TakedownLimitReached>
    readonly listTakedowns: (
      actor: Actor,
      contentId: string,
      page: PageRequest,
    ) => Effect.Effect<Page<Takedown>, ContentNotFound | InvalidCursor>
    /**
     * Fingerprints again, in batches, every text still at an older fold, until none is left (on any instance);
     * answers how many this call did. The layer runs it in the background from its start (`refoldWorker`).
     */
    readonly refold: Effect.Effect<number>
    /**
     * Deletes the matches older than the retention (ContentSettings.matchRetentionDays) that no takedown cites, at
     * most MATCH_PURGE_LIMIT a call; answers how many. Run by the server's housekeeping sweep.
     */
    readonly purgeMatches: Effect.Effect<number>
  }
>()("@agentgov/domain/content/ContentService") {
  static readonly layer = Layer.effect(
    ContentService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* AuditLog
      const agents = yield* AgentRepo
      const c2pa = yield* C2paSigner
      const tx = transactional(sql)
      /** The image multi-index's statements (imageIndex.ts), on this service's database. */
      const query: ImageQuery = (statement, params) =>
        sql.unsafe<Record<string, unknown>>(statement, params as Array<unknown>).pipe(Effect.orDie)

      /** A text's fingerprint rows, in one statement (at registration, and when it is fingerprinted again). */
      const insertFingerprints = (
        workspaceId: string,
        contentId: string,
        fingerprints: ReturnType<typeof fingerprintText>["fingerprints"],
      ) =>
        sql`INSERT INTO content_text_fingerprints (workspace_id, hash, content_id, pos)
          SELECT ${workspaceId}, x.hash, ${contentId}, x.pos
          FROM jsonb_to_recordset(${JSON.stringify(fingerprints)}::text::jsonb) AS x(hash bigint, pos integer)`

      const findItem = (workspaceId: string, id: string) =>
        sql<ItemRow>`SELECT ${sql.literal(ITEM_COLUMNS)},
              (SELECT count(*) FROM content_text_fingerprints f WHERE f.content_id = c.id) AS fingerprints
            FROM content_items c WHERE workspace_id = ${workspaceId} AND id = ${id}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie,
        )

      const requireItem = (actor: Actor, id: string) =>
        Effect.gen(function* () {
          const row = yield* findItem(actor.workspaceId, id)
          if (!row) return yield* new ContentNotFound({ contentId: id })
          return row
        })

      /**
       * An http(s) URL a person will read in a takedown notice (`targetUrl`, a scan's `url`): control characters
       * are refused rather than dropped by the URL parser, so nothing sent can start a new line of the notice.
       */
      const httpUrl = (field: string, value: string) =>
        Effect.gen(function* () {
          // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses
          if (/[\u0000-\u001f\u007f]/.test(value))
            return yield* new InvalidInput({ field, message: "contains a control character (a line break, a tab…)" })
          let url: URL
          try {
            url = new URL(value)
          } catch {
            return yield* new InvalidInput({ field, message: "is not a URL" })
          }
          if (url.protocol !== "http:" && url.protocol !== "https:")
            return yield* new InvalidInput({ field, message: "must be http or https" })
          return url
        })

      /** The image bytes of a field, checked to be a JPEG, PNG or WebP under the pixel limit. */
      const imageInput = (field: string, value: string | undefined) =>
        Effect.gen(function* () {
          if (value === undefined) return yield* new InvalidInput({ field, message: "is required for an image" })
          const bytes = decodeBase64(field, value)
          if (bytes instanceof InvalidInput) return yield* bytes
          const image = yield* imaging(() => inspectImage(bytes))
          if (typeof image === "string") return yield* new InvalidInput({ field, message: image })
          return { bytes, image }
        })

      const register = Effect.fn("ContentService.register")(function* (actor: Actor, input: RegisterContent) {
        if (actor.agentId !== undefined && input.agentId !== undefined && input.agentId !== actor.agentId)
          return yield* new PermissionDenied({ message: "this credential is bound to another agent" })
        const agentId = input.agentId ?? actor.agentId
        if (agentId !== undefined) {
          const agent = yield* agents.find(actor.workspaceId, agentId).pipe(Effect.orDie)
          if (!agent) return yield* new AgentNotFound({ agentId })
        }
        const metadata = input.metadata ?? {}
        if (Buffer.byteLength(JSON.stringify(metadata)) > METADATA_MAX_BYTES)
          return yield* new InvalidInput({ field: "metadata", message: "exceeds 16 KiB" })
        const now = yield* Clock.currentTimeMillis
        const id = newId("cnt", now)

        if (input.kind === "text") {
          if (input.data !== undefined) return yield* new InvalidInput({ field: "data", message: "is for images" })
          if (input.watermark === true)
            return yield* new InvalidInput({
              field: "watermark",
              message: "texts take no watermark: any normaliser strips invisible marks from text",
            })
          if (input.c2pa === true)
            return yield* new InvalidInput({ field: "c2pa", message: "C2PA manifests are signed into images only" })
          const text = input.text
          if (text === undefined || text.trim() === "")
            return yield* new InvalidInput({ field: "text", message: "is required for a text" })
          if (text.length > MAX_TEXT_CHARS)
            return yield* new InvalidInput({ field: "text", message: `exceeds ${MAX_TEXT_CHARS} characters` })
          const fp = fingerprintText(text)
          if (fp.tokens.length === 0)
            return yield* new InvalidInput({ field: "text", message: "has no words once normalised" })
          const asset = Buffer.from(text, "utf8")
          return yield* tx(
            Effect.gen(function* () {
              yield* sql`INSERT INTO content_items (id, workspace_id, kind, title, media_type, metadata, asset, sha256,
                  words, fingerprint_window, fingerprint_fold, minhash, watermarked, agent_id, created_by, created_at)
                VALUES (${id}, ${actor.workspaceId}, 'text', ${input.title}, 'text/plain; charset=utf-8',
                  ${jsonb(sql, metadata)}, ${asset.toString("base64")}, ${createHash("sha256").update(asset).digest("hex")},
                  ${fp.tokens.length}, ${WINDOW}, ${FOLD_VERSION}, ${jsonb(sql, fp.minhash)}, false, ${agentId ?? null}, ${actor.credential.id},
                  ${isoOf(now)}::timestamptz)`
              yield* insertFingerprints(actor.workspaceId, id, fp.fingerprints)
              yield* audit.append(actor, [
                {
                  type: "content.registered",
                  agentId: agentId ?? null,
                  data: {
                    contentId: id,
                    mediaType: "text/plain",
                    fingerprint: `minhash64:${Buffer.from(Uint32Array.from(fp.minhash.slice(0, 4)).buffer).toString("hex")}`,
                    watermarked: false,
                    c2pa: false,
                    ...(agentId !== undefined ? { agentId } : {}),
                  },
                },
              ])
              return toItem((yield* findItem(actor.workspaceId, id))!)
            }),
          ).pipe(Effect.orDie)
        }

        if (input.text !== undefined) return yield* new InvalidInput({ field: "text", message: "is for texts" })
        const { bytes, image } = yield* imageInput("data", input.data)
        // The hashes are of the image as sent, computed by sharp on its own threads while the watermark is fitted
        // (mostly on this one) and the manifest signed: the watermark moves them by 0–2 bits of 64 (measured on
        // the benchmark's photos), far inside the radius of 10 a copy is found within, and signing adds a
        // manifest beside the pixels without changing them.
        const hashing = withImageSlot(() => hashImage(bytes))
        // Awaited below; a failure before then must not go unhandled.
        hashing.catch(() => undefined)
        let asset = bytes
        let psnr: number | null = null
        if (input.watermark === true) {
          if (image.width < MIN_WATERMARK_SIDE || image.height < MIN_WATERMARK_SIDE)
            return yield* new InvalidInput({
              field: "watermark",
              message: `needs an image of at least ${MIN_WATERMARK_SIDE}×${MIN_WATERMARK_SIDE} pixels`,
            })
          // The mark is drawn on one frame and the asset re-encoded from it: an animation would come back still.
          if (image.pages > 1)
            return yield* new InvalidInput({
              field: "watermark",
              message: `is for still images: this one is animated (${image.pages} frames), register it without a watermark`,
            })
          const marked = yield* imaging(() => embedWatermark(bytes, id))
          // Read back as a scan would read it: an image the eye sees little of (mostly transparent, where the
          // reader sees the white it is flattened on) or that clips the change away carries no id to read, and
          // must not be recorded as watermarked.
          const reading = yield* imaging(() => detectWatermark(marked.data))
          if (reading?.contentId !== id)
            return yield* new InvalidInput({
              field: "watermark",
              message:
                "does not read back from this image (too much of it is transparent or flat to carry one): register it without a watermark",
            })
          asset = marked.data
          psnr = Math.round(marked.psnr * 100) / 100
        }
        const mediaType = IMAGE_MEDIA_TYPES[image.format]
        let manifest: { signed: true; source: string } | null = null
        if (input.c2pa === true) {
          const { credential, source, validFrom, validUntil } = yield* c2pa.signing
          // c2pa-rs refuses to sign outside the certificate's validity (a 500 before 2026-11-29). The service's own
          // is renewed; the operator's (AGENTGOV_C2PA_CERT) is theirs to renew.
          const at = yield* Clock.currentTimeMillis
          if (at < validFrom || at >= validUntil)
            return yield* new StateConflict({
              code: "C2PA_CREDENTIAL_INVALID",
              message: `the C2PA signing certificate${source === "operator" ? " (AGENTGOV_C2PA_CERT)" : ""} is valid from ${isoOf(validFrom)} to ${isoOf(validUntil)}, not now: ${source === "operator" ? "the operator must replace it" : "try again shortly"}; register without c2pa meanwhile`,
            })
          const unsigned = asset
          asset = yield* imaging(() =>
            signManifest(unsigned, mediaType, credential, {
              title: input.title,
              author: actor.workspaceId,
              contentId: id,
              watermarked: psnr !== null,
            }),
          )
          manifest = { signed: true, source }
        }
        const hashes = yield* Effect.promise(() => hashing)
        const rows = indexRows(hashes)
        return yield* tx(
          Effect.gen(function* () {
            yield* sql`INSERT INTO content_items (id, workspace_id, kind, title, media_type, metadata, asset, sha256, width,
                height, phash, dhash, mirror_phash, mirror_dhash, watermarked, watermark_psnr, c2pa, agent_id,
                created_by, created_at)
              VALUES (${id}, ${actor.workspaceId}, 'image', ${input.title}, ${mediaType}, ${jsonb(sql, metadata)},
                ${asset.toString("base64")}, ${createHash("sha256").update(asset).digest("hex")}, ${image.width},
                ${image.height}, ${hashes.phash}, ${hashes.dhash}, ${hashes.mirrorPhash}, ${hashes.mirrorDhash},
                ${psnr !== null}, ${psnr}, ${manifest === null ? null : jsonb(sql, manifest)}, ${agentId ?? null},
                ${actor.credential.id}, ${isoOf(now)}::timestamptz)`
            yield* sql.unsafe(IMAGE_INDEX_INSERT_SQL, [actor.workspaceId, id, JSON.stringify(rows)])
            yield* audit.append(actor, [
              {
                type: "content.registered",
                agentId: agentId ?? null,
                data: {
                  contentId: id,
                  mediaType,
                  fingerprint: `phash:${hashes.phash}`,
                  watermarked: psnr !== null,
                  c2pa: manifest !== null,
                  ...(agentId !== undefined ? { agentId } : {}),
                },
              },
            ])
            return toItem((yield* findItem(actor.workspaceId, id))!)
          }),
        ).pipe(Effect.orDie)
      })

      const list = Effect.fn("ContentService.list")(function* (actor: Actor, query: ContentListQuery) {
        const { limit, before } = yield* pageWindow(query, idCursor("cnt"))
        const rows = yield* sql<ItemRow>`SELECT ${sql.literal(ITEM_COLUMNS)},
              (SELECT count(*) FROM content_text_fingerprints f WHERE f.content_id = c.id) AS fingerprints
            FROM content_items c WHERE workspace_id = ${actor.workspaceId}
              ${before === undefined ? sql`` : sql`AND id < ${before}`}
              ${query.kind === undefined ? sql`` : sql`AND kind = ${query.kind}`}
            ORDER BY id DESC LIMIT ${limit + 1}`.pipe(Effect.orDie)
        return toPage(
          rows.map((r) => toItem(r)),
          limit,
        )
      })

      const matchesOf = (workspaceId: string, contentId: string) =>
        sql<MatchRow>`SELECT * FROM content_matches WHERE workspace_id = ${workspaceId} AND content_id = ${contentId}
            ORDER BY id DESC LIMIT 100`.pipe(Effect.orDie)

      const get = Effect.fn("ContentService.get")(function* (actor: Actor, id: string) {
        const row = yield* requireItem(actor, id)
        return toItem(row, yield* matchesOf(actor.workspaceId, id))
      })

      const asset = Effect.fn("ContentService.asset")(function* (actor: Actor, id: string) {
        const [row] = yield* sql<{ media_type: string; asset: string }>`SELECT media_type, asset FROM content_items
            WHERE workspace_id = ${actor.workspaceId} AND id = ${id}`.pipe(Effect.orDie)
        if (!row) return yield* new ContentNotFound({ contentId: id })
        return { mediaType: row.media_type, data: Buffer.from(row.asset, "base64") }
      })

      /**
       * A cut of the candidate and what is derived from it lazily: the current fold's, and while texts of an older
       * one remain (`refolding`) the old cut (tokenizeLegacy), with which those texts are looked up and verified.
       */
      interface CandidateView {
        readonly cut: (text: string) => Array<Token>
        readonly tokens: ReadonlyArray<Token>
        readonly shingles: ReadonlyArray<number>
        readonly positions: Map<number, Array<number>>
        distinct?: number
        minhash?: ReadonlyArray<number>
      }
      const viewOf = (text: string, cut: (text: string) => Array<Token>): CandidateView => {
        // Winnowed with the scan's wider window: every run long enough to be reported still shares one.
        const { tokens, shingles, fingerprints } = candidateFingerprints(text, cut)
        const positions = new Map<number, Array<number>>()
        for (const f of fingerprints) {
          const at = positions.get(f.hash)
          if (at) at.push(f.pos)
          else positions.set(f.hash, [f.pos])
        }
        return { cut, tokens, shingles, positions }
      }

      const scanText = (actor: Actor, text: string, only: string | undefined) =>
        Effect.gen(function* () {
          const current = viewOf(text, tokenize)
          // Texts not yet fingerprinted again keep their old rows: looked up with the candidate cut as they were.
          const legacy = refolding ? viewOf(text, tokenizeLegacy) : undefined
          if (current.positions.size === 0 && (legacy?.positions.size ?? 0) === 0) return []
          // One statement for every fingerprint: an index probe each, inside the server.
          const hits =
            legacy === undefined
              ? yield* sql
                  .unsafe<{ content_id: string; hash: string | number; pos: number; legacy?: boolean }>(
                    TEXT_LOOKUP_SQL,
                    [actor.workspaceId, [...current.positions.keys()], only ?? null],
                  )
                  .pipe(Effect.orDie)
              : yield* sql
                  .unsafe<{ content_id: string; hash: string | number; pos: number; legacy?: boolean }>(
                    TEXT_LOOKUP_REFOLDING_SQL,
                    [actor.workspaceId, [...current.positions.keys()], only ?? null, [...legacy.positions.keys()]],
                  )
                  .pipe(Effect.orDie)
          // The MinHash estimate of an item's Jaccard similarity, computed only for an item long enough to be a
          // near-duplicate: Jaccard is at most |B| / |A| for the item's shingles B and the candidate's A, and where
          // that is under 1/4 an estimate of 0.5 or more could only be noise (a 64-slot signature of a true 0.25
          // reads 0.5 about once in 100,000).
          const jaccardWith = (
            view: CandidateView,
            registeredWords: number,
            signature: () => ReadonlyArray<number>,
          ) => {
            // The candidate's shingle count bounds its distinct ones: counted only when that bound cannot decide.
            const itemShingles = Math.max(1, registeredWords - SHINGLE_WORDS + 1) * 4
            if (itemShingles < view.shingles.length) {
              view.distinct ??= distinctCount(view.shingles)
              if (itemShingles < view.distinct) return 0
            }
            view.minhash ??= minHashOf(view.shingles)
            return minHashSimilarity(view.minhash, signature())
          }
          // Each item's positions of each shared hash, paired with the candidate's (seedPairs: at most
          // MAX_POSITIONS_PER_HASH of each side, so a text repeating one phrase is not N² seeds).
          const byItem = new Map<string, { legacy: boolean; hashes: Map<number, Array<number>> }>()
          for (const h of hits) {
            let item = byItem.get(h.content_id)
            if (!item) {
              item = { legacy: h.legacy === true, hashes: new Map() }
              byItem.set(h.content_id, item)
            }
            const hash = Number(h.hash)
            const at = item.hashes.get(hash)
            if (at) at.push(h.pos)
            else item.hashes.set(hash, [h.pos])
          }
          const seeds = new Map<string, { view: CandidateView; pairs: Array<readonly [number, number]> }>()
          for (const [contentId, item] of byItem) {
            const view = item.legacy && legacy !== undefined ? legacy : current
            seeds.set(contentId, { view, pairs: seedPairs(view.positions, item.hashes) })
          }
          const ranked = [...seeds.entries()]
            .sort((a, b) => b[1].pairs.length - a[1].pairs.length)
            .slice(0, MAX_TEXT_CANDIDATES)
          if (ranked.length === 0) return []
          // The candidates' texts, loaded a few at a time (at most TEXT_BATCH_CHARS of stored asset a statement, the
          // best ranked first) and each verified in its own turn of the event loop: 50 texts of 2,000,000 characters
          // are 100,000,000 characters to tokenise (seconds), held at once and in one go before (review "content3").
          const sizes = yield* sql
            .unsafe<{ id: string; size: number }>(
              "SELECT id, octet_length(asset) AS size FROM content_items WHERE workspace_id = $1 AND id = ANY($2::text[])",
              [actor.workspaceId, ranked.map(([id]) => id)],
            )
            .pipe(Effect.orDie)
          const sizeOf = new Map(sizes.map((r) => [r.id, Number(r.size)]))
          const batches: Array<Array<string>> = []
          const batchOf = new Map<string, number>()
          let batchChars = Number.POSITIVE_INFINITY
          for (const [id] of ranked) {
            const size = sizeOf.get(id)
            if (size === undefined) continue
            if (batchChars + size > TEXT_BATCH_CHARS) {
              batches.push([])
              batchChars = 0
            }
            batches.at(-1)!.push(id)
            batchOf.set(id, batches.length - 1)
            batchChars += size
          }
          const byId = new Map<string, { id: string; asset: string; minhash: ReadonlyArray<number> }>()
          let loaded = -1
          const out: Array<ContentMatch> = []
          for (const [contentId, { view, pairs }] of ranked) {
            const batch = batchOf.get(contentId)
            if (batch === undefined) continue
            if (batch > loaded) {
              byId.clear()
              loaded = batch
              const rows = yield* sql
                .unsafe<{ id: string; asset: string; minhash: ReadonlyArray<number> }>(
                  "SELECT id, asset, minhash FROM content_items WHERE workspace_id = $1 AND id = ANY($2::text[])",
                  [actor.workspaceId, batches[batch]!],
                )
                .pipe(Effect.orDie)
              for (const r of rows) byId.set(r.id, r)
            }
            const row = byId.get(contentId)
            if (!row) continue
            byId.delete(contentId)
            // A turn of the event loop before each item: other requests are answered between them.
            yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
            const registeredText = Buffer.from(row.asset, "base64").toString("utf8")
            // Cut as its rows were (the old way for a text not yet fingerprinted again), as the candidate was.
            const registered = view.cut(registeredText)
            const tokens = view.tokens
            const spans = copiedSpans(tokens, registered, pairs)
            const found = coverage(
              spans.map((s) => s.registered),
              registered.length,
            )
            // The MinHash of the old cut is computed here rather than read: the worker may have replaced the
            // stored one since the lookup.
            const jaccard = jaccardWith(view, registered.length, () =>
              view === current ? row.minhash : minHashOf(shingleHashes(registered.map((t) => t.word))),
            )
            if (spans.length === 0 && jaccard < MINHASH_NEAR_DUPLICATE) continue
            // MinHash speaks only for whole-document near-duplicates; below that the spans are the evidence.
            const nearDuplicate = jaccard >= MINHASH_NEAR_DUPLICATE && jaccard > found
            out.push({
              contentId,
              similarity: Math.round((nearDuplicate ? jaccard : found) * 10000) / 10000,
              method: nearDuplicate ? "text-minhash" : "text-winnowing",
              spans: spans.map((s) => ({
                candidate: { start: tokens[s.candidate[0]]!.start, end: tokens[s.candidate[1] - 1]!.end },
                registered: { start: registered[s.registered[0]]!.start, end: registered[s.registered[1] - 1]!.end },
                words: s.candidate[1] - s.candidate[0],
              })),
            })
          }
          return out
        })

      /** The candidate's C2PA manifest, validated by c2pa-rs with the service's anchors. */
      const manifestOf = (bytes: Buffer, mediaType: string) =>
        Effect.gen(function* () {
          const { anchorsPem } = yield* c2pa.signing
          return yield* imaging(() => readManifest(bytes, mediaType, anchorsPem))
        })

      const scanImage = (actor: Actor, bytes: Buffer, only: string | undefined) =>
        Effect.gen(function* () {
          const hashes = yield* imaging(() => hashImage(bytes))
          // Multi-index lookup in the process's copy of the workspace's index, brought up to the table first
          // (imageIndex.ts); against one item, that item's two hashes.
          const hits: ReadonlyArray<ImageHit> =
            only === undefined
              ? yield* lookupImage(query, actor.workspaceId, hashes.phash)
              : (yield* sql<{ phash: string; mirror_phash: string }>`SELECT phash, mirror_phash FROM content_items
                  WHERE workspace_id = ${actor.workspaceId} AND id = ${only} AND kind = 'image'`.pipe(
                  Effect.orDie,
                )).flatMap((r) => [
                  { contentId: only, mirror: false, distance: hamming(r.phash, hashes.phash) },
                  { contentId: only, mirror: true, distance: hamming(r.mirror_phash, hashes.phash) },
                ])
          // An item is found by its hash and by its mirror's: its nearest counts.
          const nearest = new Map<string, { distance: number; mirror: boolean }>()
          for (const h of hits) {
            const seen = nearest.get(h.contentId)
            if (!seen || h.distance < seen.distance || (h.distance === seen.distance && !h.mirror))
              nearest.set(h.contentId, { distance: h.distance, mirror: h.mirror })
          }
          const out: Array<ContentMatch> = []
          for (const [contentId, { distance, mirror }] of nearest) {
            if (distance > IMAGE_RADIUS) continue
            out.push({
              contentId,
              similarity: Math.round((1 - distance / 64) * 10000) / 10000,
              method: mirror ? "phash-mirror" : "phash",
              distance,
            })
          }
          const mark = yield* imaging(() => detectWatermark(bytes))
          if (mark && (only === undefined || mark.contentId === only)) {
            const item = yield* findItem(actor.workspaceId, mark.contentId)
            if (item) {
              const existing = out.find((m) => m.contentId === mark.contentId)
              const watermark = { contentId: mark.contentId, confidence: Math.round(mark.confidence * 10000) / 10000 }
              if (existing) out[out.indexOf(existing)] = { ...existing, watermark }
              else
                out.push({
                  contentId: mark.contentId,
                  similarity: watermark.confidence,
                  method: "watermark",
                  watermark,
                })
            }
          }
          return out
        })

      const scan = Effect.fn("ContentService.scan")(function* (actor: Actor, input: ScanContent, contentId?: string) {
        const only = contentId === undefined ? undefined : yield* requireItem(actor, contentId)
        if ((input.text === undefined) === (input.data === undefined))
          return yield* new InvalidInput({ field: "text", message: "send either text or data" })
        // A candidate of the other kind than the item scanned could never match it: say so rather than answer none.
        if (only !== undefined && only.kind !== (input.text !== undefined ? "text" : "image"))
          return yield* new InvalidInput({
            field: input.text !== undefined ? "text" : "data",
            message: `${only.id} is ${only.kind === "text" ? "a text: send the candidate as text" : "an image: send the candidate as data"}`,
          })
        if (input.text !== undefined && input.text.trim() === "")
          return yield* new InvalidInput({ field: "text", message: "is empty: send the candidate text" })
        // Where the candidate was found goes into the matches and any takedown notice built on them.
        const url = input.url === undefined ? undefined : (yield* httpUrl("url", input.url)).href
        let matches: Array<ContentMatch>
        let manifest: ManifestReading = { present: false }
        if (input.text !== undefined) {
          if (input.text.length > MAX_TEXT_CHARS)
            return yield* new InvalidInput({ field: "text", message: `exceeds ${MAX_TEXT_CHARS} characters` })
          matches = yield* scanText(actor, input.text, contentId)
        } else {
          const { bytes, image } = yield* imageInput("data", input.data)
          matches = yield* scanImage(actor, bytes, contentId)
          manifest = yield* manifestOf(bytes, IMAGE_MEDIA_TYPES[image.format])
        }
        matches.sort((a, b) => b.similarity - a.similarity || a.contentId.localeCompare(b.contentId))
        const now = yield* Clock.currentTimeMillis
        const recorded: Array<ContentMatch> = []
        const stored: Array<{ id: string; content_id: string; method: string; similarity: number; evidence: unknown }> =
          []
        const events: Array<NewEvent> = []
        for (const m of matches) {
          const threshold = m.method.startsWith("text") ? TEXT_RECORD_THRESHOLD : IMAGE_RECORD_THRESHOLD
          if (m.similarity < threshold && m.method !== "watermark") {
            recorded.push(m)
            continue
          }
          const id = newId("mch", now)
          const { contentId: cid, similarity, method, ...evidence } = m
          stored.push({ id, content_id: cid, method, similarity, evidence })
          events.push({
            type: "content.match.detected",
            data: {
              contentId: cid,
              matchId: id,
              similarity: Math.min(1, similarity),
              method,
              ...(url !== undefined ? { url } : {}),
            },
          })
          recorded.push({ id, ...m, ...(url !== undefined ? { url } : {}), createdAt: isoOf(now) })
        }
        // The matches in one INSERT and their events in one append, in the order ranked: one transaction's
        // worth of round trips whatever the number of matches.
        if (stored.length > 0)
          yield* tx(
            Effect.gen(function* () {
              yield* sql`INSERT INTO content_matches (id, workspace_id, content_id, method, similarity, evidence, url, created_at)
                SELECT x.id, ${actor.workspaceId}, x.content_id, x.method, x.similarity, x.evidence, ${url ?? null},
                  ${isoOf(now)}::timestamptz
                FROM jsonb_to_recordset(${JSON.stringify(stored)}::text::jsonb)
                  AS x(id text, content_id text, method text, similarity double precision, evidence jsonb)`
              yield* audit.append(actor, events)
            }),
          ).pipe(Effect.orDie)
        return {
          matches: recorded,
          c2pa: manifest.present
            ? {
                present: true,
                valid: manifest.valid === true,
                ...(manifest.state !== undefined ? { state: manifest.state } : {}),
                failures: manifest.failures ?? [],
              }
            : { present: false },
        }
      })

      const detect = Effect.fn("ContentService.detectWatermark")(function* (actor: Actor, data: string) {
        const { bytes } = yield* imageInput("data", data)
        const mark = yield* imaging(() => detectWatermark(bytes))
        if (!mark) return { found: false }
        const item = yield* findItem(actor.workspaceId, mark.contentId)
        return {
          found: true,
          contentId: mark.contentId,
          confidence: Math.round(mark.confidence * 10000) / 10000,
          registered: item !== undefined,
        }
      })

      const createTakedown = Effect.fn("ContentService.createTakedown")(function* (
        actor: Actor,
        contentId: string,
        input: CreateTakedown,
      ) {
        const item = yield* requireItem(actor, contentId)
        if (ADDRESS_INVISIBLE.test(input.recipient))
          return yield* new InvalidInput({
            field: "recipient",
            message: "contains a control or format character (invisible, or reordering the address)",
          })
        if (!EMAIL.test(input.recipient))
          return yield* new InvalidInput({ field: "recipient", message: "is not an e-mail address" })
        const target = yield* httpUrl("targetUrl", input.targetUrl)
        let match: MatchRow | undefined
        if (input.matchId !== undefined) {
          ;[match] = yield* sql<MatchRow>`SELECT * FROM content_matches
              WHERE workspace_id = ${actor.workspaceId} AND content_id = ${contentId} AND id = ${input.matchId}`.pipe(
            Effect.orDie,
          )
          if (!match) return yield* new InvalidInput({ field: "matchId", message: "is not a match of this item" })
        }
        const settings = yield* ContentSettings
        const now = yield* Clock.currentTimeMillis
        const id = newId("tkd", now)
        const notice = composeNotice({
          takedownId: id,
          item: toItem(item),
          match: match ? toMatch(match) : undefined,
          targetUrl: target.href,
          note: input.note,
          at: isoOf(now),
        })
        // Recorded, with its event, before the notice goes out: a request cut short while the SMTP server takes
        // its time (or an instance that stops then) leaves the takedown `pending`, not lost, and a notice is never
        // sent for a takedown that was not stored. The delivery's outcome is then written over it.
        const recorded = yield* tx(
          Effect.gen(function* () {
            const retryAfterSeconds = yield* dailyCapReached(sql, {
              table: "content_takedowns",
              kind: "takedowns",
              workspaceId: actor.workspaceId,
              limit: TAKEDOWNS_PER_DAY,
              now,
            })
            if (retryAfterSeconds !== undefined)
              return yield* new TakedownLimitReached({ limit: TAKEDOWNS_PER_DAY, retryAfterSeconds })
            // The match cited is held (a purge skips it, or is waited for) until the takedown citing it commits:
            // one purged since it was read above is a 422, not a foreign-key failure.
            if (input.matchId !== undefined) {
              const held = yield* sql`SELECT 1 FROM content_matches
                  WHERE workspace_id = ${actor.workspaceId} AND id = ${input.matchId} FOR KEY SHARE`
              if (held.length === 0)
                return yield* new InvalidInput({ field: "matchId", message: "is not a match of this item" })
            }
            const [row] = yield* sql<TakedownRow>`INSERT INTO content_takedowns (id, workspace_id, content_id, match_id,
                target_url, recipient, note, notice, status, message_id, error, created_at, sent_at)
              VALUES (${id}, ${actor.workspaceId}, ${contentId}, ${input.matchId ?? null}, ${target.href},
                ${input.recipient}, ${input.note ?? null}, ${notice}, 'pending', ${null}, ${null},
                ${isoOf(now)}::timestamptz, ${null}::timestamptz)
              RETURNING *`
            yield* audit.append(actor, [
              {
                type: "content.takedown.submitted",
                data: {
                  contentId,
                  takedownId: id,
                  url: target.href,
                  ...(input.matchId !== undefined ? { matchId: input.matchId } : {}),
                },
              },
            ])
            return row!
          }),
        )
        const smtpUrl = settings.smtpUrl
        if (smtpUrl === undefined) return toTakedown(recorded)
        // The sending and its record are not interrupted: a notice that went out is recorded `sent`. sendNotice is
        // bounded (smtpTimeoutMs), so a stalled server cannot hold this.
        return yield* Effect.uninterruptible(
          Effect.gen(function* () {
            const delivery = yield* Effect.promise(() =>
              sendNotice(
                { ...settings, smtpUrl },
                { to: input.recipient, subject: `Takedown notice ${id}: ${item.title}`, text: notice },
              ),
            )
            const sentAt = delivery.status === "sent" ? isoOf(yield* Clock.currentTimeMillis) : null
            const [row] = yield* sql<TakedownRow>`UPDATE content_takedowns
                SET status = ${delivery.status}, message_id = ${"messageId" in delivery ? delivery.messageId : null},
                  error = ${"error" in delivery ? delivery.error : null}, sent_at = ${sentAt}::timestamptz
                WHERE workspace_id = ${actor.workspaceId} AND id = ${id}
                RETURNING *`.pipe(Effect.orDie)
            return toTakedown(row!)
          }),
        )
      })

      const listTakedowns = Effect.fn("ContentService.listTakedowns")(function* (
        actor: Actor,
        contentId: string,
        page: PageRequest,
      ) {
        yield* requireItem(actor, contentId)
        const { limit, before } = yield* pageWindow(page, idCursor("tkd"))
        const rows = yield* sql<TakedownRow>`SELECT * FROM content_takedowns
            WHERE workspace_id = ${actor.workspaceId} AND content_id = ${contentId}
              ${before === undefined ? sql`` : sql`AND id < ${before}`}
            ORDER BY id DESC LIMIT ${limit + 1}`.pipe(Effect.orDie)
        return toPage(rows.map(toTakedown), limit)
      })

      /**
       * Texts fingerprinted under an older normalisation (`fingerprint_fold` < FOLD_VERSION: migration 0028
       * labels 1 those holding a letter versions 1 and 2 fold differently, 0030 leaves at 2 those holding a letter
       * version 3 cuts as a word of its own) are fingerprinted again from their stored text, off the start path:
       * REFOLD_BATCH at a time, each batch in a transaction that takes its rows `FOR NO KEY UPDATE SKIP LOCKED`, so
       * instances share the work and none does a text twice. Their rows are replaced with the current window's;
       * words and MinHash with the current fold's. Until a text's turn, scans look it up by its old rows
       * (TEXT_LOOKUP_REFOLDING_SQL), for as long as `refolding` is true: from the start until the worker finds
       * none left on any instance (registrations are stored at FOLD_VERSION, so none appears after).
       */
      let refolding = true
      const PENDING = sql.literal(`kind = 'text' AND fingerprint_fold < ${FOLD_VERSION}`)
      /**
       * Texts that failed to be fingerprinted again on their own (a batch failed, then each of its texts was taken
       * alone): left at their old rows, and at their old lookup, rather than stop the worker on them for ever. Per
       * process, and tried again after STUCK_RETRY_MS (the failure may have been the store's, not the text's).
       */
      const stuck = new Set<string>()
      /** `cursor.at`: the text the batch is at when it fails (the one to set aside when the batch held it alone). */
      const refoldBatch = (size: number, cursor: { at: string | undefined }) =>
        tx(
          Effect.gen(function* () {
            // Through the partial index of migration 0033 (its predicate, written out). FOR NO KEY UPDATE, not FOR
            // UPDATE: the batch may hold its rows for seconds (16 texts of up to 2,000,000 characters), and a match
            // or a takedown recorded meanwhile checks its foreign key with FOR KEY SHARE on the item, which FOR
            // UPDATE blocks (past the pool's lock time-out: a scan answered 503). The batch changes no key.
            const rows = yield* sql<{ id: string; workspace_id: string; asset: string }>`SELECT id, workspace_id, asset
                FROM content_items WHERE ${PENDING} AND NOT (id = ANY(${[...stuck]}::text[]))
                ORDER BY fingerprint_fold, id LIMIT ${size} FOR NO KEY UPDATE SKIP LOCKED`
            for (const row of rows) {
              cursor.at = row.id
              // A turn of the event loop before each text: requests are answered between them.
              yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
              const fp = fingerprintText(Buffer.from(row.asset, "base64").toString("utf8"))
              yield* sql`DELETE FROM content_text_fingerprints WHERE content_id = ${row.id}`
              yield* insertFingerprints(row.workspace_id, row.id, fp.fingerprints)
              yield* sql`UPDATE content_items SET words = ${fp.tokens.length}, fingerprint_window = ${WINDOW},
                  fingerprint_fold = ${FOLD_VERSION}, minhash = ${jsonb(sql, fp.minhash)}
                WHERE id = ${row.id}`
            }
            cursor.at = undefined
            return rows.length
          }),
        )
      const refold = Effect.gen(function* () {
        let done = 0
        // After a failed batch, as many texts as it held are taken one at a time: the one that fails alone is set
        // aside, and the rest are written.
        let alone = 0
        let inARow = 0
        const cursor: { at: string | undefined } = { at: undefined }
        for (;;) {
          const size = alone > 0 ? 1 : REFOLD_BATCH
          cursor.at = undefined
          const exit = yield* Effect.exit(refoldBatch(size, cursor))
          if (Exit.isFailure(exit)) {
            const text = cursor.at
            // Interrupted, the store out of reach or failing before a text was read, or texts failing one after
            // another (the store refusing writes, not one text): the caller's to retry, after its pause.
            if (
              text === undefined ||
              Cause.hasInterrupts(exit.cause) ||
              storeUnreachable(Cause.squash(exit.cause)) ||
              inARow >= STUCK_IN_A_ROW
            )
              return yield* Effect.failCause(exit.cause)
            yield* pause(REFOLD_PAUSE_MS)
            if (size > 1) {
              alone = size
              continue
            }
            stuck.add(text)
            alone -= 1
            inARow += 1
            yield* Effect.logError("a text could not be fingerprinted again; it keeps its old rows for now", {
              contentId: text,
              cause: Cause.pretty(exit.cause),
            })
            continue
          }
          const n = exit.value
          done += n
          if (alone > 0) alone -= 1
          if (n > 0) inARow = 0
          if (n > 0) continue
          // None free: done, unless another instance holds the last ones (not committed yet). Texts set aside keep
          // the old lookup on (they are still looked up by their old rows).
          const [left] = yield* sql<{ others: boolean; any: boolean }>`SELECT
              EXISTS (SELECT 1 FROM content_items WHERE ${PENDING} AND NOT (id = ANY(${[...stuck]}::text[]))) AS others,
              EXISTS (SELECT 1 FROM content_items WHERE ${PENDING}) AS any`
          if (!left?.others) {
            if (!left?.any) refolding = false
            return done
          }
          yield* pause(REFOLD_PAUSE_MS)
        }
      }).pipe(Effect.orDie)
      const settings = yield* ContentSettings
      if (settings.refoldWorker !== false)
        yield* Effect.forkScoped(
          Effect.gen(function* () {
            // A failure (the store unavailable) is retried after a pause: the texts left keep their old rows. Texts
            // set aside are tried again after STUCK_RETRY_MS.
            for (;;) {
              const exit = yield* Effect.exit(refold)
              if (Exit.isSuccess(exit)) {
                if (stuck.size === 0) return
                yield* pause(STUCK_RETRY_MS)
                stuck.clear()
                continue
              }
              yield* Effect.logWarning("fingerprinting texts of an older fold again failed; retrying", exit.cause)
              yield* pause(REFOLD_PAUSE_MS * 5)
            }
          }),
        )

      /**
       * Matches past the retention that no takedown cites (content_takedowns_by_match, migration 0033), through the
       * primary key (ids sort by the time they were minted). FOR UPDATE SKIP LOCKED: a match a takedown being
       * created holds (FOR KEY SHARE) is skipped, and a purge on another instance is not waited for. The foreign
       * key of content_takedowns.match_id still refuses to delete a cited match whatever the order.
       */
      const retentionMs = (settings.matchRetentionDays ?? MATCH_RETENTION_DAYS) * DAY_MS
      const purgeMatches = Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const before = now - retentionMs
        return sql<{ n: number }>`WITH gone AS (DELETE FROM content_matches WHERE id IN (
              SELECT m.id FROM content_matches m
              WHERE m.id < ${firstIdAt("mch", before)} AND m.created_at < ${isoOf(before)}::timestamptz
                AND NOT EXISTS (SELECT 1 FROM content_takedowns t WHERE t.match_id = m.id)
              ORDER BY m.id LIMIT ${MATCH_PURGE_LIMIT} FOR UPDATE SKIP LOCKED) RETURNING 1)
            SELECT count(*)::int AS n FROM gone`.pipe(
          Effect.map((r) => r[0]?.n ?? 0),
          Effect.orDie,
        )
      }).pipe(Effect.withSpan("ContentService.purgeMatches"))

      return ContentService.of({
        register,
        list,
        get,
        asset,
        scan,
        detectWatermark: detect,
        createTakedown,
        listTakedowns,
        refold,
        purgeMatches,
      })
    }),
  )
}
