import {
  AuditEvent,
  EventQueryInput,
  EventService,
  IngestEvents,
  IngestResult,
  MAX_INGEST_BATCH,
  PageOf,
  Verification,
} from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { idField } from "./common.ts"

const tag = "Events"

export const eventOperations = [
  defineOperation({
    name: "events.ingest",
    method: "POST",
    path: "/events/ingest",
    scope: "events:write",
    tag,
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
    name: "events.get",
    method: "GET",
    path: "/events/:id",
    scope: "events:read",
    tag,
    summary: "Get an event",
    errors: ["EVENT_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: AuditEvent,
    handler: (input, actor) => EventService.use((s) => s.get(actor, input.id)),
  }),
]
