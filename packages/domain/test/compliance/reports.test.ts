import type { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Authenticator, ComplianceService, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())
const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => env.run(effect)

describe("a report whose generation stops the process", () => {
  it("is failed once its last attempt's claim runs out, and never claimed again", async () => {
    const { apiKey } = await run(WorkspaceService.use((s) => s.create(null, { name: "crashing", environment: "live" })))
    const actor = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const insert = (id: string, attempts: number) =>
      run(
        SqlClient.SqlClient.use(
          (sql) => sql`INSERT INTO compliance_reports (id, workspace_id, framework, agent_id, period_from, period_to,
              status, requested_by, attempts, claimed_until, created_at)
            VALUES (${id}, ${actor.workspaceId}, 'soc2', NULL, now() - interval '2 days', now() - interval '1 day',
              'generating', 'test', ${attempts}, now() - interval '1 minute', now() - interval '1 hour')`,
        ),
      )
    // Claimed three times, and each time the process claiming it stopped before an outcome (its claim ran out).
    await insert("rpt_crashes_every_time", 3)
    // Claimed twice the same way: it has an attempt left.
    await insert("rpt_one_attempt_left", 2)
    const claimed = await run(ComplianceService.use((s) => s.generateNext))
    expect(claimed).toBe("rpt_one_attempt_left")
    expect(await run(ComplianceService.use((s) => s.generateNext))).toBeUndefined()
    const rows = await run(
      SqlClient.SqlClient.use(
        (sql) => sql<{ id: string; status: string; attempts: number; error: string | null }>`
          SELECT id, status, attempts, error FROM compliance_reports WHERE workspace_id = ${actor.workspaceId} ORDER BY id`,
      ),
    )
    expect(rows).toEqual([
      {
        id: "rpt_crashes_every_time",
        status: "failed",
        attempts: 3,
        error: "generation did not finish in 3 attempts (the process generating it stopped); request a new report",
      },
      { id: "rpt_one_attempt_left", status: "ready", attempts: 3, error: null },
    ])
  })
})
