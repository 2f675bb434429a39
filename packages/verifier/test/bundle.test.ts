import { describe, expect, it } from "vitest"
import {
  type BundleError,
  chainHash,
  checkpointPayload,
  EMPTY_ROOT,
  signCheckpoint,
  verifyBundle,
  verifyCheckpoint,
} from "../src/index.ts"
import { copy, makeBundle, makeChain, makeSigner, WORKSPACE } from "./fixtures.ts"

const signer = makeSigner()
const chain = makeChain(20)
const full = makeBundle(chain, signer)
const partial = makeBundle(chain, signer, { from: 5, to: 9 })
const trusted = { trustedJwks: signer.jwks }

/** The sequences the errors name, in order. */
const sequences = (errors: readonly BundleError[]): Array<number | undefined> => errors.map((e) => e.sequence)

describe("checkpoints", () => {
  it("signs the prefixed canonical JSON of the five body fields", () => {
    expect(checkpointPayload(full.checkpoint).toString("utf8")).toBe(
      `agentgov-checkpoint/v1\n{"headHash":"${chain[19]!.hash}","rootHash":"${full.checkpoint.rootHash}",` +
        `"timestamp":"2025-01-02T00:00:00.000Z","treeSize":20,"workspaceId":"${WORKSPACE}"}`,
    )
    expect(verifyCheckpoint(full.checkpoint, signer.jwks)).toEqual({ ok: true })
  })

  it("refuses keys that are missing or not Ed25519, and bad signatures", () => {
    const other = makeSigner("other")
    expect(verifyCheckpoint(full.checkpoint, other.jwks)).toMatchObject({ ok: false, reason: /no key with kid/ })
    const renamed = { keys: [{ ...other.jwks.keys[0]!, kid: signer.kid }] }
    expect(verifyCheckpoint(full.checkpoint, renamed)).toMatchObject({ ok: false, reason: /does not verify/ })
    const notEd = { keys: [{ ...signer.jwks.keys[0]!, crv: "X25519" }] }
    expect(verifyCheckpoint(full.checkpoint, notEd)).toMatchObject({ ok: false, reason: /not an Ed25519/ })
    const broken = { keys: [{ ...signer.jwks.keys[0]!, x: "AAAA" }] }
    expect(verifyCheckpoint(full.checkpoint, broken)).toMatchObject({ ok: false, reason: /cannot verify/ })
    expect(verifyCheckpoint({ ...full.checkpoint, signature: "not base64url!" }, signer.jwks)).toMatchObject({
      ok: false,
    })
    expect(verifyCheckpoint({ ...full.checkpoint, treeSize: 21 }, signer.jwks)).toMatchObject({ ok: false })
  })
})

describe("valid bundles", () => {
  it("verifies a bundle of the whole trail", () => {
    const result = verifyBundle(full, trusted)
    expect(result).toEqual({
      valid: true,
      checked: 20,
      errors: [],
      warnings: [],
      checkpoint: { treeSize: 20, rootHash: full.checkpoint.rootHash, kid: signer.kid },
    })
  })

  it("verifies a range of events (5..9 of 20)", () => {
    const result = verifyBundle(partial, trusted)
    expect(result).toMatchObject({ valid: true, checked: 5, errors: [] })
  })

  it("verifies a bundle of the empty trail", () => {
    const result = verifyBundle(makeBundle([], signer), trusted)
    expect(result).toMatchObject({ valid: true, checked: 0, checkpoint: { treeSize: 0, rootHash: EMPTY_ROOT } })
  })

  it("verifies events under a later checkpoint than the last exported event", () => {
    expect(verifyBundle(makeBundle(chain, signer, { to: 6 }), trusted)).toMatchObject({ valid: true, checked: 6 })
  })

  it("warns when the key is not pinned", () => {
    const result = verifyBundle(full)
    expect(result.valid).toBe(true)
    expect(result.warnings).toEqual([expect.stringMatching(/not pinned/)])
  })

  it("still verifies a bundle of the old format (every leaf the chain hash), saying what it does not prove", () => {
    const old = makeBundle(chain, signer, { attributedFrom: "v1" })
    expect(old.format).toBe("agentgov.audit-bundle/v1")
    const result = verifyBundle(old, trusted)
    expect(result).toMatchObject({ valid: true, checked: 20, errors: [] })
    expect(result.warnings).toEqual([expect.stringMatching(/a v1 bundle: .*not its id, agentId, actor or occurredAt/)])
  })

  it("verifies a workspace whose leaves became attributed mid-chain, saying which events are not", () => {
    const mixed = makeBundle(chain, signer, { attributedFrom: 8 })
    const result = verifyBundle(mixed, trusted)
    expect(result).toMatchObject({ valid: true, checked: 20, errors: [] })
    expect(result.warnings).toEqual([expect.stringMatching(/events before sequence 8 .* not proven/)])
    expect(verifyBundle(makeBundle(chain, signer, { attributedFrom: 8, from: 8 }), trusted).warnings).toEqual([])
  })

  it("round-trips through JSON", () => {
    expect(verifyBundle(JSON.parse(JSON.stringify(partial)), trusted).valid).toBe(true)
  })
})

describe("tampering", () => {
  it("detects changed data", () => {
    const b = copy(full)
    b.events[6].data.step = 700
    const result = verifyBundle(b, trusted)
    expect(result.valid).toBe(false)
    expect(result.errors).toEqual([{ sequence: 7, reason: expect.stringMatching(/hash does not match/) }])
  })

  it("detects changed data whose hash was recomputed", () => {
    const b = copy(full)
    const e = b.events[6]
    e.data.step = 700
    e.hash = chainHash(e.prevHash, e.type, e.data, e.timestamp)
    const result = verifyBundle(b, trusted)
    expect(result.errors).toEqual([
      { sequence: 7, reason: expect.stringMatching(/inclusion proof does not verify/) },
      { sequence: 8, reason: "prevHash is not the hash of event 7" },
      { reason: "the Merkle root of the events is not the checkpoint's root" },
    ])
  })

  it("detects a changed type", () => {
    const b = copy(partial)
    b.events[2].type = "policy.deleted"
    expect(sequences(verifyBundle(b, trusted).errors)).toEqual([7])
  })

  it("detects a changed timestamp", () => {
    const b = copy(partial)
    b.events[2].timestamp = "2025-01-01T12:00:07.251Z"
    expect(sequences(verifyBundle(b, trusted).errors)).toEqual([7])
  })

  it("detects a deleted event", () => {
    const b = copy(full)
    b.events.splice(6, 1)
    b.inclusionProofs.splice(6, 1)
    const result = verifyBundle(b, trusted)
    expect(result.errors).toEqual([{ sequence: 8, reason: expect.stringMatching(/8 follows 6/) }])
  })

  it("detects a deleted event whose inclusion proof was left in", () => {
    const b = copy(full)
    b.events.splice(6, 1)
    expect(sequences(verifyBundle(b, trusted).errors)).toEqual([8, 7])
  })

  it("detects swapped events", () => {
    const b = copy(partial)
    ;[b.events[1], b.events[2]] = [b.events[2], b.events[1]]
    expect(verifyBundle(b, trusted).errors).toEqual([
      { sequence: 7, reason: "sequence 7 follows 5; sequences must be contiguous and ascending" },
      { sequence: 6, reason: "sequence 6 follows 7; sequences must be contiguous and ascending" },
      { sequence: 8, reason: "sequence 8 follows 6; sequences must be contiguous and ascending" },
    ])
  })

  it("detects a wrong inclusion proof", () => {
    const b = copy(partial)
    b.inclusionProofs[3].path[1] = b.inclusionProofs[3].path[2]
    expect(verifyBundle(b, trusted).errors).toEqual([
      {
        sequence: 8,
        reason:
          "inclusion proof does not verify against the checkpoint's root (the leaf covers the event's hash, id, agentId, actor and occurredAt)",
      },
    ])
  })

  it.each([
    ["agentId", (e: any) => (e.agentId = "agt_2")],
    ["agentId removed", (e: any) => (e.agentId = null)],
    ["actor id", (e: any) => (e.actor.id = "key_2")],
    ["actor type", (e: any) => (e.actor.type = "system")],
    ["id", (e: any) => (e.id = "evt_forged")],
    ["occurredAt", (e: any) => (e.occurredAt = "2025-01-01T00:00:00.000Z")],
  ])("detects a changed %s, which the chain hash does not cover", (_, change) => {
    const b = copy(partial)
    change(b.events[1])
    const result = verifyBundle(b, trusted)
    expect(result.valid).toBe(false)
    expect(result.errors).toEqual([{ sequence: 6, reason: expect.stringMatching(/inclusion proof does not verify/) }])
  })

  it("detects an attributed bundle passed off as one of the old format, or with another attributedFrom", () => {
    const b = copy(partial)
    b.events[1].agentId = "agt_2"
    // The leaf form is not signed, but the root pins it: neither relabelling verifies.
    for (const relabel of [{ format: "agentgov.audit-bundle/v1" }, { attributedFrom: 7 }, { attributedFrom: 100 }]) {
      const result = verifyBundle({ ...b, ...relabel }, trusted)
      expect(result.valid, JSON.stringify(relabel)).toBe(false)
      expect(sequences(result.errors), JSON.stringify(relabel)).toContain(6)
    }
    const missing = copy(partial)
    delete missing.attributedFrom
    expect(verifyBundle(missing, trusted).errors).toContainEqual({
      reason: '"attributedFrom" missing or not a sequence (an integer ≥ 1)',
    })
  })

  it("detects an inclusion proof for another leaf or tree size", () => {
    const b = copy(partial)
    b.inclusionProofs[0].leafIndex = 5
    b.inclusionProofs[1].treeSize = 19
    b.inclusionProofs.pop()
    const errors = verifyBundle(b, trusted).errors
    expect(errors).toEqual([
      { sequence: 5, reason: "inclusion proof is for leaf index 5, not 4" },
      { sequence: 6, reason: "inclusion proof is for tree size 19, not the checkpoint's 20" },
      { sequence: 9, reason: "no inclusion proof" },
    ])
  })

  it("detects a changed checkpoint root by its signature", () => {
    const b = copy(partial)
    b.checkpoint.rootHash = EMPTY_ROOT
    const errors = verifyBundle(b, trusted).errors
    expect(errors[0]).toEqual({ reason: expect.stringMatching(/^checkpoint signature: the signature does not verify/) })
    expect(sequences(errors.slice(1))).toEqual([5, 6, 7, 8, 9])
  })

  it("detects a bundle signed by another key when the key is pinned", () => {
    const forger = makeSigner(signer.kid)
    const forged = makeBundle(chain, forger)
    expect(verifyBundle(forged).valid).toBe(true)
    expect(verifyBundle(forged, trusted).errors).toEqual([
      { reason: `checkpoint signature: the signature does not verify with key "${signer.kid}"` },
    ])
  })

  it("detects an unknown kid", () => {
    const b = copy(partial)
    b.checkpoint.kid = "ckp_unknown"
    expect(verifyBundle(b, trusted).errors).toEqual([
      { reason: 'checkpoint signature: no key with kid "ckp_unknown" in the JWKS' },
    ])
  })

  it("detects a head hash that is not the last event's", () => {
    const body = { ...full.checkpoint, headHash: chain[18]!.hash }
    const b = { ...full, checkpoint: signCheckpoint(body, signer.privateKey, signer.kid) }
    expect(verifyBundle(b, trusted).errors).toEqual([
      { sequence: 20, reason: "hash is not the checkpoint's head hash" },
    ])
  })

  it("detects events beyond the checkpoint", () => {
    const b = { ...partial, checkpoint: makeBundle(chain.slice(0, 8), signer).checkpoint }
    const errors = verifyBundle(b, trusted).errors
    expect(errors).toContainEqual({ sequence: 9, reason: "the checkpoint (tree size 8) does not cover it" })
    expect(errors.filter((e) => /does not cover/.test(e.reason))).toHaveLength(1)
  })

  it("detects a first event not linked to the genesis hash", () => {
    const b = copy(full)
    const e = b.events[0]
    e.prevHash = chain[1]!.hash
    e.hash = chainHash(e.prevHash, e.type, e.data, e.timestamp)
    expect(verifyBundle(b, trusted).errors).toContainEqual({
      sequence: 1,
      reason: "the first event's prevHash is not the genesis hash",
    })
  })

  it("detects an event of another workspace", () => {
    const b = copy(partial)
    b.events[0].workspaceId = "ws_other"
    expect(verifyBundle(b, trusted).errors).toEqual([{ sequence: 5, reason: "the event belongs to another workspace" }])
  })

  it("detects a checkpoint of another workspace", () => {
    const b = copy(partial)
    b.workspaceId = "ws_other"
    const errors = verifyBundle(b, trusted).errors
    expect(errors[0]).toEqual({ reason: "the checkpoint is for another workspace" })
    expect(sequences(errors.slice(1))).toEqual([5, 6, 7, 8, 9])
  })
})

describe("consistency proofs", () => {
  it("verifies a consistency proof from an older checkpoint", () => {
    const b = makeBundle(chain, signer, { from: 15, consistencyFrom: 13 })
    const result = verifyBundle(b, trusted)
    expect(result).toMatchObject({ valid: true, consistency: { fromSize: 13, fromRoot: b.consistency!.fromRoot } })
  })

  it("fails a consistency proof that does not lead to the checkpoint", () => {
    const b = copy(makeBundle(chain, signer, { from: 15, consistencyFrom: 13 }))
    b.consistency.fromRoot = EMPTY_ROOT
    const result = verifyBundle(b, trusted)
    expect(result.errors).toEqual([
      { reason: "consistency proof from tree size 13 does not verify against the checkpoint's root" },
    ])
    expect(result.consistency).toBeUndefined()

    b.consistency.toSize = 21
    expect(verifyBundle(b, trusted).errors).toEqual([
      { reason: "consistency proof is to tree size 21, not the checkpoint's 20" },
    ])
  })
})

describe("malformed input", () => {
  it.each([
    ["null", null, /not a JSON object/],
    ["a string", "bundle", /not a JSON object/],
    ["an array", [], /not a JSON object/],
    ["an empty object", {}, /"format" missing/],
    ["a bundle of another format", { ...partial, format: 1n }, /"format" missing or not a string/],
  ])("reports %s without throwing", (_, input, reason) => {
    const result = verifyBundle(input)
    expect(result.valid).toBe(false)
    expect(result.errors[0]!.reason).toMatch(reason)
  })

  it("names every missing or mistyped part", () => {
    const result = verifyBundle({ format: "agentgov.audit-bundle/v1" })
    expect(result).toMatchObject({ valid: false, checked: 0, checkpoint: null })
    expect(result.errors.map((e) => e.reason)).toEqual([
      '"workspaceId" missing or not a string',
      '"exportedAt" missing or not a string',
      "checkpoint is not an object",
      '"inclusionProofs" missing or not an array',
      '"events" missing or not an array',
    ])
  })

  it("reports mistyped fields of events, proofs, checkpoint and consistency", () => {
    const b = copy(makeBundle(chain, signer, { from: 15, consistencyFrom: 13 }))
    b.format = "agentgov.audit-bundle/v3"
    b.events[1].sequence = "16"
    b.events[2].data = [1]
    b.events[3] = 42
    b.inclusionProofs[0].path = ["XYZ"]
    b.checkpoint.treeSize = -1
    b.consistency.path = "nope"
    const result = verifyBundle(b)
    expect(result.valid).toBe(false)
    expect(result.errors).toEqual([
      { reason: 'unsupported format "agentgov.audit-bundle/v3"; expected "agentgov.audit-bundle/v2"' },
      { reason: 'checkpoint: "treeSize" missing or invalid' },
      { reason: 'inclusionProofs[0]: "path" missing or invalid' },
      { sequence: 15, reason: "no inclusion proof" },
      { reason: 'events[1]: "sequence" missing or invalid' },
      { sequence: 17, reason: 'events[2]: "data" missing or invalid' },
      { reason: "events[3] is not an object" },
      { sequence: 16, reason: "inclusion proof for an event that is not in the bundle" },
      { sequence: 17, reason: "inclusion proof for an event that is not in the bundle" },
      { sequence: 18, reason: "inclusion proof for an event that is not in the bundle" },
      { reason: 'consistency: "path" missing or invalid' },
    ])
  })

  it("reports a missing JWKS", () => {
    const b = copy(partial)
    delete b.jwks
    expect(verifyBundle(b).errors).toEqual([{ reason: "checkpoint signature: the JWKS has no keys array" }])
  })

  it("reports data that cannot be canonicalized instead of throwing", () => {
    const b = copy(partial)
    b.events[0].data = { n: Number.NaN }
    expect(verifyBundle(b, trusted).errors).toEqual([
      { sequence: 5, reason: "hash does not match the event's prevHash, type, data and timestamp" },
    ])
  })
})

describe("the API's response envelope", () => {
  const envelope = (data: unknown, extra: Record<string, unknown> = {}) => ({ ok: true, data, ...extra })

  it("verifies {ok: true, data: bundle} exactly like the bare bundle", () => {
    for (const bundle of [full, partial, makeBundle(chain, signer, { consistencyFrom: 7 })]) {
      expect(verifyBundle(envelope(bundle), trusted)).toEqual(verifyBundle(bundle, trusted))
      expect(verifyBundle(envelope(bundle))).toEqual(verifyBundle(bundle))
    }
    expect(verifyBundle(envelope(partial, { meta: { cursor: null } }), trusted).valid).toBe(true)
  })

  it("still reports a tampered bundle inside the envelope", () => {
    const b = copy(partial)
    b.events[2].data.step = 99
    const result = verifyBundle(envelope(b), trusted)
    expect(result.valid).toBe(false)
    expect(result).toEqual(verifyBundle(b, trusted))
    expect(sequences(result.errors)).toEqual([7])
  })

  it.each([
    ["ok is not true", { ok: "true", data: partial }],
    ["ok is false", { ok: false, data: partial }],
    ["data is not an object", { ok: true, data: JSON.stringify(partial) }],
    ["data is an array", { ok: true, data: [partial] }],
    ["the envelope is nested twice", envelope(envelope(partial))],
  ])("judges anything else as is: %s", (_, value) => {
    const result = verifyBundle(value, trusted)
    expect(result.valid).toBe(false)
    expect(result.errors).toContainEqual({
      reason: '"format" missing or not a string; expected "agentgov.audit-bundle/v2"',
    })
  })
})
