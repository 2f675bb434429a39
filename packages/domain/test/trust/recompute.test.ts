import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Actor,
  AgentService,
  ApiKeyService,
  AuditLog,
  Authenticator,
  TrustRecompute,
  TrustService,
  WorkspaceService,
} from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => env.run(effect)

const T = Date.parse("2031-06-01T08:00:00.000Z")
const DAY = 86_400_000

let counter = 0
const setup = async () => {
  const { apiKey } = await run(
    at(
      T,
      WorkspaceService.use((s) => s.create(null, { name: `trust-${++counter}`, environment: "live" })),
    ),
  )
  const actor = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
  const agent = await run(
    at(
      T,
      AgentService.use((s) => s.register(actor, { name: "worker" })),
    ),
  )
  return { actor, agentId: agent.id }
}

const adjust = (actor: Actor, agentId: string, delta: number, ms = T) =>
  run(
    at(
      ms,
      TrustService.use((s) => s.adjust(actor, agentId, { delta, reason: "test" })),
    ),
  )
const catchUp = (workspaceId: string, ms = T) =>
  run(
    at(
      ms,
      TrustRecompute.use((r) => r.catchUp(workspaceId)),
    ),
  )

const state = (workspaceId: string) =>
  run(
    SqlClient.SqlClient.use((sql) =>
      Effect.gen(function* () {
        const cursor = yield* sql<{
          sequence: string
        }>`SELECT sequence FROM trust_cursors WHERE workspace_id = ${workspaceId}`
        const events = yield* sql<{ type: string; data: any }>`SELECT type, data FROM events
            WHERE workspace_id = ${workspaceId} AND (type LIKE 'trust.%' OR type LIKE 'badge.%') ORDER BY sequence`
        return { cursor: Number(cursor[0]?.sequence ?? 0), events }
      }),
    ),
  )

describe("the trust worker's passes", () => {
  it("a pass that fails before its commit leaves nothing behind; the next one announces once", async () => {
    const { actor, agentId } = await setup()
    await catchUp(actor.workspaceId)
    const before = await state(actor.workspaceId)
    await adjust(actor, agentId, 150)
    // The pass runs inside a transaction that then fails: a crash between the pass's work and its commit.
    const crashed = await run(
      SqlClient.SqlClient.use((sql) =>
        sql.withTransaction(
          Effect.gen(function* () {
            const pass = yield* at(
              T,
              TrustRecompute.use((r) => r.catchUp(actor.workspaceId)),
            )
            expect(pass.emitted).toBe(3)
            return yield* Effect.fail("crash" as const)
          }),
        ),
      ).pipe(Effect.flip),
    )
    expect(crashed).toBe("crash")
    const after = await state(actor.workspaceId)
    expect(after.cursor).toBe(before.cursor)
    expect(after.events.map((e) => e.type)).toEqual(before.events.map((e) => e.type).concat("trust.score.adjusted"))
    // Resumed from the cursor: the same events read again, each change announced once.
    await catchUp(actor.workspaceId)
    await catchUp(actor.workspaceId)
    const types = (await state(actor.workspaceId)).events.map((e) => e.type)
    expect(types.filter((t) => t === "trust.score.changed")).toHaveLength(1)
    expect(types.filter((t) => t === "trust.tier.upgraded")).toHaveLength(1)
    expect(types.filter((t) => t === "badge.earned")).toHaveLength(1)
  })

  it("the sweep announces what time alone changed, once", async () => {
    const { actor, agentId } = await setup()
    await adjust(actor, agentId, 90) // 490: probation
    await catchUp(actor.workspaceId)
    const base = (await state(actor.workspaceId)).events.length
    // Ninety days on, tenure has grown by 100 points: bronze, without any new evidence.
    const later = T + 90 * DAY
    const swept = await run(
      at(
        later,
        TrustRecompute.use((r) => r.sweep(actor.workspaceId)),
      ),
    )
    expect(swept.emitted).toBe(3)
    const events = (await state(actor.workspaceId)).events.slice(base)
    expect(events.map((e) => e.type)).toEqual(["trust.score.changed", "trust.tier.upgraded", "badge.earned"])
    expect(events[0]!.data).toMatchObject({ previousScore: 490, newScore: 590, newTier: "bronze" })
    expect(events[0]!.data.reason).toMatch(/^time:/)
    expect(
      (
        await run(
          at(
            later,
            TrustRecompute.use((r) => r.sweep(actor.workspaceId)),
          ),
        )
      ).emitted,
    ).toBe(0)
    const score = await run(
      at(
        later,
        TrustService.use((s) => s.score(actor, agentId)),
      ),
    )
    expect(score).toMatchObject({ score: 590, tier: "bronze" })
  })

  it("a pass over several days counts each active day once, as daily passes do", async () => {
    // Each day: an allowed guard decision and an event of the agent's own software. Read day by day, or all at once
    // by one pass (a worker back after days down, a first pass over a history): the same evidence.
    const day = async (actor: Actor, agentId: string, n: number) =>
      run(
        at(
          T + n * DAY + 3_600_000,
          AuditLog.use((a) =>
            a.append(actor, [
              { type: "policy.evaluated", agentId, data: { decision: "allow", action: "read.file" } },
              { type: "task.done", agentId, data: {} },
            ]),
          ),
        ),
      )
    const activeDays = async (actor: Actor, agentId: string) => {
      const score = await run(
        at(
          T + 3 * DAY,
          TrustService.use((s) => s.score(actor, agentId)),
        ),
      )
      return score.components.find((c) => c.name === "tenure_activity")!.detail.activeDays
    }
    const daily = await setup()
    const once = await setup()
    for (let n = 0; n < 3; n++) {
      await day(daily.actor, daily.agentId, n)
      await catchUp(daily.actor.workspaceId, T + n * DAY + 7_200_000)
      await day(once.actor, once.agentId, n)
    }
    await catchUp(once.actor.workspaceId, T + 3 * DAY)
    // Three days, decayed a little since: 2^(−(2 + 11/12)/30) + … ≈ 2.9.
    expect(await activeDays(daily.actor, daily.agentId)).toBeCloseTo(2.9, 1)
    expect(await activeDays(once.actor, once.agentId)).toBe(await activeDays(daily.actor, daily.agentId))
  })

  it("a change that no evidence but the agent's records caused names them, not time", async () => {
    const { actor, agentId } = await setup()
    await catchUp(actor.workspaceId)
    const base = (await state(actor.workspaceId)).events.length
    // An agent key that expires: identity 0 → 750, the score +75.
    await run(
      at(
        T + 1_000,
        ApiKeyService.use((s) =>
          s.create(actor, {
            name: "agent-key",
            type: "agent",
            agentId,
            scopes: ["guard:evaluate"],
            expiresAt: new Date(T + 30 * DAY).toISOString(),
          }),
        ),
      ),
    )
    await catchUp(actor.workspaceId, T + 2_000)
    const changed = (await state(actor.workspaceId)).events.slice(base).filter((e) => e.type === "trust.score.changed")
    expect(changed).toHaveLength(1)
    expect(changed[0]!.data).toMatchObject({ previousScore: 400, newScore: 475, reason: "evidence: apikey.created" })
  })
})
