import { checkIngestResult } from "../core/answers.ts"
import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import { type EventStreamParams, streamEvents } from "../core/sse.ts"
import type {
  AuditBundle,
  AuditEvent,
  ChainVerification,
  Checkpoint,
  ConsistencyProof,
  EventExportParams,
  EventListParams,
  EventWithProof,
  InclusionProof,
  IngestEvent,
  IngestResult,
  StreamEvent,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/events`: the hash-chained audit trail (D8) — ingest, query, verify, prove, export, stream.
 *
 * For events your agent produces, prefer `client.agent().track()`: it batches, retries and never
 * stores an event twice. `ingest` is the one-call form.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * await client.events.ingest([{ type: "invoice.sent", agentId: "agt_…", data: { invoiceId: "inv_42" } }])
 * for await (const e of client.events.list({ type: "invoice.*", limit: 100 })) console.log(e.sequence, e.type)
 * const { valid } = await client.events.verify()
 * ```
 */
export class Events extends Resource {
  /**
   * Stores 1..100 events atomically, in order. The automatic Idempotency-Key makes the SDK's own
   * retries safe; pass `idempotencyKey` to make yours safe too.
   */
  ingest(events: ReadonlyArray<IngestEvent>, options?: RequestOptions): Promise<IngestResult> {
    return this.one(
      { method: "POST", path: "/events/ingest", body: { events }, check: checkIngestResult(events.length) },
      options,
    )
  }

  /** Newest first by sequence. */
  list(params: EventListParams = {}, options?: RequestOptions): PageIterator<AuditEvent> {
    return this.paginate("/events", { ...params }, options)
  }

  /** With `proof: true`, also its inclusion proof against the newest checkpoint covering it. */
  get(id: string, params: { readonly proof?: boolean } = {}, options?: RequestOptions): Promise<EventWithProof> {
    return this.one({ method: "GET", path: `/events/${seg(id)}`, query: { ...params } }, options)
  }

  /** Recomputes the whole chain on the service and records the result. */
  verify(options?: RequestOptions): Promise<ChainVerification> {
    // Verification only reads: repeating it is harmless, so no key is needed to retry it.
    return this.one({ method: "POST", path: "/events/verify", replaySafe: true, autoIdempotencyKey: false }, options)
  }

  /** The signed checkpoint of the current chain head. */
  checkpoint(options?: RequestOptions): Promise<Checkpoint> {
    return this.one({ method: "GET", path: "/events/checkpoint" }, options)
  }

  /** The audit path of event `sequence` in a checkpoint's tree (the newest covering it by default). */
  inclusionProof(
    params: { readonly sequence: number; readonly treeSize?: number },
    options?: RequestOptions,
  ): Promise<InclusionProof> {
    return this.one({ method: "GET", path: "/events/proofs/inclusion", query: { ...params } }, options)
  }

  /** Proof that the tree of `fromSize` events is a prefix of a later checkpoint's tree. */
  consistencyProof(
    params: { readonly fromSize: number; readonly toSize?: number },
    options?: RequestOptions,
  ): Promise<ConsistencyProof> {
    return this.one({ method: "GET", path: "/events/proofs/consistency", query: { ...params } }, options)
  }

  /**
   * A bundle `npx agentgov-verify` checks offline. Not for agent-bound credentials. A workspace builds two at once
   * (429 RATE_LIMITED with Retry-After past that, which the client retries as for any 429).
   */
  export(params: EventExportParams = {}, options?: RequestOptions): Promise<AuditBundle> {
    return this.one({ method: "GET", path: "/events/export", query: { ...params } }, options)
  }

  /**
   * The live stream (`GET /events/stream`, D9) as an async iterator. It reconnects with
   * `Last-Event-ID` on its own; stop it with `signal` or by leaving the loop.
   *
   * @example
   * ```ts
   * import { AgentGov } from "@agentgov/sdk"
   *
   * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
   * for await (const event of client.events.stream({ types: ["policy.denied"] })) {
   *   console.log(event.id, event.payload.data)
   * }
   * ```
   */
  stream(params: EventStreamParams = {}): AsyncIterable<StreamEvent> {
    const http = this.http
    return { [Symbol.asyncIterator]: () => streamEvents(http, params, "key") }
  }
}
