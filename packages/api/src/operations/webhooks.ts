import {
  CreateWebhook,
  MAX_REDELIVER,
  MAX_WEBHOOKS_PER_WORKSPACE,
  PageOf,
  Redeliver,
  RedeliverResult,
  RotateWebhookSecret,
  TestResult,
  TestWebhook,
  UpdateWebhook,
  Webhook,
  WebhookGetQuery,
  WebhookService,
  WebhookWithSecret,
} from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { idAnd, idField, pageFields, REDACTED_SECRET } from "./common.ts"

const tag = "Webhooks"

const SIGNING =
  "Each delivery is a POST of the event envelope `{id, type, timestamp, workspaceId, data, metadata: {deliveryId, webhookId, attempt}}` with `X-SVC-Webhook-Id` (the delivery id), `X-SVC-Webhook-Timestamp` (Unix seconds) and `X-SVC-Webhook-Signature: v1=<hex HMAC-SHA256 of id.timestamp.body>` keyed with the UTF-8 bytes of the secret (during a rotation's overlap: `v1=<new> v1=<old>`), plus the legacy `X-SVC-Signature` (hex HMAC of the body). Any 2xx is success; redirects are not followed."

const redactSecret = (w: WebhookWithSecret) => ({ ...w, secret: REDACTED_SECRET })

export const webhookOperations = [
  defineOperation({
    name: "webhooks.create",
    method: "POST",
    path: "/webhooks",
    scope: "webhooks:write",
    tag,
    summary: "Register a webhook",
    description: `The workspace's events matching \`events\` (exact names, \`prefix.*\`, \`*\`; \`enforcement.issued\` is \`enforcement.created\`) are delivered to \`url\`, retried per \`retryPolicy\`; when every attempt for an event fails, or the endpoint answers 410 Gone, the webhook is disabled. The signing secret (generated when omitted) is returned once, in \`secret\`. URLs whose host resolves to a private, loopback, link-local or metadata address are refused (422, \`url\`) unless the operator's allowlist names them, in every environment. An attempt records the status code only: never the answer's body or headers, and one message for every failed connection. At most ${MAX_WEBHOOKS_PER_WORKSPACE} webhooks per workspace (409 \`WEBHOOK_LIMIT_REACHED\`). ${SIGNING}`,
    successStatus: 201,
    errors: ["WEBHOOK_LIMIT_REACHED"],
    input: CreateWebhook,
    output: WebhookWithSecret,
    ownsIdempotency: true,
    redactForReplay: redactSecret,
    handler: (input, actor, { idempotency }) => WebhookService.use((s) => s.create(actor, input, idempotency)),
  }),
  defineOperation({
    name: "webhooks.list",
    method: "GET",
    path: "/webhooks",
    scope: "webhooks:read",
    tag,
    summary: "List webhooks",
    description: "Newest first, each with its delivery statistics. Never includes secrets.",
    paginated: true,
    input: Schema.Struct({ ...pageFields, enabled: Schema.optionalKey(Schema.Boolean) }),
    output: PageOf(Webhook),
    handler: (input, actor) => WebhookService.use((s) => s.list(actor, input)),
  }),
  defineOperation({
    name: "webhooks.get",
    method: "GET",
    path: "/webhooks/:id",
    scope: "webhooks:read",
    tag,
    summary: "Get a webhook",
    description:
      "With statistics over its recorded attempts; with `includeDeliveries=true`, also the most recent attempts (`limit`, default 25), newest first. Every attempt of one event shares the delivery `id`.",
    errors: ["WEBHOOK_NOT_FOUND"],
    input: Schema.Struct({ ...idField, ...WebhookGetQuery.fields }),
    output: Webhook,
    handler: ({ id, ...options }, actor) => WebhookService.use((s) => s.get(actor, id, options)),
  }),
  defineOperation({
    name: "webhooks.update",
    method: "PATCH",
    path: "/webhooks/:id",
    scope: "webhooks:write",
    tag,
    summary: "Update a webhook",
    description:
      "`enabled: true` re-enables a disabled webhook: deliveries paused while it was disabled resume. `enabled: false` pauses its pending deliveries; events recorded while it is disabled are not delivered to it. The secret changes only by rotation.",
    errors: ["WEBHOOK_NOT_FOUND"],
    input: idAnd(UpdateWebhook),
    output: Webhook,
    handler: ({ id, ...patch }, actor) => WebhookService.use((s) => s.update(actor, id, patch)),
  }),
  defineOperation({
    name: "webhooks.delete",
    method: "DELETE",
    path: "/webhooks/:id",
    scope: "webhooks:write",
    tag,
    summary: "Delete a webhook",
    description: "Deletes it with its delivery history; nothing more is sent to it. Returns the webhook as it was.",
    errors: ["WEBHOOK_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: Webhook,
    handler: (input, actor) => WebhookService.use((s) => s.remove(actor, input.id)),
  }),
  defineOperation({
    name: "webhooks.rotate",
    method: "POST",
    path: "/webhooks/:id/rotate",
    scope: "webhooks:write",
    tag,
    summary: "Rotate a webhook's secret",
    description:
      "Returns the new secret once (generated unless given). For `overlapSeconds` (default 86400, 0 = none) deliveries carry a signature with each secret, `X-SVC-Webhook-Signature: v1=<new> v1=<old>`, so receivers can switch without losing a delivery; the legacy `X-SVC-Signature` uses the new secret.",
    errors: ["WEBHOOK_NOT_FOUND"],
    input: idAnd(RotateWebhookSecret),
    output: WebhookWithSecret,
    redactForReplay: redactSecret,
    handler: ({ id, ...input }, actor) => WebhookService.use((s) => s.rotate(actor, id, input)),
  }),
  defineOperation({
    name: "webhooks.test",
    method: "POST",
    path: "/webhooks/:id/test",
    scope: "webhooks:write",
    tag,
    summary: "Send a test delivery",
    description:
      "Sends a sample event of `eventType` (a system event name or alias; others are 422) now and answers with the outcome; signed exactly as real deliveries, also to a disabled webhook. The sample is not recorded (no event, no history, no statistics) and never disables the webhook. Not idempotent: a retry sends again.",
    errors: ["WEBHOOK_NOT_FOUND"],
    input: idAnd(TestWebhook),
    output: TestResult,
    // The send may take the whole time-out: it must not run inside the transaction an Idempotency-Key opens.
    ownsIdempotency: true,
    handler: ({ id, eventType }, actor) => WebhookService.use((s) => s.test(actor, id, eventType)),
  }),
  defineOperation({
    name: "webhooks.redeliver",
    method: "POST",
    path: "/webhooks/:id/redeliver",
    scope: "webhooks:write",
    tag,
    summary: "Re-send failed deliveries",
    description: `Queues the failed deliveries named by \`deliveryIds\` and/or whose events fall in \`since\`..\`until\` (at least one of them), oldest first, at most ${MAX_REDELIVER} per call (\`hasMore\` says whether more match). Each gets a new round of its retry schedule; attempt numbers continue. Named deliveries that are not failed are listed in \`skipped\`. A disabled webhook is 409 \`WEBHOOK_DISABLED\`: enable it first.`,
    errors: ["WEBHOOK_NOT_FOUND", "WEBHOOK_DISABLED"],
    input: idAnd(Redeliver),
    output: RedeliverResult,
    handler: ({ id, ...input }, actor) => WebhookService.use((s) => s.redeliver(actor, id, input)),
  }),
]
