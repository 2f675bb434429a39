import { Context } from "effect"

/** What the operator's configuration gives the people domain. */
export interface PeopleSettingsShape {
  /** Where the dashboard is served: invitation links point here. */
  readonly publicUrl: string
  /** How long an invitation link works. */
  readonly invitationTtlMs: number
  /**
   * Sends an invitation e-mail (SMTP when the operator set SMTP_URL); absent: the link is shown to the
   * inviter instead. A failure to send falls back to showing the link.
   */
  readonly sendInvitation?:
    | ((message: { to: string; workspaceName: string; role: string; link: string }) => Promise<void>)
    | undefined
}

export const DEFAULT_INVITATION_TTL_MS = 7 * 24 * 3600_000

/** The operator's settings for people; unset (domain tests): a loopback URL, no SMTP, seven-day invitations. */
export const PeopleSettings = Context.Reference<PeopleSettingsShape>("@agentgov/domain/people/PeopleSettings", {
  defaultValue: () => ({ publicUrl: "http://127.0.0.1:3000", invitationTtlMs: DEFAULT_INVITATION_TTL_MS }),
})
