import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { C2PA_SEALED_AAD } from "../content/C2paSigner.ts"
import { secretAad } from "../webhooks/DeliveryQueue.ts"
import { unseal } from "./sealed.ts"

/**
 * Which of the store's sealed secrets `master` cannot open: the signing keys (none of those
 * that can still sign opens), the C2PA key, the newest webhook's secret. Empty when every kind the
 * store holds opens, or when it holds none yet (a new store).
 *
 * Read at start, before anything is written: a store started with another key (a restore without its
 * master.key, a second instance with another AGENTGOV_MASTER_KEY) would otherwise get a new master.key
 * and a new signing key written into it, and then die on the C2PA key or serve webhooks whose secrets
 * it cannot open.
 */
export const sealedNotOpening = (master: Buffer): Effect.Effect<ReadonlyArray<string>, never, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const failing: Array<string> = []
    const signing = yield* sql<{ kid: string; private_key: string }>`SELECT kid, private_key FROM signing_keys
      WHERE private_key IS NOT NULL`
    if (signing.length > 0 && !signing.some((k) => unseal(master, k.kid, k.private_key) !== undefined))
      failing.push("the signing keys")
    const c2pa = yield* sql<{ id: string; sealed_key: string }>`SELECT id, sealed_key FROM c2pa_credentials`
    if (c2pa.some((c) => unseal(master, C2PA_SEALED_AAD(c.id), c.sealed_key) === undefined))
      failing.push("the C2PA signing key")
    const webhooks = yield* sql<{ id: string; secret: string }>`SELECT id, secret FROM webhooks
      ORDER BY created_at DESC, id DESC LIMIT 1`
    if (webhooks.some((w) => unseal(master, secretAad(w.id), w.secret) === undefined))
      failing.push("the webhook secrets")
    return failing
  }).pipe(Effect.orDie)
