import { Schema } from "effect"
import { Description, DisplayName, Id, Labels, Metadata, showable, Timestamp } from "../shared/schemas.ts"

export const AgentStatus = Schema.Literals(["active", "suspended", "deregistered"])

export const Agent = Schema.Struct({
  id: Id("agt"),
  workspaceId: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  labels: Schema.Array(Schema.String),
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  status: AgentStatus,
  currentVersion: Schema.NullOr(Schema.String),
  trustScore: Schema.Int.annotate({ description: "0..1000; new agents start at 400 (probation)" }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  deregisteredAt: Schema.NullOr(Timestamp),
}).annotate({ identifier: "Agent" })
export type Agent = typeof Agent.Type

export const RegisterAgent = Schema.Struct({
  name: DisplayName,
  description: Schema.optionalKey(Description),
  labels: Schema.optionalKey(Labels),
  metadata: Schema.optionalKey(Metadata),
}).annotate({ identifier: "RegisterAgent" })
export type RegisterAgent = typeof RegisterAgent.Type

export const UpdateAgent = Schema.Struct({
  name: Schema.optionalKey(DisplayName),
  description: Schema.optionalKey(Schema.NullOr(Description)),
  labels: Schema.optionalKey(Labels),
  metadata: Schema.optionalKey(Metadata),
}).annotate({ identifier: "UpdateAgent" })
export type UpdateAgent = typeof UpdateAgent.Type

export const AgentVersion = Schema.Struct({
  id: Id("ver"),
  agentId: Schema.String,
  version: Schema.String,
  description: Schema.NullOr(Schema.String),
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  createdAt: Timestamp,
}).annotate({ identifier: "AgentVersion" })
export type AgentVersion = typeof AgentVersion.Type

export const CreateAgentVersion = Schema.Struct({
  version: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(100), ...showable()),
  description: Schema.optionalKey(Description),
  metadata: Schema.optionalKey(Metadata),
}).annotate({ identifier: "CreateAgentVersion" })
export type CreateAgentVersion = typeof CreateAgentVersion.Type

/** Trust score of a newly registered agent: unproven, so `probation` (decision D11 tiers). */
export const INITIAL_TRUST_SCORE = 400
