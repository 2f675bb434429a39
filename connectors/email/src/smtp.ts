import { isLoopbackHost } from "@agentgov/connector-sdk/runtime"
import { parseConnectionUrl } from "nodemailer/lib/shared"

/**
 * How SMTP_URL's connection is protected, as nodemailer reads the URL (its own parser, so that the host judged here is
 * the host it connects to):
 * - `implicit`: `smtps://`, TLS from the first byte (port 465 by default);
 * - `starttls`: `smtp://` to a host that is not a loopback one, STARTTLS required: a server that does not offer it (or
 *   a network that strips it from the answer) gets nothing, the password included;
 * - `starttls-if-offered`: `smtp://` to a loopback host (a local relay), or a URL that says `requireTLS=false`.
 */
export type SmtpTls = "implicit" | "starttls" | "starttls-if-offered"

/** SMTP_URL's problem, if it has one (never the URL itself: it carries the password). */
export const smtpUrlProblem = (value: string): string | undefined => {
  if (!/^smtps?:\/\//.test(value)) return "must start with smtp:// or smtps://"
  const parsed = parseConnectionUrl(value)
  if (parsed.secure !== true && parsed.port === 465)
    return "is smtp:// on port 465, where the server expects TLS from the start: write smtps://…:465 (smtp:// is STARTTLS, on 587)"
  return undefined
}

/** The transport's options for SMTP_URL, and how its connection is protected. */
export const smtpTransport = (
  smtpUrl: string,
): {
  readonly options: Record<string, unknown>
  readonly tls: SmtpTls
  readonly loopback: boolean
  /** False when the URL says `tls.rejectUnauthorized=false`: any certificate is taken for the server's. */
  readonly checksCertificate: boolean
} => {
  const parsed = parseConnectionUrl(smtpUrl)
  // nodemailer connects to localhost when the URL names no host
  const loopback = isLoopbackHost(parsed.host ?? "localhost")
  // Node's TLS skips the check for `false` only (not 0, not "false"), which nodemailer's parser makes of the text
  const checksCertificate = (parsed.tls as { rejectUnauthorized?: unknown } | undefined)?.rejectUnauthorized !== false
  if (parsed.secure === true)
    return { options: { ...TIMEOUTS, ...parsed }, tls: "implicit", loopback, checksCertificate }
  // nodemailer's default for smtp:// is STARTTLS when the server offers it, and plain text (with the login) when not
  const requireTLS = parsed.requireTLS === undefined ? !loopback : Boolean(parsed.requireTLS)
  return {
    options: { ...TIMEOUTS, ...parsed, requireTLS },
    tls: requireTLS ? "starttls" : "starttls-if-offered",
    loopback,
    checksCertificate,
  }
}

/** A server that stops answering fails the attempt within a minute (the URL may say otherwise). */
const TIMEOUTS = { connectionTimeout: 30_000, greetingTimeout: 30_000, socketTimeout: 60_000 }
