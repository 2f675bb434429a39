import { resolve } from "./jsonSchema.ts"

type Json = Record<string, any>

const SAMPLE_TIMESTAMP = "2030-01-01T00:00:00.000Z"

/** A string the schema's length bounds admit. */
const sampleString = (s: Json): string => {
  if (s.format === "date-time") return SAMPLE_TIMESTAMP
  const min = typeof s.minLength === "number" ? s.minLength : 0
  const max = typeof s.maxLength === "number" ? s.maxLength : Number.POSITIVE_INFINITY
  const text = "example".padEnd(min, "x")
  return text.slice(0, Math.max(min, Math.min(max, text.length)))
}

const sampleNumber = (s: Json): number => {
  const min =
    typeof s.minimum === "number" ? s.minimum : typeof s.exclusiveMinimum === "number" ? s.exclusiveMinimum + 1 : 1
  const max = typeof s.maximum === "number" ? s.maximum : Number.POSITIVE_INFINITY
  return Math.min(Math.max(min, 1), max)
}

/**
 * A small value the JSON Schema accepts, for the examples of the document and the reference page:
 * the schema's own `examples`, `const`, `default` or first `enum` value when it has one, else the
 * required properties and those with their own `examples` (else the first property), one array item (or `minItems`), the
 * first non-null branch of a union, and strings and numbers within their bounds. `definitions`
 * resolves `$ref`s.
 */
export const exampleOf = (schema: Json, definitions: Record<string, Json>, depth = 0): unknown => {
  const s = resolve(schema, definitions)
  if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0]
  if ("const" in s) return s.const
  if ("default" in s) return s.default
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0]
  if (depth > 12) return {}
  if (Array.isArray(s.allOf) && s.allOf.length > 0) {
    const parts = s.allOf.map((p: Json) => exampleOf(p, definitions, depth + 1))
    const own = s.properties ? exampleOf({ ...s, allOf: undefined }, definitions, depth + 1) : {}
    return Object.assign({}, own, ...parts.filter((p: unknown) => p && typeof p === "object"))
  }
  const branches = (s.anyOf ?? s.oneOf) as Array<Json> | undefined
  if (branches && branches.length > 0) {
    const branch = branches.find((b) => resolve(b, definitions).type !== "null") ?? branches[0]!
    return exampleOf(branch, definitions, depth + 1)
  }
  const type = Array.isArray(s.type) ? s.type.find((t: string) => t !== "null") : s.type
  switch (type) {
    case "object": {
      const properties = (s.properties ?? {}) as Record<string, Json>
      // Also the optional properties that carry their own example: the domain marks those worth showing.
      const exemplified = Object.keys(properties).filter((n) =>
        Array.isArray(resolve(properties[n]!, definitions).examples),
      )
      const required: Array<string> = Array.isArray(s.required) ? s.required : []
      const chosen = [...new Set([...required, ...exemplified])]
      const names = chosen.length > 0 ? chosen : Object.keys(properties).slice(0, 1)
      return Object.fromEntries(
        names.filter((n) => n in properties).map((n) => [n, exampleOf(properties[n]!, definitions, depth + 1)]),
      )
    }
    case "array": {
      const count = Math.max(1, typeof s.minItems === "number" ? s.minItems : 1)
      return Array.from({ length: count }, () => exampleOf(s.items ?? {}, definitions, depth + 1))
    }
    case "string":
      return sampleString(s)
    case "integer":
    case "number":
      return sampleNumber(s)
    case "boolean":
      return true
    case "null":
      return null
    default:
      return {}
  }
}
