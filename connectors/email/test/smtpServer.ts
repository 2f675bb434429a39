import type { AddressInfo } from "node:net"
import { type ParsedMail, simpleParser } from "mailparser"
import { SMTPServer } from "smtp-server"

/**
 * A real SMTP server (`smtp-server`) in the test process. A message counts as delivered only once
 * the server has answered `250` to its DATA, as RFC 5321 has it: a message whose sender went away
 * before that answer is discarded. `hold()` makes the server keep the next message unanswered, so a
 * test can kill the sender in the middle of the conversation.
 */

export interface Mail {
  readonly parsed: ParsedMail
  readonly raw: string
  readonly envelope: { readonly from: string; readonly to: ReadonlyArray<string> }
  /** Whether the message came over TLS (implicit, or after STARTTLS). */
  readonly secure: boolean
  /** Whether the client logged in. */
  readonly authenticated: boolean
}

export interface SmtpServerOptions {
  /** The address to listen on and to name in `url` (default 127.0.0.1). */
  readonly host?: string
  /** Offer STARTTLS (smtp-server's own test certificate); default not. */
  readonly starttls?: boolean
  /** TLS from the first byte, as on port 465 (`url` is then smtps://); default not. */
  readonly implicitTls?: boolean
}

export interface SmtpServer {
  readonly url: string
  /** Messages answered 250, oldest first. */
  readonly mailbox: Array<Mail>
  /** Messages held unanswered by `hold()`, with their Message-ID. */
  readonly held: Array<{ readonly messageId: string; readonly raw: string }>
  /** The next messages are received whole but never answered (the sender dies waiting). */
  readonly hold: (on: boolean) => void
  /** Logins are answered `535 5.7.8` (a rotated password) until `refuseLogin(false)`; others go on. */
  readonly refuseLogin: (on: boolean) => void
  readonly close: () => Promise<void>
}

export const startSmtpServer = async (options: SmtpServerOptions = {}): Promise<SmtpServer> => {
  const host = options.host ?? "127.0.0.1"
  const mailbox: Array<Mail> = []
  const held: Array<{ messageId: string; raw: string }> = []
  let holding = false
  let refusingLogin = false
  const server = new SMTPServer({
    authOptional: true,
    // a client that logs in (a user in SMTP_URL) may, over the plain connection of the tests
    allowInsecureAuth: true,
    onAuth(auth, _session, callback) {
      if (refusingLogin)
        return callback(Object.assign(new Error("5.7.8 Authentication credentials invalid"), { responseCode: 535 }))
      callback(null, { user: auth.username })
    },
    disabledCommands: options.starttls === true ? [] : ["STARTTLS"],
    secure: options.implicitTls === true,
    logger: false,
    size: 10 * 1024 * 1024,
    closeTimeout: 200,
    onData(stream, session, callback) {
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8")
        void simpleParser(raw).then((parsed) => {
          if (holding) {
            held.push({ messageId: parsed.messageId ?? "", raw })
            return // never answered
          }
          mailbox.push({
            parsed,
            raw,
            envelope: {
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
              to: session.envelope.rcptTo.map((r) => r.address),
            },
            secure: session.secure === true,
            authenticated: session.user !== undefined,
          })
          callback()
        }, callback)
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(0, host, () => resolve()))
  const port = (server.server.address() as AddressInfo).port
  return {
    url: `${options.implicitTls === true ? "smtps" : "smtp"}://${host.includes(":") ? `[${host}]` : host}:${port}`,
    mailbox,
    held,
    hold: (on) => {
      holding = on
    },
    refuseLogin: (on) => {
      refusingLogin = on
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
      }),
  }
}
