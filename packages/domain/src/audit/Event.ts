import { Schema } from "effect"
import { Cursor, jsonObject, Limit, Timestamp } from "../shared/schemas.ts"
import { AuditEvent } from "./AuditEvent.ts"
import { eventFilterIssue } from "./eventFilters.ts"

export const MAX_INGEST_BATCH = 100
export const MAX_EVENT_DATA_BYTES = 32 * 1024

export const IngestEvent = Schema.Struct({
  type: Schema.String.annotate({
    description: "`lowercase.dotted`; the system's own names are refused",
    examples: ["tool.called"],
  }),
  agentId: Schema.optionalKey(Schema.String),
  data: jsonObject({ description: "JSON object, at most 32 KiB encoded" }),
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
    Schema.Array(Schema.String.check(Schema.makeFilter((f: string) => eventFilterIssue(f) ?? true))).annotate({
      description: "event names, exact, `prefix.*` or `*` (D9); several comma-separated or repeated",
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

const Hash = Schema.String.annotate({ description: "lowercase hex SHA-256" })
const Sequence = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
const TreeSize = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

export const Checkpoint = Schema.Struct({
  workspaceId: Schema.String,
  treeSize: Schema.Int.annotate({ description: "events in the tree: sequences 1..treeSize" }),
  rootHash: Hash.annotate({
    description:
      "RFC 6962 Merkle tree hash over the events' leaves: for a sequence ≥ attributedFrom, SHA-256(0x00 ‖ UTF-8 JCS({actor: {id, type}, agentId, hash, id, occurredAt})); before it, SHA-256(0x00 ‖ bytes of the event's hash)",
  }),
  headHash: Hash.annotate({ description: "the chain hash of event treeSize" }),
  timestamp: Timestamp,
  kid: Schema.String.annotate({ description: "the signing key in /.well-known/jwks.json" }),
  signature: Schema.String.annotate({
    description:
      'base64url Ed25519 over UTF-8 "agentgov-checkpoint/v1\\n" + JCS({workspaceId, treeSize, rootHash, headHash, timestamp})',
  }),
}).annotate({ identifier: "Checkpoint" })

export const InclusionProof = Schema.Struct({
  sequence: Schema.Int,
  leafIndex: Schema.Int.annotate({ description: "sequence − 1" }),
  treeSize: Schema.Int,
  path: Schema.Array(Hash).annotate({ description: "audit path, leaf to root (RFC 9162 §2.1.3)" }),
}).annotate({ identifier: "InclusionProof" })

/** The first sequence whose Merkle leaf covers the event's attribution (1 unless the workspace predates it). */
const AttributedFrom = Schema.Int.annotate({
  description:
    "events from this sequence on have leaves that cover id, agentId, actor and occurredAt besides the chain hash; earlier ones (signed before attribution was covered) have the chain hash alone",
})

export const InclusionProofResult = Schema.Struct({
  ...InclusionProof.fields,
  attributedFrom: AttributedFrom,
  checkpoint: Checkpoint,
}).annotate({
  identifier: "InclusionProofResult",
})

export const ConsistencyProofResult = Schema.Struct({
  fromSize: Schema.Int,
  fromRoot: Hash,
  toSize: Schema.Int,
  path: Schema.Array(Hash).annotate({ description: "RFC 9162 §2.1.4 consistency proof" }),
  checkpoint: Checkpoint,
}).annotate({ identifier: "ConsistencyProofResult" })

export const InclusionProofQuery = Schema.Struct({
  sequence: Sequence,
  treeSize: Schema.optionalKey(TreeSize.annotate({ description: "a checkpoint's tree size; the latest by default" })),
})

export const ConsistencyProofQuery = Schema.Struct({
  fromSize: TreeSize.annotate({ description: "the tree size of the older checkpoint you hold" }),
  toSize: Schema.optionalKey(TreeSize.annotate({ description: "a checkpoint's tree size; the latest by default" })),
})

export const ExportQuery = Schema.Struct({
  fromSequence: Schema.optionalKey(Sequence),
  toSequence: Schema.optionalKey(Sequence),
  sinceTreeSize: Schema.optionalKey(
    TreeSize.annotate({ description: "add a consistency proof from this older tree size to the bundle's checkpoint" }),
  ),
})

export const ExportBundle = Schema.Struct({
  format: Schema.Literal("agentgov.audit-bundle/v2"),
  workspaceId: Schema.String,
  attributedFrom: AttributedFrom,
  exportedAt: Timestamp,
  events: Schema.Array(AuditEvent),
  checkpoint: Checkpoint,
  inclusionProofs: Schema.Array(InclusionProof),
  consistency: Schema.optionalKey(
    Schema.Struct({ fromSize: Schema.Int, fromRoot: Hash, toSize: Schema.Int, path: Schema.Array(Hash) }),
  ),
  jwks: Schema.Struct({ keys: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)) }),
}).annotate({ identifier: "AuditBundle" })

export const EventWithProof = Schema.Struct({
  ...AuditEvent.fields,
  proof: Schema.optionalKey(InclusionProofResult),
}).annotate({ identifier: "EventWithProof" })

export const EventGetQuery = Schema.Struct({
  id: Schema.String,
  proof: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "add the event's inclusion proof and the checkpoint it is made against" }),
  ),
})
