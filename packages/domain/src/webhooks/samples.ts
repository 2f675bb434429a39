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
      // Schema.Int states ±(2^53 − 1) as its bounds: those are no bounds a sample should sit on.
      const bound = (n: unknown) => (typeof n === "number" && Math.abs(n) < Number.MAX_SAFE_INTEGER ? n : undefined)
      const min = bound(schema.minimum)
      const max = bound(schema.maximum)
      if (min !== undefined && max !== undefined && max <= 1_000_000) {
        const mid = (min + max) / 2
        return schema.type === "integer" ? Math.floor(mid) : mid
      }
      // A version, a count, a number of seconds: 1 reads as real data.
      return min ?? Math.min(1, max ?? 1)
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
 * Events whose fields depend on each other (D11's tiers: `bronze` from 500, `probation` from 300): values that
 * agree, laid over the sample built field by field.
 */
const COHERENT: Partial<Record<SystemEventName, Record<string, unknown>>> = {
  "trust.score.changed": {
    previousScore: 480,
    newScore: 520,
    delta: 40,
    reason: "sample: 40 points for a week without a violation",
    newTier: "bronze",
  },
  "trust.tier.upgraded": { previousTier: "probation", newTier: "bronze", score: 500 },
  "trust.tier.downgraded": { previousTier: "bronze", newTier: "probation", score: 499 },
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
  const data = sampleOf(doc.schema, doc.definitions ?? {}, "data", now) as Record<string, unknown>
  return { type, data: { ...data, ...COHERENT[type] } }
}
