import { Schema } from "effect"

type JsonSchema = Record<string, any>

/** The JSON Schema of a schema with its definitions, `$ref`s pointing at `#/components/schemas/…`. */
export const toJsonSchema = (schema: Schema.Top): { schema: JsonSchema; definitions: Record<string, JsonSchema> } => {
  const doc = Schema.toJsonSchemaDocument(schema) as unknown as {
    schema: JsonSchema
    definitions?: Record<string, JsonSchema>
  }
  const rewrite = (v: unknown): any => {
    if (Array.isArray(v)) return v.map(rewrite)
    if (v && typeof v === "object") {
      const out: JsonSchema = {}
      for (const [k, val] of Object.entries(v)) {
        out[k] =
          k === "$ref" && typeof val === "string" ? val.replace("#/$defs/", "#/components/schemas/") : rewrite(val)
      }
      return out
    }
    return v
  }
  return { schema: rewrite(doc.schema), definitions: rewrite(doc.definitions ?? {}) }
}

/** Follows `$ref`s into the definitions. */
export const resolve = (s: JsonSchema, definitions: Record<string, JsonSchema>): JsonSchema => {
  let cur = s
  for (let i = 0; i < 10 && typeof cur.$ref === "string"; i++) {
    cur = definitions[cur.$ref.split("/").pop()!] ?? {}
  }
  return cur
}

/** The primitive JSON type a property accepts (first non-null branch of a union), for query-string coercion. */
export const propertyTypes = (schema: Schema.Top): Record<string, string> => {
  const { schema: root, definitions } = toJsonSchema(schema)
  const obj = resolve(root, definitions)
  const out: Record<string, string> = {}
  for (const [name, prop] of Object.entries((obj.properties ?? {}) as Record<string, JsonSchema>)) {
    let p = resolve(prop, definitions)
    const branches = (p.anyOf ?? p.oneOf) as Array<JsonSchema> | undefined
    if (branches) p = resolve(branches.find((b) => resolve(b, definitions).type !== "null") ?? {}, definitions)
    out[name] = typeof p.type === "string" ? p.type : "string"
  }
  return out
}
