/**
 * Signed checkpoints: the workspace's Merkle root and chain head at a tree
 * size, signed with Ed25519 by a key the server publishes as a JWK.
 */
import { createPublicKey, type JsonWebKey, type KeyObject, sign, verify } from "node:crypto"
import { canonicalize } from "./jcs.ts"

/** The signed fields of a checkpoint. */
export interface CheckpointBody {
  readonly workspaceId: string
  /** Number of events in the tree. */
  readonly treeSize: number
  /** MTH of the first `treeSize` event leaves, lowercase hex. */
  readonly rootHash: string
  /** Chain hash of event `treeSize` (GENESIS_HASH when the tree is empty). */
  readonly headHash: string
  /** ISO 8601 time the checkpoint was made. */
  readonly timestamp: string
}

export interface Checkpoint extends CheckpointBody {
  /** `kid` of the signing key in the JWKS. */
  readonly kid: string
  /** base64url Ed25519 signature over `checkpointPayload`. */
  readonly signature: string
}

/** A public JSON Web Key; checkpoint keys are Ed25519: `kty: "OKP"`, `crv: "Ed25519"`, `x`, and a `kid`. */
export interface Jwk {
  readonly kty?: string
  readonly crv?: string
  readonly x?: string
  readonly kid?: string
  readonly alg?: string
  readonly use?: string
}

export interface Jwks {
  readonly keys: readonly Jwk[]
}

export type CheckpointVerification = { readonly ok: true } | { readonly ok: false; readonly reason: string }

const PAYLOAD_PREFIX = "agentgov-checkpoint/v1\n"

/** The signed bytes: UTF-8 of "agentgov-checkpoint/v1\n" + JCS of the five body fields. */
export const checkpointPayload = (c: CheckpointBody): Buffer => {
  const { workspaceId, treeSize, rootHash, headHash, timestamp } = c
  return Buffer.from(PAYLOAD_PREFIX + canonicalize({ workspaceId, treeSize, rootHash, headHash, timestamp }), "utf8")
}

/** Signs a checkpoint body with an Ed25519 private key published under `kid`. */
export const signCheckpoint = (body: CheckpointBody, privateKey: KeyObject, kid: string): Checkpoint => {
  const { workspaceId, treeSize, rootHash, headHash, timestamp } = body
  const signature = sign(null, checkpointPayload(body), privateKey).toString("base64url")
  return { workspaceId, treeSize, rootHash, headHash, timestamp, kid, signature }
}

const BASE64URL = /^[A-Za-z0-9_-]*$/

/** Checks the checkpoint's signature with the key of its `kid` in `jwks`, which must be an Ed25519 JWK. */
export const verifyCheckpoint = (checkpoint: Checkpoint, jwks: Jwks): CheckpointVerification => {
  if (!Array.isArray(jwks?.keys)) return { ok: false, reason: "the JWKS has no keys array" }
  const jwk = jwks.keys.find((k) => k?.kid === checkpoint.kid)
  if (!jwk) return { ok: false, reason: `no key with kid ${JSON.stringify(checkpoint.kid)} in the JWKS` }
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519") {
    return { ok: false, reason: `key ${JSON.stringify(checkpoint.kid)} is not an Ed25519 (OKP) key` }
  }
  if (typeof checkpoint.signature !== "string" || !BASE64URL.test(checkpoint.signature)) {
    return { ok: false, reason: "the signature is not base64url" }
  }
  try {
    const key = createPublicKey({ key: jwk as JsonWebKey, format: "jwk" })
    const signature = Buffer.from(checkpoint.signature, "base64url")
    return verify(null, checkpointPayload(checkpoint), key, signature)
      ? { ok: true }
      : { ok: false, reason: `the signature does not verify with key ${JSON.stringify(checkpoint.kid)}` }
  } catch (e) {
    return { ok: false, reason: `cannot verify with key ${JSON.stringify(checkpoint.kid)}: ${(e as Error).message}` }
  }
}
