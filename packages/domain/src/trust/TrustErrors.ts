import { Schema } from "effect"

/** D13: the agent holds no badge (below `bronze`, suspended, deregistered, or no such agent: all alike). */
export class BadgeNotFound extends Schema.TaggedError<BadgeNotFound>()("BadgeNotFound", { agentId: Schema.String }) {}
