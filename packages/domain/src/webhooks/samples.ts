import { Schema } from "effect"
import { EVENT_ALIASES, SYSTEM_EVENTS, type SystemEventName } from "../audit/eventCatalog.ts"
import { newId } from "../shared/ids.ts"

type Json = Record<string, any>

/** An id of the kind a description names (`agt_…`): a fresh one, so that samples look like real data. */
const idLike = (description: string | undefined): string | undefined => {
  const prefix = /`([a-z]+)_…`/.exec(description ?? "")?.[1]
  return prefix === undefined ? undefined : `${prefix}_${newId("evt").slice(4)}`
}

const sampleOf = (schema: Json, definitions: Json, name: string, now: string): unknown => {
  if (typeof schema.$ref === "string")
    return sampleOf(definitions[schema.$ref.split("/").pop()!] ?? {}, definitions, name, now)
  if ("const" in schema) return schema.const
  if (Array.isArray(schema.enum)) return schema.enum[0]
  const branches = (schema.anyOf ?? schema.oneOf) as Array<Json> | undefined
  if (branches) return sampleOf(branches.find((b) => b.type !== "null") ?? branches[0]!, definitions, name, now)
  switch (schema.type) {
    case "object": {
      const out: Record<string, unknown> = {}
      for (const key of (schema.required ?? []) as Array<string>)
        out[key] = sampleOf(schema.properties?.[key] ?? {}, definitions, key, now)
      return out
    }
    case "array":
      return [sampleOf(schema.items ?? {}, definitions, name, now)]
    case "integer":
    case "number": {
      const { minimum: min, maximum: max } = schema as { minimum?: number; maximum?: number }
      if (min !== undefined && max !== undefined && max <= 1_000_000) {
        const mid = (min + max) / 2
        return schema.type === "integer" ? Math.floor(mid) : mid
      }
      return min ?? 0
    }
    case "boolean":
      return false
    case "null":
      return null
    default:
      if (schema.format === "date-time") return now
      return idLike(schema.description) ?? (/name$/i.test(name) ? "sample-agent" : `sample ${name}`)
  }
}

/**
 * Sample `data` for a test delivery of a system event (or an alias): built
 * from the event's catalog schema with the required fields only, ids of the
 * right kind and a timestamp of now. Undefined for names not in the catalog.
 */
export const sampleEvent = (
  eventType: string,
  now: string,
): { readonly type: SystemEventName; readonly data: Record<string, unknown> } | undefined => {
  const type = (Object.hasOwn(EVENT_ALIASES, eventType) ? EVENT_ALIASES[eventType] : eventType) as SystemEventName
  if (!Object.hasOwn(SYSTEM_EVENTS, type)) return undefined
  const doc = Schema.toJsonSchemaDocument(SYSTEM_EVENTS[type].data) as unknown as { schema: Json; definitions?: Json }
  return { type, data: sampleOf(doc.schema, doc.definitions ?? {}, "data", now) as Record<string, unknown> }
}
