import { Effect, Schema, SchemaTransformation } from "effect"
import { ENFORCEMENT_TYPES } from "../../enforcement/Enforcement.ts"
import {
  type Condition,
  EFFECTS,
  LIMITS,
  MODES,
  OPERATORS,
  type PolicyDocument as PolicyDocumentType,
  RATE_PERIODS,
  RATE_SCOPES,
  WEEKDAYS,
} from "./language.ts"
import { type PolicyInvalid, policyInvalid } from "./PolicyInvalid.ts"
import { validatePolicyDocument } from "./validate.ts"

/**
 * Schemas of the policy language. `PolicyDocumentShape` describes the JSON a client sends (it
 * gives the types and the JSON Schema of the API reference); `PolicyDocument` is what an
 * operation decodes with: it runs {@link validatePolicyDocument}, whose issues name exact
 * fields (`rules[2].when.all[0].op`) where a union of condition shapes could only say that
 * none of them fit.
 */

const Text = (max: number) => Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(max))

export const PolicyCondition: Schema.Codec<Condition> = Schema.suspend(
  (): Schema.Codec<Condition> =>
    Schema.Union([
      Schema.Struct({ all: Schema.Array(PolicyCondition).check(Schema.isMinLength(1)) }),
      Schema.Struct({ any: Schema.Array(PolicyCondition).check(Schema.isMinLength(1)) }),
      Schema.Struct({ not: PolicyCondition }),
      Schema.Struct({
        field: Schema.String.annotate({ description: "action, context.<dotted path>, or agent.<field>" }),
        op: Schema.Literals(OPERATORS),
        value: Schema.optionalKey(Schema.Unknown),
      }),
      Schema.Struct({
        time: Schema.Struct({
          days: Schema.optionalKey(Schema.Array(Schema.Literals(WEEKDAYS))),
          from: Schema.String.annotate({ description: "HH:MM, inclusive" }),
          to: Schema.String.annotate({ description: "HH:MM, exclusive; earlier than from = past midnight" }),
          tz: Schema.String.annotate({ description: "IANA time zone" }),
        }),
      }),
      Schema.Struct({
        rate: Schema.Struct({
          max: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: LIMITS.rateMax })),
          per: Schema.Literals(RATE_PERIODS),
          scope: Schema.optionalKey(Schema.Literals(RATE_SCOPES)),
        }),
      }),
      Schema.Struct({ cel: Text(LIMITS.celLength) }),
    ]),
).annotate({ identifier: "PolicyCondition", description: "a condition; see docs/decisions.md, Policy language" })

export const PolicyRule = Schema.Struct({
  id: Schema.String.check(Schema.isPattern(LIMITS.ruleIdPattern)),
  effect: Schema.Literals(EFFECTS),
  actions: Schema.Array(Text(256)).check(Schema.isMinLength(1), Schema.isMaxLength(LIMITS.actionsPerRule)),
  when: Schema.optionalKey(PolicyCondition),
  reason: Schema.optionalKey(Text(LIMITS.reasonLength)),
  approval: Schema.optionalKey(
    Schema.Struct({
      timeoutSeconds: Schema.Int.check(
        Schema.isBetween({
          minimum: LIMITS.approvalTimeoutSeconds.min,
          maximum: LIMITS.approvalTimeoutSeconds.max,
        }),
      ).pipe(Schema.withDecodingDefaultKey(Effect.succeed(LIMITS.approvalTimeoutSeconds.default))),
      approvers: Schema.optionalKey(Schema.Array(Text(LIMITS.approverLength))),
    }),
  ),
  enforce: Schema.optionalKey(
    Schema.Struct({
      type: Schema.Literals(ENFORCEMENT_TYPES),
      after: Schema.Int.check(Schema.isBetween({ minimum: LIMITS.enforceAfter.min, maximum: LIMITS.enforceAfter.max }))
        .pipe(Schema.withDecodingDefaultKey(Effect.succeed(LIMITS.enforceAfter.default)))
        .annotate({ description: "denials by this rule that trigger it (default 1)" }),
      withinSeconds: Schema.Int.check(
        Schema.isBetween({ minimum: LIMITS.enforceWithinSeconds.min, maximum: LIMITS.enforceWithinSeconds.max }),
      )
        .pipe(Schema.withDecodingDefaultKey(Effect.succeed(LIMITS.enforceWithinSeconds.default)))
        .annotate({ description: "the window the denials are counted over (default 3600)" }),
      durationSeconds: Schema.optionalKey(
        Schema.Int.check(
          Schema.isBetween({
            minimum: LIMITS.enforceDurationSeconds.min,
            maximum: LIMITS.enforceDurationSeconds.max,
          }),
        ).annotate({ description: "how long it lasts; absent: until resolved (a revocation takes none)" }),
      ),
      limitPerMinute: Schema.optionalKey(
        Schema.Int.check(
          Schema.isBetween({ minimum: LIMITS.enforceLimitPerMinute.min, maximum: LIMITS.enforceLimitPerMinute.max }),
        ).annotate({ description: "a throttle's guard calls per minute (throttle only, required there)" }),
      ),
      reason: Schema.optionalKey(Text(LIMITS.reasonLength)),
    }).annotate({
      description:
        "deny rules only: issue an enforcement against the agent after `after` denials by this rule within `withinSeconds`; inert in monitor mode",
    }),
  ),
}).annotate({ identifier: "PolicyRule" })

export const PolicyDocumentShape = Schema.Struct({
  name: Text(LIMITS.nameLength),
  description: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(LIMITS.descriptionLength))),
  enabled: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(true))),
  mode: Schema.Literals(MODES).pipe(Schema.withDecodingDefaultKey(Effect.succeed("enforce" as const))),
  target: Schema.optionalKey(
    Schema.Struct({
      agentIds: Schema.optionalKey(Schema.Array(Schema.String)),
      labels: Schema.optionalKey(Schema.Array(Schema.String)),
    }),
  ),
  rules: Schema.Array(PolicyRule).check(Schema.isMinLength(1), Schema.isMaxLength(LIMITS.rules)),
}).annotate({ identifier: "PolicyDocument" })

/** `rules[2].when.all[0].op` → ["rules", 2, "when", "all", 0, "op"]. */
const pathOf = (field: string): Array<string | number> => {
  const out: Array<string | number> = []
  for (const part of field.split(".")) {
    if (part === "") continue
    const bracket = part.indexOf("[")
    if (bracket === -1) {
      out.push(part)
      continue
    }
    if (bracket > 0) out.push(part.slice(0, bracket))
    for (const m of part.slice(bracket).matchAll(/\[(\d+)\]/g)) out.push(Number(m[1]))
  }
  return out
}

/**
 * A check that refuses nothing and documents `schema` (its encoded side) as the value's JSON Schema
 * (effect compiles it into the same document, definitions and recursion included): for a field decoded as any
 * value and validated afterwards, with exact field paths, as part of a whole policy document.
 */
export const documentedAs = <T>(schema: Schema.Top, expected: string) =>
  Schema.makeFilter((_: T) => undefined, {
    expected,
    representation: { id: "agentgov/documentedAs", payload: null, schemas: [Schema.toEncoded(schema).ast] },
    toJsonSchema: ({ schemas }) => schemas[0]!,
  })

// Decoding runs the filter, then at once the transformation on the same object: the second
// takes the first one's result instead of validating (and compiling CEL) again.
let lastValidated: { readonly input: object; readonly result: ReturnType<typeof validatePolicyDocument> } | undefined
const validate = (input: { readonly [k: string]: unknown }) => {
  const result = validatePolicyDocument(input)
  lastValidated = { input, result }
  return result
}
const validated = (input: { readonly [k: string]: unknown }) => {
  const last = lastValidated
  lastValidated = undefined
  return last?.input === input ? last.result : validatePolicyDocument(input)
}

const validDocument = Schema.makeFilter(
  (input: { readonly [k: string]: unknown }) => {
    const result = validate(input)
    return result.ok ? undefined : result.issues.map((i) => ({ path: pathOf(i.field), issue: i.issue }))
  },
  // Documented as the shape it validates (with its named, recursive definitions), not as any record.
  {
    expected: "a policy document",
    // The encoded side: a field with a decoding default is optional in what a client sends.
    representation: {
      id: "agentgov/PolicyDocument",
      payload: null,
      schemas: [Schema.toEncoded(PolicyDocumentShape).ast],
    },
    toJsonSchema: ({ schemas }) => schemas[0]!,
  },
)

/**
 * The policy document an operation accepts: decoding validates it (exact field paths, every
 * issue) and applies the defaults.
 */
export const PolicyDocument = Schema.Record(Schema.String, Schema.Unknown)
  .check(validDocument)
  .pipe(
    Schema.decodeTo(
      Schema.toType(PolicyDocumentShape),
      SchemaTransformation.transform({
        decode: (input) => {
          const result = validated(input)
          // The filter above has already refused every invalid document.
          if (!result.ok) throw new Error("unreachable: an invalid policy document passed validation")
          return result.document
        },
        encode: (document) => document as unknown as { readonly [k: string]: unknown },
      }),
    ),
  )
  .annotate({ identifier: "PolicyDocumentInput" })

/** A validated policy document, defaults applied. */
export type PolicyDocument = PolicyDocumentType

/** Validates a document as sent, failing with {@link PolicyInvalid} that names every bad field. */
export const decodePolicyDocument = (input: unknown): Effect.Effect<PolicyDocumentType, PolicyInvalid> =>
  Effect.suspend(() => {
    const result = validatePolicyDocument(input)
    return result.ok ? Effect.succeed(result.document) : Effect.fail(policyInvalid(result.issues))
  })
