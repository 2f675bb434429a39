import { Schema } from "effect"

/** Names and labels people type: trimmed of nothing, 1..200 characters. */
export const Name = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))
export const Description = Schema.String.check(Schema.isMaxLength(2000))
export const Label = Schema.String.check(Schema.isPattern(/^[a-z0-9][a-z0-9_.:/-]{0,62}$/)).annotate({
  description: "lowercase letters, digits and _ . : / -, at most 63 characters",
})
export const Labels = Schema.Array(Label).check(Schema.isMaxLength(50))
export const Metadata = Schema.Record(Schema.String, Schema.Unknown).annotate({
  description: "free-form JSON object, at most 16 KiB encoded",
})
export const Timestamp = Schema.String.annotate({ description: "ISO 8601 UTC with milliseconds", format: "date-time" })
export const Id = (prefix: string) => Schema.String.annotate({ description: `opaque id with prefix \`${prefix}_\`` })

export const Limit = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })).annotate({
  description: "page size, 1..100, default 25",
})
export const Cursor = Schema.String.annotate({ description: "`meta.cursor` of the previous page" })

/** The page envelope of a list operation. */
export const PageOf = <S extends Schema.Top>(item: S) =>
  Schema.Struct({
    data: Schema.Array(item),
    meta: Schema.Struct({ cursor: Schema.NullOr(Schema.String), hasMore: Schema.Boolean }),
  })

export const METADATA_MAX_BYTES = 16 * 1024
