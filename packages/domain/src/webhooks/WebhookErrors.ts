import { Schema } from "effect"

export class WebhookNotFound extends Schema.TaggedError<WebhookNotFound>()("WebhookNotFound", {
  webhookId: Schema.String,
}) {}
