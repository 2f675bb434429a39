import { Schema } from "effect"

/** No such item in the caller's workspace (another workspace's item is indistinguishable from none). */
export class ContentNotFound extends Schema.TaggedError<ContentNotFound>()("ContentNotFound", {
  contentId: Schema.String,
}) {}
