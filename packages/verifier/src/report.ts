/**
 * Compliance reports (decision D14): what a report counts from the audit trail, how it is signed, and the
 * offline check of a report against export bundles. The server and `agentgov-verify report` share these
 * definitions, so a recount cannot drift from the count.
 */
import { createHash, createPublicKey, type JsonWebKey, type KeyObject, sign, verify } from "node:crypto"
import { type BundleVerification, UNPINNED_WARNING, unwrapEnvelope, verifyBundle } from "./bundle.ts"
import { type Checkpoint, type Jwks, verifyCheckpoint } from "./checkpoint.ts"
import { canonicalize } from "./jcs.ts"

export const REPORT_FORMAT = "agentgov.compliance-report/v1"

/** A condition on one field of an event's `data`: equal to a string or boolean, absent (null), or present. */
export type FieldCondition = string | boolean | null | { readonly present: true }

/**
 * A count over the report's counted events: those of `types` (every type when absent) whose `data` fields
 * meet every condition of `where`.
 */
export interface EventMetric {
  readonly name: string
  readonly description: string
  readonly types?: readonly string[]
  readonly where?: Readonly<Record<string, FieldCondition>>
}

/** Every count a report takes from the trail; each is recounted by the verifier from a bundle. */
export const EVENT_METRICS = [
  { name: "events", description: "events recorded" },
  { name: "evaluations", description: "guard evaluations", types: ["policy.evaluated"] },
  {
    name: "allowed",
    description: "evaluations that let the action proceed",
    types: ["policy.evaluated"],
    where: { allowed: true },
  },
  { name: "denials", description: "actions blocked by policy", types: ["policy.denied"] },
  { name: "violations", description: "policy violations recorded", types: ["policy.violated"] },
  {
    name: "approvalsRequired",
    description: "evaluations that required a person's approval",
    types: ["policy.evaluated"],
    where: { decision: "require_approval" },
  },
  {
    name: "approvalsBypassed",
    description: "evaluations that required approval yet proceeded without one",
    types: ["policy.evaluated"],
    where: { decision: "require_approval", allowed: true, approvalId: null },
  },
  { name: "approvalsRequested", description: "approval requests", types: ["approval.requested"] },
  {
    name: "approvalsDecidedByPeople",
    description: "approvals decided by a person",
    types: ["approval.decided"],
    where: { expired: false, decidedBy: { present: true } },
  },
  {
    name: "approvalsExpired",
    description: "approvals nobody decided in time (denied)",
    types: ["approval.decided"],
    where: { expired: true },
  },
  { name: "enforcements", description: "enforcements issued", types: ["enforcement.created"] },
  {
    name: "suspensions",
    description: "suspensions issued",
    types: ["enforcement.created"],
    where: { type: "suspension" },
  },
  {
    name: "revocations",
    description: "revocations issued",
    types: ["enforcement.created"],
    where: { type: "revocation" },
  },
  { name: "enforcementsResolved", description: "enforcements resolved or expired", types: ["enforcement.resolved"] },
  { name: "keysCreated", description: "API keys created", types: ["apikey.created"] },
  { name: "keysRevoked", description: "API keys revoked", types: ["apikey.revoked"] },
  { name: "keysRotated", description: "API keys rotated", types: ["apikey.rotated"] },
  {
    name: "policyChanges",
    description: "policy versions saved or deleted",
    types: ["policy.created", "policy.updated", "policy.deleted"],
  },
  {
    name: "agentVersions",
    description: "agent versions recorded",
    types: ["agent.updated"],
    where: { versionId: { present: true } },
  },
  { name: "chainAlarms", description: "chain verification failures recorded", types: ["chain.invalid"] },
  { name: "contentRegistered", description: "generated content registered", types: ["content.registered"] },
  {
    name: "contentUnmarked",
    description: "content registered with neither C2PA nor a watermark",
    types: ["content.registered"],
    where: { c2pa: false, watermarked: false },
  },
] as const satisfies readonly EventMetric[]

export type MetricName = (typeof EVENT_METRICS)[number]["name"]
export type Metrics = Record<MetricName, number>

const conditionHolds = (value: unknown, condition: FieldCondition): boolean => {
  if (condition === null) return value === undefined || value === null
  if (typeof condition === "object") return value !== undefined && value !== null
  return value === condition
}

/** Whether an event counts towards `metric`. */
export const metricMatches = (
  metric: EventMetric,
  e: { readonly type: string; readonly data: Record<string, unknown> },
): boolean => {
  if (metric.types !== undefined && !metric.types.includes(e.type)) return false
  for (const [field, condition] of Object.entries(metric.where ?? {}))
    if (!conditionHolds(e.data[field], condition)) return false
  return true
}

/** Which events a report counts: the workspace's in the period, or for an agent its own and the workspace-wide ones. */
export const countsEvent = (
  scope: { readonly from: string; readonly to: string; readonly agentId: string | null },
  e: { readonly timestamp: string; readonly agentId: string | null },
): boolean => {
  const t = Date.parse(e.timestamp)
  if (t < Date.parse(scope.from) || t >= Date.parse(scope.to)) return false
  return scope.agentId === null || e.agentId === null || e.agentId === scope.agentId
}

/** Sequences as ascending inclusive ranges `[from, to]`. */
export type SequenceRanges = ReadonlyArray<readonly [number, number]>

/** Builds ranges and the ids digest from counted events in ascending order, without keeping them. */
export class CountedBuilder {
  private readonly ranges: Array<[number, number]> = []
  private readonly digest = createHash("sha256")
  private readonly ids: string[] = []
  private readonly keepIds: number
  count = 0
  constructor(keepIds: number) {
    this.keepIds = keepIds
  }
  push(sequence: number, id: string): void {
    const last = this.ranges[this.ranges.length - 1]
    if (last && last[1] + 1 === sequence) last[1] = sequence
    else this.ranges.push([sequence, sequence])
    this.digest.update(`${sequence} ${id}\n`)
    if (this.count < this.keepIds) this.ids.push(id)
    this.count += 1
  }
  done(): Counted {
    return {
      count: this.count,
      sequences: this.ranges,
      idsDigest: this.digest.digest("hex"),
      ...(this.count <= this.keepIds ? { ids: this.ids } : {}),
    }
  }
}

/** The events a report counted: the count, the sequences, and the ids (listed up to a bundle's worth; always digested). */
export interface Counted {
  readonly count: number
  readonly sequences: SequenceRanges
  /** SHA-256 (hex) over `"<sequence> <id>\n"` of every counted event, in sequence order. */
  readonly idsDigest: string
  /** The ids in sequence order, when at most 10,000 were counted. */
  readonly ids?: readonly string[]
}

export type ControlStatus = "met" | "partial" | "not_met" | "not_applicable"

export interface Evidence {
  /** What was found, in words. */
  readonly label: string
  readonly value: number | string | boolean
  /** The event metric this value is (recountable from a bundle); absent for values read from current records. */
  readonly metric?: MetricName
  /** Ids of the records this evidence names (enforcements, keys, events). */
  readonly ids?: readonly string[]
}

export interface ControlOutcome {
  readonly id: string
  readonly title: string
  readonly reference: string
  /** Required for a certification of this framework. */
  readonly required: boolean
  readonly status: ControlStatus
  readonly evidence: readonly Evidence[]
  /** What the records cannot show and the operator must supply. */
  readonly gaps: readonly string[]
}

/** The signed document of a report. */
export interface ReportDocument {
  readonly format: typeof REPORT_FORMAT
  readonly id: string
  readonly workspaceId: string
  readonly framework: string
  readonly catalogueVersion: string
  readonly agentId: string | null
  readonly period: { readonly from: string; readonly to: string }
  readonly generatedAt: string
  /** The signed checkpoint taken at generation: every counted event is in its tree. */
  readonly checkpoint: Checkpoint
  /** The whole chain's verification at generation. */
  readonly chain: {
    readonly valid: boolean
    readonly checked: number
    readonly firstBadSequence?: number
    readonly reason?: string
  }
  readonly counted: Counted
  readonly metrics: Metrics
  /** Activity per time bucket, for the chart. */
  readonly activity: ReadonlyArray<{
    readonly at: string
    readonly evaluations: number
    readonly denials: number
    readonly enforcements: number
  }>
  readonly controls: readonly ControlOutcome[]
  readonly summary: {
    readonly result: "compliant" | "partially_compliant" | "non_compliant"
    readonly met: number
    readonly partial: number
    readonly notMet: number
    readonly notApplicable: number
  }
}

/** A report with its signature: a detached JWS (RFC 7515 App. F) over the JCS of the document without `signature`. */
export type SignedReport = ReportDocument & { readonly signature: string }

/** The JWS `typ` of a compliance report's signature. */
export const REPORT_JWS_TYPE = "agentgov-report+jcs"
/** The JWS `typ` of a certification's signature. */
export const CERTIFICATION_JWS_TYPE = "agentgov-certification+jcs"

const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64url")

/** A detached compact JWS (RFC 7515 App. F, `header..signature`) over the JCS of `doc`, Ed25519 with key `kid`. */
export const signDetached = (doc: unknown, privateKey: KeyObject, kid: string, typ: string): string => {
  const header = b64(JSON.stringify({ alg: "EdDSA", kid, typ }))
  const payload = b64(canonicalize(doc))
  return `${header}..${sign(null, Buffer.from(`${header}.${payload}`), privateKey).toString("base64url")}`
}

/** Checks a detached JWS made by `signDetached` over `doc` with a key of `jwks`: ok, or why not. */
export const verifyDetached = (
  doc: unknown,
  signature: unknown,
  jwks: Jwks,
  typ: string,
): { ok: true; kid: string } | { ok: false; reason: string } => {
  if (typeof signature !== "string") return { ok: false, reason: '"signature" missing or not a string' }
  const parts = signature.split(".")
  if (parts.length !== 3 || parts[1] !== "")
    return { ok: false, reason: "the signature is not a detached compact JWS (header..signature)" }
  let header: Record<string, unknown>
  try {
    header = JSON.parse(Buffer.from(parts[0]!, "base64url").toString("utf8"))
  } catch {
    return { ok: false, reason: "the JWS header is not base64url JSON" }
  }
  if (header.alg !== "EdDSA" || header.typ !== typ || typeof header.kid !== "string")
    return { ok: false, reason: `unexpected JWS header ${JSON.stringify(header)}` }
  const kid = header.kid
  const jwk = Array.isArray(jwks?.keys) ? jwks.keys.find((k) => k?.kid === kid) : undefined
  if (!jwk) return { ok: false, reason: `no key with kid ${JSON.stringify(kid)} in the JWKS` }
  try {
    const key = createPublicKey({ key: jwk as JsonWebKey, format: "jwk" })
    const input = Buffer.from(`${parts[0]}.${b64(canonicalize(doc))}`)
    return verify(null, input, key, Buffer.from(parts[2]!, "base64url"))
      ? { ok: true, kid }
      : { ok: false, reason: `the signature does not verify with key ${JSON.stringify(kid)}` }
  } catch (e) {
    return { ok: false, reason: `cannot verify with key ${JSON.stringify(kid)}: ${(e as Error).message}` }
  }
}

/** Signs a report document with an Ed25519 key published under `kid`. */
export const signReport = (doc: ReportDocument, privateKey: KeyObject, kid: string): SignedReport => ({
  ...doc,
  signature: signDetached(doc, privateKey, kid, REPORT_JWS_TYPE),
})

export interface ReportError {
  readonly sequence?: number
  readonly reason: string
}

export interface ReportVerification {
  readonly valid: boolean
  readonly errors: readonly ReportError[]
  readonly warnings: readonly string[]
  /** Counted events found in the bundles and recounted. */
  readonly recounted: number
  readonly bundles: readonly BundleVerification[]
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const isSequence = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 1

/**
 * What is wrong with the shape of a report's `counted`, or undefined: a count, ascending disjoint ranges of
 * sequences, a digest, and the ids (strings) when listed. Checked before anything reads them, so that no
 * malformed value can throw, and a range is never walked sequence by sequence (one may span 2^53).
 */
const countedProblem = (c: unknown): string | undefined => {
  if (!isObject(c)) return '"counted" missing or not an object'
  if (!Number.isSafeInteger(c.count) || (c.count as number) < 0) return '"counted.count" is not a count'
  if (!Array.isArray(c.sequences)) return '"counted.sequences" is not an array'
  let last = 0
  for (const [i, r] of (c.sequences as unknown[]).entries()) {
    if (!Array.isArray(r) || r.length !== 2 || !isSequence(r[0]) || !isSequence(r[1]) || r[0] > r[1])
      return `"counted.sequences[${i}]" is not a range [from, to] of sequences (integers ≥ 1, from ≤ to)`
    if (r[0] <= last) return `"counted.sequences[${i}]" does not follow the range before it (ascending, disjoint)`
    last = r[1]
  }
  if (typeof c.idsDigest !== "string") return '"counted.idsDigest" is not a string'
  if (c.ids !== undefined && !(Array.isArray(c.ids) && c.ids.every((id) => typeof id === "string")))
    return '"counted.ids" is not a list of ids'
  return undefined
}

/** Whether sequence `s` is in one of the ascending disjoint `ranges`. */
const inRanges = (ranges: SequenceRanges, s: number): boolean => {
  let lo = 0
  let hi = ranges.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const [from, to] = ranges[mid]!
    if (s < from) hi = mid - 1
    else if (s > to) lo = mid + 1
    else return true
  }
  return false
}

/** Ascending sequences as text ranges ("1–4, 30–40"), at most `n` of them. */
const spansText = (spans: ReadonlyArray<readonly [number, number]>, n = 5): string =>
  spans
    .slice(0, n)
    .map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`))
    .join(", ") + (spans.length > n ? `, and ${spans.length - n} more ranges` : "")

/** The report's signature check alone: ok, or why not. */
export const verifyReportSignature = (report: Record<string, unknown>, jwks: Jwks) => {
  const { signature, ...doc } = report
  return verifyDetached(doc, signature, jwks, REPORT_JWS_TYPE)
}

/**
 * Checks a report offline against one or more export bundles of its workspace: the report's signature and its
 * checkpoint's; each bundle (verifyBundle); that each bundle's tree is the report's or extends it (a
 * consistency proof from the report's tree size); that every counted event is in a bundle, with the listed
 * ids and digest; and that every metric recounts to the report's value. Accepts values straight from
 * JSON.parse (bare, or in the API's envelope); never throws on malformed input.
 */
export const verifyReport = (
  reportValue: unknown,
  bundleValues: readonly unknown[],
  options: { readonly trustedJwks?: Jwks } = {},
): ReportVerification => {
  try {
    return checkReport(reportValue, bundleValues, options)
  } catch (e) {
    // Not expected (every field is checked before use): a last guard so that input never throws.
    return {
      valid: false,
      errors: [{ reason: `the report cannot be checked: ${(e as Error).message}` }],
      warnings: [],
      recounted: 0,
      bundles: [],
    }
  }
}

const checkReport = (
  reportValue: unknown,
  bundleValues: readonly unknown[],
  options: { readonly trustedJwks?: Jwks },
): ReportVerification => {
  const errors: ReportError[] = []
  const warnings: string[] = []
  const fail = (reason: string, sequence?: number) =>
    errors.push(sequence === undefined ? { reason } : { sequence, reason })
  const raw = unwrapEnvelope(reportValue)
  // The API's report record carries the signed document in `report`.
  const report = isObject(raw) && isObject(raw.report) && raw.format === undefined ? raw.report : raw
  if (!isObject(report) || report.format !== REPORT_FORMAT) {
    fail(`not a compliance report (expected "format": ${JSON.stringify(REPORT_FORMAT)})`)
    return { valid: false, errors, warnings, recounted: 0, bundles: [] }
  }
  const doc = report as unknown as SignedReport
  // Each bundle keeps its place among those given, for the messages; one that is no JSON object is an error, not
  // skipped (third pass: a stray file beside a good bundle passed unnoticed).
  const given = bundleValues.map((b) => unwrapEnvelope(b))
  const nameOf = (i: number) => (given.length === 1 ? "the bundle" : `bundle ${i + 1}`)
  for (const [i, b] of given.entries())
    if (!isObject(b)) fail(`${nameOf(i)} is not an export bundle (not a JSON object)`)
  const placed = [...given.entries()].filter((e): e is [number, Record<string, unknown>] => isObject(e[1]))
  const bundles = placed.map(([, b]) => b)
  const bundleJwks = bundles.find((b) => isObject(b.jwks))?.jwks as Jwks | undefined
  const jwks = options.trustedJwks ?? bundleJwks
  if (!jwks) fail("no keys to check the signature with: give a bundle or --jwks")
  else {
    if (!options.trustedJwks)
      warnings.push("the signing keys are not pinned: checked against the JWKS inside the bundle")
    const sig = verifyReportSignature(report, jwks)
    if (!sig.ok) fail(sig.reason)
    if (!isObject(doc.checkpoint)) fail('"checkpoint" missing')
    else {
      const c = verifyCheckpoint(doc.checkpoint, jwks)
      if (!c.ok) fail(`checkpoint signature: ${c.reason}`)
      if (doc.checkpoint.workspaceId !== doc.workspaceId) fail("the checkpoint is for another workspace")
    }
  }
  if (given.length === 0) fail("no export bundle given: the counted events cannot be recounted")

  // Each bundle: valid, of this workspace, and linked to the report's tree.
  const results: BundleVerification[] = []
  const events = new Map<
    number,
    { id: string; type: string; timestamp: string; agentId: string | null; data: Record<string, unknown> }
  >()
  const size = isObject(doc.checkpoint) && Number.isSafeInteger(doc.checkpoint.treeSize) ? doc.checkpoint.treeSize : -1
  const root = isObject(doc.checkpoint) ? doc.checkpoint.rootHash : ""
  for (const [i, bundle] of placed) {
    const r = verifyBundle(bundle, options.trustedJwks ? { trustedJwks: options.trustedJwks } : {})
    results.push(r)
    const name = nameOf(i)
    for (const e of r.errors) fail(`${name}: ${e.reason}`, e.sequence)
    // What the bundle warns of bears on the recount (say, events whose id and agentId its proofs do not cover, which
    // the ids digest and the agent scope rest on): passed on (third pass). Unpinned keys the report says once.
    for (const w of r.warnings) if (w !== UNPINNED_WARNING) warnings.push(`${name}: ${w}`)
    if (bundle.workspaceId !== doc.workspaceId) fail(`${name} is of another workspace`)
    if (r.checkpoint) {
      const linked =
        (r.checkpoint.treeSize === size && r.checkpoint.rootHash === root) ||
        (r.consistency?.fromSize === size && r.consistency.fromRoot === root)
      if (!linked)
        fail(
          `${name}'s checkpoint (tree size ${r.checkpoint.treeSize}) is neither the report's (tree size ${size}) nor proven to extend it: export with sinceTreeSize=${size}`,
        )
    }
    for (const e of Array.isArray(bundle.events) ? bundle.events : [])
      if (isObject(e) && isSequence(e.sequence) && isObject(e.data)) events.set(e.sequence, e as never)
  }

  // The counted events: every one present, with the listed ids and digest, and every metric recounted. The ranges
  // are walked through the bundles' events (sorted), so the work is bounded by the bundles, not by the ranges.
  const counted = doc.counted
  const period = doc.period as unknown
  const periodOk =
    isObject(period) &&
    typeof period.from === "string" &&
    typeof period.to === "string" &&
    !Number.isNaN(Date.parse(period.from)) &&
    !Number.isNaN(Date.parse(period.to)) &&
    (doc.agentId === null || typeof doc.agentId === "string")
  const problem = countedProblem(counted)
  let recounted = 0
  if (problem) fail(problem)
  else if (!periodOk) fail('"period" missing or malformed: expected {from, to} timestamps')
  else if (bundles.length > 0) {
    const scope = { from: doc.period.from, to: doc.period.to, agentId: doc.agentId }
    const ranges = counted.sequences
    const present = [...events.keys()].sort((a, b) => a - b)
    const digest = createHash("sha256")
    const tally = Object.fromEntries(EVENT_METRICS.map((m) => [m.name, 0])) as Metrics
    let missing = 0
    const notInBundle = (from: number, to: number) => {
      for (let s = from; s <= to && missing + s - from < 20; s++) fail("counted by the report but not in the bundle", s)
      missing += Math.max(0, to - from + 1)
    }
    const ids: string[] = []
    let p = 0
    for (const [from, to] of ranges) {
      while (p < present.length && present[p]! < from) p++
      let next = from
      for (; p < present.length && present[p]! <= to; p++) {
        const s = present[p]!
        const e = events.get(s)!
        notInBundle(next, s - 1)
        next = s + 1
        if (s > size) fail(`counted, but beyond the report's checkpoint (tree size ${size})`, s)
        if (!countsEvent(scope, e)) fail("counted, but outside the report's period or agent", s)
        digest.update(`${s} ${e.id}\n`)
        ids.push(e.id)
        recounted += 1
        for (const m of EVENT_METRICS) if (metricMatches(m, e)) tally[m.name] += 1
      }
      notInBundle(next, to)
    }
    if (missing > 20) fail(`${missing - 20} more counted events are not in the bundle`)
    if (missing === 0) {
      if (recounted !== counted.count)
        fail(`the report says ${counted.count} events were counted; its ranges hold ${recounted}`)
      if (digest.digest("hex") !== counted.idsDigest)
        fail("the ids of the counted events do not match the report's digest")
      if (
        counted.ids !== undefined &&
        (counted.ids.length !== ids.length || counted.ids.some((id, i) => id !== ids[i]))
      )
        fail("the listed ids are not those of the counted events")
      for (const m of EVENT_METRICS) {
        const said = (doc.metrics as Record<string, unknown>)?.[m.name]
        if (said !== tally[m.name])
          fail(`metric ${m.name}: the report says ${String(said)}, the bundle recounts ${tally[m.name]}`)
      }
      // Events of the period in the report's tree that it did not count: an undercount.
      for (const s of present)
        if (s <= size && !inRanges(ranges, s) && countsEvent(scope, events.get(s)!))
          fail("in the report's period and tree, but not counted", s)
      // What no bundle held cannot be judged: say which sequences of the tree those are.
      const unseen: Array<[number, number]> = []
      let expected = 1
      for (const s of present) {
        if (s > size) break
        if (s > expected) unseen.push([expected, s - 1])
        expected = s + 1
      }
      if (size >= expected) unseen.push([expected, size])
      if (unseen.length > 0)
        warnings.push(
          `the bundles do not hold ${unseen.length === 1 && unseen[0]![0] === unseen[0]![1] ? "sequence" : "sequences"} ${spansText(unseen)} of the report's tree (size ${size}): events among them that fall in the report's period were not checked for being left uncounted`,
        )
    }
  }
  if (isObject(doc.chain) && doc.chain.valid === false)
    warnings.push(
      `the report records a broken chain at generation (from sequence ${String(doc.chain.firstBadSequence)}): ${String(doc.chain.reason)}`,
    )
  return { valid: errors.length === 0, errors, warnings, recounted, bundles: results }
}
