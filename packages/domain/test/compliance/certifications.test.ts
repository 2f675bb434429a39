import { EVENT_METRICS, type Metrics } from "@agentgov/verifier"
import type { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  AgentService,
  Authenticator,
  CATALOGUES,
  ComplianceRepo,
  ComplianceService,
  type Facts,
  summarise,
  WorkspaceService,
} from "../../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"

const zero = Object.fromEntries(EVENT_METRICS.map((m) => [m.name, 0])) as Metrics
const facts = (over: Partial<Omit<Facts, "metrics">> & { metrics?: Partial<Metrics> } = {}): Facts => ({
  scope: "agent",
  chain: { valid: true, checked: 10 },
  checkpoint: { treeSize: 10, rootHash: "ab".repeat(32) },
  keys: { active: 1, withoutExpiry: [], allScopes: [], ofInactiveAgents: [] },
  enforcements: { incidents: 0, incidentsClosedWithin72h: 0, openOver7d: [], medianHoursToClose: null },
  guardDefault: "deny",
  enforcingPolicies: 1,
  ...over,
  metrics: { ...zero, events: 10, evaluations: 5, ...over.metrics },
})
const judge = (framework: keyof typeof CATALOGUES, id: string, f: Facts) =>
  CATALOGUES[framework].controls.find((c) => c.id === id)!.judge(f)

describe("the catalogue's rules", () => {
  it("human oversight: a bypassed approval is not met; none decided is partial; decided and none bypassed is met", () => {
    expect(
      judge(
        "eu-ai-act",
        "AIA-14",
        facts({ metrics: { approvalsRequired: 2, approvalsDecidedByPeople: 1, approvalsBypassed: 1 } }),
      ).status,
    ).toBe("not_met")
    expect(judge("eu-ai-act", "AIA-14", facts({ metrics: { approvalsRequired: 2 } })).status).toBe("partial")
    expect(
      judge("eu-ai-act", "AIA-14", facts({ metrics: { approvalsRequired: 2, approvalsDecidedByPeople: 2 } })).status,
    ).toBe("met")
  })

  it("record-keeping names the first bad sequence of a broken chain", () => {
    const j = judge(
      "eu-ai-act",
      "AIA-12",
      facts({ chain: { valid: false, checked: 6, firstBadSequence: 7, reason: "hash" } }),
    )
    expect(j.status).toBe("not_met")
    expect(j.gaps[0]).toContain("from sequence 7")
  })

  it("marking of content: nothing registered is not applicable; unmarked items are not met or partial", () => {
    expect(judge("eu-ai-act", "AIA-50", facts()).status).toBe("not_applicable")
    expect(judge("eu-ai-act", "AIA-50", facts({ metrics: { contentRegistered: 2, contentUnmarked: 2 } })).status).toBe(
      "not_met",
    )
    expect(judge("eu-ai-act", "AIA-50", facts({ metrics: { contentRegistered: 2, contentUnmarked: 1 } })).status).toBe(
      "partial",
    )
    expect(judge("eu-ai-act", "AIA-50", facts({ metrics: { contentRegistered: 2 } })).status).toBe("met")
  })

  it("SOC 2 CC6.2: a key left active for a deregistered agent is not met", () => {
    expect(
      judge(
        "soc2",
        "CC6.2",
        facts({ keys: { active: 1, withoutExpiry: [], allScopes: [], ofInactiveAgents: ["key_1"] } }),
      ).status,
    ).toBe("not_met")
  })

  it("only controls the records can fully evidence are required, and every control cites its text", () => {
    for (const c of Object.values(CATALOGUES)) {
      expect(c.controls.length).toBeGreaterThan(0)
      for (const control of c.controls) {
        expect(control.citation.length).toBeGreaterThan(40)
        expect(control.reference).not.toBe("")
        // A required control must be able to be met; a not-required one never claims more than partial
        // unless its rule says met outright from records (content marking).
        const best = control.judge(facts({ metrics: { approvalsRequired: 1, approvalsDecidedByPeople: 1 } }))
        if (control.required) expect(best.status).toBe("met")
      }
    }
  })

  it("the summary: compliant only when every required control is met", () => {
    const c = (required: boolean, status: "met" | "partial" | "not_met" | "not_applicable") => ({
      id: "x",
      title: "x",
      reference: "x",
      required,
      status,
      evidence: [],
      gaps: [],
    })
    expect(summarise([c(true, "met"), c(false, "partial")]).result).toBe("compliant")
    expect(summarise([c(true, "met"), c(true, "partial")]).result).toBe("partially_compliant")
    expect(summarise([c(true, "not_met"), c(true, "met")]).result).toBe("non_compliant")
  })
})

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())
const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => env.run(effect)

const T = Date.parse("2031-06-01T08:00:00.000Z")
const YEAR = 365 * 86_400_000

describe("certification expiry on a fixed clock", () => {
  it("is listed until a year after issue, and not from then on", async () => {
    const { apiKey } = await run(WorkspaceService.use((s) => s.create(null, { name: "certs", environment: "live" })))
    const actor = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const agent = await run(AgentService.use((s) => s.register(actor, { name: "certified" })))
    // A ready report of the agent whose required controls are met (generation is tested with the server).
    const controls = CATALOGUES.gdpr.controls.map((c) => ({ id: c.id, required: c.required, status: "met" }))
    await run(
      SqlClient.SqlClient.use(
        (
          sql,
        ) => sql`INSERT INTO compliance_reports (id, workspace_id, framework, agent_id, period_from, period_to, status,
            requested_by, summary, document, created_at, completed_at)
          VALUES ('rpt_fixed', ${actor.workspaceId}, 'gdpr', ${agent.id}, '2031-03-01T00:00:00Z', '2031-06-01T00:00:00Z',
            'ready', 'test', ${JSON.stringify({ result: "compliant", met: controls.length, partial: 0, notMet: 0, notApplicable: 0 })}::jsonb, ${JSON.stringify({ controls })}, '2031-06-01T00:00:00Z', '2031-06-01T00:00:00Z')`,
      ),
    )
    await run(SqlClient.SqlClient.use((sql) => sql`UPDATE agents SET trust_score = 700 WHERE id = ${agent.id}`))
    const cert = await run(
      at(
        T,
        ComplianceService.use((s) => s.issueCertification(actor, { agentId: agent.id, reportId: "rpt_fixed" })),
      ),
    )
    expect(cert.issuedAt).toBe(new Date(T).toISOString())
    expect(cert.expiresAt).toBe(new Date(T + YEAR).toISOString())
    const listAt = (ms: number) =>
      run(
        at(
          ms,
          ComplianceService.use((s) => s.listCertifications(actor, agent.id)),
        ),
      )
    expect((await listAt(T + YEAR - 1)).map((c) => c.status)).toEqual(["active"])
    expect(await listAt(T + YEAR)).toEqual([])
    // An expired certification is not revoked by a later fall below bronze (the trust worker's pass revokes
    // through ComplianceRepo.revokeCertifications): it is simply over, and no certification.revoked is written.
    await run(SqlClient.SqlClient.use((sql) => sql`UPDATE agents SET trust_score = 100 WHERE id = ${agent.id}`))
    expect(
      await run(
        ComplianceRepo.use((r) =>
          r.revokeCertifications(
            actor.workspaceId,
            agent.id,
            "trust_below_bronze",
            new Date(T + YEAR + 1).toISOString(),
          ),
        ),
      ),
    ).toEqual([])
    // The same call while it was in force revokes it, with the event to append.
    const revoked = await run(
      ComplianceRepo.use((r) =>
        r.revokeCertifications(actor.workspaceId, agent.id, "trust_below_bronze", new Date(T + YEAR - 1).toISOString()),
      ),
    )
    expect(revoked.map((e) => [e.type, (e.data as { reason: string }).reason])).toEqual([
      ["certification.revoked", "trust_below_bronze"],
    ])
  })
})

describe("a report backs one certification (third pass)", () => {
  /** A workspace with an agent at bronze or above, and a ready GDPR report of it whose required controls are met. */
  const seed = async (name: string) => {
    const { apiKey } = await run(WorkspaceService.use((s) => s.create(null, { name, environment: "live" })))
    const actor = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const agent = await run(AgentService.use((s) => s.register(actor, { name: "certified" })))
    const controls = CATALOGUES.gdpr.controls.map((c) => ({ id: c.id, required: c.required, status: "met" }))
    const reportId = `rpt_once_${name}`
    await run(
      SqlClient.SqlClient.use(
        (sql) => sql`INSERT INTO compliance_reports (id, workspace_id, framework, agent_id, period_from, period_to,
            status, requested_by, summary, document, created_at, completed_at)
          VALUES (${reportId}, ${actor.workspaceId}, 'gdpr', ${agent.id}, '2031-03-01T00:00:00Z', '2031-06-01T00:00:00Z',
            'ready', 'test', ${JSON.stringify({ result: "compliant", met: controls.length, partial: 0, notMet: 0, notApplicable: 0 })}::jsonb,
            ${JSON.stringify({ controls })}, '2031-06-01T00:00:00Z', '2031-06-01T00:00:00Z')`,
      ),
    )
    await run(SqlClient.SqlClient.use((sql) => sql`UPDATE agents SET trust_score = 700 WHERE id = ${agent.id}`))
    const issue = (ms: number) =>
      env.failure(
        at(
          ms,
          ComplianceService.use((s) => s.issueCertification(actor, { agentId: agent.id, reportId })),
        ),
      )
    const issued = (ms: number) =>
      run(
        at(
          ms,
          ComplianceService.use((s) => s.issueCertification(actor, { agentId: agent.id, reportId })),
        ),
      )
    const count = async () =>
      (
        await run(
          SqlClient.SqlClient.use(
            (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM certifications WHERE report_id = ${reportId}`,
          ),
        )
      )[0]!.n
    return { actor, agent, reportId, issue, issued, count }
  }

  it("a second certification from the same report is refused while the first is in force, and after it ends", async () => {
    const s = await seed("once")
    const first = await s.issued(T)
    // Asked again (a retry, a second operator): refused, naming the certification the report backs; nothing written.
    const again = await s.issue(T + 1000)
    expect(again).toMatchObject({ _tag: "CertificationRefused", unmetControls: [] })
    expect((again as { message: string }).message).toContain(first.id)
    expect(await s.count()).toBe(1)
    // Revoked by an operator (the evidence behind the report found wanting): the report cannot reinstate it.
    await run(ComplianceService.use((c) => c.revokeCertification(s.actor, first.id, { reason: "audit" })))
    expect(await s.issue(T + 2000)).toMatchObject({ _tag: "CertificationRefused" })
    // Nor renew it when its year is up: a year's certification needs a report of its own.
    expect(await s.issue(T + YEAR + 1)).toMatchObject({ _tag: "CertificationRefused" })
    expect(await s.count()).toBe(1)
  })

  it("of concurrent requests from one report, one certification is issued", async () => {
    const s = await seed("concurrent")
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => s.issued(T)))
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1)
    expect(await s.count()).toBe(1)
  })
})

describe("a certification's report covers the agent's recent life (fifth pass)", () => {
  const DAY = 86_400_000
  /** A workspace whose agent (registered at `registeredAt`) has a ready, compliant GDPR report of `from`–`to`. */
  const seed = async (name: string, from: string, to: string, registeredAt: string) => {
    const { apiKey } = await run(WorkspaceService.use((s) => s.create(null, { name, environment: "live" })))
    const actor = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const agent = await run(AgentService.use((s) => s.register(actor, { name: "certified" })))
    const controls = CATALOGUES.gdpr.controls.map((c) => ({ id: c.id, required: c.required, status: "met" }))
    const reportId = `rpt_period_${name}`
    await run(
      SqlClient.SqlClient.use(
        (sql) => sql`INSERT INTO compliance_reports (id, workspace_id, framework, agent_id, period_from, period_to,
            status, requested_by, summary, document, created_at, completed_at)
          VALUES (${reportId}, ${actor.workspaceId}, 'gdpr', ${agent.id}, ${from}::timestamptz, ${to}::timestamptz,
            'ready', 'test', ${JSON.stringify({ result: "compliant", met: controls.length, partial: 0, notMet: 0, notApplicable: 0 })}::jsonb,
            ${JSON.stringify({ controls })}, ${to}::timestamptz, ${to}::timestamptz)`,
      ),
    )
    await run(
      SqlClient.SqlClient.use(
        (sql) =>
          sql`UPDATE agents SET trust_score = 700, created_at = ${registeredAt}::timestamptz WHERE id = ${agent.id}`,
      ),
    )
    const issue = (ms: number) =>
      at(
        ms,
        ComplianceService.use((s) => s.issueCertification(actor, { agentId: agent.id, reportId })),
      )
    const count = async () =>
      (
        await run(
          SqlClient.SqlClient.use(
            (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM certifications WHERE report_id = ${reportId}`,
          ),
        )
      )[0]!.n
    return { issue, count }
  }

  it("a few quiet minutes of an agent registered long before do not certify it: 422 on reportId, nothing written", async () => {
    const s = await seed("minutes", "2031-05-31T23:55:00Z", "2031-06-01T00:00:00Z", "2030-01-01T00:00:00Z")
    const refused = await env.failure(s.issue(T))
    expect(refused).toMatchObject({ _tag: "InvalidInput", field: "reportId" })
    expect((refused as { message: string }).message).toContain("5 minutes")
    expect((refused as { message: string }).message).toContain("request a report from 2031-03-03T00:00:00.000Z")
    expect(await s.count()).toBe(0)
  })

  it("nor 89 days; 90 days do", async () => {
    const short = await seed(
      "89d",
      new Date(Date.parse("2031-06-01T00:00:00Z") - 89 * DAY).toISOString(),
      "2031-06-01T00:00:00Z",
      "2030-01-01T00:00:00Z",
    )
    expect(await env.failure(short.issue(T))).toMatchObject({ _tag: "InvalidInput", field: "reportId" })
    const enough = await seed("90d", "2031-03-03T00:00:00Z", "2031-06-01T00:00:00Z", "2030-01-01T00:00:00Z")
    expect((await run(enough.issue(T))).reportId).toBe("rpt_period_90d")
  })

  it("an agent younger than 90 days: a report of its whole life certifies; one that starts after its registration does not", async () => {
    const whole = await seed("young", "2031-05-20T00:00:00Z", "2031-06-01T00:00:00Z", "2031-05-20T00:00:00Z")
    expect((await run(whole.issue(T))).status).toBe("active")
    const later = await seed("young-later", "2031-05-25T00:00:00Z", "2031-06-01T00:00:00Z", "2031-05-20T00:00:00Z")
    const refused = await env.failure(later.issue(T))
    expect(refused).toMatchObject({ _tag: "InvalidInput", field: "reportId" })
    expect((refused as { message: string }).message).toContain("2031-05-20T00:00:00.000Z")
  })

  it("a report that ended more than 24 hours before does not certify: 422 asking for a report up to now", async () => {
    const s = await seed("stale", "2031-03-01T00:00:00Z", "2031-06-01T00:00:00Z", "2030-01-01T00:00:00Z")
    const to = Date.parse("2031-06-01T00:00:00Z")
    const refused = await env.failure(s.issue(to + DAY + 1))
    expect(refused).toMatchObject({ _tag: "InvalidInput", field: "reportId" })
    expect((refused as { message: string }).message).toContain("request a report up to now")
    expect(await s.count()).toBe(0)
    expect((await run(s.issue(to + DAY))).status).toBe("active")
  })
})
