import { createHmac } from "node:crypto"

/** The secrets a delivery is signed with: the current one and, during a rotation's overlap, the previous. */
export interface SigningSecrets {
  readonly current: string
  readonly previous?: string | undefined
}

const hmacHex = (secret: string, ...parts: ReadonlyArray<string>) => {
  const mac = createHmac("sha256", Buffer.from(secret, "utf8"))
  for (const p of parts) mac.update(p, "utf8")
  return mac.digest("hex")
}

/**
 * The signature headers of the spec and D9. `X-SVC-Webhook-Signature` is
 * `v1=` + hex HMAC-SHA256 over `<id>.<timestamp>.<body>`, keyed with the UTF-8
 * bytes of the secret; during a rotation's overlap it carries one signature
 * per secret, space-separated, the new one first (`v1=<new> v1=<old>`), so a
 * receiver holding either secret verifies. The legacy `X-SVC-Signature` is the
 * hex HMAC of the body alone, with the current secret.
 */
export const signatureHeaders = (
  secrets: SigningSecrets,
  deliveryId: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> => {
  const ts = String(timestampSeconds)
  const signed = (secret: string) => `v1=${hmacHex(secret, deliveryId, ".", ts, ".", body)}`
  return {
    "x-svc-webhook-id": deliveryId,
    "x-svc-webhook-timestamp": ts,
    "x-svc-webhook-signature": [secrets.current, ...(secrets.previous === undefined ? [] : [secrets.previous])]
      .map(signed)
      .join(" "),
    "x-svc-signature": hmacHex(secrets.current, body),
  }
}

/** What the envelope of one attempt says. */
export interface EnvelopeParts {
  readonly eventId: string
  readonly type: string
  /** ISO 8601 with milliseconds, as the event was recorded. */
  readonly timestamp: string
  readonly workspaceId: string
  /** The event's `data` as JSON text (stored canonical; spliced in verbatim, never re-encoded). */
  readonly dataJson: string
  readonly deliveryId: string
  readonly webhookId: string
  readonly attempt: number
}

/** The body of a delivery: the spec's event envelope `{id, type, timestamp, workspaceId, data, metadata}`. */
export const envelopeBody = (p: EnvelopeParts): string =>
  `{"id":${JSON.stringify(p.eventId)},"type":${JSON.stringify(p.type)},"timestamp":${JSON.stringify(p.timestamp)},` +
  `"workspaceId":${JSON.stringify(p.workspaceId)},"data":${p.dataJson},"metadata":{"deliveryId":${JSON.stringify(p.deliveryId)},` +
  `"webhookId":${JSON.stringify(p.webhookId)},"attempt":${p.attempt}}}`
