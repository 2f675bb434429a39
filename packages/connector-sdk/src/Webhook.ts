import { createHmac, timingSafeEqual } from "node:crypto"
import type { IncomingHttpHeaders } from "node:http"
import { BoundedSet } from "./cache.ts"
import { WebhookVerificationError } from "./errors.ts"
import { type AnyWebhookEvent, canonicalEventName } from "./events.ts"

/**
 * The headers of a signed delivery (spec, "Webhook request headers and signature"; D9).
 *
 * @example
 * ```ts
 * import { WEBHOOK_HEADERS } from "@agentgov/connector-sdk"
 *
 * req.headers[WEBHOOK_HEADERS.id.toLowerCase()] // the delivery id, "dlv_…"
 * ```
 */
export const WEBHOOK_HEADERS = Object.freeze({
  /** The delivery id (`dlv_…`). */
  id: "X-SVC-Webhook-Id",
  /** Unix time in seconds when the attempt was signed. */
  timestamp: "X-SVC-Webhook-Timestamp",
  /** `v1=<hex HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`, several separated by spaces. */
  signature: "X-SVC-Webhook-Signature",
  /** Legacy: `<hex HMAC-SHA256(secret, body)>`, with no timestamp. */
  legacySignature: "X-SVC-Signature",
} as const)

/** The spec's default: 5 minutes either way. */
export const DEFAULT_TOLERANCE_SECONDS = 300

const DEFAULT_REPLAY_ENTRIES = 10_000
/** A legacy signature has no timestamp, so nothing bounds how long it could be replayed. */
const LEGACY_REPLAY_TTL_MS = 48 * 3600_000

/**
 * Request headers in any of the shapes Node and frameworks hand out: a fetch `Headers`, Node's
 * `IncomingHttpHeaders`, or a plain record. Names are matched case-insensitively.
 *
 * @example
 * ```ts
 * import type { HeadersLike } from "@agentgov/connector-sdk"
 *
 * const headers: HeadersLike = { "X-SVC-Webhook-Id": "dlv_1", "x-svc-webhook-timestamp": "1790000000" }
 * ```
 */
export type HeadersLike =
  | Headers
  | IncomingHttpHeaders
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/**
 * Options of {@link Webhook} and {@link verifyWebhook}.
 *
 * @example
 * ```ts
 * import type { WebhookOptions } from "@agentgov/connector-sdk"
 *
 * const options: WebhookOptions = {
 *   secret: [process.env.WEBHOOK_SECRET!, process.env.WEBHOOK_SECRET_PREVIOUS!], // during rotation
 *   toleranceSeconds: 300,
 * }
 * ```
 */
export interface WebhookOptions {
  /**
   * The endpoint's signing secret, or several: a delivery signed with any of them is accepted, so
   * a receiver can hold the old and the new secret while a rotation is under way. The HMAC key is
   * the UTF-8 bytes of the string, used as is.
   */
  readonly secret: string | ReadonlyArray<string>
  /** How far the signed timestamp may be from now, either way. Default 300 (5 minutes). */
  readonly toleranceSeconds?: number
  /**
   * Accept the legacy `X-SVC-Signature` (a signature of the body alone) when a delivery has no
   * `X-SVC-Webhook-Signature`. Default false. The legacy form carries no timestamp: a captured
   * delivery stays valid forever, and only the replay cache (bounded, in memory) stands between
   * it and a replay. Turn it on only for senders that cannot send the current form.
   */
  readonly allowLegacy?: boolean
  /**
   * Refuse (`REPLAYED`) a signed request seen before: the same delivery id and timestamp, or the
   * same legacy signature. Default on, with at most 10,000 remembered requests; `false` turns it
   * off. The memory is this instance's: keep one `Webhook` for the life of the process.
   */
  readonly replayProtection?: boolean | { readonly maxEntries?: number }
  /** The clock, in milliseconds since the epoch. Default `Date.now`. */
  readonly now?: () => number
}

/**
 * A verified delivery: the event, plus what the headers said.
 *
 * @example
 * ```ts
 * import type { VerifiedDelivery } from "@agentgov/connector-sdk"
 *
 * const log = (d: VerifiedDelivery) => console.log(d.deliveryId, d.scheme, d.event.type)
 * ```
 */
export interface VerifiedDelivery<E = AnyWebhookEvent> {
  readonly event: E
  /** `X-SVC-Webhook-Id`; for a legacy delivery, the envelope's `metadata.deliveryId`. */
  readonly deliveryId: string
  /** `X-SVC-Webhook-Timestamp` in Unix seconds; undefined for a legacy delivery. */
  readonly timestamp: number | undefined
  /** Which signature was verified. */
  readonly scheme: "v1" | "legacy"
}

/**
 * Verifies signed webhook deliveries: signature (constant-time, any of the configured secrets),
 * timestamp within the tolerance, no replay; then parses the event envelope. Keep one instance
 * per process so that replay protection remembers what it saw.
 *
 * @example
 * ```ts
 * import { Webhook } from "@agentgov/connector-sdk"
 *
 * const webhook = new Webhook({ secret: process.env.AGENTGOV_WEBHOOK_SECRET! })
 *
 * // rawBody: the exact bytes received, not re-serialised JSON
 * const event = webhook.verify(rawBody, req.headers)
 * if (event.type === "approval.requested") console.log(event.data.approvalId)
 * ```
 */
export class Webhook {
  readonly #keys: ReadonlyArray<Buffer>
  readonly #toleranceMs: number
  readonly #allowLegacy: boolean
  readonly #now: () => number
  readonly #seen: BoundedSet | undefined

  constructor(options: WebhookOptions) {
    const secrets = typeof options.secret === "string" ? [options.secret] : [...(options.secret ?? [])]
    if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s.length === 0)) {
      throw new TypeError("Webhook: `secret` must be a non-empty string or a non-empty array of them")
    }
    const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS
    if (!(tolerance >= 0 && Number.isFinite(tolerance))) {
      throw new RangeError("Webhook: `toleranceSeconds` must be a finite number ≥ 0")
    }
    this.#keys = secrets.map((s) => Buffer.from(s, "utf8"))
    this.#toleranceMs = tolerance * 1000
    this.#allowLegacy = options.allowLegacy ?? false
    this.#now = options.now ?? Date.now
    const replay = options.replayProtection ?? true
    this.#seen =
      replay === false
        ? undefined
        : new BoundedSet((replay === true ? undefined : replay.maxEntries) ?? DEFAULT_REPLAY_ENTRIES, this.#now)
  }

  /**
   * Verifies a delivery and returns its event.
   *
   * @param body the raw request body, exactly as received
   * @param headers the request headers
   * @throws {WebhookVerificationError} when the delivery must not be trusted
   *
   * @example
   * ```ts
   * const event = webhook.verify(rawBody, request.headers)
   * ```
   */
  verify(body: string | Uint8Array, headers: HeadersLike): AnyWebhookEvent {
    return this.verifyDelivery(body, headers).event
  }

  /**
   * Like {@link Webhook.verify}, and also says which delivery it was and how it was signed.
   *
   * @example
   * ```ts
   * const { event, deliveryId, scheme } = webhook.verifyDelivery(rawBody, request.headers)
   * if (scheme === "legacy") console.warn("sender still uses the legacy signature", deliveryId)
   * ```
   */
  verifyDelivery(body: string | Uint8Array, headers: HeadersLike): VerifiedDelivery {
    if (typeof body !== "string" && !(body instanceof Uint8Array)) {
      throw new TypeError("Webhook.verify: pass the raw body (string or bytes) exactly as received, not parsed JSON")
    }
    const signature = header(headers, WEBHOOK_HEADERS.signature)
    if (signature === undefined) {
      const legacy = header(headers, WEBHOOK_HEADERS.legacySignature)
      if (legacy !== undefined && this.#allowLegacy) return this.#verifyLegacy(body, legacy)
      throw new WebhookVerificationError(
        "MISSING_HEADER",
        legacy === undefined
          ? `missing ${WEBHOOK_HEADERS.signature}`
          : `missing ${WEBHOOK_HEADERS.signature}; only the legacy ${WEBHOOK_HEADERS.legacySignature} was sent and allowLegacy is off`,
      )
    }
    const id = header(headers, WEBHOOK_HEADERS.id)
    if (id === undefined) throw new WebhookVerificationError("MISSING_HEADER", `missing ${WEBHOOK_HEADERS.id}`)
    const timestamp = header(headers, WEBHOOK_HEADERS.timestamp)
    if (timestamp === undefined) {
      throw new WebhookVerificationError("MISSING_HEADER", `missing ${WEBHOOK_HEADERS.timestamp}`)
    }

    // The signature first: a stranger learns nothing but BAD_SIGNATURE, whatever the timestamp.
    const candidates = signature
      .split(/[\s,]+/)
      .filter((t) => t.startsWith("v1="))
      .map((t) => t.slice(3))
    const prefix = `${id}.${timestamp}.`
    const matched = this.#keys.some((key) => {
      const expected = createHmac("sha256", key).update(prefix, "utf8").update(body).digest("hex")
      return candidates.some((c) => hexEqual(expected, c))
    })
    if (!matched) throw new WebhookVerificationError("BAD_SIGNATURE", "no signature matches the configured secrets")

    if (!/^\d{1,15}$/.test(timestamp)) {
      throw new WebhookVerificationError("INVALID_HEADER", `${WEBHOOK_HEADERS.timestamp} must be Unix seconds`)
    }
    const seconds = Number(timestamp)
    const skewMs = seconds * 1000 - this.#now()
    if (skewMs < -this.#toleranceMs) {
      throw new WebhookVerificationError("TIMESTAMP_TOO_OLD", `signed ${Math.round(-skewMs / 1000)} s ago`)
    }
    if (skewMs > this.#toleranceMs) {
      throw new WebhookVerificationError("TIMESTAMP_IN_FUTURE", `signed ${Math.round(skewMs / 1000)} s in the future`)
    }

    const event = parseEnvelope(body)
    // Remembered only once verified, so unsigned requests cannot fill the memory. A timestamp
    // older than the tolerance is refused anyway, so the key need not outlive the window.
    this.#remember(`v1:${id}.${timestamp}`, 2 * this.#toleranceMs + 1000)
    return { event, deliveryId: id, timestamp: seconds, scheme: "v1" }
  }

  #verifyLegacy(body: string | Uint8Array, signature: string): VerifiedDelivery {
    const candidates = signature.split(/[\s,]+/)
    let matched: string | undefined
    for (const key of this.#keys) {
      const expected = createHmac("sha256", key).update(body).digest("hex")
      if (candidates.some((c) => hexEqual(expected, c))) {
        matched = expected
        break
      }
    }
    if (matched === undefined) {
      throw new WebhookVerificationError("BAD_SIGNATURE", "no legacy signature matches the configured secrets")
    }
    const event = parseEnvelope(body)
    this.#remember(`legacy:${matched}`, LEGACY_REPLAY_TTL_MS)
    return { event, deliveryId: event.metadata.deliveryId, timestamp: undefined, scheme: "legacy" }
  }

  #remember(key: string, ttlMs: number): void {
    if (this.#seen !== undefined && !this.#seen.add(key, ttlMs)) {
      throw new WebhookVerificationError("REPLAYED", "this signed delivery was already received")
    }
  }
}

/**
 * Options of {@link verifyWebhook}: the delivery and the {@link WebhookOptions}.
 *
 * @example
 * ```ts
 * import type { VerifyWebhookOptions } from "@agentgov/connector-sdk"
 *
 * const options: VerifyWebhookOptions = { body: rawBody, headers: req.headers, secret }
 * ```
 */
export interface VerifyWebhookOptions extends Omit<WebhookOptions, "replayProtection"> {
  /** The raw request body, exactly as received. */
  readonly body: string | Uint8Array
  readonly headers: HeadersLike
}

/**
 * Verifies one delivery (signature and timestamp) and returns its event. A one-shot call cannot
 * remember earlier deliveries: for replay protection keep a {@link Webhook}, or use
 * `createConnector`, which also de-duplicates by event id.
 *
 * @throws {WebhookVerificationError}
 *
 * @example
 * ```ts
 * import { verifyWebhook } from "@agentgov/connector-sdk"
 *
 * const event = verifyWebhook({ body: rawBody, headers: req.headers, secret: process.env.AGENTGOV_WEBHOOK_SECRET! })
 * ```
 */
export const verifyWebhook = (options: VerifyWebhookOptions): AnyWebhookEvent =>
  new Webhook({ ...options, replayProtection: false }).verify(options.body, options.headers)

/**
 * Reads a header from any {@link HeadersLike}, case-insensitively; repeated values are joined
 * with `", "` as HTTP does. Undefined when absent or empty.
 *
 * @example
 * ```ts
 * import { getHeader } from "@agentgov/connector-sdk"
 *
 * getHeader({ "x-svc-webhook-id": "dlv_1" }, "X-SVC-Webhook-Id") // "dlv_1"
 * ```
 */
export const getHeader = (headers: HeadersLike, name: string): string | undefined => header(headers, name)

const header = (headers: HeadersLike, name: string): string | undefined => {
  let value: string | ReadonlyArray<string> | null | undefined
  if (typeof (headers as Headers).get === "function") {
    value = (headers as Headers).get(name)
  } else {
    const wanted = name.toLowerCase()
    const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
    value = record[wanted]
    if (value === undefined) {
      for (const key of Object.keys(record)) {
        if (key.toLowerCase() === wanted) {
          value = record[key]
          break
        }
      }
    }
  }
  if (value === null || value === undefined) return undefined
  const text = (typeof value === "string" ? value : value.join(", ")).trim()
  return text === "" ? undefined : text
}

const HEX_SHA256 = /^[0-9a-f]{64}$/

/** Constant-time comparison of two lowercase hex digests; anything else is simply unequal. */
const hexEqual = (expected: string, candidate: string): boolean =>
  HEX_SHA256.test(candidate) && timingSafeEqual(Buffer.from(expected, "latin1"), Buffer.from(candidate, "latin1"))

const decoder = new TextDecoder("utf-8", { fatal: true })

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * Parses a verified body into an event envelope, checking the fields the SDK relies on. `data` is
 * not checked beyond being an object. An alias in `type` becomes its canonical name.
 */
export const parseEnvelope = (body: string | Uint8Array): AnyWebhookEvent => {
  let value: unknown
  try {
    value = JSON.parse(typeof body === "string" ? body : decoder.decode(body))
  } catch {
    throw new WebhookVerificationError("INVALID_PAYLOAD", "the body is not JSON")
  }
  if (!isRecord(value)) throw new WebhookVerificationError("INVALID_PAYLOAD", "the body is not a JSON object")
  for (const field of ["id", "type", "timestamp", "workspaceId"] as const) {
    if (typeof value[field] !== "string" || value[field] === "") {
      throw new WebhookVerificationError("INVALID_PAYLOAD", `the envelope's \`${field}\` must be a non-empty string`)
    }
  }
  if (!isRecord(value.data))
    throw new WebhookVerificationError("INVALID_PAYLOAD", "the envelope's `data` must be an object")
  const metadata = value.metadata
  if (
    !isRecord(metadata) ||
    typeof metadata.deliveryId !== "string" ||
    typeof metadata.webhookId !== "string" ||
    !Number.isInteger(metadata.attempt)
  ) {
    throw new WebhookVerificationError(
      "INVALID_PAYLOAD",
      "the envelope's `metadata` must hold `deliveryId`, `webhookId` and an integer `attempt`",
    )
  }
  const type = canonicalEventName(value.type as string)
  return (type === value.type ? value : { ...value, type }) as unknown as AnyWebhookEvent
}
