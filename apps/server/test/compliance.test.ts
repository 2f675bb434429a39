import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { ComplianceRepo, SCOPES, TrustRecompute } from "@agentgov/domain"
import { attributedLeaf, hashRange, type Jwks, rootOf, verifyReport } from "@agentgov/verifier"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { getDocument } from "pdfjs-dist/legacy/build/pdf.mjs"
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest"
import { expectError, startTestServer, type TestServer, unique } from "./helpers.ts"

let t: TestServer
const STANDARD_FONTS = join(
  dirname(createRequire(import.meta.url).resolve("pdfjs-dist/package.json")),
  "standard_fonts/",
)

beforeAll(async () => {
  t = await startTestServer()
})
afterAll(async () => t?.close())

const run = <A>(effect: unknown): Promise<A> => t.server.runtime.runPromise(effect as any) as Promise<A>
/**
 * Holds the workspace's chain head (FOR UPDATE) in a transaction of its own until `release()`: whatever appends to
 * that workspace's trail waits there, after its checks. `holding` settles once the transaction ends.
 */
const holdChainHead = async (workspaceId: string) => {
  let locked!: () => void
  let release!: () => void
  const isLocked = new Promise<void>((r) => (locked = r))
  const released = new Promise<void>((r) => (release = r))
  const holding = run(
    SqlClient.SqlClient.use((sql) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SELECT sequence FROM chain_heads WHERE workspace_id = ${workspaceId} FOR UPDATE`
          locked()
          yield* Effect.promise(() => released)
        }),
      ),
    ),
  )
  await isLocked
  return { release, holding }
}
const ok = <T = any>(res: { status: number; body: any }, status = 200): T => {
  expect(res.status, JSON.stringify(res.body)).toBe(status)
  return res.body.data as T
}

/** An operator's trust adjustment of the seeded agent (201). */
const adjustTrust = async (s: { agentId: string; key: string }, delta: number) =>
  ok(
    await t.call("POST", `/api/v1/trust/score/${s.agentId}/adjustments`, {
      key: s.key,
      body: { delta, reason: "operator review" },
    }),
    201,
  )

interface Seeded {
  readonly workspaceId: string
  /** The workspace's own all-scope key. */
  readonly key: string
  readonly agentId: string
  readonly agentKey: string
  readonly from: string
  to: string
}

/** A workspace of its own with one agent, an agent key (expiring unless `keyExpires: false`) and policies. */
const seedWorkspace = async (spec: { guardDefault: "allow" | "deny"; keyExpires?: boolean }): Promise<Seeded> => {
  const from = new Date(Date.now() - 1000).toISOString()
  const made = ok(
    await t.call("POST", "/api/v1/workspaces", { body: { name: unique("ws"), guardDefault: spec.guardDefault } }),
    201,
  )
  const key = made.apiKey.apiKey as string
  const agent = ok(await t.call("POST", "/api/v1/agents", { body: { name: unique("agent") }, key }), 201)
  const agentKey = ok(
    await t.call("POST", "/api/v1/api-keys", {
      key,
      body: {
        name: "agent key",
        type: "agent",
        agentId: agent.id,
        scopes: ["guard:evaluate", "compliance:read", "agents:read"],
        ...(spec.keyExpires === false ? {} : { expiresAt: new Date(Date.now() + 30 * 86_400_000).toISOString() }),
      },
    }),
    201,
  ).apiKey as string
  return { workspaceId: made.workspace.id, key, agentId: agent.id, agentKey, from, to: "" }
}

const policy = async (s: Seeded, rules: ReadonlyArray<Record<string, unknown>>) =>
  ok(await t.call("POST", "/api/v1/policies", { key: s.key, body: { name: unique("policy"), rules } }), 201)
const guard = async (s: Seeded, action: string, extra: Record<string, unknown> = {}) =>
  ok(await t.call("POST", "/v1/guard", { key: s.agentKey, body: { agentId: s.agentId, action, ...extra } }))

/** The period ends now (reports refuse a future end): everything seeded so far is inside it. */
const closePeriod = async (s: Seeded) => {
  await new Promise((r) => setTimeout(r, 5))
  s.to = new Date().toISOString()
  await new Promise((r) => setTimeout(r, 5))
}

/** Requests a report and waits for the worker to generate it. */
const report = async (s: Seeded, framework: string, agent = true) => {
  const made = ok(
    await t.call("POST", "/api/v1/compliance/reports", {
      key: s.key,
      body: { framework, from: s.from, to: s.to, ...(agent ? { agentId: s.agentId } : {}) },
    }),
    202,
  )
  expect(made.status).toBe("generating")
  for (let i = 0; i < 200; i++) {
    const got = ok(await t.call("GET", `/api/v1/compliance/reports/${made.id}`, { key: s.key }))
    if (got.status !== "generating") {
      expect(got.status, got.error).toBe("ready")
      return got
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error("the report was not generated")
}

const statuses = (r: any) => Object.fromEntries(r.report.controls.map((c: any) => [c.id, c.status]))

/**
 * A history that meets every required control: deny by default, an enforcing policy with a
 * require_approval rule, an expiring agent key, one approval decided by a person and used, one denial
 * acted on by a warning that was resolved.
 */
const seedCompliant = async () => {
  const s = await seedWorkspace({ guardDefault: "deny" })
  await policy(s, [
    { id: "reads", effect: "allow", actions: ["read.*"] },
    { id: "no-deletes", effect: "deny", actions: ["delete.*"] },
    { id: "human", effect: "require_approval", actions: ["deploy.prod"] },
  ])
  await guard(s, "read.file")
  await guard(s, "read.db")
  expect((await guard(s, "delete.db")).decision).toBe("deny")
  const asked = await guard(s, "deploy.prod")
  expect(asked.decision).toBe("require_approval")
  ok(
    await t.call("POST", `/api/v1/approvals/${asked.approvalId}/decide`, {
      key: s.key,
      body: { decision: "approved", reason: "reviewed" },
    }),
  )
  expect((await guard(s, "deploy.prod", { approvalId: asked.approvalId })).decision).toBe("allow")
  const warning = ok(
    await t.call("POST", "/api/v1/enforcement", {
      key: s.key,
      body: { agentId: s.agentId, type: "warning", reason: "tried to delete the database" },
    }),
    201,
  )
  ok(await t.call("PATCH", `/api/v1/enforcement/${warning.id}`, { key: s.key, body: { resolution: "upheld" } }))
  // No trust module yet: the agent has earned bronze by hand.
  await t.query((sql) => sql`UPDATE agents SET trust_score = 600 WHERE id = ${s.agentId}`)
  await closePeriod(s)
  return s
}

/** Allow by default, no approval rule, a key that never expires, and a denial nobody acted on. */
const seedPartial = async () => {
  const s = await seedWorkspace({ guardDefault: "allow", keyExpires: false })
  await policy(s, [{ id: "no-deletes", effect: "deny", actions: ["delete.*"] }])
  await guard(s, "read.file")
  await guard(s, "delete.db")
  await closePeriod(s)
  return s
}

/** The compliant history, whose trail is then altered after the period: one event's data rewritten. */
const seedTampered = async () => {
  const s = await seedCompliant()
  const [victim] = await t.query<{ sequence: number }>(
    (sql) => sql`SELECT sequence FROM events WHERE workspace_id = ${s.workspaceId} AND type = 'policy.denied'`,
  )
  await t.query(
    (sql) =>
      sql`UPDATE events SET data = (data::jsonb || '{"action":"read.file"}'::jsonb)::json
          WHERE workspace_id = ${s.workspaceId} AND sequence = ${victim!.sequence}`,
  )
  return { ...s, tampered: Number(victim!.sequence) }
}

let compliant: Seeded
let partial: Seeded
let tampered: Seeded & { tampered: number }

beforeAll(async () => {
  compliant = await seedCompliant()
  partial = await seedPartial()
  tampered = await seedTampered()
})

describe("reports judge each framework's controls by the catalogue's rules", () => {
  it("EU AI Act: compliant, partly (no approval exercised), non-compliant (a broken trail)", async () => {
    const good = await report(compliant, "eu-ai-act")
    // Required: record-keeping (chain valid, events recorded) and human oversight (approval decided, none bypassed).
    expect(statuses(good)).toEqual({
      "AIA-9": "partial",
      "AIA-10": "not_applicable",
      "AIA-11": "not_applicable",
      "AIA-12": "met",
      "AIA-13": "not_applicable",
      "AIA-14": "met",
      "AIA-15": "partial",
      "AIA-50": "not_applicable",
      "AIA-72": "partial",
      "AIA-73": "partial",
    })
    expect(good.summary.result).toBe("compliant")
    const oversight = good.report.controls.find((c: any) => c.id === "AIA-14")
    const value = (m: string) => oversight.evidence.find((e: any) => e.metric === m).value
    expect([value("approvalsRequired"), value("approvalsDecidedByPeople"), value("approvalsBypassed")]).toEqual([
      1, 1, 0,
    ])

    const some = await report(partial, "eu-ai-act")
    expect(statuses(some)["AIA-12"]).toBe("met")
    expect(statuses(some)["AIA-14"]).toBe("partial")
    expect(some.summary.result).toBe("partially_compliant")

    const bad = await report(tampered, "eu-ai-act")
    expect(statuses(bad)["AIA-12"]).toBe("not_met")
    expect(bad.summary.result).toBe("non_compliant")
  })

  it("GDPR: compliant, partly (allow by default, a key without expiry), non-compliant (no enforcing policy)", async () => {
    const good = await report(compliant, "gdpr")
    expect(statuses(good)).toEqual({
      "GDPR-5.1.f": "met",
      "GDPR-25": "met",
      "GDPR-30": "partial",
      "GDPR-32": "met",
      "GDPR-33": "partial",
    })
    expect(good.summary.result).toBe("compliant")

    const some = await report(partial, "gdpr")
    expect(statuses(some)).toMatchObject({ "GDPR-5.1.f": "met", "GDPR-25": "partial", "GDPR-32": "partial" })
    const keyGap = some.report.controls.find((c: any) => c.id === "GDPR-32")
    expect(keyGap.evidence.find((e: any) => e.label === "active keys without an expiry").value).toBe(1)
    expect(some.summary.result).toBe("partially_compliant")

    const none = await seedWorkspace({ guardDefault: "allow" })
    await guard(none, "read.file")
    await closePeriod(none)
    const bad = await report(none, "gdpr")
    expect(statuses(bad)["GDPR-25"]).toBe("not_met")
    expect(bad.summary.result).toBe("non_compliant")
  })

  it("SOC 2: compliant, partly (a violation nobody acted on), non-compliant (a broken trail)", async () => {
    const good = await report(compliant, "soc2")
    expect(statuses(good)).toEqual({
      "CC6.1": "met",
      "CC6.2": "met",
      "CC6.3": "met",
      "CC7.2": "met",
      "CC7.3": "met",
      "CC7.4": "met",
      "CC8.1": "partial",
      "A1.2": "not_applicable",
    })
    expect(good.summary.result).toBe("compliant")

    const some = await report(partial, "soc2")
    expect(statuses(some)["CC7.3"]).toBe("partial")
    expect(some.summary.result).toBe("partially_compliant")

    const bad = await report(tampered, "soc2")
    expect(statuses(bad)["CC7.2"]).toBe("not_met")
    expect(bad.summary.result).toBe("non_compliant")
  })

  it("a workspace report counts the workspace's keys: the all-scope key is a least-privilege gap", async () => {
    const whole = await report(compliant, "soc2", false)
    expect(whole.agentId).toBeNull()
    const cc63 = whole.report.controls.find((c: any) => c.id === "CC6.3")
    expect(cc63.status).toBe("partial")
    expect(
      cc63.evidence.find((e: any) => e.label === "active keys holding every workspace scope").value,
    ).toBeGreaterThan(0)
  })

  it("tampering after the period: record-keeping is not met and the report names the sequence", async () => {
    const bad = await report(tampered, "eu-ai-act")
    expect(bad.report.chain).toMatchObject({ valid: false, firstBadSequence: tampered.tampered })
    const keeping = bad.report.controls.find((c: any) => c.id === "AIA-12")
    expect(keeping.status).toBe("not_met")
    expect(keeping.evidence[0].label).toContain(`from sequence ${tampered.tampered}`)
    expect(keeping.gaps[0]).toContain(`from sequence ${tampered.tampered}`)
  })

  it("a trail rewritten under a signed checkpoint: the report pins to that checkpoint and is not compliant", async () => {
    const s = await seedCompliant()
    const first = await report(s, "eu-ai-act")
    const signed = first.report.checkpoint.treeSize
    const [victim] = await t.query<{ sequence: number }>(
      (sql) => sql`SELECT sequence FROM events WHERE workspace_id = ${s.workspaceId} AND type = 'policy.denied'`,
    )
    // Data and hash both replaced: the leaf no longer matches the root the checkpoint signed.
    await t.query(
      (sql) =>
        sql`UPDATE events SET hash = ${"0".repeat(64)} WHERE workspace_id = ${s.workspaceId} AND sequence = ${victim!.sequence}`,
    )
    const bad = await report(s, "eu-ai-act")
    expect(bad.report.checkpoint.treeSize).toBe(signed)
    expect(bad.report.checkpoint.signature).toBe(first.report.checkpoint.signature)
    expect(bad.report.chain).toMatchObject({ valid: false, firstBadSequence: Number(victim!.sequence) })
    expect(statuses(bad)["AIA-12"]).toBe("not_met")
    expect(bad.summary.result).toBe("non_compliant")
  })

  it("the report is pinned to a signed checkpoint, lists what it counted and emits compliance.report.generated", async () => {
    const r = await report(compliant, "gdpr")
    const doc = r.report
    const [cp] = await t.query<{ tree_size: number; root_hash: string }>(
      (sql) =>
        sql`SELECT tree_size, root_hash FROM checkpoints WHERE workspace_id = ${compliant.workspaceId}
            AND tree_size = ${doc.checkpoint.treeSize}`,
    )
    expect(cp?.root_hash).toBe(doc.checkpoint.rootHash)
    const counted = await t.query<{ sequence: number; id: string }>(
      (sql) =>
        sql`SELECT sequence, id FROM events WHERE workspace_id = ${compliant.workspaceId}
            AND ts >= ${compliant.from}::timestamptz AND ts < ${compliant.to}::timestamptz
            AND (agent_id = ${compliant.agentId} OR agent_id IS NULL) ORDER BY sequence`,
    )
    expect(doc.counted.count).toBe(counted.length)
    expect(doc.counted.ids).toEqual(counted.map((e) => e.id))
    const generated = await t.query<{ data: any }>(
      (sql) =>
        sql`SELECT data FROM events WHERE workspace_id = ${compliant.workspaceId}
            AND type = 'compliance.report.generated' AND data->>'reportId' = ${r.id}`,
    )
    expect(generated[0]?.data).toMatchObject({
      reportId: r.id,
      framework: "gdpr",
      agentId: compliant.agentId,
      result: "compliant",
      treeSize: doc.checkpoint.treeSize,
      counted: counted.length,
    })
  })

  it("counts a period of more events than a page (10,000 sequences) each once, with the digest of their ids", async () => {
    const s = await seedWorkspace({ guardDefault: "deny" })
    // Over 10,250 events: the pages of sequences cut the period in two.
    for (let c = 0; c < 103; c++) {
      ok(
        await t.call("POST", "/api/v1/events/ingest", {
          key: s.key,
          body: {
            events: Array.from({ length: c === 102 ? 50 : 100 }, (_, i) => ({ type: "app.step", data: { c, i } })),
          },
        }),
        201,
      )
    }
    await closePeriod(s)
    const r = await report(s, "soc2", false)
    const counted = await t.query<{ sequence: number; id: string }>(
      (sql) =>
        sql`SELECT sequence, id FROM events WHERE workspace_id = ${s.workspaceId}
            AND ts >= ${s.from}::timestamptz AND ts < ${s.to}::timestamptz ORDER BY sequence`,
    )
    expect(counted.length).toBeGreaterThan(10_250)
    expect(r.report.counted.count).toBe(counted.length)
    expect(r.report.metrics.events).toBe(counted.length)
    expect(r.report.counted.sequences).toEqual([[counted[0]!.sequence, counted.at(-1)!.sequence]])
    // Over a bundle's worth the ids are not listed, only digested: the digest is of every one, in order.
    expect(r.report.counted.ids).toBeUndefined()
    const digest = createHash("sha256")
    for (const e of counted) digest.update(`${e.sequence} ${e.id}\n`)
    expect(r.report.counted.idsDigest).toBe(digest.digest("hex"))

    // The chain's verification stored the Merkle subtrees it hashed and the checkpoint was signed from them:
    // each stored subtree, and the signed root, is what hashing the events' leaves gives.
    const rows = await t.query<any>(
      (sql) => sql`SELECT sequence, hash, id, agent_id, actor_type, actor_id,
          to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS occurred_at
        FROM events WHERE workspace_id = ${s.workspaceId} AND sequence <= ${r.report.checkpoint.treeSize}
        ORDER BY sequence`,
    )
    const leaves = rows.map((e) =>
      attributedLeaf({
        hash: e.hash,
        id: e.id,
        agentId: e.agent_id,
        actor: { type: e.actor_type, id: e.actor_id },
        occurredAt: e.occurred_at,
      }),
    )
    expect(leaves.length).toBe(r.report.checkpoint.treeSize)
    expect(r.report.checkpoint.rootHash).toBe(rootOf(leaves))
    const nodes = await t.query<{ level: number; idx: number; hash: string }>(
      (sql) => sql`SELECT level, idx, hash FROM merkle_nodes WHERE workspace_id = ${s.workspaceId} ORDER BY level, idx`,
    )
    expect(nodes.filter((n) => n.level === 8).map((n) => Number(n.idx))).toEqual(
      Array.from({ length: Math.floor(leaves.length / 256) }, (_, i) => i),
    )
    for (const n of nodes) {
      const size = 2 ** n.level
      expect(n.hash, `${n.level}/${n.idx}`).toBe(hashRange(leaves, Number(n.idx) * size, (Number(n.idx) + 1) * size))
    }
  })
})

describe("the queue", () => {
  it("one workspace's backlog of reports does not hold up another workspace's report", async () => {
    const a = await seedWorkspace({ guardDefault: "deny" })
    const b = await seedWorkspace({ guardDefault: "deny" })
    await closePeriod(a)
    b.to = a.to
    const request = async (s: Seeded) =>
      ok(
        await t.call("POST", "/api/v1/compliance/reports", {
          key: s.key,
          body: { framework: "soc2", from: s.from, to: s.to },
        }),
        202,
      ).id as string
    // While a's first report is being generated (held at a's chain head), a queues three more, then b one.
    const { release, holding } = await holdChainHead(a.workspaceId)
    const first = await request(a)
    for (let i = 0; ; i++) {
      const [row] = await t.query<{ claimed: boolean }>(
        (sql) => sql`SELECT claimed_until IS NOT NULL AS claimed FROM compliance_reports WHERE id = ${first}`,
      )
      if (row!.claimed) break
      if (i > 500) throw new Error("the worker did not claim the report")
      await new Promise((r) => setTimeout(r, 10))
    }
    const backlog = [await request(a), await request(a), await request(a)]
    const other = await request(b)
    release()
    await holding
    const completed = async (id: string) => {
      for (let i = 0; i < 600; i++) {
        const [row] = await t.query<{ status: string; completed_at: Date | null }>(
          (sql) => sql`SELECT status, completed_at FROM compliance_reports WHERE id = ${id}`,
        )
        if (row!.status !== "generating") {
          expect(row!.status).toBe("ready")
          return row!.completed_at!.getTime()
        }
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error(`report ${id} was not generated`)
    }
    const otherDone = await completed(other)
    const backlogDone = await Promise.all(backlog.map(completed))
    // Served next, before any of a's backlog (they were requested first).
    for (const done of backlogDone) expect(otherDone).toBeLessThanOrEqual(done)
  })
})

describe("offline verification", () => {
  const exportFor = async (s: Seeded, doc: any) => {
    const first = doc.counted.sequences[0][0]
    const last = doc.counted.sequences.at(-1)[1]
    return ok(
      await t.call(
        "GET",
        `/api/v1/events/export?fromSequence=${first}&toSequence=${last}&sinceTreeSize=${doc.checkpoint.treeSize}`,
        { key: s.key },
      ),
    )
  }

  it("a report verifies against a bundle; a changed byte fails; counted events missing from the bundle fail", async () => {
    const r = await report(compliant, "soc2")
    const bundle = await exportFor(compliant, r.report)
    const jwks = (await (await fetch(`${t.url}/.well-known/jwks.json`)).json()) as Jwks
    const good = verifyReport(r, [bundle], { trustedJwks: jwks })
    expect(good.errors).toEqual([])
    expect(good.valid).toBe(true)
    expect(good.recounted).toBe(r.report.counted.count)

    // One byte of the saved report changed: a digit of a metric.
    const text = JSON.stringify(r.report)
    const at = text.indexOf('"evaluations":') + '"evaluations":'.length
    const changed = text.slice(0, at) + String((Number(text[at]) + 1) % 10) + text.slice(at + 1)
    expect(changed.length).toBe(text.length)
    const forged = verifyReport(JSON.parse(changed), [bundle], { trustedJwks: jwks })
    expect(forged.valid).toBe(false)
    expect(forged.errors.map((e) => e.reason).join("\n")).toMatch(/signature does not verify/)

    // The bundle without the first counted event.
    const first = r.report.counted.sequences[0][0]
    const short = await t.call(
      "GET",
      `/api/v1/events/export?fromSequence=${first + 1}&toSequence=${r.report.counted.sequences.at(-1)[1]}&sinceTreeSize=${r.report.checkpoint.treeSize}`,
      { key: compliant.key },
    )
    const missing = verifyReport(r, [ok(short)], { trustedJwks: jwks })
    expect(missing.valid).toBe(false)
    expect(missing.errors).toContainEqual({ sequence: first, reason: "counted by the report but not in the bundle" })
  })

  it("agentgov-verify report: exit 0 for the report, 1 for a changed one", async () => {
    const r = await report(compliant, "eu-ai-act")
    const bundle = await exportFor(compliant, r.report)
    const dir = mkdtempSync(join(tmpdir(), "report-"))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, "report.json"), JSON.stringify({ ok: true, data: r }))
    writeFileSync(join(dir, "bundle.json"), JSON.stringify(bundle))
    const cli = join(import.meta.dirname, "../../../packages/verifier/bin/agentgov-verify.js")
    const out = execFileSync(process.execPath, [cli, "report", join(dir, "report.json"), join(dir, "bundle.json")], {
      encoding: "utf8",
    })
    expect(out).toMatch(/^OK: /)
    writeFileSync(
      join(dir, "report.json"),
      JSON.stringify({ ...r.report, period: { ...r.report.period, to: new Date().toISOString() } }),
    )
    let code = 0
    try {
      execFileSync(process.execPath, [cli, "report", join(dir, "report.json"), join(dir, "bundle.json")])
    } catch (e) {
      code = (e as { status: number }).status
    }
    expect(code).toBe(1)
  })
})

describe("rendering", () => {
  it("a PDF that parses, with a cover, the table, a page per control and the verification page", async () => {
    const r = await report(compliant, "soc2")
    const res = await fetch(`${t.url}/api/v1/compliance/reports/${r.id}?format=pdf`, {
      headers: { authorization: `Bearer ${compliant.key}` },
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("application/pdf")
    const bytes = new Uint8Array(await res.arrayBuffer())
    // To look at it as an auditor would: DUMP_REPORT_PDF=/tmp/r.pdf, then pdftoppm -png /tmp/r.pdf page.
    if (process.env.DUMP_REPORT_PDF) writeFileSync(process.env.DUMP_REPORT_PDF, bytes)
    expect(Buffer.from(bytes.subarray(0, 5)).toString()).toBe("%PDF-")
    const task = getDocument({ data: bytes, standardFontDataUrl: STANDARD_FONTS })
    const pdf = await task.promise
    // 8 SOC 2 controls: cover + controls and chart + 8 evidence pages + verification.
    expect(pdf.numPages).toBe(11)
    let text = ""
    for (let p = 1; p <= pdf.numPages; p++) {
      const content = await (await pdf.getPage(p)).getTextContent()
      text += `${content.items.map((i: any) => i.str).join(" ")}\n`
    }
    for (const id of ["CC6.1", "CC6.2", "CC6.3", "CC7.2", "CC7.3", "CC7.4", "CC8.1", "A1.2"]) expect(text).toContain(id)
    expect(text).toContain(r.report.checkpoint.rootHash)
    expect(text).toContain("agentgov-verify report")
    await task.destroy()
  })

  it("an HTML view, escaped; 409 before the report is ready", async () => {
    const r = await report(compliant, "gdpr")
    const res = await fetch(`${t.url}/api/v1/compliance/reports/${r.id}?format=html`, {
      headers: { authorization: `Bearer ${compliant.key}` },
    })
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'")
    const html = await res.text()
    expect(html).toContain("<h1>GDPR</h1>")
    expect(html).toContain("GDPR-5.1.f")
    expect(html).not.toContain("<script")

    const waiting = ok(
      await t.call("POST", "/api/v1/compliance/reports", {
        key: compliant.key,
        body: { framework: "gdpr", from: compliant.from, to: compliant.to },
      }),
      202,
    )
    // Held as generating: claimed by nobody while this test looks.
    await t.query(
      (sql) => sql`UPDATE compliance_reports SET claimed_until = now() + interval '1 hour' WHERE id = ${waiting.id}`,
    )
    expectError(
      await t.call("GET", `/api/v1/compliance/reports/${waiting.id}?format=pdf`, { key: compliant.key }),
      409,
      "REPORT_NOT_READY",
    )
    await t.query((sql) => sql`UPDATE compliance_reports SET claimed_until = NULL WHERE id = ${waiting.id}`)
  })
})

describe("certifications", () => {
  it("issues from an agent's report whose required controls are met, signed, valid a year", async () => {
    const r = await report(compliant, "eu-ai-act")
    const badge = async () => {
      const res = await t.call("GET", `/api/v1/badge/${compliant.agentId}?format=json`, { key: null })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body.data.certifications
    }
    // Served (and cached by the server) before the certification.
    const before = await badge()
    expect(before).not.toContain("eu-ai-act")
    const cert = ok(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: compliant.key,
        body: { agentId: compliant.agentId, reportId: r.id },
      }),
      201,
    )
    expect(cert).toMatchObject({ agentId: compliant.agentId, framework: "eu-ai-act", reportId: r.id, status: "active" })
    expect(Date.parse(cert.expiresAt) - Date.parse(cert.issuedAt)).toBe(365 * 86_400_000)
    expect(cert.signature).toMatch(/^[\w-]+\.\.[\w-]+$/)
    const listed = ok<any[]>(
      await t.call("GET", `/api/v1/compliance/certifications/${compliant.agentId}`, { key: compliant.key }),
    )
    expect(listed.map((c) => c.id)).toContain(cert.id)
    // What the agent's badge shows: the badge reads its frameworks through ComplianceRepo.activeFrameworks.
    expect(
      await run(
        ComplianceRepo.use((r) =>
          r.activeFrameworks(compliant.workspaceId, compliant.agentId, new Date().toISOString()),
        ),
      ),
    ).toEqual([{ framework: "eu-ai-act", until: Date.parse(cert.expiresAt) }])
    // And the badge names it at once, although one was cached before.
    expect(await badge()).toContain("eu-ai-act")
  })

  it("signs a badge naming a certification to expire no later than the certification does", async () => {
    const r = await report(compliant, "eu-ai-act")
    const cert = ok(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: compliant.key,
        body: { agentId: compliant.agentId, reportId: r.id },
      }),
      201,
    )
    // Every certification of the agent in force ends in two hours: a badge valid 24 h would still name the framework,
    // checked offline, for 22 hours after it ended.
    const ends = new Date(Date.now() + 2 * 3_600_000)
    await t.query(
      (sql) =>
        sql`UPDATE certifications SET expires_at = ${ends} WHERE agent_id = ${compliant.agentId} AND status = 'active'`,
    )
    // The issue dropped the cached badge: this read signs a new one from the rows as they are now.
    const res = await t.call("GET", `/api/v1/badge/${compliant.agentId}?format=json`, { key: null })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const shown = res.body.data
    expect(shown.certifications).toContain("eu-ai-act")
    expect(Date.parse(shown.expiresAt)).toBe(ends.getTime())
    const payload = JSON.parse(Buffer.from(shown.signature.split(".")[1], "base64url").toString("utf8"))
    expect(payload.exp).toBe(Math.floor(ends.getTime() / 1000))
    expect(cert.id).toMatch(/^crt_/)
  })

  it("refuses with 409 naming the unmet controls, and changes nothing", async () => {
    const r = await report(partial, "gdpr")
    const before = await t.chainLength(partial.workspaceId)
    const res = await t.call("POST", "/api/v1/compliance/certifications", {
      key: partial.key,
      body: { agentId: partial.agentId, reportId: r.id },
    })
    expectError(res, 409, "CERTIFICATION_REFUSED")
    expect(res.body.error.message).toContain("GDPR-25 (partial)")
    expect(res.body.error.message).toContain("GDPR-32 (partial)")
    expect(res.body.error.details.issue).toBe("unmet: GDPR-25, GDPR-32")
    expect(await t.chainLength(partial.workspaceId)).toBe(before)
    expect(
      ok<any[]>(await t.call("GET", `/api/v1/compliance/certifications/${partial.agentId}`, { key: partial.key })),
    ).toEqual([])
  })

  it("a report backs one certification: asked again, 409 naming it, and no second certification.issued", async () => {
    const s = await seedCompliant()
    const r = await report(s, "gdpr")
    const issue = () =>
      t.call("POST", "/api/v1/compliance/certifications", { key: s.key, body: { agentId: s.agentId, reportId: r.id } })
    const cert = ok(await issue(), 201)
    const before = await t.chainLength(s.workspaceId)
    const again = await issue()
    expectError(again, 409, "CERTIFICATION_REFUSED")
    expect(again.body.error.message).toContain(cert.id)
    expect(await t.chainLength(s.workspaceId)).toBe(before)
    const listed = ok<any[]>(await t.call("GET", `/api/v1/compliance/certifications/${s.agentId}`, { key: s.key }))
    expect(listed.map((c) => c.id)).toEqual([cert.id])
  })

  it("a compliant report of a short period after the agent's registration does not certify: 422 (fifth pass)", async () => {
    const s = await seedCompliant()
    const agent = ok(await t.call("GET", `/api/v1/agents/${s.agentId}`, { key: s.key }))
    // The period an operator picks to flatter the agent: from just after its registration, everything seeded inside.
    const r = await report({ ...s, from: new Date(Date.parse(agent.createdAt) + 1).toISOString() }, "gdpr")
    expect(r.summary.result).toBe("compliant")
    const before = await t.chainLength(s.workspaceId)
    const res = await t.call("POST", "/api/v1/compliance/certifications", {
      key: s.key,
      body: { agentId: s.agentId, reportId: r.id },
    })
    expectError(res, 422, "VALIDATION_ERROR", "reportId")
    expect(res.body.error.message).toContain("at least the 90 days before its end")
    expect(res.body.error.message).toContain(`request a report from ${agent.createdAt} or earlier`)
    expect(await t.chainLength(s.workspaceId)).toBe(before)
    expect(ok<any[]>(await t.call("GET", `/api/v1/compliance/certifications/${s.agentId}`, { key: s.key }))).toEqual([])
    // The agent's whole life (the period starts before its registration) certifies it.
    const whole = await report(s, "gdpr")
    ok(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: s.key,
        body: { agentId: s.agentId, reportId: whole.id },
      }),
      201,
    )
  })

  it("a badge presented as text with its certifications nested deep is refused, not a 500 (third pass)", async () => {
    const res = await t.call("GET", `/api/v1/badge/${compliant.agentId}?format=json`, { key: null })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const { certifications: _, ...rest } = res.body.data
    const deep = `${"[".repeat(20_000)}${"]".repeat(20_000)}`
    const text = `${JSON.stringify(rest).slice(0, -1)},"certifications":${deep}}`
    const checked = await t.call("POST", `/api/v1/badge/${compliant.agentId}/verify`, {
      key: null,
      body: { badge: text },
    })
    expect(checked.status, JSON.stringify(checked.body)).toBe(200)
    expect(checked.body.data).toMatchObject({ valid: false, reason: "bad_signature" })
  })

  it("a suspension revokes the agent's certifications (certification.revoked)", async () => {
    const s = await seedCompliant()
    const r = await report(s, "soc2")
    const cert = ok(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: s.key,
        body: { agentId: s.agentId, reportId: r.id },
      }),
      201,
    )
    ok(
      await t.call("POST", "/api/v1/enforcement", {
        key: s.key,
        body: { agentId: s.agentId, type: "suspension", reason: "incident", durationSeconds: 3600 },
      }),
      201,
    )
    expect(ok<any[]>(await t.call("GET", `/api/v1/compliance/certifications/${s.agentId}`, { key: s.key }))).toEqual([])
    const [row] = await t.query<{ status: string; revoked_reason: string }>(
      (sql) => sql`SELECT status, revoked_reason FROM certifications WHERE id = ${cert.id}`,
    )
    expect(row).toEqual({ status: "revoked", revoked_reason: "agent_suspended" })
    const events = await t.query<{ type: string; data: any }>(
      (sql) => sql`SELECT type, data FROM events WHERE workspace_id = ${s.workspaceId}
          AND type IN ('certification.issued', 'certification.revoked') ORDER BY sequence`,
    )
    expect(events.map((e) => e.type)).toEqual(["certification.issued", "certification.revoked"])
    expect(events[1]!.data).toEqual({
      certificationId: cert.id,
      agentId: s.agentId,
      framework: "soc2",
      reportId: r.id,
      reason: "agent_suspended",
    })
  })

  it("a fall below bronze revokes them, in the trust worker's pass that announces it", async () => {
    const s = await seedCompliant()
    const r = await report(s, "gdpr")
    const cert = ok(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: s.key,
        body: { agentId: s.agentId, reportId: r.id },
      }),
      201,
    )
    const adjust = (delta: number) => adjustTrust(s, delta)
    const pass = async () => {
      for (let i = 0; i < 500; i++) {
        await run(TrustRecompute.use((w) => w.catchUp(s.workspaceId)))
        if (!(await run<ReadonlyArray<string>>(TrustRecompute.use((w) => w.behind))).includes(s.workspaceId)) return
        await new Promise((r) => setTimeout(r, 10))
      }
      throw new Error("the trust worker did not catch up")
    }
    const listed = async () =>
      ok<any[]>(await t.call("GET", `/api/v1/compliance/certifications/${s.agentId}`, { key: s.key }))
    // Vetted into bronze by the operator: the pass keeps the certification.
    await adjust(200)
    await pass()
    expect((await listed()).map((c) => c.id)).toEqual([cert.id])
    // Then an incident takes the agent below bronze: the pass revokes it, with certification.revoked.
    await adjust(-300)
    await pass()
    expect(await listed()).toEqual([])
    const [revoked] = await t.query<{ data: any }>(
      (sql) => sql`SELECT data FROM events WHERE workspace_id = ${s.workspaceId} AND type = 'certification.revoked'`,
    )
    expect(revoked!.data).toMatchObject({ certificationId: cert.id, reason: "trust_below_bronze" })
    // And no new one while below bronze.
    const again = await t.call("POST", "/api/v1/compliance/certifications", {
      key: s.key,
      body: { agentId: s.agentId, reportId: r.id },
    })
    expectError(again, 409, "CERTIFICATION_REFUSED")
    expect(again.body.error.message).toContain("below bronze")
  })

  it("a certification issued while the trust pass takes the agent below bronze is revoked by that pass", async () => {
    const s = await seedCompliant()
    const r = await report(s, "gdpr")
    const adjust = (delta: number) => adjustTrust(s, delta)
    const catchUp = () => run(TrustRecompute.use((w) => w.catchUp(s.workspaceId)))
    await adjust(200)
    await catchUp()
    // The incident is recorded; the pass that will announce it has not run yet.
    await adjust(-300)
    const waiting = async (n: number) => {
      for (let i = 0; i < 1000; i++) {
        const [row] = await t.query<{ n: number }>(
          (sql) => sql`SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND datname = current_database()`,
        )
        if (row!.n >= n) return
        await new Promise((r) => setTimeout(r, 10))
      }
      throw new Error(`fewer than ${n} statements waiting on a lock`)
    }
    // Hold the chain head: the issue stops at its event, after its checks and its row, holding the agent's lock.
    const { release, holding } = await holdChainHead(s.workspaceId)
    const issuing = t.call("POST", "/api/v1/compliance/certifications", {
      key: s.key,
      body: { agentId: s.agentId, reportId: r.id },
    })
    await waiting(1)
    // The pass, meanwhile, computes the fall below bronze and revokes what is in force.
    const passing = catchUp()
    await waiting(2)
    release()
    await holding
    const cert = ok(await issuing, 201)
    await passing
    for (let i = 0; i < 10; i++) await catchUp()
    const [row] = await t.query<{ status: string; revoked_reason: string | null }>(
      (sql) => sql`SELECT status, revoked_reason FROM certifications WHERE id = ${cert.id}`,
    )
    expect(row).toEqual({ status: "revoked", revoked_reason: "trust_below_bronze" })
    expect(ok<any[]>(await t.call("GET", `/api/v1/compliance/certifications/${s.agentId}`, { key: s.key }))).toEqual([])
  })

  it("an operator revokes one in force: certification.revoked, gone from the list and from the badge at once", async () => {
    const s = await seedCompliant()
    const r = await report(s, "soc2")
    const cert = ok(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: s.key,
        body: { agentId: s.agentId, reportId: r.id },
      }),
      201,
    )
    const badge = async () => {
      const res = await t.call("GET", `/api/v1/badge/${s.agentId}?format=json`, { key: null })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      const payload = JSON.parse(Buffer.from(res.body.data.signature.split(".")[1], "base64url").toString("utf8"))
      return { listed: res.body.data.certifications, signed: payload.certifications }
    }
    // The badge (cached by the server from here on) names the framework, signed.
    expect(await badge()).toEqual({ listed: ["soc2"], signed: ["soc2"] })
    const readOnly = await t.createKey(
      { type: "workspace", scopes: SCOPES.filter((x) => x !== "compliance:write" && x !== "workspaces:admin") },
      s.key,
    )
    const before = await t.chainLength(s.workspaceId)
    const reason = "the audit found the approval records incomplete"

    // Not by an agent key (agent keys cannot hold compliance:write), nor without compliance:write, nor from
    // another workspace.
    expectError(
      await t.call("POST", `/api/v1/compliance/certifications/${cert.id}/revoke`, {
        key: s.agentKey,
        body: { reason },
      }),
      403,
      "FORBIDDEN",
      "scope",
    )
    expectError(
      await t.call("POST", `/api/v1/compliance/certifications/${cert.id}/revoke`, { key: readOnly, body: { reason } }),
      403,
      "FORBIDDEN",
      "scope",
    )
    expectError(
      await t.call("POST", `/api/v1/compliance/certifications/${cert.id}/revoke`, {
        key: partial.key,
        body: { reason },
      }),
      404,
      "CERTIFICATION_NOT_FOUND",
    )
    // Empty, or only spaces and invisible characters: a reason nobody can read.
    for (const blank of ["", "   ", "\u200b\u00a0\t"])
      expectError(
        await t.call("POST", `/api/v1/compliance/certifications/${cert.id}/revoke`, {
          key: s.key,
          body: { reason: blank },
        }),
        422,
        "VALIDATION_ERROR",
        "reason",
      )
    expect(await t.chainLength(s.workspaceId)).toBe(before)

    const revoked = ok(
      await t.call("POST", `/api/v1/compliance/certifications/${cert.id}/revoke`, { key: s.key, body: { reason } }),
    )
    expect(revoked).toMatchObject({
      id: cert.id,
      status: "revoked",
      revokedReason: "revoked_by_operator",
      revocationNote: reason,
      signature: cert.signature,
    })
    expect(Date.parse(revoked.revokedAt)).toBeGreaterThanOrEqual(Date.parse(cert.issuedAt))
    expect(ok<any[]>(await t.call("GET", `/api/v1/compliance/certifications/${s.agentId}`, { key: s.key }))).toEqual([])
    // The badge no longer names it, although the one served before was cached.
    expect(await badge()).toEqual({ listed: [], signed: [] })
    const events = await t.query<{ type: string; data: any; actor_type: string; actor_id: string }>(
      (sql) => sql`SELECT type, data, actor_type, actor_id FROM events WHERE workspace_id = ${s.workspaceId}
          AND sequence > ${before} ORDER BY sequence`,
    )
    expect(events.map((e) => e.type)).toEqual(["certification.revoked"])
    expect(events[0]!.data).toEqual({
      certificationId: cert.id,
      agentId: s.agentId,
      framework: "soc2",
      reportId: r.id,
      reason: "revoked_by_operator",
      note: reason,
    })
    expect(events[0]!.actor_type).toBe("api_key")

    // Once: a revoked one is 409, and nothing more is recorded.
    const again = await t.call("POST", `/api/v1/compliance/certifications/${cert.id}/revoke`, {
      key: s.key,
      body: { reason },
    })
    expectError(again, 409, "CERTIFICATION_NOT_ACTIVE")
    expect(again.body.error.message).toContain("revoked")
    expect(await t.chainLength(s.workspaceId)).toBe(before + 1)
  })

  it("refuses a workspace report, and a report of another agent", async () => {
    const whole = await report(compliant, "gdpr", false)
    expectError(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: compliant.key,
        body: { agentId: compliant.agentId, reportId: whole.id },
      }),
      422,
      "VALIDATION_ERROR",
      "reportId",
    )
  })
})

describe("security", () => {
  let readOnly: string
  let writeOnly: string
  beforeAll(async () => {
    const scopes = SCOPES.filter((s) => !["compliance:read", "compliance:write", "workspaces:admin"].includes(s))
    readOnly = await t.createKey({ type: "workspace", scopes: [...scopes, "compliance:read"] }, compliant.key)
    writeOnly = await t.createKey({ type: "workspace", scopes: [...scopes, "compliance:write"] }, compliant.key)
  })

  it("compliance:write to request and certify, compliance:read to read", async () => {
    const body = { framework: "gdpr", from: compliant.from, to: compliant.to }
    expectError(await t.call("POST", "/api/v1/compliance/reports", { key: readOnly, body }), 403, "FORBIDDEN", "scope")
    const r = await report(compliant, "gdpr")
    expectError(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: readOnly,
        body: { agentId: compliant.agentId, reportId: r.id },
      }),
      403,
      "FORBIDDEN",
      "scope",
    )
    for (const path of [
      "/api/v1/compliance/reports",
      `/api/v1/compliance/reports/${r.id}`,
      `/api/v1/compliance/certifications/${compliant.agentId}`,
    ]) {
      expectError(await t.call("GET", path, { key: writeOnly }), 403, "FORBIDDEN", "scope")
      expect((await t.call("GET", path, { key: readOnly })).status).toBe(200)
    }
  })

  it("another workspace's reports are 404 and never listed", async () => {
    const r = await report(compliant, "soc2")
    expectError(
      await t.call("GET", `/api/v1/compliance/reports/${r.id}`, { key: partial.key }),
      404,
      "REPORT_NOT_FOUND",
    )
    expectError(
      await t.call("GET", `/api/v1/compliance/reports/${r.id}?format=pdf`, { key: partial.key }),
      404,
      "REPORT_NOT_FOUND",
    )
    const listed = ok<any[]>(await t.call("GET", "/api/v1/compliance/reports?limit=100", { key: partial.key }))
    expect(listed.map((x) => x.id)).not.toContain(r.id)
    expect(listed.every((x) => x.workspaceId === partial.workspaceId)).toBe(true)
    expectError(
      await t.call("POST", "/api/v1/compliance/certifications", {
        key: partial.key,
        body: { agentId: partial.agentId, reportId: r.id },
      }),
      404,
      "REPORT_NOT_FOUND",
    )
  })

  it("an agent key sees only its own agent's reports and certifications", async () => {
    const other = ok(
      await t.call("POST", "/api/v1/agents", { key: compliant.key, body: { name: unique("other") } }),
      201,
    )
    const mine = await report(compliant, "gdpr")
    const whole = await report(compliant, "gdpr", false)
    expect(ok(await t.call("GET", `/api/v1/compliance/reports/${mine.id}`, { key: compliant.agentKey })).id).toBe(
      mine.id,
    )
    expectError(
      await t.call("GET", `/api/v1/compliance/reports/${whole.id}`, { key: compliant.agentKey }),
      404,
      "REPORT_NOT_FOUND",
    )
    const listed = ok<any[]>(await t.call("GET", "/api/v1/compliance/reports?limit=100", { key: compliant.agentKey }))
    expect(listed.length).toBeGreaterThan(0)
    expect(listed.every((x) => x.agentId === compliant.agentId)).toBe(true)
    // Lists carry each report's summary, never its document.
    const ready = listed.find((x) => x.id === mine.id)
    expect(ready.summary).toEqual(mine.summary)
    expect(ready.report).toBeUndefined()
    expect(
      (await t.call("GET", `/api/v1/compliance/certifications/${compliant.agentId}`, { key: compliant.agentKey }))
        .status,
    ).toBe(200)
    expectError(
      await t.call("GET", `/api/v1/compliance/certifications/${other.id}`, { key: compliant.agentKey }),
      404,
      "AGENT_NOT_FOUND",
    )
  })

  it("bad input is refused with the field named and nothing stored", async () => {
    const count = async () =>
      (
        await t.query<{ n: number }>(
          (sql) => sql`SELECT count(*)::int AS n FROM compliance_reports WHERE workspace_id = ${compliant.workspaceId}`,
        )
      )[0]!.n
    const before = await count()
    const post = (body: Record<string, unknown>) =>
      t.call("POST", "/api/v1/compliance/reports", { key: compliant.key, body })
    expectError(
      await post({ framework: "hipaa", from: compliant.from, to: compliant.to }),
      422,
      "VALIDATION_ERROR",
      "framework",
    )
    expectError(
      await post({ framework: "gdpr", from: compliant.to, to: compliant.from }),
      422,
      "VALIDATION_ERROR",
      "from",
    )
    expectError(
      await post({ framework: "gdpr", from: compliant.from, to: new Date(Date.now() + 86_400_000).toISOString() }),
      422,
      "VALIDATION_ERROR",
      "to",
    )
    expectError(
      await post({ framework: "gdpr", from: compliant.from, to: compliant.to, agentId: "agt_nope" }),
      404,
      "AGENT_NOT_FOUND",
    )
    expect(await count()).toBe(before)
  })
})
