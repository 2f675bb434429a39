import { loadMigrations } from "@agentgov/db"
import { describe, expect, it } from "vitest"
import { storeBefore } from "../content/storeBefore.ts"

/**
 * Migration 0037 marks every grant that already holds a token as exchanged (at its creation: when the code was
 * exchanged is not recorded), so that the sweep of abandoned consents, which from then on reads only the grants
 * never exchanged, still never reads one that acts.
 */

const MIGRATION = "0037_oauth_grants_unexchanged"
const store = storeBefore(MIGRATION)

describe(`migration ${MIGRATION}`, () => {
  it("marks the grants holding a token as exchanged, at their creation; consents with a code or nothing stay unmarked", async () => {
    const sql = store.sql()
    await sql`INSERT INTO users (id, email, email_verified, created_at, updated_at)
      VALUES ('usr_1', 'a@example.com', true, now(), now())`
    await sql`INSERT INTO oauth_clients (id, workspace_id, name, redirect_uris, scopes, created_by, created_at)
      VALUES ('cli_1', 'ws_old', 'App', '["https://app.example/cb"]', '["agents:read"]', 'usr_1', now())`
    const grant = (id: string, created: string) =>
      sql`INSERT INTO oauth_grants (id, client_id, user_id, workspace_id, scopes, created_at)
        VALUES (${id}, 'cli_1', 'usr_1', 'ws_old', '["agents:read"]', ${created}::timestamptz)`
    await grant("grt_tokens", "2026-01-01T00:00:00.000Z")
    await grant("grt_revoked", "2026-02-01T00:00:00.000Z")
    await grant("grt_code", "2026-03-01T00:00:00.000Z")
    await grant("grt_nothing", "2026-04-01T00:00:00.000Z")
    await sql`UPDATE oauth_grants SET revoked_at = now() WHERE id = 'grt_revoked'`
    for (const [hash, grantId, kind] of [
      ["tok_a", "grt_tokens", "access"],
      ["tok_r", "grt_tokens", "refresh"],
      ["tok_rv", "grt_revoked", "refresh"],
    ])
      await sql`INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at, created_at)
        VALUES (${hash!}, ${grantId!}, ${kind!}, now(), now())`
    await sql`INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, expires_at)
      VALUES ('code_1', 'grt_code', 'https://app.example/cb', now())`

    await sql.unsafe(loadMigrations().find((m) => m.version === MIGRATION)!.sql)

    const rows = await sql<Array<{ id: string; exchanged_at: Date | null }>>`
      SELECT id, exchanged_at FROM oauth_grants ORDER BY id`
    expect(rows.map((r) => [r.id, r.exchanged_at?.toISOString() ?? null])).toEqual([
      ["grt_code", null],
      ["grt_nothing", null],
      ["grt_revoked", "2026-02-01T00:00:00.000Z"],
      ["grt_tokens", "2026-01-01T00:00:00.000Z"],
    ])
  })
})
