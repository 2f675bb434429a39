import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApprovalRepo } from "../../src/approvals/ApprovalRepo.ts"
import { AgentService, ApprovalService, SCOPES, systemActor, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, holdStatistics, makeDomainRuntime, rowsRead } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const indexEntriesRead = (sql: SqlClient.SqlClient) => rowsRead(sql, "approvals")

/**
 * A workspace of 30 agents, and `insert` of `perAgent` approvals for each of them in SQL (`tag` keeps their ids apart,
 * `expiresInMs` from now; each agent's 20 bindings in turn).
 */
const thirtyAgents = (name: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const admin = systemActor("ws_none", "live", new Set(SCOPES))
    const { workspace } = yield* WorkspaceService.use((s) => s.create(admin, { name }))
    const actor = systemActor(workspace.id, "live", new Set(SCOPES))
    const agents: Array<string> = []
    for (let i = 0; i < 30; i++)
      agents.push((yield* AgentService.use((s) => s.register(actor, { name: `agent-${i}` }))).id)
    const now = Date.now()
    const insert = (status: string, perAgent: number, tag: string, expiresInMs = 3_600_000) =>
      sql`INSERT INTO approvals (id, workspace_id, agent_id, action, context, binding_hash, status, approvers,
            decided_at, expires_at, created_at)
          SELECT 'apr_' || ${tag} || '_' || a.n || '_' || g, ${workspace.id}, a.id, 'deploy', '{}'::jsonb,
            'binding-' || a.n || '-' || (g % 20), ${status}, '[]'::jsonb,
            CASE WHEN ${status} = 'pending' THEN NULL ELSE ${new Date(now - 3_600_000).toISOString()}::timestamptz END,
            ${new Date(now + expiresInMs).toISOString()}::timestamptz, ${new Date(now - 7_200_000).toISOString()}::timestamptz
          FROM unnest(${agents}::text[]) WITH ORDINALITY AS a(id, n), generate_series(1, ${perAgent}) AS g`
    return { sql, workspace, agents, now, insert }
  })

describe("the guard's reads of an agent's approvals, after statistics of a quiet spell", () => {
  it("read that agent's pending approvals and that binding's, not the workspace's or the agent's history", async () => {
    const result = await env.run(
      Effect.gen(function* () {
        const { sql, workspace, agents, insert } = yield* thirtyAgents("approval-plans")
        // The history every agent has when the statistics are taken, all decided; then 100 pending for each agent.
        yield* insert("approved", 200, "h")
        yield* holdStatistics(sql, ["approvals"], { vacuum: true })
        yield* insert("pending", 100, "p")
        const measured = yield* sql.withTransaction(
          Effect.gen(function* () {
            const before = yield* indexEntriesRead(sql)
            // What the guard asks for a call its rules send to approval: this agent already has 100 awaiting one.
            const ask = yield* ApprovalService.use((a) =>
              a.requestForGuard({
                workspaceId: workspace.id,
                agentId: agents[0]!,
                action: "deploy",
                context: { service: "api" },
                policyId: "pol_plans",
                ruleId: "r1",
              }),
            )
            return { ask, read: (yield* indexEntriesRead(sql)) - before }
          }),
        )
        // The next test's statistics must be a quiet spell's again: none of these pending then.
        yield* sql`DELETE FROM approvals WHERE workspace_id = ${workspace.id}`
        return measured
      }).pipe(Effect.orDie),
    )
    expect(result.ask).toEqual({ kind: "queue_full", pending: 100 })
    // The binding's standing request (none) and the agent's 100 pending approvals: about 100 index entries. Through
    // the workspace's pending approvals the count read 3,000, and the standing request read the agent's history.
    expect(result.read).toBeLessThan(300)
  })
})

describe("the expiry sweep, after statistics of a quiet spell", () => {
  it("reads a workspace's due approvals, not every pending one", async () => {
    const result = await env.run(
      Effect.gen(function* () {
        const { sql, workspace, agents, now, insert } = yield* thirtyAgents("approval-expiry-plans")
        // Every approval decided when the statistics are taken; then each agent has 100 awaiting a decision for
        // another week, and 2 whose time ran out a minute ago.
        yield* insert("approved", 200, "xh", -3_600_000)
        // And 2,000 agents deregistered long ago, with nothing pending.
        yield* sql`INSERT INTO agents (id, workspace_id, name, status, trust_score, created_at, updated_at, deregistered_at)
            SELECT 'agt_gone' || i, ${workspace.id}, 'gone-' || i, 'deregistered', 500, now(), now(), now()
            FROM generate_series(1, 2000) AS i`
        yield* holdStatistics(sql, ["approvals"], { vacuum: true })
        yield* holdStatistics(sql, ["agents"])
        yield* insert("pending", 100, "xp", 7 * 86_400_000)
        yield* insert("pending", 2, "xd", -60_000)
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const before = yield* indexEntriesRead(sql)
            const expired = yield* ApprovalRepo.use((r) => r.expire(workspace.id, new Date(now).toISOString()))
            const read = (yield* indexEntriesRead(sql)) - before
            // An agent deregistered before deregistration expired its approvals (as before the fourth pass): the
            // sweep looks for such agents every time it runs.
            yield* sql`UPDATE agents SET status = 'deregistered' WHERE id = ${agents[7]!}`
            const [approvalsBefore, agentsBefore] = [yield* indexEntriesRead(sql), yield* rowsRead(sql, "agents")]
            const stranded = yield* ApprovalRepo.use((r) => r.deregisteredWithPending)
            return {
              expired: expired.length,
              read,
              deregistered: agents[7]!,
              stranded: stranded.filter((s) => s.workspaceId === workspace.id).map((s) => s.agentId),
              strandedRead: {
                approvals: (yield* indexEntriesRead(sql)) - approvalsBefore,
                agents: (yield* rowsRead(sql, "agents")) - agentsBefore,
              },
            }
          }),
        )
      }).pipe(Effect.orDie),
    )
    expect(result.expired).toBe(60)
    // The 60 due approvals, each found and updated: a few hundred entries at most. When the update joined the due
    // ids to the table, it read all 3,060 pending approvals (and compared each with every due id): 6,120.
    expect(result.read).toBeLessThan(500)
    expect(result.stranded).toEqual([result.deregistered])
    // Each pending approval read once (3,000 after the sweep) and the 30 agents that have one probed by their key:
    // the 2,000 deregistered long ago are not read. Before, the agents were scanned once for each pending approval
    // (90,000 rows); with the deregistered agents as the array, all 2,060 agents were read.
    expect(result.strandedRead.agents).toBeLessThan(200)
    expect(result.strandedRead.approvals).toBeLessThan(3_200)
  })
})
