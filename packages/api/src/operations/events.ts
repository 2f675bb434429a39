import {
  AuditEvent,
  Checkpoint,
  Checkpoints,
  ConsistencyProofQuery,
  ConsistencyProofResult,
  EventGetQuery,
  EventQueryInput,
  EventService,
  EventWithProof,
  ExportBundle,
  ExportQuery,
  InclusionProofQuery,
  InclusionProofResult,
  IngestEvents,
  IngestResult,
  MAX_EXPORT_EVENTS,
  MAX_EXPORTS_IN_PROCESS,
  MAX_EXPORTS_PER_WORKSPACE,
  MAX_INGEST_BATCH,
  PageOf,
  Verification,
} from "@agentgov/domain"
import { Effect, Schema } from "effect"
import { defineOperation } from "../Operation.ts"

const tag = "Events"

export const eventOperations = [
  defineOperation({
    name: "events.ingest",
    method: "POST",
    path: "/events/ingest",
    scope: "events:write",
    tag,
    sdkArgument: "events",
    summary: "Ingest events",
    description: `1 to ${MAX_INGEST_BATCH} events per call, stored atomically in the workspace's hash chain. Types are \`lowercase.dotted\`; the system's own names are refused. An agent-bound credential ingests for its own agent only (\`agentId\` defaults to it). Use \`Idempotency-Key\` to make retries safe.`,
    successStatus: 201,
    input: IngestEvents,
    output: IngestResult,
    ownsIdempotency: true,
    handler: (input, actor, { idempotency }) => EventService.use((s) => s.ingest(actor, input.events, idempotency)),
  }),
  defineOperation({
    name: "events.list",
    method: "GET",
    path: "/events",
    scope: "events:read",
    tag,
    summary: "Query events",
    description:
      "Newest first (by sequence). Each event has the fields its hash is computed from, so anyone can recompute the chain: hash = SHA-256(prevHash ‖ type ‖ JCS(data) ‖ timestamp).",
    paginated: true,
    input: EventQueryInput,
    output: PageOf(AuditEvent),
    // An inverted range (fromSequence after toSequence, since after until): 422, as export and proofs answer it.
    errors: ["VALIDATION_ERROR"],
    handler: (input, actor) => EventService.use((s) => s.list(actor, input)),
  }),
  defineOperation({
    name: "events.verify",
    method: "POST",
    path: "/events/verify",
    scope: "events:read",
    tag,
    summary: "Verify the hash chain",
    description:
      "Recomputes the workspace's chain from its first event; the result is recorded. Also run every 6 hours.",
    input: Schema.Struct({}),
    output: Verification,
    handler: (_input, actor) => EventService.use((s) => s.verify(actor, "api")),
  }),
  defineOperation({
    name: "events.checkpoint",
    method: "GET",
    path: "/events/checkpoint",
    scope: "events:read",
    tag,
    summary: "Get the signed checkpoint",
    description:
      "The checkpoint of the current chain head: the RFC 6962 Merkle root over every event, the head's chain hash and the time, signed with Ed25519 by a key in `/.well-known/jwks.json`. Signed now if the chain grew since the last one (also every minute).",
    input: Schema.Struct({}),
    output: Checkpoint,
    // The chain no longer matches a checkpoint already signed: nothing is signed over it.
    errors: ["CHAIN_INCONSISTENT"],
    handler: (_input, actor) => Checkpoints.use((c) => c.latest(actor)),
  }),
  defineOperation({
    name: "events.inclusionProof",
    method: "GET",
    path: "/events/proofs/inclusion",
    scope: "events:read",
    tag,
    summary: "Prove an event is in the tree",
    description:
      "The audit path of event `sequence` (leaf `sequence − 1`) in the tree of a checkpoint: the newest one that covers the event unless `treeSize` names another. Verify with RFC 9162 §2.1.3.2 or `@agentgov/verifier`. An agent-bound credential gets proofs of its own agent's events only (403 naming `agentId` otherwise).",
    errors: ["CHECKPOINT_NOT_FOUND", "VALIDATION_ERROR", "CHAIN_INCONSISTENT"],
    input: InclusionProofQuery,
    output: InclusionProofResult,
    handler: (input, actor) => Checkpoints.use((c) => c.inclusion(actor, input.sequence, input.treeSize)),
  }),
  defineOperation({
    name: "events.consistencyProof",
    method: "GET",
    path: "/events/proofs/consistency",
    scope: "events:read",
    tag,
    summary: "Prove the trail only grew",
    description:
      "Proof that the tree of the first `fromSize` events (a checkpoint you kept) is a prefix of a later checkpoint's tree (the latest unless `toSize` names one): nothing was changed or removed in between. RFC 9162 §2.1.4. Tree-level (no event's data), so agent-bound credentials may ask too.",
    errors: ["CHECKPOINT_NOT_FOUND", "VALIDATION_ERROR", "CHAIN_INCONSISTENT"],
    input: ConsistencyProofQuery,
    output: ConsistencyProofResult,
    handler: (input, actor) => Checkpoints.use((c) => c.consistency(actor, input.fromSize, input.toSize)),
  }),
  defineOperation({
    name: "events.export",
    method: "GET",
    path: "/events/export",
    scope: "events:read",
    tag,
    summary: "Export a verifiable bundle",
    description: `Events \`fromSequence..toSequence\` (at most ${MAX_EXPORT_EVENTS}: the latest by default; with one end named, up to ${MAX_EXPORT_EVENTS} from that end) with a fresh signed checkpoint, every event's inclusion proof, the JWKS and, with \`sinceTreeSize\`, a consistency proof from an older checkpoint. Check it offline, with no server: \`npx agentgov-verify bundle.json\` (package \`@agentgov/verifier\`). Not for agent-bound credentials (403 naming \`agentId\`). At most ${MAX_EXPORTS_PER_WORKSPACE} exports are built at once per workspace (${MAX_EXPORTS_IN_PROCESS} per server instance); past that, 429 \`RATE_LIMITED\` with \`Retry-After\`.`,
    input: ExportQuery,
    output: ExportBundle,
    errors: ["VALIDATION_ERROR", "CHAIN_INCONSISTENT"],
    handler: (input, actor) => Checkpoints.use((c) => c.exportBundle(actor, input)),
  }),
  defineOperation({
    name: "events.get",
    method: "GET",
    path: "/events/:id",
    scope: "events:read",
    tag,
    summary: "Get an event",
    description: "With `proof=true`, also its inclusion proof against the newest checkpoint that covers it.",
    errors: ["EVENT_NOT_FOUND", "CHAIN_INCONSISTENT"],
    input: EventGetQuery,
    output: EventWithProof,
    handler: (input, actor) =>
      Effect.gen(function* () {
        const event = yield* EventService.use((s) => s.get(actor, input.id))
        if (!input.proof) return event
        const proof = yield* Checkpoints.use((c) => c.inclusion(actor, event.sequence))
        return { ...event, proof }
      }),
  }),
]
