import { Context } from "effect"
import { EMPTY_ALLOWLIST, type Resolver, systemResolver, type TargetPolicy } from "./targets.ts"

export interface WebhookSettingsShape {
  /** Multiplies every schedule delay and time-out (tests run schedules on a fast clock); 1 in production. */
  readonly timeScale: number
  /** Where deliveries may go (SSRF protection). */
  readonly targets: TargetPolicy
  /** DNS for webhook hosts; tests substitute their own. */
  readonly resolver: Resolver
}

/**
 * The operator's webhook settings. Unset, the strict defaults hold: real
 * time, and public addresses only.
 */
export const WebhookSettings = Context.Reference<WebhookSettingsShape>("@agentgov/domain/webhooks/WebhookSettings", {
  defaultValue: () => ({
    timeScale: 1,
    targets: { allowlist: EMPTY_ALLOWLIST },
    resolver: systemResolver,
  }),
})
