/**
 * `@agentgov/sdk/webhooks`: verify the service's signed webhook deliveries (D9). The same
 * verifier as `@agentgov/connector-sdk`, re-exported so that an agent needs one package. Kept
 * out of the main entry point because it uses `node:crypto`, which the rest of the SDK does not
 * need.
 *
 * @example
 * ```ts
 * import { Webhook, WebhookVerificationError } from "@agentgov/sdk/webhooks"
 *
 * const webhook = new Webhook({ secret: process.env.AGENTGOV_WEBHOOK_SECRET! })
 * // in your HTTP handler, with the raw body:
 * try {
 *   const event = webhook.verify(rawBody, request.headers)
 *   console.log(event.type, event.data)
 * } catch (error) {
 *   if (error instanceof WebhookVerificationError) console.warn(error.code) // answer error.status
 * }
 * ```
 */
export {
  type AnyWebhookEvent,
  DEFAULT_TOLERANCE_SECONDS,
  type EventPattern,
  getHeader,
  type HeadersLike,
  isEventType,
  isSystemEventName,
  matchesEventPattern,
  SYSTEM_EVENT_NAMES,
  type SystemEventDataMap,
  type SystemEventName,
  type SystemWebhookEvent,
  type VerifiedDelivery,
  type VerifyWebhookOptions,
  verifyWebhook,
  WEBHOOK_HEADERS,
  Webhook,
  type WebhookEvent,
  type WebhookOptions,
  WebhookVerificationError,
  type WebhookVerificationErrorCode,
} from "@agentgov/connector-sdk"
