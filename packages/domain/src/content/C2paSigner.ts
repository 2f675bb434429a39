import { X509Certificate } from "node:crypto"
import { Clock, Context, Effect, Layer, Semaphore } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { MasterKey } from "../keys/SigningKeys.ts"
import { seal, unseal } from "../keys/sealed.ts"
import { isoOf } from "../shared/time.ts"
import { ContentSettings } from "./ContentSettings.ts"
import { type C2paCredential, credentialOf, issueCredential, pemCertificates } from "./c2pa.ts"

const ROW = "service"
/** What a C2PA credential's sealed key is bound to (its row). */
export const C2PA_SEALED_AAD = (id: string) => `c2pa:${id}`

export interface C2paSigning {
  readonly credential: C2paCredential
  /** The anchors a reader trusts our manifests by (the service's CA, or the operator chain's issuers). */
  readonly anchorsPem: string | undefined
  readonly source: "issued" | "operator"
  /** When the signing certificate stops being valid (ms): the operator's is not renewed by the service. */
  readonly validUntil: number
  /** From when it is valid (ms). */
  readonly validFrom: number
}

const DAY = 86_400_000
/**
 * The service's own signing certificate (2 years) is replaced by a new one, from a new CA, once less than this
 * is left of it. Manifests carry no timestamp (no timestamp authority offline), so c2pa-rs judges a manifest's
 * certificate at the time it reads it: renewed at half its life, what was signed validates a year at least. The
 * CA's key is not kept, so the new certificate comes with a new CA; the earlier CAs stay anchors, after it, in
 * the row's `ca_pem`.
 */
export const C2PA_RENEW_BEFORE_MS = 365 * DAY

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g
const pemBlocks = (pem: string): Array<string> => [...pem.matchAll(PEM_CERTIFICATE)].map((m) => m[0])
/** When the first certificate of a PEM bundle is valid, from and until (ms). */
const validityOf = (pem: string): { readonly validFrom: number; readonly validUntil: number } => {
  const cert = new X509Certificate(pemBlocks(pem)[0]!)
  return { validFrom: Date.parse(cert.validFrom), validUntil: Date.parse(cert.validTo) }
}

/**
 * The C2PA signing credential: the operator's (AGENTGOV_C2PA_CERT / _KEY, a PEM chain and key), or else the
 * service's own, issued by its own CA on first use and kept with the key sealed under the master key. Every
 * instance of a deployment reads the same row; the first to issue wins (the others read its row). The service's
 * own is renewed (C2PA_RENEW_BEFORE_MS) by the first instance to need it; the others read the renewed row when
 * their copy reaches the same point.
 */
export class C2paSigner extends Context.Service<C2paSigner, { readonly signing: Effect.Effect<C2paSigning> }>()(
  "@agentgov/domain/content/C2paSigner",
) {
  static readonly layer = Layer.effect(
    C2paSigner,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { key: master } = yield* MasterKey
      const settings = yield* ContentSettings

      const load = Effect.gen(function* () {
        if (settings.c2paCertPem !== undefined && settings.c2paKeyPem !== undefined) {
          const chain = pemCertificates(settings.c2paCertPem)
          const issuers = pemBlocks(settings.c2paCertPem).slice(1)
          if (chain.length === 0) return yield* Effect.die(new Error("AGENTGOV_C2PA_CERT holds no certificate"))
          return {
            signing: {
              credential: credentialOf(settings.c2paCertPem, settings.c2paKeyPem),
              anchorsPem: issuers.length > 0 ? issuers.join("\n") : undefined,
              source: "operator" as const,
              ...validityOf(settings.c2paCertPem),
            },
            renewAt: Number.POSITIVE_INFINITY,
          }
        }
        const read = sql<{ ca_pem: string; cert_pem: string; sealed_key: string }>`SELECT ca_pem, cert_pem, sealed_key
            FROM c2pa_credentials WHERE id = ${ROW}`
        const now = yield* Clock.currentTimeMillis
        let [row] = yield* read
        if (!row) {
          const issued = yield* Effect.promise(() => issueCredential("agentgov", new Date(now)))
          yield* sql`INSERT INTO c2pa_credentials (id, ca_pem, cert_pem, sealed_key, created_at)
              VALUES (${ROW}, ${issued.caPem}, ${issued.certPem}, ${seal(master, C2PA_SEALED_AAD(ROW), issued.keyPkcs8)},
                ${isoOf(now)}::timestamptz)
              ON CONFLICT (id) DO NOTHING`
          ;[row] = yield* read
        } else if (validityOf(row.cert_pem).validUntil - C2PA_RENEW_BEFORE_MS <= now) {
          // Renewed in place, only if the row is still the one read (another instance may have renewed it).
          const issued = yield* Effect.promise(() => issueCredential("agentgov", new Date(now)))
          yield* sql`UPDATE c2pa_credentials SET ca_pem = ${`${issued.caPem.trim()}\n${row.ca_pem.trim()}\n`},
                cert_pem = ${issued.certPem}, sealed_key = ${seal(master, C2PA_SEALED_AAD(ROW), issued.keyPkcs8)},
                created_at = ${isoOf(now)}::timestamptz
              WHERE id = ${ROW} AND cert_pem = ${row.cert_pem}`
          ;[row] = yield* read
        }
        const key = unseal(master, C2PA_SEALED_AAD(ROW), row!.sealed_key)
        if (!key)
          return yield* Effect.die(
            new Error(
              "the stored C2PA key does not open with this master key (instances must share AGENTGOV_MASTER_KEY)",
            ),
          )
        const validity = validityOf(row!.cert_pem)
        // The chain signed into manifests is the certificate and its CA (the first); every CA is an anchor.
        const [ca] = pemBlocks(row!.ca_pem)
        return {
          signing: {
            credential: credentialOf(`${row!.cert_pem}\n${ca}`, key),
            anchorsPem: row!.ca_pem,
            source: "issued" as const,
            ...validity,
          },
          renewAt: validity.validUntil - C2PA_RENEW_BEFORE_MS,
        }
      }).pipe(Effect.orDie)

      let current: { readonly signing: C2paSigning; readonly renewAt: number } | undefined
      const lock = Semaphore.makeUnsafe(1)
      const signing = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        if (current !== undefined && now < current.renewAt) return current.signing
        return yield* lock.withPermits(1)(
          Effect.gen(function* () {
            if (current !== undefined && (yield* Clock.currentTimeMillis) < current.renewAt) return current.signing
            current = yield* load
            return current.signing
          }),
        )
      })

      return C2paSigner.of({ signing })
    }),
  )
}
