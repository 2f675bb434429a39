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

/** Sends the notice through the configured SMTP server; a refusal is recorded, not thrown. */
export const sendNotice = async (
  settings: ContentSettingsShape,
  mail: { readonly to: string; readonly subject: string; readonly text: string },
): Promise<NoticeDelivery> => {
  const transport = nodemailer.createTransport(settings.smtpUrl)
  try {
    const info = await transport.sendMail({ from: settings.from, ...mail })
    return { status: "sent", messageId: String(info.messageId) }
  } catch (e) {
    return { status: "failed", error: e instanceof Error ? e.message.slice(0, 500) : "SMTP delivery failed" }
  } finally {
    transport.close()
  }
}
