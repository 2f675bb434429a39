import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WorkspaceService } from "../src/index.ts"
import { dailyCapReached } from "../src/shared/dailyCap.ts"
import { firstIdAt } from "../src/shared/ids.ts"
import { DAY_MS, isoOf } from "../src/shared/time.ts"
import { type DomainTestRuntime, holdStatistics, makeDomainRuntime, rowsRead } from "./runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const HOUR_MS = 3_600_000

describe("the daily cap on invitations and takedown notices", () => {
  it("counts the day's rows at the boundary and reads the day's, not the workspace's whole history", async () => {
    const { workspace } = await env.run(
      WorkspaceService.use((s) => s.create(null, { name: `cap-${Date.now()}`, environment: "live" })),
    )
    const now = Date.now()
    // 3,000 invitations of the past months, one exactly a day old (out of the window: `created_at >`), and two of
    // the day, minted as PeopleService mints them: the id and created_at from one instant.
    const at = [
      ...Array.from({ length: 3_000 }, (_, i) => now - DAY_MS - (i + 1) * HOUR_MS),
      now - DAY_MS,
      now - 23 * HOUR_MS,
      now - HOUR_MS,
    ].sort((a, b) => a - b)
    // Ids with the time they were minted at written out: `newId` never goes back in time within a process (an id
    // for a past instant after a newer one takes the newer one's time), which would put every row in the window.
    const rows = at.map((ms, i) => ({
      id: `${firstIdAt("inv", ms)}${String(i).padStart(16, "0")}`,
      email: `p${i}@example.com`,
      token: `hash-${workspace.id}-${i}`,
      created: isoOf(ms),
    }))
    const count = (limit: number) =>
      env.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              // At this table's size the planner reads it whole; at a real workspace's history it takes the index,
              // as here.
              yield* sql`SET LOCAL enable_seqscan = off`
              const reached = yield* dailyCapReached(sql, {
                table: "invitations",
                kind: "invitations",
                workspaceId: workspace.id,
                limit,
                now,
              })
              return { reached, read: yield* rowsRead(sql, "invitations") }
            }),
          )
        }).pipe(Effect.orDie),
      )
    await env.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO invitations (id, workspace_id, email, role, token_hash, status, invited_by, expires_at,
            created_at)
          SELECT r.id, ${workspace.id}, r.email, 'member', r.token, 'revoked', 'usr_test', r.created::timestamptz,
            r.created::timestamptz
          FROM json_to_recordset(${JSON.stringify(rows)}::text::json) AS r(id text, email text, token text, created text)`
        yield* holdStatistics(sql, ["invitations"])
      }).pipe(Effect.orDie),
    )
    // Two in the window: under a cap of 3; at a cap of 2, until the older of the two leaves it (in an hour).
    const under = await count(3)
    expect(under.reached).toBeUndefined()
    const at2 = await count(2)
    expect(at2.reached).toBe(HOUR_MS / 1_000)
    // The 3,001 older rows are not read one by one (they were, through the workspace's index, before the id bound).
    expect(under.read).toBeLessThanOrEqual(10)
  })
})
