import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Actor,
  AgentService,
  ApiKeyService,
  Authenticator,
  type CreateEnforcement,
  EnforcementService,
  WorkspaceService,
} from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => env.run(effect)
const failure = <A, E>(effect: Effect.Effect<A, E, R>): Promise<E> => env.failure(effect)

const T = Date.parse("2031-06-01T08:00:00.000Z")

let counter = 0
/** A fresh workspace with its all-scope actor and one agent. */
const setup = async () => {
  const { apiKey } = await run(
    WorkspaceService.use((s) => s.create(null, { name: `enforcement-${++counter}`, environment: "live" })),
  )
  const actor = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
  const agentId = (await run(AgentService.use((s) => s.register(actor, { name: "worker" })))).id
  return { actor, agentId }
}

const issue = (actor: Actor, input: Omit<CreateEnforcement, "reason"> & { reason?: string }, ms = T) =>
  run(
    at(
      ms,
      EnforcementService.use((s) => s.create(actor, { reason: "r", ...input })),
    ),
  )
const statusOf = (actor: Actor, agentId: string) =>
  run(AgentService.use((s) => s.get(actor, agentId))).then((a) => a.status)
const sweep = (ms: number) =>
  run(
    at(
      ms,
      EnforcementService.use((s) => s.expireDue),
    ),
  )

const eventsOf = async (workspaceId: string) =>
  run(
    SqlClient.SqlClient.use(
      (sql) => sql<{ type: string; actor_type: string; actor_id: string | null; data: any }>`SELECT type, actor_type,
          actor_id, data FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
    ),
  )

describe("expiry, judged by the clock at the millisecond", () => {
  it("in force until expiresAt; from that instant expired, as of expiresAt, before and after the sweep", async () => {
    const { actor, agentId } = await setup()
    const e = await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    expect(e.expiresAt).toBe(new Date(T + 60_000).toISOString())
    const get = (ms: number) =>
      run(
        at(
          ms,
          EnforcementService.use((s) => s.get(actor, e.id)),
        ),
      )
    expect(await get(T + 59_999)).toEqual(e)
    const expired = { ...e, status: "expired", inForce: false, updatedAt: e.expiresAt }
    expect(await get(T + 60_000)).toEqual(expired)
    await sweep(T + 59_999)
    expect(await statusOf(actor, agentId)).toBe("suspended")
    await sweep(T + 60_000)
    expect(await statusOf(actor, agentId)).toBe("active")
    expect(await get(T)).toEqual(expired)
  })

  it("a later expiry set by PATCH holds; the old one no longer ends it", async () => {
    const { actor, agentId } = await setup()
    const e = await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    const extended = await run(
      at(
        T + 30_000,
        EnforcementService.use((s) => s.update(actor, e.id, { durationSeconds: 120 })),
      ),
    )
    expect(extended.expiresAt).toBe(new Date(T + 150_000).toISOString())
    await sweep(T + 60_000)
    expect(await statusOf(actor, agentId)).toBe("suspended")
    await sweep(T + 150_000)
    expect(await statusOf(actor, agentId)).toBe("active")
  })

  it("an upheld suspension stays in force until its expiry, then expires and reinstates", async () => {
    const { actor, agentId } = await setup()
    const e = await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    const upheld = await run(
      at(
        T + 1000,
        EnforcementService.use((s) => s.update(actor, e.id, { resolution: "upheld" })),
      ),
    )
    expect(upheld).toMatchObject({ status: "resolved", resolution: "upheld", inForce: true })
    await sweep(T + 60_000)
    expect(await statusOf(actor, agentId)).toBe("active")
    expect(
      await run(
        at(
          T + 60_000,
          EnforcementService.use((s) => s.get(actor, e.id)),
        ),
      ),
    ).toMatchObject({
      status: "expired",
      resolution: "upheld",
      inForce: false,
    })
  })

  it("two suspensions ending together reinstate once; the first expiry of the agent says so", async () => {
    const { actor, agentId } = await setup()
    const a = await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    const b = await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    await sweep(T + 60_000)
    expect(await statusOf(actor, agentId)).toBe("active")
    const resolved = (await eventsOf(actor.workspaceId)).filter((e) => e.type === "enforcement.resolved")
    expect(resolved.map((e) => [e.data.enforcementId, e.data.status, e.data.reinstated, e.actor_type])).toEqual([
      [a.id, "expired", true, "system"],
      [b.id, "expired", false, "system"],
    ])
  })

  it("a revocation in force keeps the agent suspended when a suspension expires", async () => {
    const { actor, agentId } = await setup()
    await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    await issue(actor, { agentId, type: "revocation" })
    await sweep(T + 60_000)
    expect(await statusOf(actor, agentId)).toBe("suspended")
  })

  it("a deregistered agent stays deregistered when its suspension is lifted", async () => {
    const { actor, agentId } = await setup()
    const e = await issue(actor, { agentId, type: "suspension" })
    await run(AgentService.use((s) => s.deregister(actor, agentId)))
    const lifted = await run(EnforcementService.use((s) => s.update(actor, e.id, { resolution: "overturned" })))
    expect(lifted.status).toBe("resolved")
    expect(await statusOf(actor, agentId)).toBe("deregistered")
    const [event] = (await eventsOf(actor.workspaceId)).filter((x) => x.type === "enforcement.resolved")
    expect(event!.data.reinstated).toBe(false)
  })

  it("throttleFor counts only throttles in force", async () => {
    const { actor, agentId } = await setup()
    await issue(actor, { agentId, type: "throttle", limitPerMinute: 5, durationSeconds: 60 })
    const lasting = await issue(actor, { agentId, type: "throttle", limitPerMinute: 20 })
    const throttle = (ms: number) =>
      run(
        at(
          ms,
          EnforcementService.use((s) => s.throttleFor(actor.workspaceId, agentId)),
        ),
      )
    expect(await throttle(T + 59_999)).toBe(5)
    expect(await throttle(T + 60_000)).toBe(20)
    await run(
      at(
        T + 61_000,
        EnforcementService.use((s) => s.update(actor, lasting.id, { resolution: "overturned" })),
      ),
    )
    expect(await throttle(T + 61_000)).toBeUndefined()
  })
})

describe("an agent read as of the clock: a lapsed suspension shows lifted before the sweep records it", () => {
  const agentAt = (actor: Actor, agentId: string, ms: number) =>
    run(
      at(
        ms,
        AgentService.use((s) => s.get(actor, agentId)),
      ),
    )
  const listedAt = (actor: Actor, status: "active" | "suspended", ms: number) =>
    run(
      at(
        ms,
        AgentService.use((s) => s.list(actor, { status })),
      ),
    ).then((page) => page.data.map((a) => a.id))

  it("get and list show it suspended until expiresAt, then active as of expiresAt; the sweep stores the same", async () => {
    const { actor, agentId } = await setup()
    const e = await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    const suspended = await agentAt(actor, agentId, T + 59_999)
    expect(suspended.status).toBe("suspended")
    expect(await listedAt(actor, "suspended", T + 59_999)).toEqual([agentId])
    expect(await listedAt(actor, "active", T + 59_999)).toEqual([])

    const lifted = await agentAt(actor, agentId, T + 60_000)
    expect(lifted).toEqual({ ...suspended, status: "active", updatedAt: e.expiresAt })
    expect(await listedAt(actor, "suspended", T + 60_000)).toEqual([])
    expect(await listedAt(actor, "active", T + 60_000)).toEqual([agentId])

    await sweep(T + 90_000)
    // Stored now: read at any time, the same agent, updated when the suspension lapsed, not when swept.
    expect(await agentAt(actor, agentId, T)).toEqual(lifted)
    expect(await statusOf(actor, agentId)).toBe("active")
  })

  it("the sweep dates the reinstatement by the suspension, not by a throttle that expired after it", async () => {
    const { actor, agentId } = await setup()
    const e = await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    await issue(actor, { agentId, type: "throttle", limitPerMinute: 5, durationSeconds: 70 })
    const lifted = await agentAt(actor, agentId, T + 90_000)
    expect(lifted).toMatchObject({ status: "active", updatedAt: e.expiresAt })
    await sweep(T + 90_000)
    expect(await agentAt(actor, agentId, T + 90_000)).toEqual(lifted)
  })

  it("a revocation in force keeps it suspended on read after a suspension lapses", async () => {
    const { actor, agentId } = await setup()
    await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    await issue(actor, { agentId, type: "revocation" })
    expect((await agentAt(actor, agentId, T + 120_000)).status).toBe("suspended")
    expect(await listedAt(actor, "suspended", T + 120_000)).toEqual([agentId])
  })

  it("an agent changed after its suspension lapsed is answered active, and keeps that change's time", async () => {
    const { actor, agentId } = await setup()
    await issue(actor, { agentId, type: "suspension", durationSeconds: 60 })
    const renamed = await run(
      at(
        T + 70_000,
        AgentService.use((s) => s.update(actor, agentId, { name: "renamed" })),
      ),
    )
    expect(renamed).toMatchObject({ name: "renamed", status: "active", updatedAt: new Date(T + 70_000).toISOString() })
    await sweep(T + 90_000)
    expect(await agentAt(actor, agentId, T + 90_000)).toEqual(renamed)
  })
})

describe("autoEnforce", () => {
  it("issues an enforcement naming the policy and rule, recorded as the system's", async () => {
    const { actor, agentId } = await setup()
    const e = await run(
      at(
        T,
        EnforcementService.use((s) =>
          s.autoEnforce({
            workspaceId: actor.workspaceId,
            agentId,
            type: "suspension",
            reason: "5 violations in 10 minutes",
            policyId: "pol_limits",
            ruleId: "too-many",
            durationSeconds: 600,
          }),
        ),
      ),
    )
    expect(e).toMatchObject({
      type: "suspension",
      status: "active",
      policyId: "pol_limits",
      ruleId: "too-many",
      expiresAt: new Date(T + 600_000).toISOString(),
    })
    expect(await statusOf(actor, agentId)).toBe("suspended")
    const events = (await eventsOf(actor.workspaceId)).slice(-2)
    expect(events.map((x) => [x.type, x.actor_type])).toEqual([
      ["enforcement.created", "system"],
      ["agent.suspended", "system"],
    ])
    expect(events[0]!.data).toEqual({
      enforcementId: e.id,
      agentId,
      type: "suspension",
      status: "active",
      reason: "5 violations in 10 minutes",
      policyId: "pol_limits",
      ruleId: "too-many",
      expiresAt: e.expiresAt,
    })
  })

  it("records the caller's actor when given one", async () => {
    const { actor, agentId } = await setup()
    await run(
      EnforcementService.use((s) =>
        s.autoEnforce({
          workspaceId: actor.workspaceId,
          agentId,
          type: "warning",
          reason: "r",
          policyId: "p",
          ruleId: "r",
          actor,
        }),
      ),
    )
    const [last] = (await eventsOf(actor.workspaceId)).slice(-1)
    expect([last!.type, last!.actor_type, last!.actor_id]).toEqual([
      "enforcement.created",
      "api_key",
      actor.credential.id,
    ])
  })

  it("joins the caller's transaction: rolled back, no enforcement, the agent active, its keys working", async () => {
    const { actor, agentId } = await setup()
    const key = await run(
      ApiKeyService.use((s) => s.create(actor, { name: "k", type: "agent", agentId, scopes: ["agents:read"] })),
    )
    const before = (await eventsOf(actor.workspaceId)).length
    const rolledBack = SqlClient.SqlClient.use((sql) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* EnforcementService.use((s) =>
            s.autoEnforce({
              workspaceId: actor.workspaceId,
              agentId,
              type: "revocation",
              reason: "r",
              policyId: "p",
              ruleId: "r",
            }),
          )
          return yield* Effect.fail("abort" as const)
        }),
      ),
    )
    expect(await run(Effect.flip(rolledBack))).toBe("abort")
    expect(await statusOf(actor, agentId)).toBe("active")
    expect((await run(Authenticator.use((a) => a.authenticate(key.apiKey)))).agentId).toBe(agentId)
    expect((await run(EnforcementService.use((s) => s.list(actor, { status: ["all"] })))).data).toEqual([])
    expect((await eventsOf(actor.workspaceId)).length).toBe(before)
  })

  it("refuses a missing or deregistered agent and a throttle without a limit", async () => {
    const { actor, agentId } = await setup()
    const auto = (over: Partial<Parameters<EnforcementService["Service"]["autoEnforce"]>[0]>) =>
      failure(
        EnforcementService.use((s) =>
          s.autoEnforce({
            workspaceId: actor.workspaceId,
            agentId,
            type: "suspension",
            reason: "r",
            policyId: "p",
            ruleId: "r",
            ...over,
          }),
        ),
      )
    expect(await auto({ type: "throttle" })).toMatchObject({ _tag: "InvalidInput", field: "limitPerMinute" })
    expect(await auto({ agentId: "agt_missing" })).toMatchObject({ _tag: "AgentNotFound" })
    await run(AgentService.use((s) => s.deregister(actor, agentId)))
    expect(await auto({})).toMatchObject({ _tag: "AgentDeregistered" })
  })
})

describe("a deleted workspace", () => {
  it("gets no enforcement.resolved from the sweep after workspace.deleted: its trail ends there", async () => {
    const { actor, agentId } = await setup()
    const { apiKey } = await run(
      WorkspaceService.use((s) =>
        s.create(null, { name: `enforcement-admin-${++counter}`, environment: "live" }, undefined, { adminKey: true }),
      ),
    )
    const admin = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const T2 = T + 10 * 86_400_000
    await issue(actor, { agentId, type: "suspension", durationSeconds: 60 }, T2)
    await issue(actor, { agentId, type: "throttle", limitPerMinute: 5, durationSeconds: 60 }, T2)
    await run(
      at(
        T2 + 1000,
        WorkspaceService.use((s) => s.remove(admin, actor.workspaceId)),
      ),
    )
    await sweep(T2 + 61_000)
    const types = (await eventsOf(actor.workspaceId)).map((e) => e.type)
    expect(types.at(-1)).toBe("workspace.deleted")
    expect(types).not.toContain("enforcement.resolved")
    // Recorded as they read (expired), so that later sweeps no longer find them.
    const stored = await run(
      SqlClient.SqlClient.use(
        (sql) => sql<{ status: string }>`SELECT status FROM enforcements WHERE workspace_id = ${actor.workspaceId}`,
      ),
    )
    expect(stored.map((r) => r.status)).toEqual(["expired", "expired"])
  })
})
