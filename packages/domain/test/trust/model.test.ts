import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { badgeOf, tierOf } from "../../src/trust/Tier.ts"
import {
  applyEvaluations,
  applyEvent,
  cloneEvidence,
  computeScore,
  DAILY_ALLOWED_CAP,
  type Evidence,
  emptyEvidence,
  type Facts,
  HALF_LIFE_DAYS,
  markActive,
  NO_FACTS,
} from "../../src/trust/TrustModel.ts"

/** A fixed clock: registration at T0, and days after it. */
const T0 = Date.parse("2026-01-01T00:00:00.000Z")
const DAY = 86_400_000
const day = (n: number) => T0 + n * DAY

const component = (e: Evidence, name: string, now: number, facts: Facts = NO_FACTS) => {
  const c = computeScore(e, facts, now).components.find((c) => c.name === name)
  if (!c) throw new Error(`no component ${name}`)
  return c
}

const allowed = (e: Evidence, at: number, n = 1) => {
  for (let i = 0; i < n; i++) applyEvent(e, "policy.evaluated", { decision: "allow" }, at)
}

describe("tiers (D11)", () => {
  it.each([
    [0, "untrusted"],
    [299, "untrusted"],
    [300, "probation"],
    [499, "probation"],
    [500, "bronze"],
    [699, "bronze"],
    [700, "silver"],
    [849, "silver"],
    [850, "gold"],
    [949, "gold"],
    [950, "platinum"],
    [1000, "platinum"],
  ])("%i is %s", (score, tier) => {
    expect(tierOf(score)).toBe(tier)
  })

  it("a badge from bronze up, and only while active", () => {
    expect(badgeOf("probation", "active")).toBeUndefined()
    expect(badgeOf("bronze", "active")).toBe("bronze")
    expect(badgeOf("gold", "suspended")).toBeUndefined()
    expect(badgeOf("gold", "deregistered")).toBeUndefined()
  })
})

describe("a new agent", () => {
  it("starts at 400, in probation, and each component shows its inputs", () => {
    const s = computeScore(emptyEvidence(T0), NO_FACTS, T0)
    expect(s.score).toBe(400)
    expect(s.tier).toBe("probation")
    expect(s.components.map((c) => [c.name, c.score, c.weight])).toEqual([
      ["policy_compliance", 200, 0.3],
      ["enforcement_history", 1000, 0.25],
      ["human_oversight", 600, 0.15],
      ["tenure_activity", 0, 0.2],
      ["identity_keys", 0, 0.1],
      ["operator_adjustment", 500, 0],
    ])
    const weights = s.components.reduce((sum, c) => sum + c.weight, 0)
    expect(weights).toBeCloseTo(1, 10)
  })
})

describe("policy compliance", () => {
  it.each([
    // allowed calls on day 0, denials, monitor-only violations → component score
    [0, 0, 0, 200],
    [100, 0, 0, 276], // 200 + 800·(1 − e^(−0.1)) = 276.1
    [100, 1, 0, 216],
    [100, 0, 2, 216],
    [0, 10, 0, 0],
  ])("%i allowed, %i denied, %i monitor violations → %i", (a, d, m, expected) => {
    const e = emptyEvidence(T0)
    allowed(e, T0, a)
    for (let i = 0; i < d; i++) applyEvent(e, "policy.denied", { reasons: [{ code: "POLICY_DENIED" }] }, T0)
    for (let i = 0; i < m; i++) applyEvent(e, "policy.violated", { decision: "allow" }, T0)
    const c = component(e, "policy_compliance", T0)
    expect(c.score).toBe(expected)
    expect(c.detail).toMatchObject({ allowed: Math.min(a, DAILY_ALLOWED_CAP), denied: d, monitorViolations: m })
  })

  it("counts at most DAILY_ALLOWED_CAP allowed calls per UTC day: a flood earns what a normal day does", () => {
    const flood = emptyEvidence(T0)
    allowed(flood, T0, 10_000)
    const normal = emptyEvidence(T0)
    allowed(normal, T0, DAILY_ALLOWED_CAP)
    expect(computeScore(flood, NO_FACTS, T0).score).toBe(computeScore(normal, NO_FACTS, T0).score)
    expect(flood.totals.allowed).toBe(10_000)
    // A whole day's flood leaves a new agent in probation.
    expect(computeScore(flood, NO_FACTS, T0 + 3_600_000).tier).toBe("probation")
  })

  it("a denial the agent's status or an enforcement caused costs nothing more", () => {
    const e = emptyEvidence(T0)
    applyEvent(e, "policy.denied", { reasons: [{ code: "AGENT_SUSPENDED" }] }, T0)
    applyEvent(e, "policy.denied", { reasons: [{ code: "AGENT_THROTTLED" }] }, T0)
    expect(component(e, "policy_compliance", T0).score).toBe(200)
  })

  it("a denial an approver's denial decided costs nothing more: that denial already costs, once", () => {
    const e = emptyEvidence(T0)
    for (let i = 0; i < 5; i++)
      applyEvent(
        e,
        "policy.denied",
        { reasons: [{ code: "APPROVAL_DENIED" }, { code: "APPROVAL_REQUIRED", ruleId: "payments" }] },
        T0,
      )
    expect(component(e, "policy_compliance", T0).score).toBe(200)
    expect(e.totals).toMatchObject({ deniedByApproval: 5 })
    // A rule's own denial still costs, whatever notes follow it.
    applyEvent(e, "policy.denied", { reasons: [{ code: "POLICY_DENIED" }, { code: "APPROVAL_DENIED" }] }, T0)
    expect(component(e, "policy_compliance", T0).detail).toMatchObject({ denied: 1 })
  })

  it("old evidence decays: a denial counts half after one half-life", () => {
    const e = emptyEvidence(T0)
    allowed(e, T0, 100)
    applyEvent(e, "policy.denied", { reasons: [] }, T0)
    const later = day(HALF_LIFE_DAYS)
    const c = component(e, "policy_compliance", later)
    expect(c.detail).toMatchObject({ allowed: 50, denied: 0.5 })
    // 200 + 800·(1 − e^(−0.05)) − 60·0.5 = 209.0
    expect(c.score).toBe(209)
  })
})

describe("enforcement history", () => {
  it.each([
    ["warning", 900],
    ["throttle", 750],
    ["suspension", 500],
    ["revocation", 0],
  ])("a %s costs its weight", (type, expected) => {
    const e = emptyEvidence(T0)
    applyEvent(e, "enforcement.created", { enforcementId: "enf_1", type }, T0)
    expect(component(e, "enforcement_history", T0).score).toBe(expected)
  })

  it("an overturned enforcement costs nothing, an upheld one keeps its cost, decayed", () => {
    const e = emptyEvidence(T0)
    applyEvent(e, "enforcement.created", { enforcementId: "enf_1", type: "suspension" }, T0)
    applyEvent(e, "enforcement.created", { enforcementId: "enf_2", type: "warning" }, day(1))
    applyEvent(e, "enforcement.resolved", { enforcementId: "enf_1", resolution: "overturned" }, day(5))
    applyEvent(e, "enforcement.resolved", { enforcementId: "enf_2", resolution: "upheld" }, day(5))
    // Only the warning remains: 100 · 2^(−(30 − 1)/30) = 51.2 at day 30.
    const c = component(e, "enforcement_history", day(30))
    expect(c.detail).toMatchObject({ cost: 51.2, open: 0 })
    expect(c.score).toBe(949)
  })

  it("an upheld enforcement overturned on a later review costs nothing, also after evidence is stored and read back", () => {
    const e = emptyEvidence(T0)
    applyEvent(e, "enforcement.created", { enforcementId: "enf_1", type: "suspension" }, T0)
    applyEvent(e, "enforcement.resolved", { enforcementId: "enf_1", resolution: "upheld" }, day(1))
    expect(component(e, "enforcement_history", day(1)).detail).toMatchObject({ open: 0 })
    expect(component(e, "enforcement_history", day(1)).score).toBeLessThan(1000)
    // The evidence as the worker stores it (JSON in trust_scores) and reads it back for the next pass.
    const stored = cloneEvidence(JSON.parse(JSON.stringify(e)) as Evidence)
    applyEvent(stored, "enforcement.resolved", { enforcementId: "enf_1", resolution: "overturned" }, day(3))
    expect(component(stored, "enforcement_history", day(3))).toMatchObject({ score: 1000, detail: { cost: 0 } })
    // Overturned once: a second overturn (or an expiry after it) takes nothing more.
    applyEvent(stored, "enforcement.resolved", { enforcementId: "enf_1", resolution: "overturned" }, day(4))
    expect(component(stored, "enforcement_history", day(4)).score).toBe(1000)
    // Evidence stored before upheld enforcements were kept (no `upheld` field) still folds.
    const old = cloneEvidence({ ...JSON.parse(JSON.stringify(e)), upheld: undefined } as Evidence)
    applyEvent(old, "enforcement.resolved", { enforcementId: "enf_1", resolution: "overturned" }, day(3))
    applyEvent(old, "enforcement.created", { enforcementId: "enf_2", type: "warning" }, day(3))
    applyEvent(old, "enforcement.resolved", { enforcementId: "enf_2", resolution: "upheld" }, day(3))
    expect(component(old, "enforcement_history", day(3)).score).toBeLessThan(1000)
  })

  it("an enforcement seen twice (alias and name) costs once", () => {
    const e = emptyEvidence(T0)
    applyEvent(e, "enforcement.created", { enforcementId: "enf_1", type: "warning" }, T0)
    applyEvent(e, "enforcement.issued", { enforcementId: "enf_1", type: "warning" }, T0)
    expect(component(e, "enforcement_history", T0).score).toBe(900)
  })
})

describe("human oversight", () => {
  it.each([
    [0, 0, 0, 600],
    [20, 0, 0, 853], // 600 + 400·(1 − e^(−1)) = 852.8
    [0, 2, 0, 400],
    [0, 0, 4, 500],
  ])("%i approved, %i denied, %i expired → %i", (p, h, x, expected) => {
    const e = emptyEvidence(T0)
    for (let i = 0; i < p; i++) applyEvent(e, "approval.decided", { decision: "approved", expired: false }, T0)
    for (let i = 0; i < h; i++) applyEvent(e, "approval.decided", { decision: "denied", expired: false }, T0)
    for (let i = 0; i < x; i++) applyEvent(e, "approval.decided", { decision: "denied", expired: true }, T0)
    expect(component(e, "human_oversight", T0).score).toBe(expected)
  })
})

describe("tenure and activity", () => {
  it("grows with age and with distinct active days, not with calls", () => {
    const e = emptyEvidence(T0)
    for (let d = 0; d < 10; d++) allowed(e, day(d) + 3_600_000, 5)
    applyEvent(e, "report.sent", {}, day(9) + 7_200_000) // the same day again: no new active day
    const c = component(e, "tenure_activity", day(10))
    // age 10 days: 500·10/90 = 55.6; active days decayed Σ 2^(−(10 − d − 1/24)/30) ≈ 8.9 → 500·(1 − e^(−8.9/30)) ≈ 128
    expect(c.detail).toMatchObject({ ageDays: 10 })
    expect(c.score).toBe(183)
  })
})

describe("identity and keys", () => {
  it.each([
    [{ hasVersion: false, activeAgentKeys: 0, keysWithoutExpiry: 0, newestKeyAgeDays: null }, 0],
    [{ hasVersion: true, activeAgentKeys: 0, keysWithoutExpiry: 0, newestKeyAgeDays: null }, 250],
    [{ hasVersion: true, activeAgentKeys: 1, keysWithoutExpiry: 1, newestKeyAgeDays: 10 }, 750],
    [{ hasVersion: true, activeAgentKeys: 2, keysWithoutExpiry: 0, newestKeyAgeDays: 10 }, 1000],
    [{ hasVersion: true, activeAgentKeys: 1, keysWithoutExpiry: 0, newestKeyAgeDays: 200 }, 750],
  ])("%o → %i", (facts, expected) => {
    expect(component(emptyEvidence(T0), "identity_keys", T0, facts).score).toBe(expected)
  })
})

describe("operator adjustments", () => {
  it("add to the weighted sum and show as their own component", () => {
    const e = emptyEvidence(T0)
    applyEvent(e, "trust.score.adjusted", { delta: 150, reason: "audited" }, T0)
    const s = computeScore(e, NO_FACTS, T0)
    expect(s.score).toBe(550)
    expect(s.tier).toBe("bronze")
    expect(s.components.at(-1)).toMatchObject({ name: "operator_adjustment", score: 650, weight: 0 })
    applyEvent(e, "trust.score.adjusted", { delta: -1000, reason: "compromised" }, T0)
    expect(computeScore(e, NO_FACTS, T0).score).toBe(0)
  })
})

describe("earning bronze", () => {
  it("a week of clean, capped activity with a registered version earns bronze", () => {
    const facts = { hasVersion: true, activeAgentKeys: 0, keysWithoutExpiry: 0, newestKeyAgeDays: null }
    const after = (days: number) => {
      const e = emptyEvidence(T0)
      for (let d = 0; d < days; d++) allowed(e, day(d) + 3_600_000, DAILY_ALLOWED_CAP)
      return computeScore(e, facts, day(days))
    }
    expect(after(1).tier).toBe("probation")
    expect(after(3).tier).toBe("probation")
    expect(after(7).tier).toBe("bronze")
  })
})

// ---- properties ----------------------------------------------------------------------------

type Ev = { readonly type: string; readonly data: Record<string, unknown>; readonly offset: number }

const enforcementType = fc.constantFrom("warning", "throttle", "suspension", "revocation")
const anyEvent: fc.Arbitrary<Ev> = fc.oneof(
  fc.record({
    type: fc.constant("policy.evaluated"),
    data: fc.record({ decision: fc.constantFrom("allow", "deny", "require_approval") }),
    offset: fc.nat(90 * DAY),
  }),
  fc.record({
    type: fc.constant("policy.denied"),
    data: fc.record({ reasons: fc.constant([{ code: "POLICY_DENIED" }]) }),
    offset: fc.nat(90 * DAY),
  }),
  fc.record({
    type: fc.constant("policy.violated"),
    data: fc.record({ decision: fc.constantFrom("allow", "deny") }),
    offset: fc.nat(90 * DAY),
  }),
  fc.record({
    type: fc.constant("enforcement.created"),
    data: fc.record({ enforcementId: fc.constantFrom("enf_a", "enf_b", "enf_c"), type: enforcementType }),
    offset: fc.nat(90 * DAY),
  }),
  fc.record({
    type: fc.constant("enforcement.resolved"),
    data: fc.record({
      enforcementId: fc.constantFrom("enf_a", "enf_b", "enf_c"),
      resolution: fc.constantFrom("upheld", "overturned"),
    }),
    offset: fc.nat(90 * DAY),
  }),
  fc.record({
    type: fc.constant("approval.decided"),
    data: fc.record({ decision: fc.constantFrom("approved", "denied"), expired: fc.boolean() }),
    offset: fc.nat(90 * DAY),
  }),
  fc.record({ type: fc.constant("task.done"), data: fc.constant({}), offset: fc.nat(90 * DAY) }),
)

const facts: fc.Arbitrary<Facts> = fc.record({
  hasVersion: fc.boolean(),
  activeAgentKeys: fc.nat(3),
  keysWithoutExpiry: fc.nat(3),
  newestKeyAgeDays: fc.option(fc.nat(400), { nil: null }),
})

/** Evidence from events in time order; the clock is a fixed instant after them all. */
const fold = (events: ReadonlyArray<Ev>) => {
  const e = emptyEvidence(T0)
  for (const ev of [...events].sort((a, b) => a.offset - b.offset)) applyEvent(e, ev.type, ev.data, T0 + ev.offset)
  return e
}
const NOW = day(100)

describe("properties", () => {
  it("scores stay integers in 0..1000, and so does every component", () => {
    fc.assert(
      fc.property(
        fc.array(anyEvent, { maxLength: 200 }),
        facts,
        fc.integer({ min: -3000, max: 3000 }),
        (evs, f, adj) => {
          const e = fold(evs)
          e.adjustment = adj
          const s = computeScore(e, f, NOW)
          expect(Number.isInteger(s.score)).toBe(true)
          expect(s.score).toBeGreaterThanOrEqual(0)
          expect(s.score).toBeLessThanOrEqual(1000)
          for (const c of s.components) {
            expect(Number.isInteger(c.score)).toBe(true)
            expect(c.score).toBeGreaterThanOrEqual(0)
            expect(c.score).toBeLessThanOrEqual(1000)
          }
        },
      ),
    )
  })

  const bad: fc.Arbitrary<Ev> = fc.oneof(
    fc.record({
      type: fc.constant("policy.denied"),
      data: fc.constant({ reasons: [{ code: "POLICY_DENIED" }] }),
      offset: fc.nat(100 * DAY),
    }),
    fc.record({
      type: fc.constant("policy.violated"),
      data: fc.constant({ decision: "allow" }),
      offset: fc.nat(100 * DAY),
    }),
    fc.record({
      type: fc.constant("policy.evaluated"),
      data: fc.constant({ decision: "deny" }),
      offset: fc.nat(100 * DAY),
    }),
    fc.record({
      type: fc.constant("enforcement.created"),
      data: fc.record({ enforcementId: fc.constant("enf_new"), type: enforcementType }),
      offset: fc.nat(100 * DAY),
    }),
    fc.record({
      type: fc.constant("approval.decided"),
      data: fc.record({ decision: fc.constant("denied"), expired: fc.boolean() }),
      offset: fc.nat(100 * DAY),
    }),
  )

  it("adding a denial (or any bad evidence) never raises the score", () => {
    fc.assert(
      fc.property(fc.array(anyEvent, { maxLength: 150 }), facts, bad, (evs, f, extra) => {
        const before = computeScore(fold(evs), f, NOW).score
        const after = computeScore(fold([...evs, extra]), f, NOW).score
        expect(after).toBeLessThanOrEqual(before)
      }),
    )
  })

  const good: fc.Arbitrary<Ev> = fc.oneof(
    fc.record({
      type: fc.constant("policy.evaluated"),
      data: fc.constant({ decision: "allow" }),
      offset: fc.constant(100 * DAY - 1),
    }),
    fc.record({
      type: fc.constant("approval.decided"),
      data: fc.constant({ decision: "approved", expired: false }),
      offset: fc.nat(100 * DAY),
    }),
    fc.record({ type: fc.constant("task.done"), data: fc.constant({}), offset: fc.constant(100 * DAY - 1) }),
  )

  it("adding only good evidence never lowers the score", () => {
    fc.assert(
      fc.property(
        fc.array(anyEvent, { maxLength: 150 }),
        facts,
        fc.array(good, { minLength: 1, maxLength: 20 }),
        (evs, f, extra) => {
          const before = computeScore(fold(evs), f, NOW).score
          const after = computeScore(fold([...evs, ...extra]), f, NOW).score
          expect(after).toBeGreaterThanOrEqual(before)
        },
      ),
    )
  })

  it("folding is incremental: evidence stored and read back scores as evidence folded at once", () => {
    fc.assert(
      fc.property(fc.array(anyEvent, { maxLength: 100 }), fc.nat(100), (evs, cut) => {
        const sorted = [...evs].sort((a, b) => a.offset - b.offset)
        const split = Math.min(cut, sorted.length)
        const first = fold(sorted.slice(0, split))
        const resumed = cloneEvidence(JSON.parse(JSON.stringify(first)) as Evidence)
        for (const ev of sorted.slice(split)) applyEvent(resumed, ev.type, ev.data, T0 + ev.offset)
        expect(computeScore(resumed, NO_FACTS, NOW).score).toBe(computeScore(fold(sorted), NO_FACTS, NOW).score)
      }),
    )
  })
})

describe("guard decisions counted per agent and day (the worker's aggregate)", () => {
  it("applyEvaluations once per day gives the evidence one applyEvent per decision gives", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            // Decisions over five days, some of them beyond a day's cap of allows.
            offset: fc.integer({ min: 0, max: 5 * DAY - 1 }),
            allow: fc.boolean(),
          }),
          { maxLength: 400 },
        ),
        fc.integer({ min: 0, max: 150 }),
        (decisions, earlier) => {
          const sorted = decisions.map((d) => ({ ...d, at: day(1) + d.offset })).sort((a, b) => a.at - b.at)
          const one = emptyEvidence(T0)
          const grouped = emptyEvidence(T0)
          // Both start from a day already partly used.
          allowed(one, day(1), earlier)
          allowed(grouped, day(1), earlier)
          for (const d of sorted) applyEvent(one, "policy.evaluated", { decision: d.allow ? "allow" : "deny" }, d.at)
          const days = new Map<number, Array<(typeof sorted)[number]>>()
          for (const d of sorted) {
            const k = Math.floor(d.at / DAY)
            days.set(k, [...(days.get(k) ?? []), d])
          }
          for (const k of [...days.keys()].sort((a, b) => a - b)) {
            const list = days.get(k)!
            const allows = list.filter((d) => d.allow)
            applyEvaluations(
              grouped,
              list.length,
              allows.length,
              allows.slice(0, DAILY_ALLOWED_CAP).map((d) => d.at),
            )
          }
          expect(grouped).toEqual(one)
        },
      ),
    )
  })
})

describe("the agent's own events counted per agent and day (the worker's aggregate)", () => {
  it("markActive once per day, at its first event, gives the evidence one applyEvent per event gives", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 40 * DAY - 1 }), { maxLength: 300 }),
        fc.integer({ min: 0, max: 30 }),
        (offsets, startDay) => {
          const times = offsets.map((o) => day(startDay) + o).sort((a, b) => a - b)
          const one = emptyEvidence(T0)
          const grouped = emptyEvidence(T0)
          for (const at of times) applyEvent(one, "tool.called", { path: "/x" }, at)
          const firstOfDay = new Map<number, number>()
          for (const at of times) if (!firstOfDay.has(Math.floor(at / DAY))) firstOfDay.set(Math.floor(at / DAY), at)
          for (const k of [...firstOfDay.keys()].sort((a, b) => a - b)) markActive(grouped, firstOfDay.get(k)!)
          expect(grouped).toEqual(one)
          // And the events do count: an agent with events has active days.
          if (times.length > 0) expect(one.activeDays).not.toEqual(emptyEvidence(T0).activeDays)
        },
      ),
    )
  })
})
