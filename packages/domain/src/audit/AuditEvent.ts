import { Schema } from "effect"

export const Actor = Schema.Struct({
  type: Schema.Literals(["api_key", "sdk_token", "oauth", "user", "system"]),
  id: Schema.NullOr(Schema.String),
}).annotate({
  identifier: "EventActor",
  description:
    "Who caused the event. Not covered by the chain hash (D8 fixes the hashed fields); covered by the event's Merkle leaf (see `attributedFrom`).",
})

/** An event of the audit trail as the API returns it; its hash can be recomputed from these fields. */
export const AuditEvent = Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  timestamp: Schema.String.annotate({ description: "ISO 8601 UTC with milliseconds; hashed exactly as returned" }),
  workspaceId: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  occurredAt: Schema.NullOr(Schema.String).annotate({
    description: "the client's own time of an ingested event; not part of the chain hash, covered by the Merkle leaf",
  }),
  actor: Actor,
  data: Schema.Record(Schema.String, Schema.Unknown),
  sequence: Schema.Int,
  prevHash: Schema.String,
  hash: Schema.String,
}).annotate({ identifier: "Event" })
export type AuditEvent = typeof AuditEvent.Type

/** What a domain operation hands to the audit log. */
export interface NewEvent {
  readonly type: string
  readonly agentId?: string | null | undefined
  readonly data: Record<string, unknown>
  /** Ingested events only: when the client says it happened. */
  readonly occurredAt?: string | undefined
  /** JCS of `data` when the caller already has it (ingest computes it before the chain is locked). */
  readonly canonicalData?: string | undefined
}
