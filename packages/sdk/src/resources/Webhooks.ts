import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type {
  ListParams,
  Webhook,
  WebhookCreateParams,
  WebhookDelivery,
  WebhookGetParams,
  WebhookListParams,
  WebhookRedeliverParams,
  WebhookRedeliverResult,
  WebhookRotateParams,
  WebhookTestParams,
  WebhookTestResult,
  WebhookUpdateParams,
  WebhookWithSecret,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/webhooks` (D9): signed deliveries of events to your endpoints. Verify them with
 * `@agentgov/sdk/webhooks`.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const hook = await client.webhooks.create({ url: "https://example.com/hooks", events: ["approval.*"] })
 * console.log(hook.secret) // shown once
 * const { delivered } = await client.webhooks.test(hook.id, { eventType: "approval.requested" })
 * ```
 */
export class Webhooks extends Resource {
  /** The signing secret (generated when omitted) is returned once, in `secret`. */
  create(params: WebhookCreateParams, options?: RequestOptions): Promise<WebhookWithSecret> {
    return this.one({ method: "POST", path: "/webhooks", body: params }, options)
  }

  list(params: WebhookListParams = {}, options?: RequestOptions): PageIterator<Webhook> {
    return this.paginate("/webhooks", { ...params }, options)
  }

  /** With `includeDeliveries: true`, also the most recent attempts. */
  get(id: string, params: WebhookGetParams = {}, options?: RequestOptions): Promise<Webhook> {
    return this.one({ method: "GET", path: `/webhooks/${seg(id)}`, query: { ...params } }, options)
  }

  /** Its delivery attempts, newest first, through the whole recorded history (pages of `limit`, cursor-paginated). */
  deliveries(id: string, params: ListParams = {}, options?: RequestOptions): PageIterator<WebhookDelivery> {
    return this.paginate(`/webhooks/${seg(id)}/deliveries`, { ...params }, options)
  }

  /** `enabled: true` re-enables a disabled webhook. */
  update(id: string, params: WebhookUpdateParams, options?: RequestOptions): Promise<Webhook> {
    return this.one({ method: "PATCH", path: `/webhooks/${seg(id)}`, body: params }, options)
  }

  delete(id: string, options?: RequestOptions): Promise<Webhook> {
    return this.one({ method: "DELETE", path: `/webhooks/${seg(id)}` }, options)
  }

  /** A new secret, returned once; during `overlapSeconds` deliveries carry both signatures. */
  rotate(id: string, params: WebhookRotateParams = {}, options?: RequestOptions): Promise<WebhookWithSecret> {
    return this.one({ method: "POST", path: `/webhooks/${seg(id)}/rotate`, body: params }, options)
  }

  /** Sends a signed sample event now and reports the outcome. Not idempotent: a retry sends again. */
  test(id: string, params: WebhookTestParams, options?: RequestOptions): Promise<WebhookTestResult> {
    return this.one({ method: "POST", path: `/webhooks/${seg(id)}/test`, body: params }, options)
  }

  /** Queues failed deliveries again (by id and/or time range), at most 1,000 per call. */
  redeliver(id: string, params: WebhookRedeliverParams, options?: RequestOptions): Promise<WebhookRedeliverResult> {
    return this.one({ method: "POST", path: `/webhooks/${seg(id)}/redeliver`, body: params }, options)
  }
}
