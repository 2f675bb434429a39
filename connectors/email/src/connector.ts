import { randomBytes } from "node:crypto"
import { type AnyWebhookEvent, matchesEventPattern, type Severity } from "@agentgov/connector-sdk"
import { formatEvent } from "@agentgov/connector-sdk/format"
import { defineConnector, type Logger, type OwnDeadLetter, ok, retry } from "@agentgov/connector-sdk/runtime"
import nodemailer, { type Transporter } from "nodemailer"
import { DigestStore, type FailedDigest, type StoredDigest } from "./DigestStore.ts"
import { renderDigest } from "./render.ts"
import { type DigestAt, FREQUENCIES, type Frequency, nextDue, parseDigestAt } from "./schedule.ts"
import { smtpTransport, smtpUrlProblem } from "./smtp.ts"

/**
 * The e-mail connector: events are stored in `<data dir>/email.db` as they arrive and sent as a
 * digest (grouped by type and agent) at the configured frequency. Mark before, reconcile after: a
 * digest takes its events and its rendered message in one transaction before the SMTP
 * conversation starts, and is marked sent only after the server's `250`; one marked but not sent
 * (a crash, a failed attempt) is sent again, the same message with the same Message-ID, before
 * any new digest. See the README for what that guarantees.
 */

export interface EmailOptions {
  /** The clock (tests); default `Date.now`. */
  readonly now?: () => number
  /** How often the digest loop looks at the clock and the queue, ms; default 1000. */
  readonly pollMs?: number
}

/** Attempts of one digest before it is a dead letter (`failed`, sent again by `replay`; about a day with the backoff cap). */
export const MAX_SEND_ATTEMPTS = 300
const BACKOFF_MAX_MS = 5 * 60_000
const STOP_WAIT_MS = 5000
/** Sent digests and their events are kept this long, then pruned (hourly). */
export const RETAIN_SENT_MS = 7 * 86_400_000

const ADDRESS = /^[^\s@<>(),;:"]+@[^\s@<>(),;:"]+\.[^\s@<>(),;:"]+$/

const addresses = (text: string) =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")

/** `pattern=address,address;…`: recipients per event pattern. */
export type Routes = ReadonlyArray<readonly [pattern: string, addresses: ReadonlyArray<string>]>

const PATTERN = /^(\*|[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?)$/

/** Parses `EMAIL_ROUTES`; a string is a problem. */
export const parseRoutes = (text: string): Routes | string => {
  const routes: Array<readonly [string, ReadonlyArray<string>]> = []
  for (const entry of text
    .split(";")
    .map((e) => e.trim())
    .filter((e) => e !== "")) {
    const eq = entry.indexOf("=")
    const pattern = eq < 0 ? "" : entry.slice(0, eq).trim()
    const to = eq < 0 ? [] : addresses(entry.slice(eq + 1))
    if (!PATTERN.test(pattern) || to.length === 0)
      return `"${entry}" is not pattern=address[,address] (e.g. enforcement.*=security@example.com)`
    const bad = to.filter((a) => !ADDRESS.test(bare(a)))
    if (bad.length > 0) return `not e-mail addresses: ${bad.join(", ")}`
    routes.push([pattern, to])
  }
  return routes
}

/** The recipients of an event type, as one sorted `, `-separated set. */
export const recipientsOf =
  (routes: Routes, fallback: ReadonlyArray<string>) =>
  (type: string): string => {
    const matched = routes.filter(([pattern]) => matchesEventPattern(pattern, type)).flatMap(([, to]) => to)
    return [...new Set(matched.length > 0 ? matched : fallback)].sort().join(", ")
  }

/** The bare address of `Name <a@b.c>` or `a@b.c`. */
const bare = (text: string) => /<([^>]+)>\s*$/.exec(text)?.[1] ?? text

const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined)

/** The fields of an event the digest keeps (without its recipients). */
export const pending = (event: AnyWebhookEvent, severity: Severity, dashboardUrl: string | undefined) => {
  const d = (event.data ?? {}) as Record<string, unknown>
  const m = formatEvent(event, { severity, dashboardUrl })
  const agentId = str(d.agentId) ?? ""
  const name = str(d.agentName)
  return {
    eventId: event.id,
    type: m.eventType,
    agentKey: agentId,
    agentLabel: name && agentId ? `${name} (${agentId})` : (name ?? agentId),
    severity: m.severity,
    title: m.title,
    summary: m.summary,
    link: m.link?.url ?? null,
    occurredAt: Number.isNaN(Date.parse(m.timestamp)) ? Date.now() : Date.parse(m.timestamp),
    fields: JSON.stringify(m.fields.map((f) => ({ label: f.label, value: f.value }))),
  }
}

interface MailerOptions {
  readonly frequency: Frequency
  readonly at: DigestAt
  readonly from: string
  /** Who gets an event of a type: the matching routes' addresses, else EMAIL_TO. */
  readonly recipientsOf: (type: string) => string
  readonly dashboardUrl: string | undefined
  readonly now: () => number
  readonly pollMs: number
  readonly log: Logger
}

/** The digest loop: builds and sends digests; one at a time. */
class Mailer {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false
  private kicked = false
  private prunedAt = Number.NEGATIVE_INFINITY

  readonly store: DigestStore
  private readonly transport: Transporter
  private readonly o: MailerOptions

  constructor(store: DigestStore, transport: Transporter, o: MailerOptions) {
    this.store = store
    this.transport = transport
    this.o = o
    if (this.store.meta("next_due") === undefined || this.store.meta("frequency") !== this.key())
      this.advance(this.o.now())
    this.schedule(0)
  }

  private key() {
    return `${this.o.frequency} ${this.o.at.hour}:${this.o.at.minute} ${this.o.at.zone}`
  }

  private advance(now: number) {
    this.store.setMeta("next_due", String(nextDue(this.o.frequency, now, this.o.at)))
    this.store.setMeta("frequency", this.key())
  }

  private schedule(ms: number) {
    if (this.stopped) return
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.tick(), ms)
    this.timer.unref()
  }

  recipientsOf(type: string) {
    return this.o.recipientsOf(type)
  }

  /** An event arrived: an immediate digest need not wait for the next poll. */
  kick() {
    if (this.o.frequency !== "immediate") return
    if (this.running) this.kicked = true
    else this.schedule(0)
  }

  private tick() {
    if (this.stopped || this.running) return
    this.running = this.run()
      .catch((error: unknown) => this.o.log.error("the digest loop failed", { error: (error as Error).message }))
      .finally(() => {
        this.running = undefined
        const again = this.kicked
        this.kicked = false
        this.schedule(again ? 0 : this.o.pollMs)
      })
  }

  private async run() {
    if (this.o.now() - this.prunedAt >= 3_600_000) {
      this.prunedAt = this.o.now()
      const gone = this.store.prune(this.prunedAt - RETAIN_SENT_MS)
      if (gone > 0) this.o.log.info("old digests pruned", { digests: gone })
    }
    for (;;) {
      if (this.stopped) return
      const now = this.o.now()
      // reconcile: a digest marked before a crash (or a failed attempt) goes first, unchanged
      const unsent = this.store.unsent()
      if (unsent) {
        if (unsent.nextAttemptAt > now) return
        if (!(await this.send(unsent))) return
        continue
      }
      if (now < Number(this.store.meta("next_due"))) return
      const digests = this.store.assign(
        () => `<digest.${now}.${randomBytes(8).toString("hex")}@agentgov.connector>`,
        now,
        (id) => renderDigest(this.store, id, { frequency: this.o.frequency, dashboardUrl: this.o.dashboardUrl, now }),
      )
      this.advance(now)
      // an empty period: nothing marked, nothing sent
      if (digests.length === 0) return
      for (const digest of digests) {
        this.o.log.info("digest built", { digest: digest.id, events: digest.eventCount })
        // one that fails stays marked: the reconciliation above sends it, and those after it, first
        if (!(await this.send(digest))) return
      }
      if (this.o.frequency !== "immediate") return
    }
  }

  /** One SMTP attempt; true when the server took the message. */
  private async send(d: StoredDigest): Promise<boolean> {
    try {
      const info = await this.transport.sendMail({
        from: this.o.from,
        to: d.recipients.split(", "),
        subject: d.subject.replace(/[\r\n]+/g, " "),
        text: d.text,
        html: d.html,
        messageId: d.messageId,
        date: new Date(d.createdAt),
        headers: { "X-Agentgov-Digest": String(d.id), "X-Agentgov-Events": String(d.eventCount) },
      })
      this.store.markSent(d.id, this.o.now())
      this.o.log.info("digest sent", {
        digest: d.id,
        events: d.eventCount,
        attempt: d.attempts + 1,
        response: info.response,
      })
      return true
    } catch (error) {
      const e = error as { message?: string; responseCode?: number; code?: string }
      const attempts = d.attempts + 1
      const permanent = typeof e.responseCode === "number" && e.responseCode >= 500 && e.code !== "ECONNECTION"
      const giveUp = attempts >= MAX_SEND_ATTEMPTS || (permanent && attempts >= 3)
      const wait = Math.min(BACKOFF_MAX_MS, 1000 * 2 ** Math.min(attempts - 1, 20))
      this.store.markAttemptFailed(d.id, String(e.message ?? error), this.o.now(), this.o.now() + wait, giveUp)
      const level = giveUp ? "error" : "warn"
      this.o.log[level](
        giveUp ? "dead-lettered: the digest failed; replay sends it" : "sending the digest failed; will retry",
        {
          digest: d.id,
          attempt: attempts,
          responseCode: e.responseCode,
          error: e.message,
          ...(giveUp ? { deadLetter: `digest-${d.id}` } : { delayMs: wait }),
        },
      )
      return false
    }
  }

  /**
   * Stops the loop: a send in progress gets a few seconds; one cut short stays `sending` and goes
   * again after the restart.
   */
  async stop() {
    this.stopped = true
    clearTimeout(this.timer)
    let waited: NodeJS.Timeout | undefined
    await Promise.race([this.running, new Promise((r) => (waited = setTimeout(r, STOP_WAIT_MS)))])
    clearTimeout(waited)
    this.transport.close()
    this.store.close()
  }
}

/** A failed digest as a dead letter of the runtime's `dead-letters`; `replay digest-<id>` names it. */
const deadLetterOf = (d: FailedDigest): OwnDeadLetter => ({
  id: `digest-${d.id}`,
  type: "email.digest",
  events: d.eventCount,
  attempts: d.attempts,
  reason: "smtp_failed",
  error: d.lastError,
  failedAt: d.failedAt,
})

/** Runs `f` on the data directory's `email.db` (the commands: `setup` does not run there). */
const withStore = <A>(dataDir: string, f: (store: DigestStore) => A): A => {
  const store = new DigestStore(dataDir)
  try {
    return f(store)
  } finally {
    store.close()
  }
}

/** The e-mail connector with its own clock (tests); {@link email} uses the real one. */
export const createEmailConnector = (options: EmailOptions = {}) =>
  defineConnector({
    name: "email",
    description: "sends agentgov events as e-mail digests over SMTP (immediate, hourly or daily)",
    defaultEvents: ["*"],
    settings: {
      smtpUrl: {
        env: "SMTP_URL",
        description:
          "smtps://user:password@host:465 (TLS from the start), or smtp://user:password@host:587 (STARTTLS, required but to a loopback host unless ?requireTLS=false; tls.* options as query parameters)",
        required: true,
        secret: true,
        check: smtpUrlProblem,
      },
      from: {
        env: "EMAIL_FROM",
        description: "the sender, e.g. agentgov <agentgov@example.com>",
        required: true,
        check: (v) => (ADDRESS.test(bare(v).trim()) ? undefined : "must be an e-mail address (or Name <address>)"),
      },
      to: {
        env: "EMAIL_TO",
        description: "recipients, comma-separated",
        required: true,
        check: (v) => {
          const bad = addresses(v).filter((a) => !ADDRESS.test(bare(a)))
          if (addresses(v).length === 0) return "names no recipient"
          return bad.length > 0 ? `not e-mail addresses: ${bad.join(", ")}` : undefined
        },
      },
      routes: {
        env: "EMAIL_ROUTES",
        description:
          "per event type, other recipients: pattern=address,address;pattern=… (e.g. enforcement.*=security@example.com); the rest go to EMAIL_TO",
        default: "",
        check: (v) => {
          const r = parseRoutes(v)
          return typeof r === "string" ? r : undefined
        },
      },
      frequency: {
        env: "EMAIL_FREQUENCY",
        description: "immediate, hourly or daily",
        default: "daily",
        check: (v) => (FREQUENCIES.includes(v as Frequency) ? undefined : `must be one of ${FREQUENCIES.join(", ")}`),
      },
      digestAt: {
        env: "EMAIL_DIGEST_AT",
        description: "the daily digest's time and zone, e.g. 08:00 Europe/Berlin (default 08:00 UTC)",
        default: "08:00 UTC",
        check: (v) => {
          const at = parseDigestAt(v)
          return typeof at === "string" ? at : undefined
        },
      },
    },
    setup: (settings, { log, dataDir, dashboardUrl }) => {
      const now = options.now ?? Date.now
      const smtp = smtpTransport(settings.smtpUrl)
      if (smtp.tls === "starttls-if-offered" && !smtp.loopback)
        log.warn("SMTP_URL says requireTLS=false: mail, and the login, go in the clear to a server without STARTTLS")
      // A relay on this machine has no network path to pose on; any other server's certificate is what TLS rests on.
      if (!smtp.checksCertificate && !smtp.loopback)
        log.warn(
          "SMTP_URL says tls.rejectUnauthorized=false: the server's certificate is not checked, so whoever is on the path can pose as the server and read the mail and the login",
        )
      // started here, not at the first event: a digest marked before a crash is sent at once
      const mailer = new Mailer(
        new DigestStore(dataDir),
        nodemailer.createTransport(smtp.options as Parameters<typeof nodemailer.createTransport>[0]),
        {
          frequency: settings.frequency as Frequency,
          at: parseDigestAt(settings.digestAt) as DigestAt,
          from: settings.from,
          recipientsOf: recipientsOf(parseRoutes(settings.routes) as Routes, addresses(settings.to)),
          dashboardUrl,
          now,
          pollMs: options.pollMs ?? 1000,
          log,
        },
      )
      return { mailer, now }
    },
    stop: (client) => client.mailer.stop(),
    // a digest refused for good is the app's dead letter: listed, counted in /healthz, and sent by `replay`
    ownDeadLetters: {
      count: (client) => (client.mailer.store.isOpen ? client.mailer.store.failedCount() : 0),
      list: (dataDir) => withStore(dataDir, (store) => store.failed().map(deadLetterOf)),
      replay: (dataDir, ids) => {
        const chosen =
          ids === "all"
            ? "all"
            : ids.flatMap((i) => (/^digest-\d+$/.test(i) ? [Number(i.slice("digest-".length))] : []))
        if (chosen !== "all" && chosen.length === 0) return []
        return withStore(dataDir, (store) => store.retryFailed(chosen).map(deadLetterOf))
      },
    },
    deliver: (event, { client, severity, dashboardUrl }) => {
      if (!client.mailer.store.isOpen) return retry("the connector is stopping")
      const e = pending(event, severity, dashboardUrl)
      client.mailer.store.add({ ...e, recipients: client.mailer.recipientsOf(e.type) }, client.now())
      client.mailer.kick()
      return ok()
    },
  })

export const email = createEmailConnector()
