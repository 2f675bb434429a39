import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Actor,
  AgentService,
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
})
