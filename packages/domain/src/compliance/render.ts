/**
 * A report as auditors read it: a PDF (pdfkit) and an HTML page, both drawn from the signed document alone.
 * The PDF has a fixed shape: a cover, the controls with the activity chart, one page per control with its
 * evidence and gaps, and the verification page, so its page count is the catalogue's size plus three.
 */
import type { ControlOutcome } from "@agentgov/verifier"
import type { ReportDocumentSchema } from "./Compliance.ts"
import { CATALOGUES } from "./controls/index.ts"

/** A signed report as the API returns it. */
export type RenderableReport = typeof ReportDocumentSchema.Type

const STATUS_COLOUR: Record<ControlOutcome["status"], string> = {
  met: "#1b7f3b",
  partial: "#b26a00",
  not_met: "#b3261e",
  not_applicable: "#5f6368",
}
const RESULT_TEXT = {
  compliant: "Compliant",
  partially_compliant: "Partially compliant",
  non_compliant: "Non-compliant",
} as const
const RESULT_COLOUR = { compliant: "#1b7f3b", partially_compliant: "#b26a00", non_compliant: "#b3261e" } as const
const SERIES = [
  { key: "evaluations", label: "Evaluations", colour: "#1a73e8" },
  { key: "denials", label: "Denials", colour: "#e37400" },
  { key: "enforcements", label: "Enforcements", colour: "#b3261e" },
] as const

/** The ids an evidence line names, at most `n` of them. */
const someIds = (ids: ReadonlyArray<string> | undefined, n = 8) =>
  ids === undefined || ids.length === 0
    ? ""
    : ` (${ids.slice(0, n).join(", ")}${ids.length > n ? `, and ${ids.length - n} more` : ""})`

/** Counted sequences as text, at most `n` ranges. */
const rangesText = (ranges: ReadonlyArray<readonly [number, number]>, n = 12) =>
  ranges.length === 0
    ? "none"
    : ranges
        .slice(0, n)
        .map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`))
        .join(", ") + (ranges.length > n ? `, and ${ranges.length - n} more ranges` : "")

const scopeText = (r: RenderableReport) => (r.agentId === null ? `workspace ${r.workspaceId}` : `agent ${r.agentId}`)
const day = (iso: string) => iso.replace("T", " ").replace(/\.\d{3}Z$/, " UTC")

const verifyCommands = (r: RenderableReport) => {
  const first = r.counted.sequences[0]?.[0] ?? 1
  const last = r.counted.sequences.at(-1)?.[1] ?? first
  return [
    `curl -H "Authorization: Bearer $KEY" "$BASE/api/v1/compliance/reports/${r.id}" > report.json`,
    `curl -H "Authorization: Bearer $KEY" "$BASE/api/v1/events/export?fromSequence=${first}&toSequence=${last}&sinceTreeSize=${r.checkpoint.treeSize}" > bundle.json`,
    last - first >= 10_000
      ? "# a bundle holds at most 10,000 events: export the range in several bundles and pass them all"
      : "",
    `curl "$BASE/.well-known/jwks.json" > trusted-jwks.json   # better: keys you pinned earlier`,
    "agentgov-verify report report.json bundle.json [bundle-2.json …] --jwks trusted-jwks.json",
  ].filter((line) => line !== "")
}

export const renderReportPdf = async (r: RenderableReport): Promise<Buffer> => {
  // Loaded on the first PDF asked for: pdfkit and its fonts (~2 MB of code) are not part of every instance.
  const { default: PDFDocument } = await import("pdfkit")
  return new Promise((resolve, reject) => {
    const catalogue = CATALOGUES[r.framework as keyof typeof CATALOGUES]
    const doc = new PDFDocument({
      size: "A4",
      margin: 50,
      info: {
        Title: `${catalogue?.title ?? r.framework} compliance report ${r.id}`,
        Author: "agentgov",
        Subject: `${scopeText(r)}, ${r.period.from} to ${r.period.to}`,
        CreationDate: new Date(r.generatedAt),
      },
    })
    const chunks: Buffer[] = []
    doc.on("data", (c: Buffer) => chunks.push(c))
    doc.on("end", () => resolve(Buffer.concat(chunks)))
    doc.on("error", reject)
    const width = doc.page.width - 100
    const left = 50

    const heading = (text: string, size = 16) => {
      doc.font("Helvetica-Bold").fontSize(size).fillColor("#202124").text(text, { width })
      doc.moveDown(0.4)
    }
    const para = (text: string, opts: { size?: number; colour?: string; font?: string } = {}) => {
      doc
        .font(opts.font ?? "Helvetica")
        .fontSize(opts.size ?? 10)
        .fillColor(opts.colour ?? "#202124")
        .text(text, { width })
    }
    const field = (label: string, value: string) => {
      doc.font("Helvetica-Bold").fontSize(10).fillColor("#5f6368").text(`${label}: `, { continued: true })
      doc.font("Helvetica").fillColor("#202124").text(value, { width })
    }
    const pill = (x: number, y: number, status: ControlOutcome["status"]) => {
      const text = status.replace("_", " ")
      doc.font("Helvetica-Bold").fontSize(8)
      const w = doc.widthOfString(text) + 10
      doc.roundedRect(x, y - 2, w, 13, 3).fill(STATUS_COLOUR[status])
      doc.fillColor("#ffffff").text(text, x + 5, y + 1, { lineBreak: false })
      doc.fillColor("#202124")
    }

    // Cover.
    doc.rect(0, 0, doc.page.width, 8).fill("#1a73e8")
    doc.moveDown(4)
    para("COMPLIANCE REPORT", { size: 11, colour: "#5f6368", font: "Helvetica-Bold" })
    doc.moveDown(0.3)
    heading(catalogue?.title ?? r.framework, 30)
    para(catalogue?.source ?? "", { size: 10, colour: "#5f6368" })
    doc.moveDown(2)
    field("Scope", scopeText(r))
    field("Period", `${day(r.period.from)} to ${day(r.period.to)} (end exclusive)`)
    field("Generated", day(r.generatedAt))
    field("Report", r.id)
    field("Control catalogue", `${r.framework} version ${r.catalogueVersion}`)
    field("Events counted", `${r.counted.count}, pinned to signed checkpoint of tree size ${r.checkpoint.treeSize}`)
    doc.moveDown(2)
    para("Overall result", { size: 11, colour: "#5f6368", font: "Helvetica-Bold" })
    doc.moveDown(0.3)
    doc
      .font("Helvetica-Bold")
      .fontSize(26)
      .fillColor(RESULT_COLOUR[r.summary.result])
      .text(RESULT_TEXT[r.summary.result], { width })
    doc.moveDown(0.5)
    para(
      `${r.summary.met} met · ${r.summary.partial} partial · ${r.summary.notMet} not met · ${r.summary.notApplicable} not applicable`,
      { size: 12 },
    )
    doc.moveDown(1)
    para(
      "Compliant: every control marked required is met. Controls the service's records cannot fully evidence are never required; their gaps name what the operator must supply. The report claims only what its records show: counts from the audit trail (recountable from an export bundle) and the state of keys, enforcements and policies at generation.",
      { size: 9, colour: "#5f6368" },
    )
    if (!r.chain.valid) {
      doc.moveDown(1)
      para(
        `The audit chain failed verification at generation, from sequence ${r.chain.firstBadSequence}: ${r.chain.reason}`,
        { size: 11, colour: STATUS_COLOUR.not_met, font: "Helvetica-Bold" },
      )
    }

    // Controls table and the activity chart.
    doc.addPage()
    heading("Controls")
    const cols = [
      { title: "Control", x: left, w: 66 },
      { title: "Title", x: left + 68, w: 180 },
      { title: "Reference", x: left + 250, w: 115 },
      { title: "Required", x: left + 367, w: 50 },
      { title: "Status", x: left + 419, w: width - 419 },
    ]
    let y = doc.y
    doc.font("Helvetica-Bold").fontSize(9).fillColor("#5f6368")
    for (const c of cols) doc.text(c.title, c.x, y, { width: c.w, lineBreak: false })
    y += 14
    doc
      .moveTo(left, y - 2)
      .lineTo(left + width, y - 2)
      .strokeColor("#dadce0")
      .stroke()
    for (const c of r.controls) {
      doc.font("Helvetica").fontSize(9).fillColor("#202124")
      const h = Math.max(
        doc.heightOfString(c.title, { width: cols[1]!.w }),
        doc.heightOfString(c.reference, { width: cols[2]!.w }),
        12,
      )
      doc.font("Helvetica-Bold").text(c.id, cols[0]!.x, y + 2, { width: cols[0]!.w })
      doc.font("Helvetica").text(c.title, cols[1]!.x, y + 2, { width: cols[1]!.w })
      doc.text(c.reference, cols[2]!.x, y + 2, { width: cols[2]!.w })
      doc.text(c.required ? "yes" : "no", cols[3]!.x, y + 2, { width: cols[3]!.w })
      pill(cols[4]!.x, y + 2, c.status)
      y += h + 8
      doc
        .moveTo(left, y - 3)
        .lineTo(left + width, y - 3)
        .strokeColor("#eeeeee")
        .stroke()
    }

    // The chart: grouped bars per time bucket, drawn with vector paths.
    y += 20
    doc.font("Helvetica-Bold").fontSize(13).fillColor("#202124").text("Activity over the period", left, y)
    y += 18
    const bucketMinutes =
      r.activity.length > 1 ? (Date.parse(r.activity[1]!.at) - Date.parse(r.activity[0]!.at)) / 60_000 : 0
    doc
      .font("Helvetica")
      .fontSize(8)
      .fillColor("#5f6368")
      .text(
        `Events per bucket of ${bucketMinutes >= 120 ? `${Math.round(bucketMinutes / 60)} h` : bucketMinutes >= 1 ? `${Math.round(bucketMinutes)} min` : `${Math.round(bucketMinutes * 60_000)} ms`}, from the counted events.`,
        left,
        y,
      )
    y += 16
    const chartH = 170
    const axisX = left + 40
    const chartW = width - 50
    const peak = Math.max(1, ...r.activity.flatMap((a) => [a.evaluations, a.denials, a.enforcements]))
    doc.font("Helvetica").fontSize(7).fillColor("#5f6368")
    for (let i = 0; i <= 4; i++) {
      const gy = y + chartH - (chartH * i) / 4
      doc
        .moveTo(axisX, gy)
        .lineTo(axisX + chartW, gy)
        .strokeColor(i === 0 ? "#5f6368" : "#eeeeee")
        .stroke()
      doc.fillColor("#5f6368").text(String(Math.round((peak * i) / 4)), left, gy - 4, { width: 36, align: "right" })
    }
    const n = Math.max(1, r.activity.length)
    const slot = chartW / n
    const bar = Math.max(1, (slot - 2) / SERIES.length)
    r.activity.forEach((a, i) => {
      SERIES.forEach((s, k) => {
        const v = a[s.key]
        if (v === 0) return
        const h = (chartH * v) / peak
        doc.rect(axisX + i * slot + 1 + k * bar, y + chartH - h, bar, h).fill(s.colour)
      })
    })
    doc.fillColor("#5f6368").fontSize(7)
    doc.text(day(r.period.from).slice(0, 16), axisX, y + chartH + 4, { lineBreak: false })
    doc.text(day(r.period.to).slice(0, 16), axisX + chartW - 80, y + chartH + 4, { width: 80, align: "right" })
    let lx = axisX
    const ly = y + chartH + 18
    for (const s of SERIES) {
      doc.rect(lx, ly, 8, 8).fill(s.colour)
      doc
        .fillColor("#202124")
        .fontSize(8)
        .text(s.label, lx + 12, ly, { lineBreak: false })
      lx += 90
    }
    doc.x = left

    // Evidence, one control per page.
    const citations = new Map(catalogue?.controls.map((c) => [c.id, c]) ?? [])
    for (const c of r.controls) {
      doc.addPage()
      heading(`${c.id} — ${c.title}`)
      para(`${r.framework === "soc2" ? "Criterion" : "Reference"}: ${c.reference}`, { colour: "#5f6368" })
      doc.moveDown(0.3)
      const py = doc.y
      doc.font("Helvetica-Bold").fontSize(10).fillColor("#202124").text("Status: ", left, py, { continued: false })
      pill(left + 45, py, c.status)
      doc.x = left
      doc.y = py + 16
      para(c.required ? "Required for certification." : "Not required for certification.", {
        size: 9,
        colour: "#5f6368",
      })
      const spec = citations.get(c.id)
      if (spec) {
        doc.moveDown(0.6)
        para("What the text requires", { font: "Helvetica-Bold", size: 10 })
        para(spec.citation, { size: 9, colour: "#3c4043", font: "Helvetica-Oblique" })
        doc.moveDown(0.4)
        para("What satisfies it here", { font: "Helvetica-Bold", size: 10 })
        para(spec.satisfiedBy, { size: 9 })
      }
      doc.moveDown(0.6)
      para("Evidence", { font: "Helvetica-Bold", size: 11 })
      if (c.evidence.length === 0) para("None: this service's records do not bear on it.", { size: 9 })
      for (const e of c.evidence)
        para(
          `•  ${e.label}: ${String(e.value)}${e.metric ? `   [metric ${e.metric}, recountable]` : ""}${someIds(e.ids)}`,
          { size: 9 },
        )
      doc.moveDown(0.6)
      para("Gaps", { font: "Helvetica-Bold", size: 11 })
      if (c.gaps.length === 0) para("None.", { size: 9 })
      for (const g of c.gaps) para(`•  ${g}`, { size: 9 })
    }

    // Verification.
    doc.addPage()
    heading("Verification")
    para(
      "This report is signed: a detached JWS (EdDSA) over the JCS (RFC 8785) of every field but the signature, with the service's key published in its JWKS. Its counts are pinned to a signed checkpoint of the workspace's audit trail (an RFC 6962 Merkle tree) taken at generation. Anyone holding an export bundle of the counted events, linked to that checkpoint by a consistency proof, can check the signature and recount every metric offline:",
      { size: 9 },
    )
    doc.moveDown(0.5)
    for (const line of verifyCommands(r)) para(line, { font: "Courier", size: 7.5 })
    doc.moveDown(0.8)
    heading("Scope", 12)
    field("Period", `${r.period.from} (inclusive) to ${r.period.to} (exclusive)`)
    field(
      "Counts",
      r.agentId === null
        ? "every event of the workspace"
        : `events of ${r.agentId} and workspace-wide events (no agent)`,
    )
    doc.moveDown(0.6)
    heading("Checkpoint", 12)
    field("Tree size", String(r.checkpoint.treeSize))
    field("Root hash", r.checkpoint.rootHash)
    field("Head hash", r.checkpoint.headHash)
    field("Signed at", r.checkpoint.timestamp)
    field("Key id", r.checkpoint.kid)
    field("Signature", r.checkpoint.signature)
    doc.moveDown(0.6)
    heading("Counted events", 12)
    field("Count", String(r.counted.count))
    field("Sequences", rangesText(r.counted.sequences))
    field("Ids digest (SHA-256)", r.counted.idsDigest)
    doc.moveDown(0.6)
    heading("Chain at generation", 12)
    field(
      "Verification",
      r.chain.valid
        ? `valid, ${r.chain.checked} events`
        : `broken from sequence ${r.chain.firstBadSequence}: ${r.chain.reason}`,
    )
    doc.moveDown(0.6)
    heading("Report signature", 12)
    para(r.signature, { font: "Courier", size: 7 })
    doc.end()
  })
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c as "&"] ?? c)

/** The report as one self-contained HTML page (no script; inline styles and an SVG chart). */
export const renderReportHtml = (r: RenderableReport): string => {
  const catalogue = CATALOGUES[r.framework as keyof typeof CATALOGUES]
  const e = (v: unknown) => escapeHtml(String(v))
  const peak = Math.max(1, ...r.activity.flatMap((a) => [a.evaluations, a.denials, a.enforcements]))
  const slot = 600 / Math.max(1, r.activity.length)
  const bar = Math.max(1, (slot - 2) / SERIES.length)
  const bars = r.activity
    .flatMap((a, i) =>
      SERIES.map((s, k) => {
        const h = (150 * a[s.key]) / peak
        return a[s.key] === 0
          ? ""
          : `<rect x="${(i * slot + 1 + k * bar).toFixed(1)}" y="${(150 - h).toFixed(1)}" width="${bar.toFixed(1)}" height="${h.toFixed(1)}" fill="${s.colour}"><title>${e(a.at)} ${s.label}: ${a[s.key]}</title></rect>`
      }),
    )
    .join("")
  const rows = r.controls
    .map(
      (c) =>
        `<tr><td><a href="#${e(c.id)}">${e(c.id)}</a></td><td>${e(c.title)}</td><td>${e(c.reference)}</td><td>${c.required ? "yes" : "no"}</td><td><span class="s" style="background:${STATUS_COLOUR[c.status]}">${e(c.status.replace("_", " "))}</span></td></tr>`,
    )
    .join("")
  const details = r.controls
    .map((c) => {
      const spec = catalogue?.controls.find((x) => x.id === c.id)
      const evidence =
        c.evidence.length === 0
          ? "<li>None: this service's records do not bear on it.</li>"
          : c.evidence
              .map(
                (x) =>
                  `<li>${e(x.label)}: <b>${e(x.value)}</b>${x.metric ? ` <small>[metric ${e(x.metric)}]</small>` : ""}${e(someIds(x.ids))}</li>`,
              )
              .join("")
      const gaps = c.gaps.length === 0 ? "<li>None.</li>" : c.gaps.map((g) => `<li>${e(g)}</li>`).join("")
      return `<section id="${e(c.id)}"><h3>${e(c.id)} — ${e(c.title)} <span class="s" style="background:${STATUS_COLOUR[c.status]}">${e(c.status.replace("_", " "))}</span></h3>
<p class="muted">${e(c.reference)}${c.required ? " · required for certification" : ""}</p>
${spec ? `<blockquote>${e(spec.citation)}</blockquote><p>${e(spec.satisfiedBy)}</p>` : ""}
<h4>Evidence</h4><ul>${evidence}</ul><h4>Gaps</h4><ul>${gaps}</ul></section>`
    })
    .join("\n")
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${e(catalogue?.title ?? r.framework)} compliance report ${e(r.id)}</title>
<style>body{font:14px/1.5 system-ui,sans-serif;max-width:900px;margin:2rem auto;padding:0 1rem;color:#202124}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:.3rem;text-align:left;vertical-align:top}
.s{color:#fff;border-radius:3px;padding:0 .4rem;font-size:12px;font-weight:600}.muted{color:#5f6368}
blockquote{font-style:italic;color:#3c4043;border-left:3px solid #dadce0;margin:0;padding-left:1rem}code{word-break:break-all}</style></head>
<body><p class="muted">COMPLIANCE REPORT</p><h1>${e(catalogue?.title ?? r.framework)}</h1><p class="muted">${e(catalogue?.source ?? "")}</p>
<p>Scope: ${e(scopeText(r))}<br>Period: ${e(r.period.from)} to ${e(r.period.to)} (end exclusive)<br>Generated: ${e(r.generatedAt)}<br>Report: ${e(r.id)} · catalogue ${e(r.catalogueVersion)}</p>
<h2 style="color:${RESULT_COLOUR[r.summary.result]}">${RESULT_TEXT[r.summary.result]}</h2>
<p>${r.summary.met} met · ${r.summary.partial} partial · ${r.summary.notMet} not met · ${r.summary.notApplicable} not applicable</p>
${r.chain.valid ? "" : `<p style="color:${STATUS_COLOUR.not_met}"><b>The audit chain failed verification from sequence ${e(r.chain.firstBadSequence)}: ${e(r.chain.reason)}</b></p>`}
<h2>Controls</h2><table><thead><tr><th>Control</th><th>Title</th><th>Reference</th><th>Required</th><th>Status</th></tr></thead><tbody>${rows}</tbody></table>
<h2>Activity</h2><svg role="img" aria-label="evaluations, denials and enforcements over the period" viewBox="0 0 600 160" width="100%">${bars}<line x1="0" y1="150" x2="600" y2="150" stroke="#5f6368"/></svg>
<p>${SERIES.map((s) => `<span class="s" style="background:${s.colour}">${s.label}</span>`).join(" ")} · peak ${peak} per bucket</p>
<h2>Evidence</h2>${details}
<h2>Verification</h2><p>Checkpoint: tree size ${r.checkpoint.treeSize}, root <code>${e(r.checkpoint.rootHash)}</code>, signed ${e(r.checkpoint.timestamp)} by key ${e(r.checkpoint.kid)}.</p>
<p>Counted: ${r.counted.count} events, sequences ${e(rangesText(r.counted.sequences))}; ids digest <code>${e(r.counted.idsDigest)}</code>.</p>
<pre>${verifyCommands(r).map(e).join("\n")}</pre></body></html>`
}
