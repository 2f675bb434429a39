import { Context } from "effect"

export interface ContentSettingsShape {
  /** `smtp://user:pass@host:port` (or `smtps://`): takedown notices are sent through it; unset, kept `pending`. */
  readonly smtpUrl: string | undefined
  /** The notices' From address. */
  readonly from: string
  /**
   * The longest a notice's delivery may take, in ms (unset: SMTP_TIMEOUT_MS of takedownNotice.ts, 20 s): the connection, the
   * server's greeting, each of its replies and the whole exchange. A server that accepts and stalls fails the notice.
   */
  readonly smtpTimeoutMs?: number | undefined
  /** AGENTGOV_C2PA_CERT: the operator's C2PA signing certificate chain (PEM, signing certificate first). */
  readonly c2paCertPem?: string | undefined
  /** AGENTGOV_C2PA_KEY: its private key (PEM). Without both, the service issues its own. */
  readonly c2paKeyPem?: string | undefined
  /**
   * `false`: the service does not start its refold worker (texts of an older fold are then fingerprinted again only
   * by `ContentService.refold`, or by another instance's worker). For tests; unset, it starts.
   */
  readonly refoldWorker?: boolean | undefined
  /**
   * AGENTGOV_CONTENT_MATCH_RETENTION_DAYS: a recorded match no takedown cites is purged this many days after it was
   * found (unset: MATCH_RETENTION_DAYS of ContentService, 1,095, three years). A match a takedown cites is kept
   * with the takedown.
   */
  readonly matchRetentionDays?: number | undefined
}

/** The operator's content settings (SMTP_URL, AGENTGOV_TAKEDOWN_FROM). Unset: notices stay pending. */
export const ContentSettings = Context.Reference<ContentSettingsShape>("@agentgov/domain/content/ContentSettings", {
  defaultValue: () => ({ smtpUrl: undefined, from: "agentgov <takedowns@localhost>" }),
})
