import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Actor, OAuthService, PeopleService, WorkspaceService } from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime, rowsRead } from "../runtime.ts"

// The sweep of abandoned grants deletes each with its code. Without an index on oauth_codes (grant_id), every grant
// deleted had PostgreSQL's foreign-key check scan all the codes of every grant (one full scan per grant deleted).
// The sweep still reads every grant and every live code once per run (nothing indexes "a grant with no token"): linear.

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const HOUR = 3_600_000

describe("the sweep of abandoned OAuth grants", () => {
  it("reads the codes of the grants it deletes, not every code once for each", async () => {
    const { workspace } = await t.run(
      WorkspaceService.use((s) => s.create(null, { name: "grant-plans", plan: "free" })),
    )
    const owner = await t.run(PeopleService.use((s) => s.ensureBootstrapOwner(workspace.id)))
    const actor = (await t.run(
      PeopleService.use((s) => s.actorOf(owner.id, workspace.id, { type: "user", id: owner.id })),
    )) as Actor
    const { client } = await t.run(
      OAuthService.use((s) =>
        s.createClient(actor, { name: "App", redirectUris: ["https://app.example/cb"], scopes: ["agents:read"] }),
      ),
    )
    const now = Date.now()
    const result = await t.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const grants = (tag: string, n: number, createdMs: number, codeExpiresMs: number) =>
          sql`WITH g AS (
                INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at)
                SELECT 'grt_' || ${tag} || i, ${client.id}, ${owner.id}, ${workspace.id}, '["agents:read"]'::jsonb,
                  ${new Date(createdMs).toISOString()}::timestamptz
                FROM generate_series(1, ${n}) AS i RETURNING id)
              INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, expires_at)
              SELECT 'code_' || id, id, 'https://app.example/cb', ${new Date(codeExpiresMs).toISOString()}::timestamptz
              FROM g`
        // 2,000 consents made just now, their codes still to be exchanged; 50 abandoned three hours ago.
        yield* grants("live", 2_000, now, now + 60_000)
        yield* grants("gone", 50, now - 3 * HOUR, now - 3 * HOUR + 60_000)
        yield* sql`ANALYZE oauth_grants, oauth_codes`
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const before = yield* rowsRead(sql, "oauth_codes")
            const purged = yield* at(
              now,
              OAuthService.use((s) => s.purgeAbandonedGrants),
            )
            return { purged, read: (yield* rowsRead(sql, "oauth_codes")) - before }
          }),
        )
      }).pipe(Effect.orDie),
    )
    expect(result.purged).toBe(50)
    // The live codes read once (the sweep's "has an unexpired code", hashed: 2,000), and each abandoned grant's code
    // deleted and checked through the codes' grant index: about 2,150. Without the index the foreign-key check of
    // each grant deleted scanned all 2,050 codes (104,100), and with "IN (SELECT …)" the codes' delete read them once
    // more (4,150 with the index).
    expect(result.read).toBeLessThan(3_000)
  })
})
