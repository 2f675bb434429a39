import { generateKeyPairSync, type KeyObject } from "node:crypto"
import {
  BUNDLE_FORMAT,
  BUNDLE_FORMAT_V1,
  type Bundle,
  type BundleEvent,
  chainHash,
  consistencyProof,
  eventLeaf,
  GENESIS_HASH,
  inclusionProof,
  type Jwks,
  rootOf,
  signCheckpoint,
} from "../src/index.ts"

export const WORKSPACE = "ws_01jtestworkspace"

export interface Signer {
  readonly kid: string
  readonly privateKey: KeyObject
  /** The public key as the server publishes it. */
  readonly jwks: Jwks
}

export const makeSigner = (kid = "ckp_2025_01"): Signer => {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519")
  return {
    kid,
    privateKey,
    jwks: { keys: [{ ...publicKey.export({ format: "jwk" }), kid, alg: "EdDSA", use: "sig" }] },
  }
}

/** The first `count` events of WORKSPACE's chain, as the API returns them. */
export const makeChain = (count: number): BundleEvent[] => {
  const events: BundleEvent[] = []
  let prevHash = GENESIS_HASH
  for (let sequence = 1; sequence <= count; sequence++) {
    const type = sequence % 3 === 0 ? "agent.verified" : "tool.invoked"
    const data = { step: sequence, tool: "search", args: { q: "cafe\u0301", limit: 10, ratio: 0.5 }, tags: ["a", null] }
    const timestamp = new Date(Date.UTC(2025, 0, 1, 12, 0, sequence, 250)).toISOString()
    const hash = chainHash(prevHash, type, data, timestamp)
    events.push({
      id: `evt_${sequence}`,
      type,
      timestamp,
      workspaceId: WORKSPACE,
      agentId: "agt_1",
      occurredAt: null,
      actor: { type: "api_key", id: "key_1" },
      data,
      sequence,
      prevHash,
      hash,
    })
    prevHash = hash
  }
  return events
}

export interface BundleOptions {
  /** First and last sequence exported; the whole chain by default. */
  readonly from?: number
  readonly to?: number
  /** Add a consistency proof from the tree of this size. */
  readonly consistencyFrom?: number
  /** The first sequence with an attributed leaf (1 by default); `"v1"` makes a bundle of the old format. */
  readonly attributedFrom?: number | "v1"
}

/** A bundle of part of `chain` under a checkpoint of the whole chain, signed by `signer`. */
export const makeBundle = (chain: readonly BundleEvent[], signer: Signer, options: BundleOptions = {}): Bundle => {
  const v1 = options.attributedFrom === "v1"
  const attributedFrom = v1 ? Number.POSITIVE_INFINITY : ((options.attributedFrom as number | undefined) ?? 1)
  const leaves = chain.map((e) => eventLeaf(e, attributedFrom))
  const treeSize = chain.length
  const checkpoint = signCheckpoint(
    {
      workspaceId: WORKSPACE,
      treeSize,
      rootHash: rootOf(leaves),
      headHash: chain.at(-1)?.hash ?? GENESIS_HASH,
      timestamp: "2025-01-02T00:00:00.000Z",
    },
    signer.privateKey,
    signer.kid,
  )
  const events = chain.slice((options.from ?? 1) - 1, options.to ?? treeSize)
  const m = options.consistencyFrom
  return {
    format: v1 ? BUNDLE_FORMAT_V1 : BUNDLE_FORMAT,
    workspaceId: WORKSPACE,
    ...(v1 ? {} : { attributedFrom }),
    exportedAt: "2025-01-02T00:00:01.000Z",
    events,
    checkpoint,
    inclusionProofs: events.map((e) => ({
      sequence: e.sequence,
      leafIndex: e.sequence - 1,
      treeSize,
      path: inclusionProof(leaves, e.sequence - 1, treeSize),
    })),
    ...(m === undefined
      ? {}
      : {
          consistency: {
            fromSize: m,
            fromRoot: rootOf(leaves.slice(0, m)),
            toSize: treeSize,
            path: consistencyProof(leaves, m, treeSize),
          },
        }),
    jwks: signer.jwks,
  }
}

/** A deep, mutable copy of a bundle to tamper with. */
export const copy = (bundle: Bundle): any => structuredClone(bundle)
