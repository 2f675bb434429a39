import { Schema } from "effect"

export class EventNotFound extends Schema.TaggedError<EventNotFound>()("EventNotFound", { eventId: Schema.String }) {}
