import nodemailer from "nodemailer"
import type { ContentItem, ContentMatch } from "./Content.ts"
import type { ContentSettingsShape } from "./ContentSettings.ts"

/** The notice's text: who claims what, where the copy is, and the evidence the service holds. */
export const composeNotice = (n: {
  readonly takedownId: string
  readonly item: ContentItem
  readonly match: ContentMatch | undefined
  readonly targetUrl: string
  readonly note: string | undefined
  readonly at: string
}): string => {
  const { item, match } = n
  const lines = [
    `Takedown notice ${n.takedownId} (${n.at})`,
    "",
    `The material at ${n.targetUrl} copies content registered by workspace ${item.workspaceId}:`,
    // The title as a JSON string: a line break in it (any title is taken) must not write a line of the notice.
    `  item: ${item.id} ${JSON.stringify(item.title)} (${item.mediaType}), registered ${item.createdAt}`,
    `  SHA-256 of the registered asset: ${item.sha256}`,
    `  watermark embedded: ${item.watermark.embedded ? "yes" : "no"}; C2PA manifest: ${item.c2pa.signed ? "signed" : "none"}`,
  ]
  if ("phash" in item.fingerprint) lines.push(`  perceptual hash (pHash): ${item.fingerprint.phash}`)
  if (match) {
    lines.push("", `Evidence: match ${match.id ?? ""} by ${match.method}, similarity ${match.similarity}`)
    if (match.distance !== undefined) lines.push(`  pHash Hamming distance: ${match.distance} of 64 bits`)
    if (match.watermark)
      lines.push(`  watermark read: ${match.watermark.contentId} (confidence ${match.watermark.confidence})`)
    for (const s of match.spans ?? [])
      lines.push(
        `  copied span: ${s.words} words, characters ${s.candidate.start}-${s.candidate.end} of the copy = ${s.registered.start}-${s.registered.end} of the original`,
      )
    if (match.url) lines.push(`  found at: ${match.url}`)
  }
  if (n.note) lines.push("", n.note)
  lines.push("", "Please remove or disable access to the material. Reply to this address with questions.")
  return lines.join("\n")
}

export type NoticeDelivery =
  | { readonly status: "sent"; readonly messageId: string }
  | { readonly status: "failed"; readonly error: string }

/** The longest a notice's delivery takes when ContentSettings names no `smtpTimeoutMs`. */
export const SMTP_TIMEOUT_MS = 20_000

/**
 * Sends the notice through the configured SMTP server; a refusal is recorded, not thrown. Bounded: nodemailer's
 * defaults wait 2 min for a connection, 30 s for the greeting and 10 min on a silent socket, so a server that
 * accepts and never answers held the takedown that long. Each of those waits, and the whole delivery (a server
 * answering a byte at a time never lets the socket fall silent), ends at `smtpTimeoutMs`.
 */
export const sendNotice = async (
  settings: Pick<ContentSettingsShape, "smtpUrl" | "from" | "smtpTimeoutMs">,
  mail: { readonly to: string; readonly subject: string; readonly text: string },
): Promise<NoticeDelivery> => {
  const limit = settings.smtpTimeoutMs ?? SMTP_TIMEOUT_MS
  const transport = nodemailer.createTransport({
    url: settings.smtpUrl,
    connectionTimeout: limit,
    greetingTimeout: limit,
    socketTimeout: limit,
    dnsTimeout: limit,
  })
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<NoticeDelivery>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({ status: "failed", error: `the SMTP server did not take the notice within ${limit} ms (timed out)` }),
      limit,
    )
  })
  const delivery = transport.sendMail({ from: settings.from, ...mail }).then(
    (info): NoticeDelivery => ({ status: "sent", messageId: String(info.messageId) }),
    (e: unknown): NoticeDelivery => ({
      status: "failed",
      // nodemailer's code says what its message may not ("Greeting never received" is an ETIMEDOUT).
      error:
        e instanceof Error
          ? `${"code" in e && typeof e.code === "string" ? `${e.code}: ` : ""}${e.message}`.slice(0, 500)
          : "SMTP delivery failed",
    }),
  )
  try {
    return await Promise.race([delivery, deadline])
  } finally {
    clearTimeout(timer)
    transport.close()
  }
}
