import { Clock, Context, Effect, Layer } from "effect"
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
}

/**
 * The C2PA signing credential: the operator's (AGENTGOV_C2PA_CERT / _KEY, a PEM chain and key), or else the
 * service's own, issued by its own CA on first use and kept with the key sealed under the master key. Every
 * instance of a deployment reads the same row; the first to issue wins (the others read its row).
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
          const issuers = [
            ...settings.c2paCertPem.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g),
          ]
            .slice(1)
            .map((m) => m[0])
          if (chain.length === 0) return yield* Effect.die(new Error("AGENTGOV_C2PA_CERT holds no certificate"))
          return {
            credential: credentialOf(settings.c2paCertPem, settings.c2paKeyPem),
            anchorsPem: issuers.length > 0 ? issuers.join("\n") : undefined,
            source: "operator" as const,
          }
        }
        const read = sql<{ ca_pem: string; cert_pem: string; sealed_key: string }>`SELECT ca_pem, cert_pem, sealed_key
            FROM c2pa_credentials WHERE id = ${ROW}`
        let [row] = yield* read
        if (!row) {
          const now = yield* Clock.currentTimeMillis
          const issued = yield* Effect.promise(() => issueCredential("agentgov", new Date(now)))
          yield* sql`INSERT INTO c2pa_credentials (id, ca_pem, cert_pem, sealed_key, created_at)
              VALUES (${ROW}, ${issued.caPem}, ${issued.certPem}, ${seal(master, C2PA_SEALED_AAD(ROW), issued.keyPkcs8)},
                ${isoOf(now)}::timestamptz)
              ON CONFLICT (id) DO NOTHING`
          ;[row] = yield* read
        }
        const key = unseal(master, C2PA_SEALED_AAD(ROW), row!.sealed_key)
        if (!key)
          return yield* Effect.die(
            new Error(
              "the stored C2PA key does not open with this master key (instances must share AGENTGOV_MASTER_KEY)",
            ),
          )
        return {
          credential: credentialOf(`${row!.cert_pem}\n${row!.ca_pem}`, key),
          anchorsPem: row!.ca_pem,
          source: "issued" as const,
        }
      }).pipe(Effect.orDie)

      return C2paSigner.of({ signing: yield* Effect.cached(load) })
    }),
  )
}
