/**
 * The OpenAPI generator over every shape effect's Schema encodes an input as: a body or query is
 * documented with the fields a client sends, whatever the shape (allOf, anyOf, unions, refinements,
 * transformations, records), free-form objects say they take any property, and named body schemas
 * are referenced. The catalog's own cases (the policy document) are checked on the real document.
 */
import { Effect, Schema, SchemaTransformation } from "effect"
import { describe, expect, it } from "vitest"
import { operations } from "../src/catalog.ts"
import { objectFields, resolve } from "../src/jsonSchema.ts"
import { defineOperation, type HttpMethod, type Operation } from "../src/Operation.ts"
import { buildOpenApi } from "../src/openapi.ts"
import { idAnd } from "../src/operations/common.ts"

type Json = Record<string, any>

const op = (method: HttpMethod, path: string, input: Schema.Codec<any, any, never, never>): Operation =>
  defineOperation({
    name: `test.${method.toLowerCase()}`,
    method,
    path,
    scope: null,
    tag: "Agents",
    summary: "test",
    input,
    output: Schema.Struct({ id: Schema.String }),
    handler: () => Effect.die("not called"),
  })

/** The documented request body of the one operation, `$ref`s followed, with the components. */
const bodyOf = (operation: Operation): { body: Json; schemas: Record<string, Json>; raw: Json } => {
  const doc = buildOpenApi([operation])
  const documented = Object.values(doc.paths as Json)[0][operation.method.toLowerCase()]
  const raw = documented.requestBody.content["application/json"].schema
  return { body: resolve(raw, doc.components.schemas), schemas: doc.components.schemas, raw }
}

const queryOf = (operation: Operation): Record<string, boolean> => {
  const doc = buildOpenApi([operation])
  const documented = Object.values(doc.paths as Json)[0][operation.method.toLowerCase()]
  return Object.fromEntries(
    (documented.parameters as Array<Json>).filter((p) => p.in === "query").map((p) => [p.name, p.required]),
  )
}

/** What openapi-typescript reads as "no property allowed": an object schema that says nothing of its keys. */
const closedFreeForm = (schema: unknown, at = "#"): Array<string> => {
  if (!schema || typeof schema !== "object") return []
  if (Array.isArray(schema)) return schema.flatMap((x, i) => closedFreeForm(x, `${at}/${i}`))
  const s = schema as Json
  const shaped = ["properties", "additionalProperties", "patternProperties", "allOf", "anyOf", "oneOf", "$ref"]
  const own = s.type === "object" && !shaped.some((k) => k in s) ? [at] : []
  return [
    ...own,
    ...Object.entries(s).flatMap(([k, v]) =>
      k === "const" || k === "enum" || k === "example" ? [] : closedFreeForm(v, `${at}/${k}`),
    ),
  ]
}

describe("request bodies in every schema shape", () => {
  it("allOf: a record refined to a shape (the policy document's encoding) documents the shape's fields", () => {
    const Shape = Schema.Struct({ name: Schema.String, size: Schema.optionalKey(Schema.Number) })
    const input = Schema.Record(Schema.String, Schema.Unknown).check(
      Schema.makeFilter((_: { readonly [k: string]: unknown }) => undefined, {
        representation: { id: "test/shape", payload: null, schemas: [Shape.ast] },
        toJsonSchema: ({ schemas }) => schemas[0]!,
      }),
    )
    const { body, schemas } = bodyOf(op("POST", "/things", input))
    expect(body.allOf).toBeDefined()
    const fields = objectFields(body, schemas)
    expect(Object.keys(fields.properties).sort()).toEqual(["name", "size"])
    expect(fields.required).toEqual(["name"])
  })

  it("anyOf (a union): each branch loses the path parameter, and only what every branch requires is required", () => {
    const input = Schema.Union([
      Schema.Struct({ id: Schema.String, a: Schema.String, both: Schema.String }),
      Schema.Struct({ id: Schema.String, b: Schema.Boolean, both: Schema.String }),
    ])
    const { body, schemas } = bodyOf(op("POST", "/things/:id/act", input))
    expect(body.anyOf ?? body.oneOf).toHaveLength(2)
    for (const branch of body.anyOf ?? body.oneOf) {
      expect(Object.keys(resolve(branch, schemas).properties)).not.toContain("id")
    }
    const fields = objectFields(body, schemas)
    expect(Object.keys(fields.properties).sort()).toEqual(["a", "b", "both"])
    expect(fields.required).toEqual(["both"])
    expect(queryOf(op("GET", "/things/:id", input))).toEqual({ a: false, b: false, both: true })
  })

  it("a refinement keeps the refined struct's fields", () => {
    const input = Schema.Struct({ a: Schema.String, b: Schema.optionalKey(Schema.Boolean) }).check(
      Schema.makeFilter((x: { readonly a: string }) => x.a !== "", { toJsonSchema: () => ({ minProperties: 1 }) }),
    )
    const { body } = bodyOf(op("POST", "/things", input))
    expect(body).toMatchObject({ type: "object", required: ["a"], minProperties: 1 })
    expect(Object.keys(body.properties).sort()).toEqual(["a", "b"])
    expect(queryOf(op("GET", "/things", input))).toEqual({ a: true, b: false })
  })

  it("a transformation documents the encoded side, what a client sends", () => {
    const input = Schema.Struct({
      n: Schema.NumberFromString,
      upper: Schema.String.pipe(
        Schema.decodeTo(
          Schema.String,
          SchemaTransformation.transform({ decode: (s) => s.toUpperCase(), encode: (s) => s }),
        ),
      ),
    })
    const { body } = bodyOf(op("POST", "/things", input))
    expect(body.properties.n).toEqual({ type: "string" })
    expect(body.properties.upper).toEqual({ type: "string" })
    expect(body.required).toEqual(["n", "upper"])
  })

  it("a record documents its values; a record of anything says any property is allowed", () => {
    const { body } = bodyOf(op("POST", "/things", Schema.Record(Schema.String, Schema.Boolean)))
    expect(body).toEqual({ type: "object", additionalProperties: { type: "boolean" } })
    const free = bodyOf(
      op(
        "POST",
        "/things",
        Schema.Struct({
          metadata: Schema.Record(Schema.String, Schema.Unknown),
          list: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)),
        }),
      ),
    ).body
    expect(free.properties.metadata).toEqual({ type: "object", additionalProperties: true })
    expect(free.properties.list.items).toEqual({ type: "object", additionalProperties: true })
  })

  it("an input with no fields is an object body, not required", () => {
    const doc = buildOpenApi([op("POST", "/things", Schema.Struct({}))])
    expect(doc.paths["/things"].post.requestBody).toMatchObject({
      required: false,
      content: { "application/json": { schema: { type: "object", additionalProperties: true } } },
    })
  })

  it("a named input, and the named body of an input with an id (idAnd), are referenced by name", () => {
    const Create = Schema.Struct({ name: Schema.String }).annotate({ identifier: "CreateThing" })
    expect(bodyOf(op("POST", "/things", Create)).raw).toEqual({ $ref: "#/components/schemas/CreateThing" })
    const Update = Schema.Struct({ name: Schema.optionalKey(Schema.String) }).annotate({ identifier: "UpdateThing" })
    const { raw, schemas } = bodyOf(op("PATCH", "/things/:id", idAnd(Update)))
    expect(raw).toEqual({ $ref: "#/components/schemas/UpdateThing" })
    expect(Object.keys(schemas.UpdateThing?.properties)).toEqual(["name"])
  })

  it("documents inputs strict, as the executor decodes them, and answers open; a schema used both ways is two", () => {
    const Thing = Schema.Struct({ name: Schema.String }).annotate({ identifier: "Thing" })
    const create = defineOperation({
      name: "things.create",
      method: "POST",
      path: "/things",
      scope: null,
      tag: "Agents",
      summary: "test",
      input: Schema.Struct({ thing: Thing, metadata: Schema.Record(Schema.String, Schema.Unknown) }),
      output: Thing,
      handler: () => Effect.die("not called"),
    })
    const { body, schemas } = bodyOf(create)
    expect(body.additionalProperties).toBe(false)
    expect(body.properties.thing).toEqual({ $ref: "#/components/schemas/ThingInput" })
    expect(schemas.ThingInput?.additionalProperties).toBe(false)
    expect(schemas.Thing?.additionalProperties).toBe(true)
    // A free-form record stays open in an input.
    expect(body.properties.metadata).toEqual({ type: "object", additionalProperties: true })
  })

  it("refuses two different schemas under one name instead of documenting one of them for both", () => {
    const same = (v: Schema.Codec<any, any, never, never>) => Schema.Struct({ v }).annotate({ identifier: "Same" })
    const a = op("POST", "/a", Schema.Struct({ x: same(Schema.String) }))
    const b = { ...op("POST", "/b", Schema.Struct({ x: same(Schema.Boolean) })), name: "b" }
    expect(() => buildOpenApi([a, b])).toThrow(/two different schemas are named Same/)
  })
})

describe("the catalog's document", () => {
  const doc = buildOpenApi(operations)
  const schemas = doc.components.schemas as Record<string, Json>

  it("POST /policies documents the policy document: its fields, what is required, and its rules", () => {
    const raw = doc.paths["/policies"].post.requestBody.content["application/json"].schema
    const fields = objectFields(raw, schemas)
    expect(Object.keys(fields.properties).sort()).toEqual(["description", "enabled", "mode", "name", "rules", "target"])
    expect(fields.required.sort()).toEqual(["name", "rules"])
    const rule = resolve(resolve(fields.properties.rules!, schemas).items, schemas)
    expect(rule.required).toEqual(["id", "effect", "actions"])
    // A nested condition is the condition itself (recursive), not an object of nothing.
    expect(JSON.stringify(schemas)).not.toContain("a nested condition")
  })

  it("PATCH /policies/{id} documents each field as what it takes, none as {}", () => {
    const raw = doc.paths["/policies/{id}"].patch.requestBody.content["application/json"].schema
    expect(raw).toEqual({ $ref: "#/components/schemas/UpdatePolicy" })
    const fields = objectFields(raw, schemas)
    expect(Object.keys(fields.properties).sort()).toEqual([
      "description",
      "enabled",
      "expectedVersion",
      "mode",
      "name",
      "rules",
      "target",
    ])
    for (const [name, schema] of Object.entries(fields.properties)) expect(schema, name).not.toEqual({})
    expect(fields.properties.enabled).toEqual({ type: "boolean" })
    expect(fields.properties.expectedVersion).toMatchObject({ type: "integer", minimum: 1 })
  })

  it("every POST and PATCH body with fields is a named schema", () => {
    for (const item of Object.values(doc.paths as Json)) {
      for (const [method, documented] of Object.entries(item as Json)) {
        const schema = (documented as Json).requestBody?.content["application/json"].schema
        if (!schema || (method !== "post" && method !== "patch")) continue
        if (Object.keys(objectFields(schema, schemas).properties).length === 0) continue
        expect(schema.$ref, `${(documented as Json).operationId}`).toMatch(/^#\/components\/schemas\//)
      }
    }
  })

  it("documents numbers the server sends as numbers: no `Infinity`/`NaN` strings (effect's encoding of a bare Number)", () => {
    expect(JSON.stringify(doc)).not.toContain('"Infinity"')
  })

  it("no object anywhere in the document says nothing of its properties (read as 'none allowed')", () => {
    expect(closedFreeForm(doc)).toEqual([])
  })
})
