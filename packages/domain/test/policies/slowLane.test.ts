import { Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Actor,
  AgentService,
  Authenticator,
  EventService,
  GuardBusy,
  type GuardRequestInput,
  type GuardResult,
  GuardService,
  PolicyService,
  WorkspaceService,
} from "../../src/index.ts"
import { SLOW_LANE_PER_WORKSPACE, SlowLane } from "../../src/policies/SlowLane.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

/**
 * The guard's slow lane (issue 24, finding 2): a call whose evaluation can be costly waits its turn, one per
 * event-loop turn, workspaces in turn, in a bounded queue; cheap calls are answered inline. Deterministic:
 * orders of completion and counts, never timings.
 */

describe("the slow lane", () => {
  /** A lane whose turns the test runs. */
  const driven = (options: { perWorkspace?: number; total?: number; clock?: () => number } = {}) => {
    const turns: Array<() => void> = []
    const delays: Array<number> = []
    const lane = new SlowLane({
      ...options,
      schedule: (turn, delayMs) => {
        turns.push(turn)
        delays.push(delayMs)
      },
    })
    const runAll = () => {
      while (turns.length > 0) turns.shift()!()
    }
    return { lane, turns, delays, runAll }
  }

  it("runs one job a turn, taking the workspaces in turn", () => {
    const { lane, turns, runAll } = driven()
    const done: Array<string> = []
    for (let i = 0; i < 5; i++) lane.offer("A", () => done.push(`A${i}`))
    lane.offer("B", () => done.push("B0"))
    lane.offer("B", () => done.push("B1"))
    // One turn is scheduled at a time, and it runs one job.
    expect(turns.length).toBe(1)
    turns.shift()!()
    expect(done).toEqual(["A0"])
    runAll()
    expect(done).toEqual(["A0", "B0", "A1", "B1", "A2", "A3", "A4"])
    expect(lane.waiting()).toBe(0)
  })

  it("refuses past a workspace's bound and past the lane's, queueing nothing", () => {
    const { lane, runAll } = driven({ perWorkspace: 2, total: 3 })
    const done: Array<string> = []
    expect(lane.offer("A", () => done.push("A0"))).toBeDefined()
    expect(lane.offer("A", () => done.push("A1"))).toBeDefined()
    expect(lane.offer("A", () => done.push("A2"))).toBeUndefined()
    expect(lane.offer("B", () => done.push("B0"))).toBeDefined()
    expect(lane.offer("C", () => done.push("C0"))).toBeUndefined()
    expect(lane.waiting()).toBe(3)
    runAll()
    expect(done).toEqual(["A0", "B0", "A1"])
  })

  it("rests after an evaluation as long as it took before the next, even when the next arrives later", () => {
    let now = 0
    const { lane, turns, delays } = driven({ clock: () => now })
    lane.offer("A", () => {
      now += 3
    })
    lane.offer("B", () => {
      now += 1
    })
    expect(delays).toEqual([0])
    turns.shift()!()
    expect(delays).toEqual([0, 3])
    now += 3
    turns.shift()!()
    expect(delays).toEqual([0, 3])
    // Idle now; a job that arrives within the rest still waits out the rest of it.
    now += 0.5
    lane.offer("A", () => {})
    expect(delays).toEqual([0, 3, 0.5])
  })

  it("takes back a job that has not run", () => {
    const { lane, runAll } = driven()
    const done: Array<string> = []
    lane.offer("A", () => done.push("A0"))
    const cancel = lane.offer("A", () => done.push("A1"))!
    cancel()
    expect(lane.waiting("A")).toBe(1)
    runAll()
    expect(done).toEqual(["A0"])
  })
})

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

/** Statically costly (a comprehension over a list the request may bring), cheap to run on small contexts. */
const COSTLY = "context.l.exists(x, x == 1.0)"

let counter = 0
const workspace = async (rules: ReadonlyArray<Record<string, unknown>>) => {
  const { apiKey } = await env.run(
    WorkspaceService.use((s) => s.create(null, { name: `lane-${++counter}`, environment: "live" })),
  )
  const actor = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
  const agentId = (await env.run(AgentService.use((s) => s.register(actor, { name: "worker" })))).id
  await env.run(PolicyService.use((s) => s.create(actor, { name: "p", rules })))
  const guard = await env.run(GuardService.use(Effect.succeed))
  // Loads the agent, the policies and the throttle on this instance: later calls need no lookup.
  await env.run(guard.evaluate(actor, { agentId, action: "warm.up" }))
  await env.run(guard.evaluate(actor, { agentId, action: "costly.call", context: { l: [2] } }))
  return { actor, agentId, guard }
}

const costlySet = [
  { id: "costly", effect: "deny", actions: ["costly.*"], when: { cel: COSTLY } },
  { id: "cheap", effect: "deny", actions: ["cheap.*"], when: { field: "context.n", op: "gt", value: 10 } },
]

const evaluatedCount = async (actor: Actor) =>
  (await env.run(EventService.use((s) => s.list(actor, { limit: 500, type: ["policy.evaluated"] })))).data.length

describe("the guard's slow lane", () => {
  it("answers cheap calls inline and queues costly ones", async () => {
    const { actor, agentId, guard } = await workspace(costlySet)
    const cheap = guard.evaluateNow(actor, { agentId, action: "cheap.call", context: { n: 1 } })
    expect(cheap).toBeDefined()
    await cheap
    // The fast path hands a costly call to evaluate, which queues it.
    expect(guard.evaluateNow(actor, { agentId, action: "costly.call", context: { l: [2] } })).toBeUndefined()
  })

  it("answers another workspace's calls, cheap or costly, before one workspace's queue drains", async () => {
    const a = await workspace(costlySet)
    const b = await workspace(costlySet)
    const finished: Array<string> = []
    // Every call here is a simulation, which takes the guard's path through the lane (cheap inline, costly queued)
    // and writes nothing. An evaluation's answer also waits for its event's commit, each workspace's writer in a
    // transaction of its own: .ci/run finished B's evaluations last of 42 (at 03d433f, and at 3d7d99b for the cheap
    // one on PostgreSQL) while the lane had answered them first. The lane's order, not commit latency, is checked.
    const call = (w: typeof a, tag: string, input: Omit<GuardRequestInput, "agentId">) =>
      env.run(w.guard.simulate(w.actor, { agentId: w.agentId, ...input })).then((r) => {
        finished.push(tag)
        return r as unknown as GuardResult
      })
    const many = 40
    const calls = Array.from({ length: many }, (_, i) =>
      call(a, `A${i}`, { action: "costly.call", context: { l: [2, 3 + i] } }),
    )
    calls.push(call(b, "B-cheap", { action: "cheap.call", context: { n: 1 } }))
    calls.push(call(b, "B-costly", { action: "costly.call", context: { l: [1] } }))
    const results = await Promise.all(calls)
    expect(results.at(-1)!.decision).toBe("deny")
    expect(results.slice(0, many).every((r) => r.decision === "allow")).toBe(true)
    const lastA = finished.indexOf(`A${many - 1}`)
    expect(finished.indexOf("B-cheap")).toBeLessThan(lastA)
    expect(finished.indexOf("B-costly")).toBeLessThan(lastA)
  })

  it("refuses a workspace's costly calls past its queue's bound, evaluating and recording nothing for them", async () => {
    const { actor, agentId, guard } = await workspace(costlySet)
    const before = await evaluatedCount(actor)
    const exits = await Promise.all(
      Array.from({ length: SLOW_LANE_PER_WORKSPACE * 2 }, () =>
        env.rt.runPromiseExit(guard.evaluate(actor, { agentId, action: "costly.call", context: { l: [2] } })),
      ),
    )
    const refused = exits.filter((e) => Exit.isFailure(e))
    const answered = exits.length - refused.length
    expect(refused.length).toBeGreaterThan(0)
    expect(answered).toBeGreaterThanOrEqual(SLOW_LANE_PER_WORKSPACE)
    for (const e of refused) {
      const error = Exit.isFailure(e) ? Exit.findErrorOption(e) : undefined
      expect(error?._tag === "Some" ? error.value : error).toBeInstanceOf(GuardBusy)
    }
    expect(await evaluatedCount(actor)).toBe(before + answered)
  })

  it("queues costly simulations like costly guard calls: another workspace goes first, and past the bound they are refused", async () => {
    // POST /policies/simulate evaluated inline: 50 connections of it took another tenant's p50 from ~11 ms
    // (the same load on the guard) to 60–75 ms (review of the guard, 2026-11-29).
    const a = await workspace(costlySet)
    const b = await workspace(costlySet)
    const finished: Array<string> = []
    const simulations = Array.from({ length: 40 }, (_, i) =>
      env
        .run(a.guard.simulate(a.actor, { agentId: a.agentId, action: "costly.call", context: { l: [2, 3 + i] } }))
        .then((r) => {
          finished.push(`A${i}`)
          return r
        }),
    )
    // B's call is a costly simulation too: an evaluation would also wait for its event's commit, which under load
    // could come after A's 40 simulations, that write nothing, were answered (the PostgreSQL run of .ci/run at
    // 22c9dad). The lane's order, not a commit's latency, is what this case checks.
    const bCall = env
      .run(b.guard.simulate(b.actor, { agentId: b.agentId, action: "costly.call", context: { l: [2] } }))
      .then(() => finished.push("B"))
    bCall.catch(() => {}) // awaited below, after A's calls (a refusal of one of them must not leave it unhandled)
    const results = await Promise.all(simulations)
    await bCall
    expect(results.every((r) => r.decision === "allow")).toBe(true)
    expect(finished.indexOf("B")).toBeLessThan(finished.indexOf("A39"))

    const exits = await Promise.all(
      Array.from({ length: SLOW_LANE_PER_WORKSPACE * 2 }, () =>
        env.rt.runPromiseExit(
          a.guard.simulate(a.actor, { agentId: a.agentId, action: "costly.call", context: { l: [2] } }),
        ),
      ),
    )
    const refused = exits.filter((e) => Exit.isFailure(e))
    expect(refused.length).toBeGreaterThan(0)
    for (const e of refused) {
      const error = Exit.isFailure(e) ? Exit.findErrorOption(e) : undefined
      expect(error?._tag === "Some" ? error.value : error).toBeInstanceOf(GuardBusy)
    }
  })

  it("sends a workspace whose evaluation was costly at run time to the lane for a while", async () => {
    // Cheap on paper: leaves pay for the lists they scan only at run time.
    const rules = Array.from({ length: 20 }, (_, i) => ({
      id: `r${i}`,
      effect: "deny",
      actions: ["big.*"],
      when: { field: "context.l", op: "contains", value: -i - 1 },
    }))
    const { actor, agentId, guard } = await workspace(rules)
    const big = { l: Array.from({ length: 1_000 }, (_, i) => i) }
    const first = guard.evaluateNow(actor, { agentId, action: "big.call", context: big })
    expect(first).toBeDefined()
    await first
    expect(guard.evaluateNow(actor, { agentId, action: "big.call", context: { l: [1] } })).toBeUndefined()
    expect(
      ((await env.run(guard.evaluate(actor, { agentId, action: "big.call", context: big }))) as GuardResult).decision,
    ).toBe("allow")
  })
})
