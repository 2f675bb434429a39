import { Cursor, Limit } from "@agentgov/domain"
import { Schema } from "effect"

/** Query fields of every list operation. */
export const pageFields = {
  limit: Schema.optionalKey(Limit),
  cursor: Schema.optionalKey(Cursor),
}

export const idField = { id: Schema.String.annotate({ description: "the record's id (path parameter)" }) }

/**
 * What an Idempotency-Key replay returns in place of a secret: the value was
 * shown once and is not kept. A client that lost it rotates the key.
 */
export const REDACTED_SECRET = "[redacted: shown once; rotate the key for a new value]"

/** The annotation that names an input's body schema (see {@link idAnd}). */
export const BODY_SCHEMA = "agentgov/bodySchema"

/**
 * The input of an operation on one record: its id (a path parameter) and the fields of a named body
 * schema, which the OpenAPI document references so that generated clients get its name.
 */
export const idAnd = <F extends Schema.Struct.Fields>(body: Schema.Struct<F>) =>
  Schema.Struct({ ...idField, ...body.fields }).annotate({ [BODY_SCHEMA]: body })
