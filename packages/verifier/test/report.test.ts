import { describe, expect, it } from "vitest"
import {
  CountedBuilder,
  EVENT_METRICS,
  type Metrics,
  metricMatches,
  REPORT_FORMAT,
  type ReportDocument,
  signReport,
  verifyReport,
} from "../src/index.ts"
import { makeBundle, makeChain, makeSigner, WORKSPACE } from "./fixtures.ts"

const signer = makeSigner("key_report")
const chain = makeChain(40)
/** The period covers events 5..30 (the fixture's events are a second apart). */
const period = { from: chain[4]!.timestamp, to: chain[30]!.timestamp }

/** A report over the fixture chain, counted by the same rules the server uses. */
const makeReport = (): ReportDocument => {
  const bundle = makeBundle(chain, signer)
  const counted = new CountedBuilder(10_000)
  const metrics = Object.fromEntries(EVENT_METRICS.map((m) => [m.name, 0])) as Metrics
  for (const e of chain.slice(4, 30)) {
    counted.push(e.sequence, e.id)
    for (const m of EVENT_METRICS) if (metricMatches(m, e)) metrics[m.name] += 1
  }
  return {
    format: REPORT_FORMAT,
    id: "rpt_1",
    workspaceId: WORKSPACE,
    framework: "soc2",
    catalogueVersion: "test",
    agentId: null,
    period,
    generatedAt: "2025-01-02T00:00:00.000Z",
    checkpoint: bundle.checkpoint,
    chain: { valid: true, checked: 40 },
    counted: counted.done(),
    metrics,
    activity: [],
    controls: [],
    summary: { result: "compliant", met: 0, partial: 0, notMet: 0, notApplicable: 0 },
  }
}

describe("verifyReport", () => {
  const report = signReport(makeReport(), signer.privateKey, signer.kid)
  const bundle = makeBundle(chain, signer)

  it("verifies a report against a bundle of its checkpoint, recounting every metric", () => {
    const r = verifyReport(report, [bundle], { trustedJwks: signer.jwks })
    expect(r.errors).toEqual([])
    expect(r.valid).toBe(true)
    expect(r.recounted).toBe(26)
    expect(report.counted.sequences).toEqual([[5, 30]])
  })

  it("one changed byte anywhere in the report fails its signature", () => {
    const text = JSON.stringify(report)
    const i = text.indexOf('"generatedAt":"2025') + '"generatedAt":"202'.length
    const changed = JSON.parse(`${text.slice(0, i)}6${text.slice(i + 1)}`)
    const r = verifyReport(changed, [bundle], { trustedJwks: signer.jwks })
    expect(r.valid).toBe(false)
    expect(r.errors[0]!.reason).toMatch(/signature does not verify/)
  })

  it("a metric the bundle does not recount fails, even when re-signed by another key", () => {
    const other = makeSigner("key_other")
    const inflated = signReport(
      { ...makeReport(), metrics: { ...makeReport().metrics, evaluations: 99 } },
      other.privateKey,
      other.kid,
    )
    const r = verifyReport(inflated, [bundle], { trustedJwks: signer.jwks })
    expect(r.valid).toBe(false)
    const reasons = r.errors.map((e) => e.reason)
    expect(reasons).toContain('no key with kid "key_other" in the JWKS')
    expect(reasons).toContain("metric evaluations: the report says 99, the bundle recounts 0")
  })

  it("counted events missing from the bundle fail, each named", () => {
    const part = makeBundle(chain, signer, { from: 10, to: 40 })
    const r = verifyReport(report, [part], { trustedJwks: signer.jwks })
    expect(r.valid).toBe(false)
    for (const sequence of [5, 6, 7, 8, 9])
      expect(r.errors).toContainEqual({ sequence, reason: "counted by the report but not in the bundle" })
  })

  it("a bundle of a later tree must prove it extends the report's", () => {
    const longer = makeChain(50)
    const later = makeBundle(longer, signer, { from: 1, to: 40 })
    const unlinked = verifyReport(report, [later], { trustedJwks: signer.jwks })
    expect(unlinked.valid).toBe(false)
    expect(unlinked.errors.map((e) => e.reason).join()).toMatch(/nor proven to extend it/)
    const linked = makeBundle(longer, signer, { from: 1, to: 40, consistencyFrom: 40 })
    expect(verifyReport(report, [linked], { trustedJwks: signer.jwks }).errors).toEqual([])
  })

  it("an event of the period the report left out is an undercount", () => {
    const doc = makeReport()
    const counted = new CountedBuilder(10_000)
    for (const e of chain.slice(5, 30)) counted.push(e.sequence, e.id)
    const metrics = Object.fromEntries(EVENT_METRICS.map((m) => [m.name, 0])) as Metrics
    for (const e of chain.slice(5, 30)) for (const m of EVENT_METRICS) if (metricMatches(m, e)) metrics[m.name] += 1
    const under = signReport({ ...doc, counted: counted.done(), metrics }, signer.privateKey, signer.kid)
    const r = verifyReport(under, [bundle], { trustedJwks: signer.jwks })
    expect(r.errors).toContainEqual({ sequence: 5, reason: "in the report's period and tree, but not counted" })
  })

  it("a malformed counted section, period or ids list is reported as invalid, never thrown", () => {
    const junk: Array<[string, unknown]> = [
      ["a range that is a number", { ...report.counted, sequences: [5] }],
      ["a null range", { ...report.counted, sequences: [null] }],
      ["a range of strings", { ...report.counted, sequences: [["a", "b"]] }],
      ["a reversed range", { ...report.counted, sequences: [[30, 5]] }],
      [
        "overlapping ranges",
        {
          ...report.counted,
          sequences: [
            [5, 20],
            [10, 30],
          ],
        },
      ],
      ["a non-finite id", { ...report.counted, ids: [JSON.parse("1e999")] }],
      ["deeply nested ids", { ...report.counted, ids: JSON.parse(`${"[".repeat(200_000)}${"]".repeat(200_000)}`) }],
      ["a count that is not a number", { ...report.counted, count: "26" }],
    ]
    for (const [what, counted] of junk) {
      const r = verifyReport({ ...report, counted }, [bundle], { trustedJwks: signer.jwks })
      expect(r.valid, what).toBe(false)
      expect(r.errors.map((e) => e.reason).join("\n"), what).toMatch(/"counted(\.[a-z]+)?(\[\d+\])?" /)
    }
    const noPeriod = verifyReport({ ...report, period: { from: "yesterday" } }, [bundle], { trustedJwks: signer.jwks })
    expect(noPeriod.valid).toBe(false)
    expect(noPeriod.errors.map((e) => e.reason)).toContain(
      '"period" missing or malformed: expected {from, to} timestamps',
    )
  })

  it("counted ranges far beyond the bundles are judged from the bundles' events, not walked one by one", () => {
    // Re-signed, so only the recount can refuse it; walking 2^53 sequences never ended.
    const huge = signReport(
      { ...makeReport(), counted: { ...makeReport().counted, sequences: [[5, Number.MAX_SAFE_INTEGER]] } },
      signer.privateKey,
      signer.kid,
    )
    const r = verifyReport(huge, [bundle], { trustedJwks: signer.jwks })
    expect(r.valid).toBe(false)
    expect(r.recounted).toBe(36)
    expect(r.errors.slice(0, 2)).toEqual([
      { sequence: 31, reason: "counted, but outside the report's period or agent" },
      { sequence: 32, reason: "counted, but outside the report's period or agent" },
    ])
    expect(r.errors).toContainEqual({ sequence: 41, reason: "counted by the report but not in the bundle" })
    expect(r.errors).toContainEqual({ sequence: 60, reason: "counted by the report but not in the bundle" })
    expect(r.errors).toContainEqual({
      reason: `${Number.MAX_SAFE_INTEGER - 40 - 20} more counted events are not in the bundle`,
    })
  })

  it("says which sequences of the report's tree no bundle held, so an undercount there went unchecked", () => {
    // Event 30 is in the period but left out; a bundle of only the counted range (5..29) cannot show it.
    const counted = new CountedBuilder(10_000)
    const metrics = Object.fromEntries(EVENT_METRICS.map((m) => [m.name, 0])) as Metrics
    for (const e of chain.slice(4, 29)) {
      counted.push(e.sequence, e.id)
      for (const m of EVENT_METRICS) if (metricMatches(m, e)) metrics[m.name] += 1
    }
    const under = signReport({ ...makeReport(), counted: counted.done(), metrics }, signer.privateKey, signer.kid)
    const part = verifyReport(under, [makeBundle(chain, signer, { from: 5, to: 29 })], { trustedJwks: signer.jwks })
    expect(part.errors).toEqual([])
    expect(part.warnings).toEqual([
      "the bundles do not hold sequences 1–4, 30–40 of the report's tree (size 40): events among them that fall in the report's period were not checked for being left uncounted",
    ])
    // With the whole tree the undercount shows, and there is nothing left unchecked to warn of.
    const whole = verifyReport(under, [bundle], { trustedJwks: signer.jwks })
    expect(whole.errors).toContainEqual({ sequence: 30, reason: "in the report's period and tree, but not counted" })
    expect(whole.warnings).toEqual([])
  })

  it("a bundle file that is not a bundle (an array, null, text) is an error named by its place, never skipped (third pass)", () => {
    // It was dropped before the check: a valid report and bundle plus any such file verified OK, and with only such
    // files the answer was "no export bundle given".
    for (const junk of [[], null, "bundle", 42]) {
      const r = verifyReport(report, [bundle, junk], { trustedJwks: signer.jwks })
      expect(r.valid).toBe(false)
      expect(r.errors).toEqual([{ reason: "bundle 2 is not an export bundle (not a JSON object)" }])
      const alone = verifyReport(report, [junk], { trustedJwks: signer.jwks })
      expect(alone.valid).toBe(false)
      expect(alone.errors).toEqual([{ reason: "the bundle is not an export bundle (not a JSON object)" }])
    }
    // A bundle's errors are named by its place among those given, junk included.
    const [h, ...rest] = bundle.events
    const tampered = { ...bundle, events: [{ ...h!, type: "changed" }, ...rest] }
    const named = verifyReport(report, [null, tampered], { trustedJwks: signer.jwks })
    expect(named.errors.map((e) => e.reason)).toContain("bundle 1 is not an export bundle (not a JSON object)")
    expect(named.errors.some((e) => e.reason.startsWith("bundle 2: hash does not match"))).toBe(true)
  })

  it("passes on what a bundle warns of, such as events whose attribution its proofs do not cover (third pass)", () => {
    // A workspace checkpointed before attribution was covered: its events before sequence 20 prove neither their id
    // nor their agentId, which the report's ids digest and agent scope rest on. The bundle said so; the report's
    // verification kept only the bundle's errors, and answered OK with no word of it.
    const legacy = makeBundle(chain, signer, { attributedFrom: 20 })
    const signed = signReport({ ...makeReport(), checkpoint: legacy.checkpoint }, signer.privateKey, signer.kid)
    const r = verifyReport(signed, [legacy], { trustedJwks: signer.jwks })
    expect(r.errors).toEqual([])
    expect(r.warnings).toEqual([
      "the bundle: events before sequence 20 were checkpointed before attribution was covered: their id, agentId, actor and occurredAt are not proven",
    ])
    // Unpinned keys are said once, by the report, not again for each bundle.
    const unpinned = verifyReport(signed, [legacy, legacy])
    expect(unpinned.warnings.filter((w) => w.includes("not pinned"))).toHaveLength(1)
    expect(unpinned.warnings.filter((w) => w.includes("attribution"))).toHaveLength(2)
  })

  it("never throws on junk", () => {
    expect(verifyReport(null, []).valid).toBe(false)
    expect(verifyReport({ format: REPORT_FORMAT }, [{}]).valid).toBe(false)
  })
})
