import { Schema } from "effect"

export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()("AgentNotFound", { agentId: Schema.String }) {}

export class AgentNameTaken extends Schema.TaggedError<AgentNameTaken>()("AgentNameTaken", { name: Schema.String }) {}

export class AgentVersionExists extends Schema.TaggedError<AgentVersionExists>()("AgentVersionExists", {
  agentId: Schema.String,
  version: Schema.String,
}) {}

/** Changing an agent that was deregistered: its record is history now. */
export class AgentDeregistered extends Schema.TaggedError<AgentDeregistered>()("AgentDeregistered", {
  agentId: Schema.String,
}) {}
