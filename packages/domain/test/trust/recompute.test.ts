import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Actor,
  AgentService,
  ApiKeyService,
  ApprovalService,
  AuditLog,
  Authenticator,
  TrustRecompute,
  TrustService,
  WorkspaceService,
} from "../../src/index.ts"
import { partyOf } from "../../src/trust/TrustRecompute.ts"
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

/** A component's detail, as GET /trust/score answers it at `ms`. */
const detail = async (actor: Actor, agentId: string, name: string, ms: number) => {
  const score = await run(
    at(
      ms,
      TrustService.use((s) => s.score(actor, agentId)),
    ),
  )
  return score.components.find((c) => c.name === name)!.detail
}

const counts = async (actor: Actor, agentId: string) =>
  (
    await run(
      at(
        T + DAY,
        TrustService.use((s) => s.reputation(actor, agentId)),
      ),
    )
  ).counts

/** Evidence as a pass before EVIDENCE_RULES 2 left it: no revision, no upheld enforcements kept. */
const asStoredBeforeRevisions = (agentId: string) =>
  run(
    SqlClient.SqlClient.use(
      (sql) => sql`UPDATE trust_scores SET evidence = evidence - 'rules' - 'upheld' WHERE agent_id = ${agentId}`,
    ),
  )

describe("what counts as evidence (second review)", () => {
  const ask = (actor: Actor, agentId: string, i: number, ms: number) =>
    run(
      at(
        ms,
        ApprovalService.use((s) => s.create(actor, { agentId, action: "payment.send", context: { i } })),
      ),
    )
  const decide = (actor: Actor, id: string, decision: "approved" | "denied", ms: number) =>
    run(
      at(
        ms,
        ApprovalService.use((s) => s.decide(actor, id, { decision })),
      ),
    )

  it("an approval decided by the party that asked for it counts neither way; another party's decision counts", async () => {
    const { actor, agentId } = await setup()
    // A second workspace key minted by the operator's: the same party (the operator) as the first.
    const second = await run(
      at(
        T,
        ApiKeyService.use((s) => s.create(actor, { name: "second", type: "workspace", scopes: ["approvals:manage"] })),
      ),
    )
    const sameOperator = await run(Authenticator.use((a) => a.authenticate(second.apiKey)))
    const person: Actor = { ...actor, credential: { type: "user", id: "usr_reviewer" }, userId: "usr_reviewer" }
    for (let i = 0; i < 4; i++) await decide(actor, (await ask(actor, agentId, i, T + 1_000)).id, "approved", T + 2_000)
    await decide(sameOperator, (await ask(actor, agentId, 10, T + 1_000)).id, "approved", T + 2_000)
    await decide(actor, (await ask(actor, agentId, 11, T + 1_000)).id, "denied", T + 2_000)
    // Asked by the operator, decided by a person signed in: oversight.
    await decide(person, (await ask(actor, agentId, 20, T + 1_000)).id, "approved", T + 2_000)
    await catchUp(actor.workspaceId, T + 3_000)
    expect(await detail(actor, agentId, "human_oversight", T + 3_000)).toMatchObject({ approved: 1, denied: 0 })
    expect(await counts(actor, agentId)).toMatchObject({ approvalsApproved: 1, approvalsSelfDecided: 6 })
  })

  it("evidence folded under earlier rules is folded again from the trail: an upheld enforcement overturned since costs nothing", async () => {
    const { actor, agentId } = await setup()
    const append = (ms: number, type: string, data: Record<string, unknown>) =>
      run(
        at(
          ms,
          AuditLog.use((a) => a.append(actor, [{ type, agentId, data: { agentId, ...data } }])),
        ),
      )
    await append(T + 1_000, "enforcement.created", { enforcementId: "enf_1", type: "throttle" })
    await append(T + 2_000, "enforcement.resolved", { enforcementId: "enf_1", resolution: "upheld" })
    // Self-approved before this revision: counted as oversight then.
    await decide(actor, (await ask(actor, agentId, 1, T + 2_500)).id, "approved", T + 2_600)
    await catchUp(actor.workspaceId, T + 3_000)
    await asStoredBeforeRevisions(agentId)
    // A later review overturns it: as stored before revisions, the upheld enforcement's cost was kept for good.
    await append(T + 4_000, "enforcement.resolved", { enforcementId: "enf_1", resolution: "overturned" })
    await catchUp(actor.workspaceId, T + 5_000)
    expect((await detail(actor, agentId, "enforcement_history", T + 5_000)).cost).toBe(0)
    expect(await counts(actor, agentId)).toMatchObject({ approvalsSelfDecided: 1 })
    expect((await counts(actor, agentId)).approvalsApproved).toBeUndefined()
    const changed = (await state(actor.workspaceId)).events.filter((e) => e.type === "trust.score.changed").at(-1)
    expect(changed!.data.reason).toMatch(/recomputed from the audit trail/)
  })

  it("the sweep folds again the evidence of agents no new event names", async () => {
    const { actor, agentId } = await setup()
    await decide(actor, (await ask(actor, agentId, 1, T + 1_000)).id, "approved", T + 2_000)
    await catchUp(actor.workspaceId, T + 3_000)
    await run(
      SqlClient.SqlClient.use(
        (sql) => sql`UPDATE trust_scores
            SET evidence = jsonb_set(evidence - 'rules', '{approved}', jsonb_build_object('v', 1, 't', ${T + 2_000}::float8))
            WHERE agent_id = ${agentId}`,
      ),
    )
    await run(
      at(
        T + 4_000,
        TrustRecompute.use((r) => r.sweep(actor.workspaceId)),
      ),
    )
    expect((await detail(actor, agentId, "human_oversight", T + 4_000)).approved).toBe(0)
  })

  it("an ingested event is its agent's by its agentId alone, and each day of activity counts once", async () => {
    // As POST /events/ingest stores them (its appender's clock is not the test's, so appended here directly).
    const ingest = (
      actor: Actor,
      events: ReadonlyArray<{ agentId?: string; data: Record<string, unknown> }>,
      ms: number,
    ) =>
      run(
        at(
          ms,
          AuditLog.use((a) =>
            a.append(
              actor,
              events.map((e) => ({ type: "task.done", ...e })),
            ),
          ),
        ),
      )
    const { actor, agentId } = await setup()
    const named = await run(
      at(
        T,
        AgentService.use((s) => s.register(actor, { name: "named-in-data" })),
      ),
    )
    // Two days, read by one pass: each day an event with agentId, and one naming the agent only in its data.
    for (let n = 0; n < 2; n++)
      await ingest(
        actor,
        [{ agentId, data: {} }, { data: { agentId } }, { data: { agentId: named.id } }],
        T + n * DAY + 3_600_000 * (n + 1),
      )
    await catchUp(actor.workspaceId, T + 2 * DAY)
    // 2^(−(1 − 1/24)/30 ·…) + …: two days, not three (the data-only event of the first day read after the second).
    expect((await detail(actor, agentId, "tenure_activity", T + 2 * DAY)).activeDays).toBeCloseTo(2, 0)
    expect((await detail(actor, agentId, "tenure_activity", T + 2 * DAY)).activeDays).toBeLessThan(2)
    expect((await detail(actor, named.id, "tenure_activity", T + 2 * DAY)).activeDays).toBe(0)
  })

  it("parties: a person through any credential, the agent for its own keys, the operator for keys made by none", () => {
    const keys = new Map([
      ["key_agent", { agentId: "agt_1", createdByUser: "usr_a" }],
      ["key_person", { agentId: null, createdByUser: "usr_a" }],
      ["key_operator", { agentId: null, createdByUser: null }],
    ])
    const grants = new Map([["grt_1", "usr_a"]])
    const party = (type: string, id: string | null) => partyOf({ type, id }, keys, grants)
    expect(party("user", "usr_a")).toBe("user:usr_a")
    expect(party("oauth", "grt_1")).toBe("user:usr_a")
    expect(party("api_key", "key_person")).toBe("user:usr_a")
    expect(party("sdk_token", "key_person")).toBe("user:usr_a")
    // An agent key minted by that person is the agent's, not the person's: the agent asked, the person decides.
    expect(party("api_key", "key_agent")).toBe("agent:agt_1")
    expect(party("api_key", "key_operator")).toBe("operator")
    expect(party("api_key", "key_gone")).toBe("key:key_gone")
    expect(party("system", null)).toBe("system")
  })
})
