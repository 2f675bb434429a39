import { Cursor, Limit } from "@agentgov/domain"
import { Schema } from "effect"

/** Query fields of every list operation. */
export const pageFields = {
  limit: Schema.optionalKey(Limit),
  cursor: Schema.optionalKey(Cursor),
}

export const idField = { id: Schema.String.annotate({ description: "the record's id (path parameter)" }) }

/** Drops undefined values so that `exactOptionalPropertyTypes`-style patches stay patches. */
export const definedOnly = <T extends object>(o: T): T =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T
