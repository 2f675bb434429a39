import { Schema } from "effect"
import { Description, Id, Limit, Timestamp } from "../shared/schemas.ts"

/** D9: `exponential` is schedule A (the default), `extended` schedule B. */
export const RetryPolicy = Schema.Literals(["exponential", "extended"]).annotate({
  description:
    "`exponential` (default): 5 attempts, retried 1 s, 2 s, 4 s and 8 s after each failure, 10 s time-out. `extended`: 8 attempts, retried 30 s, 2 min, 10 min, 30 min, 2 h, 8 h and 24 h after each failure, 30 s time-out",
})
export type RetryPolicy = typeof RetryPolicy.Type

export const DisabledReason = Schema.Literals(["disabled_by_user", "all_attempts_failed", "endpoint_gone"]).annotate({
  description:
    "why the webhook is disabled: `disabled_by_user` (PATCH `enabled: false`), `all_attempts_failed` (every attempt of one event's delivery failed), `endpoint_gone` (the endpoint answered 410 Gone)",
})
export type DisabledReason = typeof DisabledReason.Type

export const WebhookUrl = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(2048)).annotate({
  examples: ["https://hooks.example.com/agentgov"],
  description:
    "absolute http(s) URL without credentials, at most 2048 characters. Hosts that resolve to private, loopback, link-local or metadata addresses are refused unless the operator's allowlist (AGENTGOV_WEBHOOK_ALLOWLIST) names them, in every environment",
})

export const EventFilter = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)).annotate({
  description: "an event name (exact), `prefix.*` (every name under the prefix) or `*` (every event)",
  examples: ["agent.*"],
})
export const EventFilters = Schema.Array(EventFilter).check(Schema.isMinLength(1), Schema.isMaxLength(100))

/** A user-supplied signing secret; the HMAC key is its UTF-8 bytes (D9). */
export const WebhookSecret = Schema.String.check(
  Schema.isMinLength(16),
  Schema.isMaxLength(256),
  Schema.isPattern(/^[\x21-\x7e]+$/),
).annotate({
  description: "16 to 256 printable ASCII characters, no spaces; generated (`whsec_…`) when omitted",
  // JSON Schema counts code points, so effect documents the length loosely (minLength 8): show a real one.
  examples: ["whsec_my_own_secret_2030"],
})

export const WebhookStats = Schema.Struct({
  total: Schema.Int.annotate({ description: "attempts recorded" }),
  successful: Schema.Int,
  failed: Schema.Int,
  successRate: Schema.Finite.annotate({ description: "successful / total, 0..1; 0 before the first attempt" }),
}).annotate({ identifier: "WebhookStats" })
export type WebhookStats = typeof WebhookStats.Type

/**
 * One attempt to deliver one event. `id` is the delivery's (`X-SVC-Webhook-Id`): every attempt
 * of one event to one webhook shares it, `attempt` tells them apart.
 */
export const WebhookDelivery = Schema.Struct({
  id: Id("dlv"),
  eventId: Schema.String.annotate({ description: "the event delivered (`evt_…`)" }),
  eventType: Schema.String,
  status: Schema.Literals(["success", "failed"]),
  statusCode: Schema.optionalKey(
    Schema.Int.annotate({ description: "the HTTP status the endpoint answered; absent when it did not answer" }),
  ),
  responseTimeMs: Schema.Int,
  attempt: Schema.Int.annotate({ description: "attempt number, starting at 1" }),
  nextRetryAt: Schema.optionalKey(
    Timestamp.annotate({ description: "when the next attempt was scheduled; only on a failed attempt to be retried" }),
  ),
  attemptedAt: Timestamp,
  error: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "why the attempt failed: `HTTP <status>` (never the answer's body or headers), `connection failed or no answer within <n> ms` (whichever way the connection failed), a refusal of the target, a DNS failure, or `not sent: the workspace was deleted` (a deleted workspace's deliveries are not retried)",
    }),
  ),
}).annotate({ identifier: "WebhookDelivery" })
export type WebhookDelivery = typeof WebhookDelivery.Type

export const Webhook = Schema.Struct({
  id: Id("whk"),
  url: Schema.String,
  events: Schema.Array(Schema.String).annotate({ description: "the event filters, as registered" }),
  description: Schema.NullOr(Schema.String),
  retryPolicy: RetryPolicy,
  enabled: Schema.Boolean,
  disabledReason: Schema.NullOr(DisabledReason),
  disabledAt: Schema.NullOr(Timestamp),
  secretHint: Schema.String.annotate({
    description: "the secret's last 4 characters, to tell secrets apart; the secret itself is shown only once",
  }),
  previousSecretExpiresAt: Schema.NullOr(Timestamp).annotate({
    description: "during a rotation's overlap: until when deliveries are also signed with the previous secret",
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  stats: WebhookStats,
  deliveries: Schema.optionalKey(
    Schema.Array(WebhookDelivery).annotate({
      description: "the most recent attempts, newest first; only with `includeDeliveries=true`",
    }),
  ),
}).annotate({ identifier: "Webhook" })
export type Webhook = typeof Webhook.Type

/** The webhook with its signing secret: answered by create and rotate only, once. */
export const WebhookWithSecret = Schema.Struct({
  ...Webhook.fields,
  secret: Schema.String.annotate({ description: "the signing secret; shown once, store it now" }),
}).annotate({ identifier: "WebhookWithSecret" })
export type WebhookWithSecret = typeof WebhookWithSecret.Type

export const CreateWebhook = Schema.Struct({
  url: WebhookUrl,
  events: EventFilters,
  secret: Schema.optionalKey(WebhookSecret),
  retryPolicy: Schema.optionalKey(RetryPolicy),
  description: Schema.optionalKey(Description),
  enabled: Schema.optionalKey(Schema.Boolean.annotate({ description: "default true" })),
}).annotate({ identifier: "CreateWebhook" })
export type CreateWebhook = typeof CreateWebhook.Type

/** What a PATCH can change, in the order `webhook.updated` lists them. */
export const UPDATABLE_WEBHOOK_FIELDS = ["url", "events", "description", "retryPolicy", "enabled"] as const

export const UpdateWebhook = Schema.Struct({
  url: Schema.optionalKey(WebhookUrl),
  events: Schema.optionalKey(EventFilters),
  retryPolicy: Schema.optionalKey(RetryPolicy),
  description: Schema.optionalKey(Schema.NullOr(Description)),
  enabled: Schema.optionalKey(
    Schema.Boolean.annotate({
      description: "`true` re-enables a disabled webhook: its paused deliveries resume; `false` pauses them",
    }),
  ),
}).annotate({ identifier: "UpdateWebhook" })
export type UpdateWebhook = typeof UpdateWebhook.Type

export const MAX_ROTATION_OVERLAP_SECONDS = 30 * 86_400
export const DEFAULT_SECRET_OVERLAP_SECONDS = 86_400

export const RotateWebhookSecret = Schema.Struct({
  secret: Schema.optionalKey(WebhookSecret),
  overlapSeconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_ROTATION_OVERLAP_SECONDS })).annotate({
      description:
        "how long deliveries are also signed with the old secret; default 86400, 0 stops it now. During the overlap `X-SVC-Webhook-Signature` carries both: `v1=<new> v1=<old>`",
    }),
  ),
}).annotate({ identifier: "RotateWebhookSecret" })
export type RotateWebhookSecret = typeof RotateWebhookSecret.Type

export const WebhookGetQuery = Schema.Struct({
  includeDeliveries: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "add the most recent attempts (`deliveries`)" }),
  ),
  limit: Schema.optionalKey(Limit.annotate({ description: "how many attempts with `includeDeliveries`, default 25" })),
})

export const TestWebhook = Schema.Struct({
  eventType: Schema.String.annotate({
    description: "a system event name (docs/events.md) or its alias; a sample event of that type is sent",
  }),
}).annotate({ identifier: "TestWebhook" })

export const TestDelivery = Schema.Struct({
  id: Id("dlv"),
  eventId: Schema.String.annotate({ description: "the sample event's id; no such event is stored" }),
  eventType: Schema.String,
  status: Schema.Literals(["success", "failed"]),
  statusCode: Schema.optionalKey(Schema.Int),
  responseTimeMs: Schema.Int,
  attempt: Schema.Int,
  attemptedAt: Timestamp,
  error: Schema.optionalKey(Schema.String),
}).annotate({ identifier: "TestDelivery" })
export type TestDelivery = typeof TestDelivery.Type

export const TestResult = Schema.Struct({
  delivered: Schema.Boolean.annotate({ description: "whether the endpoint answered 2xx" }),
  delivery: TestDelivery,
}).annotate({ identifier: "WebhookTestResult" })
export type TestResult = typeof TestResult.Type

export const MAX_REDELIVER = 1_000

export const Redeliver = Schema.Struct({
  deliveryIds: Schema.optionalKey(
    Schema.Array(Schema.String).check(Schema.isMinLength(1), Schema.isMaxLength(MAX_REDELIVER)).annotate({
      description: "deliveries of this webhook (`dlv_…`, as in `deliveries[].id`)",
    }),
  ),
  since: Schema.optionalKey(Timestamp.annotate({ description: "deliveries of events at or after this time" })),
  until: Schema.optionalKey(Timestamp.annotate({ description: "deliveries of events before this time" })),
}).annotate({ identifier: "Redeliver" })
export type Redeliver = typeof Redeliver.Type

export const RedeliverResult = Schema.Struct({
  queued: Schema.Array(
    Schema.Struct({ id: Schema.String, eventId: Schema.String, eventType: Schema.String, attempt: Schema.Int }),
  ).annotate({ description: "the failed deliveries queued again, each with the number its next attempt will carry" }),
  skipped: Schema.Array(
    Schema.Struct({ id: Schema.String, status: Schema.Literals(["pending", "paused", "success"]) }),
  ).annotate({ description: "named deliveries that were not failed, so not queued" }),
  hasMore: Schema.Boolean.annotate({
    description: `more failed deliveries match than one call queues (${MAX_REDELIVER}); call again for the rest`,
  }),
}).annotate({ identifier: "RedeliverResult" })
export type RedeliverResult = typeof RedeliverResult.Type
