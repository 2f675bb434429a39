/**
 * `@agentgov/connector-sdk`: build connector apps that receive agentgov's signed webhooks.
 * Testing helpers live in `@agentgov/connector-sdk/testing`.
 */

export {
  type CloseOptions,
  type CloseResult,
  ConnectorApp,
  type ConnectorHealth,
  type ConnectorLogger,
  type ConnectorOptions,
  createConnector,
  type DeadLetter,
  type DedupeStore,
  type EventHandler,
  type HandlerContext,
  type RetryInfo,
} from "./ConnectorApp.ts"
export { type ConnectorEnvConfig, configFromEnv } from "./config.ts"
export {
  HandlerTimeoutError,
  NonRetryableError,
  RetryableError,
  type RetryableErrorOptions,
  WebhookVerificationError,
  type WebhookVerificationErrorCode,
} from "./errors.ts"
export * from "./events.ts"
export { parseRetryAfter, type RetryOptions, retryAfterMs } from "./retry.ts"
export { atLeast, defaultSeverity, isSeverity, SEVERITIES, type Severity } from "./severity.ts"
export {
  DEFAULT_TOLERANCE_SECONDS,
  getHeader,
  type HeadersLike,
  type VerifiedDelivery,
  type VerifyWebhookOptions,
  verifyWebhook,
  WEBHOOK_HEADERS,
  Webhook,
  type WebhookOptions,
} from "./Webhook.ts"
