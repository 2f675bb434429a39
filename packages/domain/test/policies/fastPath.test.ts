import { randomUUID } from "node:crypto"
import { Database } from "@agentgov/db"
import { Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import {
  type Actor,
  AgentService,
  ApprovalService,
  Authenticator,
  EnforcementService,
  EventService,
  type GuardRequestInput,
  type GuardResult,
  GuardService,
  type IdempotencyRequest,
  PolicyService,
  Replayed,
  WorkspaceService,
} from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

/**
 * The guard's fast path (`evaluateNow`, no runtime per call) against its Effect path (`evaluate`): it takes
 * a call only when everything it needs is at hand, answers exactly what `evaluate` answers, records the same
 * events, and hands the rest (approvals, automatic enforcement) to the Effect path's steps.
 */

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

/**
 * Waits until this process has heard every notification committed so far: one LISTEN connection delivers
 * them in commit order, so a token notified now arrives after them. Until then a writer's notification
 * (an agent registered, a policy created) may still drop what the guard loaded, and the fast path declines.
 */
const heardAll = () =>
  env.run(
    Database.use((db) =>
      Effect.promise(async () => {
        const token = randomUUID()
        let heard!: () => void
        const arrived = new Promise<void>((resolve) => {
          heard = resolve
        })
        const stop = await db.listen("fast_path_test", (payload) => payload === token && heard())
        await db.notify("fast_path_test", token)
        await arrived
        await stop()
      }),
    ),
  )

let counter = 0
const setup = async () => {
  const { apiKey } = await env.run(
    WorkspaceService.use((s) => s.create(null, { name: `fast-${++counter}`, environment: "live" })),
  )
  const actor = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
  const agentId = (await env.run(AgentService.use((s) => s.register(actor, { name: "worker" })))).id
  await env.run(
    PolicyService.use((s) =>
      s.create(actor, {
        name: "p",
        rules: [
          { id: "no-delete", effect: "deny", actions: ["files.delete"] },
          {
            id: "small",
            effect: "allow",
            actions: ["pay.*"],
            when: { all: [{ field: "context.amount", op: "lt", value: 100 }] },
          },
          {
            id: "ask",
            effect: "require_approval",
            actions: ["pay.*"],
            when: { all: [{ field: "context.amount", op: "gte", value: 100 }] },
          },
        ],
      }),
    ),
  )
  await env.run(
    PolicyService.use((s) =>
      s.create(actor, {
        name: "m",
        mode: "monitor",
        rules: [{ id: "watch", effect: "deny", actions: ["files.read"] }],
      }),
    ),
  )
  const guard = await env.run(GuardService.use(Effect.succeed))
  await heardAll()
  await env.run(guard.evaluate(actor, { agentId, action: "warm.up" }))
  return { actor, agentId, guard }
}

const now = (
  guard: GuardService["Service"],
  actor: Actor,
  input: GuardRequestInput,
  idempotency?: IdempotencyRequest,
) => {
  const pending = guard.evaluateNow(actor, input, idempotency)
  if (pending === undefined) throw new Error(`the fast path declined ${JSON.stringify(input)}`)
  return answerOf(pending)
}

const answerOf = <A, E>(pending: Promise<Exit.Exit<A, E>>) =>
  pending.then((exit) => {
    if (Exit.isFailure(exit)) throw new Error(`the fast path failed: ${String(exit.cause)}`)
    return exit.value
  })

const withoutEvent = (r: GuardResult | Replayed) => {
  if (r instanceof Replayed) throw new Error("replayed")
  const { eventId: _, ...rest } = r
  return rest
}

/** The types of the events one decision recorded: its policy.evaluated and those after it, up to the next one. */
const typesOf = async (actor: Actor, eventId: string) => {
  const ascending = (await env.run(EventService.use((s) => s.list(actor, { limit: 50 })))).data.toReversed()
  const first = ascending.findIndex((e) => e.id === eventId)
  expect(first).toBeGreaterThanOrEqual(0)
  const next = ascending.findIndex((e, i) => i > first && e.type === "policy.evaluated")
  return ascending.slice(first, next === -1 ? undefined : next).map((e) => e.type)
}

describe("the guard's fast path", () => {
  it("declines until the agent, the policies and the throttle are known here, then answers", async () => {
    const { apiKey } = await env.run(
      WorkspaceService.use((s) => s.create(null, { name: `fast-cold-${++counter}`, environment: "live" })),
    )
    const actor = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const agentId = (await env.run(AgentService.use((s) => s.register(actor, { name: "cold" })))).id
    const guard = await env.run(GuardService.use(Effect.succeed))
    expect(guard.evaluateNow(actor, { agentId, action: "a.b" })).toBeUndefined()
    await heardAll()
    await env.run(guard.evaluate(actor, { agentId, action: "a.b" }))
    expect(guard.evaluateNow(actor, { agentId, action: "a.b" })).toBeDefined()
  })

  it("answers as evaluate does, and records the same events", async () => {
    const { actor, agentId, guard } = await setup()
    const requests: Array<GuardRequestInput> = [
      { agentId, action: "files.delete" },
      { agentId, action: "files.read" },
      { agentId, action: "pay.card", context: { amount: 5 } },
      { agentId, action: "nothing.matches" },
    ]
    for (const input of requests) {
      const slow = (await env.run(guard.evaluate(actor, input))) as GuardResult
      const fast = (await now(guard, actor, input)) as GuardResult
      expect(withoutEvent(fast)).toEqual(withoutEvent(slow))
      expect(fast.eventId).not.toBe(slow.eventId)
      expect(await typesOf(actor, fast.eventId)).toEqual(await typesOf(actor, slow.eventId))
    }
    const verification = await env.run(EventService.use((s) => s.verify(actor, "api")))
    expect(verification.valid).toBe(true)
  })

  it("leaves refusals to evaluate: another agent than the bound one, an unknown agent, a context too large", async () => {
    const { actor, agentId, guard } = await setup()
    const bound: Actor = { ...actor, agentId }
    expect(guard.evaluateNow(bound, { agentId: "agt_other", action: "a.b" })).toBeUndefined()
    expect(guard.evaluateNow(actor, { agentId: "agt_unknown", action: "a.b" })).toBeUndefined()
    expect(guard.evaluateNow(actor, { action: "a.b" })).toBeUndefined()
    const big = { blob: "x".repeat(70_000) }
    expect(guard.evaluateNow(actor, { agentId, action: "a.b", context: big })).toBeUndefined()
    // Bound to the agent, the call need not name it.
    expect(((await now(guard, bound, { action: "files.delete" })) as GuardResult).decision).toBe("deny")
  })

  it("declines for a suspended agent, so that evaluate answers AGENT_SUSPENDED", async () => {
    const { actor, agentId, guard } = await setup()
    await env.run(EnforcementService.use((s) => s.create(actor, { agentId, type: "suspension", reason: "r" })))
    expect(guard.evaluateNow(actor, { agentId, action: "a.b" })).toBeUndefined()
    const slow = (await env.run(guard.evaluate(actor, { agentId, action: "a.b" }))) as GuardResult
    expect(slow.reasons.map((r) => r.code)).toContain("AGENT_SUSPENDED")
    // Now known here as suspended: still evaluate's, which checks the suspension is in force.
    expect(guard.evaluateNow(actor, { agentId, action: "a.b" })).toBeUndefined()
  })

  it("never answers from policies a change replaced", async () => {
    const { actor, agentId, guard } = await setup()
    expect(((await now(guard, actor, { agentId, action: "files.delete" })) as GuardResult).decision).toBe("deny")
    const policy = (await env.run(PolicyService.use((s) => s.list(actor, {})))).data.find((p) => p.name === "p")
    await env.run(
      PolicyService.use((s) => s.update(actor, policy!.id, { rules: [{ id: "r", effect: "allow", actions: ["*"] }] })),
    )
    // The writer dropped the compiled policies at commit: the fast path declines until evaluate loads them.
    expect(guard.evaluateNow(actor, { agentId, action: "files.delete" })).toBeUndefined()
    // The change's own notification would drop a copy loaded before it arrives (on PostgreSQL): wait for it.
    await heardAll()
    const reloaded = (await env.run(guard.evaluate(actor, { agentId, action: "files.delete" }))) as GuardResult
    expect(reloaded.decision).toBe("allow")
    expect(((await now(guard, actor, { agentId, action: "files.delete" })) as GuardResult).decision).toBe("allow")
  })

  it("keeps answering across its copies' expiry: each is reloaded in the background before it expires", async () => {
    // Only Date is faked, and from before the copies are first loaded, so that each copy's age is what this test
    // sets: the statements and the waits below run on real timers.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() })
    try {
      const start = Date.now()
      const { actor, agentId, guard } = await setup()
      const call = { agentId, action: "files.read" }
      expect(guard.evaluateNow(actor, call)).toBeDefined()
      /** At `dueAt` (past 4/5 of a copy's life) a call starts the reload; at `expiredAt` only the reload holds it. */
      const across = async (dueAt: number, expiredAt: number) => {
        vi.setSystemTime(start + dueAt)
        const burst = Array.from({ length: 16 }, () => guard.evaluateNow(actor, call))
        expect(burst.every((p) => p !== undefined)).toBe(true)
        await Promise.all(burst.map((p) => answerOf(p!)))
        vi.setSystemTime(start + expiredAt)
        // Until the reload lands the fast path declines (counting nothing); with no reload it never would answer.
        let answered = guard.evaluateNow(actor, call)
        for (let i = 0; answered === undefined && i < 500; i++) {
          await new Promise((resolve) => setTimeout(resolve, 20))
          answered = guard.evaluateNow(actor, call)
        }
        expect(answered).toBeDefined()
        await answerOf(answered!)
      }
      // The throttle's copy lives 5 s, the agent's and the policies' 30 s (due at 24 s, reloaded at 27 s).
      for (const [due, expired] of [
        [4_500, 5_500],
        [9_000, 10_000],
        [13_500, 14_500],
        [18_000, 19_000],
        [22_500, 23_500],
      ])
        await across(due!, expired!)
      await across(27_000, 31_000)
    } finally {
      vi.useRealTimers()
    }
  })

  it("replays a retry under the same Idempotency-Key, refuses the key with another request", async () => {
    const { actor, agentId, guard } = await setup()
    const key = (requestHash: string): IdempotencyRequest => ({
      key: "retry-1",
      operation: "guard.evaluate",
      requestHash,
      render: (value) => ({ status: 200, body: JSON.stringify(value) }),
    })
    const first = (await now(guard, actor, { agentId, action: "files.delete" }, key("h1"))) as GuardResult
    const again = await now(guard, actor, { agentId, action: "files.delete" }, key("h1"))
    expect(again).toBeInstanceOf(Replayed)
    expect(JSON.parse((again as Replayed).body)).toEqual(first)
    const other = await guard.evaluateNow(actor, { agentId, action: "files.delete" }, key("h2"))
    expect(other && Exit.isFailure(other)).toBe(true)
  })

  it("stores under the key the very answer it returns, so that the transport renders it once", async () => {
    const { actor, agentId, guard } = await setup()
    const keyed = (name: string) => {
      const stored: Array<unknown> = []
      const request: IdempotencyRequest = {
        key: name,
        operation: "guard.evaluate",
        requestHash: "h",
        render: (value) => {
          stored.push(value)
          return { status: 200, body: JSON.stringify(value) }
        },
      }
      return { request, stored }
    }
    const fast = keyed("same-1")
    const answered = await now(guard, actor, { agentId, action: "files.delete" }, fast.request)
    expect(fast.stored).toHaveLength(1)
    expect(fast.stored[0]).toBe(answered)
    const slow = keyed("same-2")
    const evaluated = await env.run(guard.evaluate(actor, { agentId, action: "files.read" }, slow.request))
    expect(slow.stored).toHaveLength(1)
    expect(slow.stored[0]).toBe(evaluated)
  })

  it("hands an approval to the Effect path's steps: require_approval creates one, once per key", async () => {
    const { actor, agentId, guard } = await setup()
    const ask = { agentId, action: "pay.card", context: { amount: 500 } }
    const key: IdempotencyRequest = {
      key: "ask-1",
      operation: "guard.evaluate",
      requestHash: "h",
      render: (value) => ({ status: 200, body: JSON.stringify(value) }),
    }
    const asked = (await now(guard, actor, ask, key)) as GuardResult
    expect(asked.decision).toBe("require_approval")
    expect(asked.approvalId).toMatch(/^apr_/)
    expect(await now(guard, actor, ask, key)).toBeInstanceOf(Replayed)
    const pending = await env.run(ApprovalService.use((s) => s.list(actor, { status: ["pending"] })))
    expect(pending.data.map((a) => a.id)).toEqual([asked.approvalId])
  })
})
