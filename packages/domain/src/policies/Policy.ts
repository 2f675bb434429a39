import { Schema } from "effect"
import { Id, Timestamp } from "../shared/schemas.ts"
import { documentedAs, MODES, PolicyDocumentShape, PolicyIssueSchema, PolicyRule } from "./engine/index.ts"

const { name, description, mode, target } = PolicyDocumentShape.fields

/** A stored policy: its current document (defaults applied) and the version it is at. */
export const Policy = Schema.Struct({
  id: Id("pol"),
  workspaceId: Schema.String,
  version: Schema.Int.annotate({ description: "1 at creation, one more at every update" }),
  name: Schema.toType(name),
  description: Schema.optionalKey(Schema.toType(description)),
  enabled: Schema.Boolean,
  mode: Schema.toType(mode),
  target: Schema.optionalKey(Schema.toType(target)),
  // Stored rules have their defaults applied: another schema than the rule a client sends.
  rules: Schema.Array(Schema.toType(PolicyRule).annotate({ identifier: "PolicyRuleWithDefaults" })),
  invalid: Schema.optionalKey(
    PolicyIssueSchema.annotate({
      description:
        "Present when the stored document no longer validates (a stricter check after an upgrade, an edited row): its " +
        "first issue. Until the policy is updated or deleted, the guard denies every action of the agents it targets " +
        "(every agent when its target does not validate either) with `CONDITION_ERROR`; in `monitor` mode it only reports.",
    }),
  ),
  createdAt: Timestamp,
  updatedAt: Timestamp,
}).annotate({ identifier: "Policy" })
export type Policy = typeof Policy.Type

const {
  id: _id,
  workspaceId: _ws,
  version: _v,
  invalid: _i,
  createdAt: _c,
  updatedAt: _u,
  ...documentFields
} = Policy.fields

/** One stored version of a policy: its document as saved then (`GET /policies/:id/versions`). */
export const PolicyVersion = Schema.Struct({
  policyId: Id("pol"),
  version: Schema.Int.annotate({ description: "1 at creation, one more at every update" }),
  ...documentFields,
  createdAt: Timestamp.annotate({ description: "when this version was saved" }),
}).annotate({ identifier: "PolicyVersion" })
export type PolicyVersion = typeof PolicyVersion.Type

/**
 * PATCH /policies/:id: any of the document's fields; `description` and
 * `target` take null to remove them. The merged document is validated as a
 * whole, with the same field paths as a create.
 */
// Each field decodes as any value and is documented as what the merged document's validation accepts
// (`Schema.Any`: effect's JSON Schema drops the checks of `Schema.Unknown`).
const patchField = (schema: Schema.Top, expected: string) =>
  Schema.optionalKey(Schema.Any.check(documentedAs(schema, expected)))

export const UpdatePolicy = Schema.Struct({
  name: patchField(name, "a policy name"),
  description: patchField(Schema.NullOr(description.schema), "a description, or null to remove it"),
  enabled: patchField(Schema.Boolean, "a boolean"),
  mode: patchField(Schema.Literals(MODES), "a mode"),
  target: patchField(Schema.NullOr(target.schema), "a target, or null to remove it"),
  rules: patchField(PolicyDocumentShape.fields.rules, "the rules"),
  expectedVersion: Schema.optionalKey(
    Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)).annotate({
      description:
        "the version this change was made against: when the policy is at another one (someone saved meanwhile), " +
        "409 `VERSION_CONFLICT` and nothing changes, instead of saving over their change",
    }),
  ),
}).annotate({ identifier: "UpdatePolicy" })
export type UpdatePolicy = typeof UpdatePolicy.Type
