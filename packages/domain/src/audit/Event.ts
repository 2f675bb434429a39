import { Schema } from "effect"
import { Cursor, Limit, Timestamp } from "../shared/schemas.ts"

export const MAX_INGEST_BATCH = 100
export const MAX_EVENT_DATA_BYTES = 32 * 1024

export const IngestEvent = Schema.Struct({
  type: Schema.String.annotate({ description: "`lowercase.dotted`; the system's own names are refused" }),
  agentId: Schema.optionalKey(Schema.String),
  data: Schema.Record(Schema.String, Schema.Unknown).annotate({ description: "JSON object, at most 32 KiB encoded" }),
  occurredAt: Schema.optionalKey(Timestamp),
}).annotate({ identifier: "IngestEvent" })
export type IngestEvent = typeof IngestEvent.Type

export const IngestEvents = Schema.Struct({
  events: Schema.Array(IngestEvent).check(Schema.isMinLength(1), Schema.isMaxLength(MAX_INGEST_BATCH)),
}).annotate({ identifier: "IngestEvents" })

export const IngestedEvent = Schema.Struct({
  id: Schema.String,
  sequence: Schema.Int,
  hash: Schema.String,
  timestamp: Timestamp,
}).annotate({ identifier: "IngestedEvent" })

export const IngestResult = Schema.Struct({ events: Schema.Array(IngestedEvent) }).annotate({
  identifier: "IngestResult",
})
export type IngestResult = typeof IngestResult.Type

export const EventQueryInput = Schema.Struct({
  limit: Schema.optionalKey(Limit),
  cursor: Schema.optionalKey(Cursor),
  type: Schema.optionalKey(
    Schema.Array(Schema.String).annotate({
      description: "event names, exact or `prefix.*`; several comma-separated or repeated",
    }),
  ),
  agentId: Schema.optionalKey(Schema.String),
  since: Schema.optionalKey(Timestamp.annotate({ description: "events at or after this time" })),
  until: Schema.optionalKey(Timestamp.annotate({ description: "events before this time" })),
  fromSequence: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  toSequence: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
}).annotate({ identifier: "EventQuery" })
export type EventQueryInput = typeof EventQueryInput.Type

export const Verification = Schema.Struct({
  valid: Schema.Boolean,
  checked: Schema.Int.annotate({ description: "events checked" }),
  firstBadSequence: Schema.optionalKey(Schema.Int),
  reason: Schema.optionalKey(Schema.String),
  verifiedAt: Timestamp,
}).annotate({ identifier: "ChainVerification" })
export type Verification = typeof Verification.Type
