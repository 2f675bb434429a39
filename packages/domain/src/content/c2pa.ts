import "reflect-metadata"
import { createPrivateKey, type KeyObject, sign, webcrypto } from "node:crypto"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { initSync, WasmBuilder, WasmReader } from "@contentauth/c2pa-wasm"
import * as x509 from "@peculiar/x509"
import { Encoder, Tag } from "cbor-x"

/**
 * C2PA manifests (decision D15) through c2pa-rs compiled to WebAssembly (`@contentauth/c2pa-wasm`), in
 * Node. Two things the package assumes of a browser are supplied here: it reads assets through
 * `FileReaderSync` (a worker API), so assets are handed over as {@link BytesBlob}s whose bytes a minimal
 * `FileReaderSync` returns; and its signer hands the claim to us to return a whole COSE_Sign1 (it passes
 * no certificates to c2pa-rs), so the COSE structure is built here: ES256 over the claim, the certificate
 * chain in the protected `x5chain` header, padded to the reserved size.
 */

class BytesBlob extends Blob {
  readonly held: Uint8Array
  constructor(held: Uint8Array) {
    super([held as Uint8Array<ArrayBuffer>])
    this.held = held
  }
  override slice(start?: number, end?: number): BytesBlob {
    return new BytesBlob(this.held.subarray(start ?? 0, end ?? this.held.length))
  }
}

let ready = false
const ensureWasm = () => {
  if (ready) return
  const g = globalThis as { FileReaderSync?: unknown }
  g.FileReaderSync ??= class {
    readAsArrayBuffer(blob: Blob): ArrayBuffer {
      if (!(blob instanceof BytesBlob)) throw new TypeError("only in-memory assets are read synchronously")
      // The blob's bytes alone, copied: `held` may be a view (a Buffer decoded into Node's shared pool, a
      // subarray), whose `.buffer` is the whole of what it views into, and Buffer's `slice` copies nothing.
      const { buffer, byteOffset, byteLength } = blob.held
      return buffer.slice(byteOffset, byteOffset + byteLength) as ArrayBuffer
    }
  }
  const require = createRequire(import.meta.url)
  initSync({ module: readFileSync(require.resolve("@contentauth/c2pa-wasm/c2pa.wasm")) })
  ready = true
}

// COSE wants plain CBOR: no tag 259 on maps, no typed-array tags on byte strings.
const cbor = new Encoder({ useRecords: false, useTag259ForMaps: false, tagUint8Array: false } as never)

/** A signing credential: the chain (signing certificate first, DER) and its private key. */
export interface C2paCredential {
  readonly chain: ReadonlyArray<Buffer>
  readonly key: KeyObject
}

const ES256 = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" }
const DAY = 86_400_000

/**
 * A new CA and a signing certificate issued by it (ECDSA P-256): the certificate carries what C2PA's
 * certificate profile asks (not a CA, digitalSignature, the emailProtection purpose, key identifiers).
 */
export const issueCredential = async (
  name: string,
  now: Date,
): Promise<{ readonly caPem: string; readonly certPem: string; readonly keyPkcs8: Buffer }> => {
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])
  const caKeys = (await webcrypto.subtle.generateKey(ES256, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Date.now().toString(16),
    name: `CN=${name} C2PA CA, O=${name}`,
    notBefore: now,
    notAfter: new Date(now.getTime() + 3650 * DAY),
    keys: caKeys,
    signingAlgorithm: ES256,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  })
  const keys = (await webcrypto.subtle.generateKey(ES256, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: (Date.now() + 1).toString(16),
    subject: `CN=${name} C2PA signer, O=${name}`,
    issuer: ca.subject,
    notBefore: now,
    notAfter: new Date(now.getTime() + 730 * DAY),
    signingKey: caKeys.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ES256,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.emailProtection], false),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  })
  return {
    caPem: ca.toString("pem"),
    certPem: cert.toString("pem"),
    keyPkcs8: Buffer.from(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey)),
  }
}

/** The DER certificates of a PEM bundle, in order. */
export const pemCertificates = (pem: string): Array<Buffer> =>
  [...pem.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)].map((m) =>
    Buffer.from(m[1]!.replace(/\s+/g, ""), "base64"),
  )

export const credentialOf = (chainPem: string, key: string | Buffer): C2paCredential => ({
  chain: pemCertificates(chainPem),
  key: typeof key === "string" ? createPrivateKey(key) : createPrivateKey({ key, format: "der", type: "pkcs8" }),
})

const RESERVE = 16_384

/** A COSE_Sign1 (RFC 9052) over the claim, detached payload, padded to exactly RESERVE bytes. */
const coseSign = (credential: C2paCredential, claim: Uint8Array): Uint8Array => {
  const protectedHeader = cbor.encode(
    new Map<number, unknown>([
      [1, -7],
      [33, credential.chain.length === 1 ? credential.chain[0] : [...credential.chain]],
    ]),
  )
  const toBeSigned = cbor.encode(["Signature1", protectedHeader, Buffer.alloc(0), Buffer.from(claim)])
  const signature = sign("sha256", toBeSigned, { key: credential.key, dsaEncoding: "ieee-p1363" })
  const build = (pad: number) =>
    cbor.encode(new Tag([protectedHeader, new Map([["pad", Buffer.alloc(pad)]]), null, signature], 18)) as Buffer
  let pad = Math.max(0, RESERVE - build(0).length)
  for (let i = 0; i < 4 && build(pad).length !== RESERVE; i++) pad += RESERVE - build(pad).length
  const out = build(pad)
  if (out.length > RESERVE) throw new Error(`the COSE signature needs ${out.length} bytes, more than ${RESERVE}`)
  return new Uint8Array(out)
}

/** The soft-binding algorithm name of our watermark, as the soft-binding assertion names it. */
export const SOFT_BINDING_ALG = "io.agentgov.watermark.dct.1"

export interface ManifestFacts {
  readonly title: string
  /** The workspace, the author of the work. */
  readonly author: string
  readonly contentId: string
  readonly watermarked: boolean
}

/**
 * Signs a C2PA manifest into the asset: a `c2pa.created` action (by a trained algorithmic model), the
 * workspace as author, the hard binding c2pa-rs computes over the asset (`c2pa.hash.data`), and, for a
 * watermarked asset, a soft-binding assertion that names the watermark and the id it carries.
 */
export const signManifest = async (
  asset: Uint8Array,
  mediaType: string,
  credential: C2paCredential,
  facts: ManifestFacts,
): Promise<Buffer> => {
  ensureWasm()
  const assertions: Array<{ label: string; data: unknown }> = [
    {
      label: "c2pa.actions.v2",
      data: {
        actions: [
          {
            action: "c2pa.created",
            digitalSourceType: "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia",
            softwareAgent: { name: "agentgov" },
          },
        ],
      },
    },
    {
      label: "stds.schema-org.CreativeWork",
      data: {
        "@context": "https://schema.org",
        "@type": "CreativeWork",
        author: [{ "@type": "Organization", name: facts.author }],
        identifier: facts.contentId,
      },
    },
  ]
  if (facts.watermarked)
    assertions.push({
      label: "c2pa.soft-binding",
      data: { alg: SOFT_BINDING_ALG, blocks: [{ scope: {}, value: facts.contentId }] },
    })
  const builder = WasmBuilder.fromJson(
    JSON.stringify({
      claim_generator_info: [{ name: "agentgov", version: "0.1.0" }],
      title: facts.title,
      format: mediaType,
      assertions,
    }),
  )
  try {
    const signer = {
      alg: "es256",
      reserveSize: RESERVE,
      sign: async (claim: Uint8Array) => coseSign(credential, claim),
    }
    const out = await builder.sign(signer as never, [], mediaType, new BytesBlob(asset))
    return Buffer.from(out)
  } finally {
    builder.free()
  }
}

export interface ManifestReading {
  readonly present: boolean
  /** `Valid` or `Trusted` (its signer chains to an anchor given). */
  readonly valid?: boolean
  readonly state?: string
  /** The failure codes c2pa-rs reported, e.g. `assertion.dataHash.mismatch`. */
  readonly failures?: ReadonlyArray<string>
  readonly author?: string
  readonly softBinding?: string
  /** The actions of the active manifest, e.g. `c2pa.created`. */
  readonly actions?: ReadonlyArray<string>
}

/**
 * c2pa-rs's settings for reading a candidate: the anchors, and no fetching. By default it follows an XMP
 * `dcterms:provenance` URL to a remote manifest (with the global `fetch`), so a scanned image made the server
 * request any address it named, loopback and metadata services included (review "content3"); a manifest only named
 * by URL now reads invalid (`RemoteManifestUrl`). OCSP fetching is off too (c2pa-rs's default, kept explicit).
 */
const readerSettings = (anchorsPem: string | undefined): string =>
  JSON.stringify({
    verify: { remote_manifest_fetch: false, ocsp_fetch: false },
    ...(anchorsPem === undefined ? {} : { trust: { trust_anchors: anchorsPem } }),
  })

/** Reads and validates the asset's C2PA manifest with c2pa-rs; anchors: PEM certificates to trust. */
export const readManifest = async (
  asset: Uint8Array,
  mediaType: string,
  anchorsPem: string | undefined,
): Promise<ManifestReading> => {
  ensureWasm()
  let reader: WasmReader
  try {
    reader = await WasmReader.fromBytes(mediaType, asset, readerSettings(anchorsPem))
  } catch (e) {
    const message = String(e)
    if (message.includes("JumbfNotFound") || message.includes("UnsupportedType")) return { present: false }
    return { present: true, valid: false, state: "Invalid", failures: [message.slice(0, 200)] }
  }
  try {
    const store = reader.manifestStore() as {
      validation_state?: string
      validation_results?: { activeManifest?: { failure?: Array<{ code: string }> } }
    }
    // Undefined when the store names an active manifest c2pa-rs could not load (an assertion it cannot decode):
    // the store's validation then says why.
    const manifest = reader.activeManifest() as
      | undefined
      | {
          assertions?: Array<{
            label: string
            data: {
              author?: Array<{ name?: string }>
              blocks?: Array<{ value?: string }>
              actions?: Array<{ action: string }>
            }
          }>
        }
    const state = manifest === undefined ? "Invalid" : (store.validation_state ?? "Invalid")
    const author = manifest?.assertions?.find((a) => a.label === "stds.schema-org.CreativeWork")?.data.author?.[0]?.name
    const softBinding = manifest?.assertions?.find((a) => a.label === "c2pa.soft-binding")?.data.blocks?.[0]?.value
    const actions = manifest?.assertions
      ?.filter((a) => a.label.startsWith("c2pa.actions"))
      .flatMap((a) => (a.data.actions ?? []).map((x) => x.action))
    const failures = (store.validation_results?.activeManifest?.failure ?? []).map((f) => f.code)
    return {
      present: true,
      valid: state === "Valid" || state === "Trusted",
      state,
      failures: manifest === undefined && failures.length === 0 ? ["manifest.missing"] : failures,
      ...(author !== undefined ? { author } : {}),
      ...(softBinding !== undefined ? { softBinding } : {}),
      ...(actions !== undefined ? { actions } : {}),
    }
  } finally {
    reader.free()
  }
}
