/**
 * Audit-trail export bundles: a range of events of one workspace, a signed
 * checkpoint, an inclusion proof of every event in the checkpoint's tree and,
 * optionally, a consistency proof from an older checkpoint.
 */
import { chainHash, GENESIS_HASH } from "./chain.ts"
import { type Checkpoint, type Jwks, verifyCheckpoint } from "./checkpoint.ts"
import { eventLeaf, isHashHex, rootOf, verifyConsistency, verifyInclusion } from "./merkle.ts"

/** The format of the bundles the server exports: events' leaves cover attribution from `attributedFrom` on. */
export const BUNDLE_FORMAT = "agentgov.audit-bundle/v2"
/** Bundles exported before attribution was covered: every leaf is the event's chain hash. Still verified. */
export const BUNDLE_FORMAT_V1 = "agentgov.audit-bundle/v1"

/**
 * An audit event as the API returns it. `hash` covers prevHash, type, data and timestamp; the event's
 * Merkle leaf also covers id, agentId, actor and occurredAt (from the bundle's `attributedFrom` on).
 */
export interface BundleEvent {
  readonly id: string
  readonly type: string
  readonly timestamp: string
  readonly workspaceId: string
  readonly agentId: string | null
  readonly occurredAt: string | null
  readonly actor: { readonly type: string; readonly id: string | null }
  readonly data: Record<string, unknown>
  readonly sequence: number
  readonly prevHash: string
  readonly hash: string
}

/** Audit path of event `sequence` (leaf `leafIndex` = sequence − 1) in the checkpoint's tree. */
export interface InclusionProof {
  readonly sequence: number
  readonly leafIndex: number
  readonly treeSize: number
  readonly path: readonly string[]
}

/** Consistency proof from an older tree (size, root) the auditor holds to the checkpoint's tree. */
export interface ConsistencyProof {
  readonly fromSize: number
  readonly fromRoot: string
  readonly toSize: number
  readonly path: readonly string[]
}

export interface Bundle {
  readonly format: typeof BUNDLE_FORMAT | typeof BUNDLE_FORMAT_V1
  readonly workspaceId: string
  /**
   * The first sequence whose leaf is `attributedLeaf` (earlier ones are `chainLeaf`): 1 for a workspace
   * created with attributed leaves. Required in v2; a v1 bundle has none (every leaf is `chainLeaf`). Not
   * signed, and need not be: a leaf of the wrong form cannot reach the signed root.
   */
  readonly attributedFrom?: number
  readonly exportedAt: string
  /** Contiguous ascending sequences, starting anywhere from 1. */
  readonly events: readonly BundleEvent[]
  readonly checkpoint: Checkpoint
  readonly inclusionProofs: readonly InclusionProof[]
  readonly consistency?: ConsistencyProof
  readonly jwks: Jwks
}

export interface BundleError {
  readonly sequence?: number
  readonly reason: string
}

export interface BundleVerification {
  readonly valid: boolean
  /** Well-formed events checked. */
  readonly checked: number
  readonly errors: readonly BundleError[]
  readonly warnings: readonly string[]
  /** The checkpoint the events were checked against; null when the bundle has no readable one. */
  readonly checkpoint: { readonly treeSize: number; readonly rootHash: string; readonly kid: string } | null
  /** The older tree the consistency proof links to, when the bundle has one and it verifies. */
  readonly consistency?: { readonly fromSize: number; readonly fromRoot: string }
}

export interface VerifyOptions {
  /** Keys the checkpoint must be signed with; without them the bundle's own JWKS is used. */
  readonly trustedJwks?: Jwks
}

/** The warning of a bundle checked without trusted keys (`verifyReport` says it once, for the report). */
export const UNPINNED_WARNING = "the checkpoint key is not pinned: it was checked against the JWKS inside the bundle"

type Check = (value: unknown) => boolean

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
const isString: Check = (value) => typeof value === "string"
const isStringOrNull: Check = (value) => value === null || typeof value === "string"
const isCount: Check = (value) => Number.isSafeInteger(value) && (value as number) >= 0
const isSequence: Check = (value) => Number.isSafeInteger(value) && (value as number) >= 1
const isPath: Check = (value) => Array.isArray(value) && value.every(isHashHex)

const EVENT_FIELDS: Record<keyof BundleEvent, Check> = {
  id: isString,
  type: isString,
  timestamp: isString,
  workspaceId: isString,
  agentId: isStringOrNull,
  occurredAt: isStringOrNull,
  actor: (value) => isObject(value) && isString(value.type) && isStringOrNull(value.id),
  data: isObject,
  sequence: isSequence,
  prevHash: isHashHex,
  hash: isHashHex,
}

const CHECKPOINT_FIELDS: Record<keyof Checkpoint, Check> = {
  workspaceId: isString,
  treeSize: isCount,
  rootHash: isHashHex,
  headHash: isHashHex,
  timestamp: isString,
  kid: isString,
  signature: isString,
}

const INCLUSION_FIELDS: Record<keyof InclusionProof, Check> = {
  sequence: isSequence,
  leafIndex: isCount,
  treeSize: isCount,
  path: isPath,
}

const CONSISTENCY_FIELDS: Record<keyof ConsistencyProof, Check> = {
  fromSize: isCount,
  fromRoot: isHashHex,
  toSize: isCount,
  path: isPath,
}

/** What is wrong with the shape of `value` (named `what`), or undefined when every field passes its check. */
const shapeProblem = (what: string, value: unknown, fields: Record<string, Check>): string | undefined => {
  if (!isObject(value)) return `${what} is not an object`
  const bad = Object.keys(fields).filter((k) => !fields[k]!(value[k]))
  if (bad.length === 0) return undefined
  return `${what}: ${bad.map((k) => JSON.stringify(k)).join(", ")} missing or invalid`
}

/**
 * The bundle (or JWKS) inside the API's success envelope `{ok: true, data, meta?}`, so that the
 * response of `GET /events/export` can be verified as saved. Only an object whose `ok` is `true` and
 * whose `data` is an object is unwrapped; any other value is returned as is.
 */
export const unwrapEnvelope = (value: unknown): unknown =>
  isObject(value) && value.ok === true && isObject(value.data) ? value.data : value

const recomputes = (e: BundleEvent): boolean => {
  try {
    return chainHash(e.prevHash, e.type, e.data, e.timestamp) === e.hash
  } catch {
    return false
  }
}

/**
 * Verifies a bundle offline and reports every failure found. Accepts any
 * value (e.g. straight from JSON.parse), the bare bundle or the API's response
 * `{ok: true, data: <bundle>}`; malformed input is reported, never thrown.
 */
export const verifyBundle = (value: unknown, options: VerifyOptions = {}): BundleVerification => {
  const input = unwrapEnvelope(value)
  const errors: BundleError[] = []
  const warnings: string[] = []
  const fail = (reason: string, sequence?: number): void => {
    errors.push(sequence === undefined ? { reason } : { sequence, reason })
  }

  if (!isObject(input)) {
    fail("the bundle is not a JSON object")
    return { valid: false, checked: 0, errors, warnings, checkpoint: null }
  }
  if (!isString(input.format)) fail(`"format" missing or not a string; expected ${JSON.stringify(BUNDLE_FORMAT)}`)
  else if (input.format !== BUNDLE_FORMAT && input.format !== BUNDLE_FORMAT_V1) {
    fail(`unsupported format ${JSON.stringify(input.format)}; expected ${JSON.stringify(BUNDLE_FORMAT)}`)
  }
  // Which leaf form each event has: a v1 bundle predates attributed leaves altogether.
  let attributedFrom = Number.POSITIVE_INFINITY
  if (input.format === BUNDLE_FORMAT) {
    if (isSequence(input.attributedFrom)) attributedFrom = input.attributedFrom as number
    else fail('"attributedFrom" missing or not a sequence (an integer ≥ 1)')
  }
  const workspaceId = input.workspaceId
  if (!isString(workspaceId)) fail('"workspaceId" missing or not a string')
  if (!isString(input.exportedAt)) fail('"exportedAt" missing or not a string')

  // The checkpoint: shape, workspace, signature.
  let checkpoint: Checkpoint | undefined
  const checkpointProblem = shapeProblem("checkpoint", input.checkpoint, CHECKPOINT_FIELDS)
  if (checkpointProblem) {
    fail(checkpointProblem)
  } else {
    checkpoint = input.checkpoint as Checkpoint
    if (checkpoint.workspaceId !== workspaceId) fail("the checkpoint is for another workspace")
    if (checkpoint.treeSize === 0 && checkpoint.headHash !== GENESIS_HASH) {
      fail("the checkpoint of the empty tree has a head hash other than the genesis hash")
    }
    const keys = options.trustedJwks ?? (input.jwks as Jwks)
    if (!options.trustedJwks) {
      warnings.push(UNPINNED_WARNING)
    }
    const signature = verifyCheckpoint(checkpoint, keys)
    if (!signature.ok) fail(`checkpoint signature: ${signature.reason}`)
  }

  // Inclusion proofs by sequence.
  const proofs = new Map<number, InclusionProof>()
  if (!Array.isArray(input.inclusionProofs)) {
    fail('"inclusionProofs" missing or not an array')
  } else {
    for (const [i, raw] of (input.inclusionProofs as unknown[]).entries()) {
      const problem = shapeProblem(`inclusionProofs[${i}]`, raw, INCLUSION_FIELDS)
      const proof = raw as InclusionProof
      if (problem) fail(problem)
      else if (proofs.has(proof.sequence)) fail("more than one inclusion proof", proof.sequence)
      else proofs.set(proof.sequence, proof)
    }
  }

  // The events: shape, hash chain, inclusion in the checkpoint's tree.
  const rawEvents: unknown[] = Array.isArray(input.events) ? input.events : []
  if (!Array.isArray(input.events)) fail('"events" missing or not an array')
  const leaves: string[] = []
  let prev: BundleEvent | undefined
  for (const [i, raw] of rawEvents.entries()) {
    const problem = shapeProblem(`events[${i}]`, raw, EVENT_FIELDS)
    if (problem) {
      fail(problem, isObject(raw) && isSequence(raw.sequence) ? (raw.sequence as number) : undefined)
      prev = undefined
      continue
    }
    const e = raw as BundleEvent
    const seq = e.sequence
    if (e.workspaceId !== workspaceId) fail("the event belongs to another workspace", seq)
    if (!recomputes(e)) fail("hash does not match the event's prevHash, type, data and timestamp", seq)
    if (prev && seq !== prev.sequence + 1) {
      fail(`sequence ${seq} follows ${prev.sequence}; sequences must be contiguous and ascending`, seq)
    } else if (prev && e.prevHash !== prev.hash) {
      fail(`prevHash is not the hash of event ${prev.sequence}`, seq)
    }
    if (seq === 1 && e.prevHash !== GENESIS_HASH) fail("the first event's prevHash is not the genesis hash", seq)

    const leaf = eventLeaf(e, attributedFrom)
    leaves.push(leaf)
    const proof = proofs.get(seq)
    proofs.delete(seq)
    if (checkpoint) {
      if (seq > checkpoint.treeSize) fail(`the checkpoint (tree size ${checkpoint.treeSize}) does not cover it`, seq)
      if (seq === checkpoint.treeSize && e.hash !== checkpoint.headHash) {
        fail("hash is not the checkpoint's head hash", seq)
      }
    }
    if (!proof) {
      fail("no inclusion proof", seq)
    } else if (proof.leafIndex !== seq - 1) {
      fail(`inclusion proof is for leaf index ${proof.leafIndex}, not ${seq - 1}`, seq)
    } else if (checkpoint && proof.treeSize !== checkpoint.treeSize) {
      fail(`inclusion proof is for tree size ${proof.treeSize}, not the checkpoint's ${checkpoint.treeSize}`, seq)
    } else if (checkpoint && !verifyInclusion(leaf, proof.leafIndex, proof.treeSize, proof.path, checkpoint.rootHash)) {
      fail(
        seq >= attributedFrom
          ? "inclusion proof does not verify against the checkpoint's root (the leaf covers the event's hash, id, agentId, actor and occurredAt)"
          : "inclusion proof does not verify against the checkpoint's root",
        seq,
      )
    }
    prev = e
  }
  for (const sequence of proofs.keys()) fail("inclusion proof for an event that is not in the bundle", sequence)
  const unattributed = rawEvents.filter(
    (e) => isObject(e) && isSequence(e.sequence) && (e.sequence as number) < attributedFrom,
  )
  if (unattributed.length > 0) {
    warnings.push(
      attributedFrom === Number.POSITIVE_INFINITY
        ? "a v1 bundle: its proofs cover each event's prevHash, type, data and timestamp, not its id, agentId, actor or occurredAt"
        : `events before sequence ${attributedFrom} were checkpointed before attribution was covered: their id, agentId, actor and occurredAt are not proven`,
    )
  }

  // A bundle of the whole tree must also rebuild the root.
  const fromGenesis =
    leaves.length === rawEvents.length && rawEvents.every((e, i) => (e as BundleEvent).sequence === i + 1)
  if (checkpoint && fromGenesis && leaves.length === checkpoint.treeSize && rootOf(leaves) !== checkpoint.rootHash) {
    fail("the Merkle root of the events is not the checkpoint's root")
  }

  // The optional consistency proof from an older checkpoint.
  let consistency: BundleVerification["consistency"]
  if (input.consistency !== undefined && input.consistency !== null) {
    const problem = shapeProblem("consistency", input.consistency, CONSISTENCY_FIELDS)
    const c = input.consistency as ConsistencyProof
    if (problem) {
      fail(problem)
    } else if (checkpoint && c.toSize !== checkpoint.treeSize) {
      fail(`consistency proof is to tree size ${c.toSize}, not the checkpoint's ${checkpoint.treeSize}`)
    } else if (checkpoint && !verifyConsistency(c.fromSize, c.toSize, c.fromRoot, checkpoint.rootHash, c.path)) {
      fail(`consistency proof from tree size ${c.fromSize} does not verify against the checkpoint's root`)
    } else if (checkpoint) {
      consistency = { fromSize: c.fromSize, fromRoot: c.fromRoot }
    }
  }

  return {
    valid: errors.length === 0,
    checked: leaves.length,
    errors,
    warnings,
    checkpoint: checkpoint
      ? { treeSize: checkpoint.treeSize, rootHash: checkpoint.rootHash, kid: checkpoint.kid }
      : null,
    ...(consistency ? { consistency } : {}),
  }
}
