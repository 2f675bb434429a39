import { Schema } from "effect"

type JsonSchema = Record<string, any>

/** Keywords that say something about an object's properties beyond its type. */
const OBJECT_SHAPE_KEYWORDS = [
  "properties",
  "additionalProperties",
  "patternProperties",
  "propertyNames",
  "unevaluatedProperties",
  "allOf",
  "anyOf",
  "oneOf",
  "$ref",
]

/**
 * Rewrites effect's JSON Schema for OpenAPI: `$ref`s point at `#/components/schemas/…`, and a bare
 * `{"type": "object"}` (a free-form record: metadata, event data, a guard's context) says
 * `additionalProperties: true`. Both mean the same to a validator, but client generators read the
 * bare form as "no properties allowed" (`Record<string, never>`).
 */
const forOpenApi = (v: unknown): any => {
  if (Array.isArray(v)) return v.map(forOpenApi)
  if (!v || typeof v !== "object") return v
  const out: JsonSchema = {}
  for (const [k, val] of Object.entries(v)) {
    // `const`, `enum`, `default` and `examples` hold values, not schemas.
    out[k] =
      k === "$ref" && typeof val === "string"
        ? val.replace("#/$defs/", "#/components/schemas/")
        : k === "const" || k === "enum" || k === "default" || k === "examples"
          ? val
          : forOpenApi(val)
  }
  const isObject = out.type === "object" || (Array.isArray(out.type) && out.type.includes("object"))
  if (isObject && !OBJECT_SHAPE_KEYWORDS.some((k) => k in out)) out.additionalProperties = true
  return out
}

/**
 * The JSON Schema of a schema with its definitions, `$ref`s pointing at `#/components/schemas/…`.
 * `strict`: objects refuse properties they do not name (`additionalProperties: false`), as the
 * executor decodes an operation's input (`onExcessProperty: "error"`); otherwise they are open, as an
 * answer or an event may gain fields.
 */
export const toJsonSchema = (
  schema: Schema.Top,
  options: { readonly strict?: boolean } = {},
): { schema: JsonSchema; definitions: Record<string, JsonSchema> } => {
  const doc = Schema.toJsonSchemaDocument(schema, {
    onExcessProperty: options.strict ? "error" : "ignore",
  }) as unknown as {
    schema: JsonSchema
    definitions?: Record<string, JsonSchema>
  }
  return { schema: forOpenApi(doc.schema), definitions: forOpenApi(doc.definitions ?? {}) }
}

/** Follows `$ref`s into the definitions. */
export const resolve = (s: JsonSchema, definitions: Record<string, JsonSchema>): JsonSchema => {
  let cur = s
  for (let i = 0; i < 10 && typeof cur.$ref === "string"; i++) {
    cur = definitions[cur.$ref.split("/").pop()!] ?? {}
  }
  return cur
}

/**
 * The properties an object schema may have and those it requires, whatever shape encodes it: its own
 * `properties`, every `allOf` part (all apply: required adds up), every `anyOf`/`oneOf` branch (one
 * applies: a property is required only when every branch requires it), through `$ref`s.
 */
export const objectFields = (
  s: JsonSchema,
  definitions: Record<string, JsonSchema>,
): { properties: Record<string, JsonSchema>; required: Array<string> } => {
  const schema = resolve(s, definitions)
  const properties: Record<string, JsonSchema> = { ...(schema.properties ?? {}) }
  const required = new Set<string>(schema.required ?? [])
  for (const part of (schema.allOf ?? []) as Array<JsonSchema>) {
    const fields = objectFields(part, definitions)
    for (const [k, p] of Object.entries(fields.properties)) properties[k] ??= p
    for (const k of fields.required) required.add(k)
  }
  const branches = (schema.anyOf ?? schema.oneOf) as Array<JsonSchema> | undefined
  if (branches && branches.length > 0) {
    const each = branches.map((b) => objectFields(b, definitions))
    for (const fields of each) for (const [k, p] of Object.entries(fields.properties)) properties[k] ??= p
    for (const k of each[0]!.required) if (each.every((f) => f.required.includes(k))) required.add(k)
  }
  return { properties, required: [...required] }
}

/**
 * The schema without the named properties (the path parameters, which travel in the URL), in every
 * shape: own `properties`, `allOf` parts and `anyOf`/`oneOf` branches, through `$ref`s (which it then
 * inlines: the named schema still has them).
 */
export const omitProperties = (
  s: JsonSchema,
  names: ReadonlyArray<string>,
  definitions: Record<string, JsonSchema>,
): JsonSchema => {
  if (names.length === 0 || !names.some((n) => n in objectFields(s, definitions).properties)) return s
  const out: JsonSchema = { ...resolve(s, definitions) }
  if (out.properties) {
    out.properties = Object.fromEntries(Object.entries(out.properties).filter(([k]) => !names.includes(k)))
  }
  if (Array.isArray(out.required)) {
    out.required = out.required.filter((k: string) => !names.includes(k))
    if (out.required.length === 0) delete out.required
  }
  for (const k of ["allOf", "anyOf", "oneOf"]) {
    if (Array.isArray(out[k])) out[k] = out[k].map((b: JsonSchema) => omitProperties(b, names, definitions))
  }
  return out
}

/** JSON with object keys sorted: equal schemas give equal strings whatever order their keys came in. */
export const canonicalJson = (v: unknown): string =>
  JSON.stringify(v, (_, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(
          Object.keys(x)
            .sort()
            .map((k) => [k, x[k]]),
        )
      : x,
  )

/** The primitive JSON type a property accepts (first non-null branch of a union), for query-string coercion. */
export const propertyTypes = (schema: Schema.Top): Record<string, string> => {
  const { schema: root, definitions } = toJsonSchema(schema, { strict: true })
  const out: Record<string, string> = {}
  for (const [name, prop] of Object.entries(objectFields(root, definitions).properties)) {
    let p = resolve(prop, definitions)
    const branches = (p.anyOf ?? p.oneOf) as Array<JsonSchema> | undefined
    if (branches) p = resolve(branches.find((b) => resolve(b, definitions).type !== "null") ?? {}, definitions)
    out[name] = typeof p.type === "string" ? p.type : "string"
  }
  return out
}

/** The names of the component schemas `root` references, directly or through other components. */
export const referencedSchemas = (root: unknown, definitions: Record<string, JsonSchema>): Set<string> => {
  const seen = new Set<string>()
  const walk = (v: unknown): void => {
    if (!v || typeof v !== "object") return
    if (Array.isArray(v)) {
      for (const x of v) walk(x)
      return
    }
    for (const [k, x] of Object.entries(v)) {
      if (k === "$ref" && typeof x === "string" && x.startsWith("#/components/schemas/")) {
        const name = x.slice("#/components/schemas/".length)
        if (!seen.has(name)) {
          seen.add(name)
          walk(definitions[name])
        }
      } else walk(x)
    }
  }
  walk(root)
  return seen
}
