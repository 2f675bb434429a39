import { Schema } from "effect"

export class InvalidCursor extends Schema.TaggedError<InvalidCursor>()("InvalidCursor", {}) {}
