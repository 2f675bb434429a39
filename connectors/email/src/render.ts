import type { Severity } from "@agentgov/connector-sdk"
import { dropBidiControls, oneLine, SEVERITY_STYLE, truncate, when } from "@agentgov/connector-sdk/format"
import type { DigestStore, GroupCount } from "./DigestStore.ts"
import type { Frequency } from "./schedule.ts"

/**
 * A digest as an e-mail: a subject with the count, a plain-text part and an HTML part (inline
 * styles and tables, as mail clients want), grouped by event type (the most severe first) and,
 * within a type, by agent. Every value from an event is escaped in the HTML. The size is bounded
 * whatever the digest holds: at most {@link LIMITS.types} event types (the most severe first),
 * {@link LIMITS.agentsPerType} agents a type and {@link LIMITS.eventsPerAgent} events an agent are
 * listed, the rest counted, and every text from an event is cut (a client's event types and field
 * names are its own).
 */

export const LIMITS = {
  types: 30,
  agentsPerType: 20,
  eventsPerAgent: 3,
  fieldsPerEvent: 6,
  text: 500,
  /** A type's, an agent's or a field's name, a title. */
  name: 200,
} as const

const SEVERITIES: ReadonlyArray<Severity> = ["info", "warning", "error", "critical"]

/** Escapes text for HTML element content and quoted attribute values. */
export const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/**
 * An event's text on one line of the text part: its own line breaks would forge the digest's lines (a
 * second "Open agentgov:" footer with another link). Unicode's bidirectional embedding, override and
 * isolate controls (U+202A–U+202E, U+2066–U+2069) are dropped: they reverse what a reader sees.
 */
const singleLine = (s: string) => oneLine(dropBidiControls(s))

/** Only http(s) links reach an href. */
const safeUrl = (url: string | null | undefined): string | undefined => {
  if (!url) return undefined
  try {
    const u = new URL(url)
    return u.protocol === "https:" || u.protocol === "http:" ? u.toString() : undefined
  } catch {
    return undefined
  }
}

const typeTitle = (type: string) => {
  const s = type.replace(/[._]+/g, " ")
  return s.charAt(0).toUpperCase() + s.slice(1)
}

const plural = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString("en-US")} ${n === 1 ? one : many}`

export interface DigestMessage {
  readonly subject: string
  readonly text: string
  readonly html: string
}

export interface RenderOptions {
  readonly frequency: Frequency
  readonly dashboardUrl: string | undefined
  /** The digest's time, epoch ms. */
  readonly now: number
}

interface TypeGroup {
  readonly type: string
  readonly count: number
  readonly severity: Severity
  readonly agents: Array<GroupCount>
}

const byType = (groups: ReadonlyArray<GroupCount>): Array<TypeGroup> => {
  const types = new Map<string, { count: number; rank: number; agents: Array<GroupCount> }>()
  for (const g of groups) {
    const t = types.get(g.type) ?? { count: 0, rank: 0, agents: [] }
    t.count += g.count
    t.rank = Math.max(t.rank, g.severityRank)
    t.agents.push(g)
    types.set(g.type, t)
  }
  return [...types.entries()]
    .map(([type, t]) => ({
      type,
      count: t.count,
      severity: SEVERITIES[t.rank] ?? "info",
      agents: t.agents.sort((a, b) => b.count - a.count || a.agentLabel.localeCompare(b.agentLabel)),
    }))
    .sort(
      (a, b) =>
        SEVERITIES.indexOf(b.severity) - SEVERITIES.indexOf(a.severity) ||
        b.count - a.count ||
        a.type.localeCompare(b.type),
    )
}

const heading = (frequency: Frequency) =>
  frequency === "immediate"
    ? "agentgov events"
    : frequency === "hourly"
      ? "agentgov hourly digest"
      : "agentgov daily digest"

/** Builds digest `digestId`'s message from the store. */
export const renderDigest = (store: DigestStore, digestId: number, o: RenderOptions): DigestMessage => {
  const all = byType(store.groups(digestId))
  const total = all.reduce((n, t) => n + t.count, 0)
  // the types listed (the most severe, then the busiest); the rest are counted
  const types = all.slice(0, LIMITS.types)
  const hidden = all.slice(LIMITS.types)
  const hiddenEvents = hidden.reduce((n, t) => n + t.count, 0)
  const moreTypes =
    hidden.length === 0
      ? undefined
      : `… and ${plural(hidden.length, "more event type")} (${plural(hiddenEvents, "event")}); see agentgov`
  // the samples of the agents shown (the busiest of each type), not of every agent
  const samples = store.samples(
    digestId,
    LIMITS.eventsPerAgent,
    types.flatMap((t) => t.agents.slice(0, LIMITS.agentsPerType)),
  )
  const name = (s: string) => truncate(singleLine(s), LIMITS.name)
  const para = (s: string) => truncate(singleLine(s), LIMITS.text)
  const sampleOf = new Map<string, typeof samples>()
  for (const s of samples) {
    const key = `${s.type}\u0000${s.agentKey}`
    sampleOf.set(key, [...(sampleOf.get(key) ?? []), s])
  }
  const dashboard = safeUrl(o.dashboardUrl)
  const at = when(new Date(o.now).toISOString())
  const only = total === 1 ? samples[0] : undefined
  const subject = truncate(
    only
      ? `[agentgov] ${singleLine(only.title)}`
      : `[agentgov] ${plural(total, "event")}: ${types
          .slice(0, 3)
          .map((t) => `${t.count} ${t.type}`)
          .join(", ")}${types.length > 3 ? ", …" : ""}`,
    200,
  )

  // --- text
  const text: Array<string> = [
    `${heading(o.frequency)}, ${at}`,
    `${plural(total, "event")} of ${plural(all.length, "type")}`,
    "",
  ]
  for (const t of types)
    text.push(`  ${String(t.count).padStart(6)}  ${name(t.type)} (${SEVERITY_STYLE[t.severity].label})`)
  if (moreTypes) text.push(`  ${moreTypes}`)
  text.push("")
  for (const t of types) {
    text.push(`== ${name(typeTitle(t.type))}: ${plural(t.count, "event")}`, "")
    for (const a of t.agents.slice(0, LIMITS.agentsPerType)) {
      text.push(`-- ${a.agentLabel === "" ? "no agent" : name(a.agentLabel)}: ${plural(a.count, "event")}`)
      for (const s of sampleOf.get(`${a.type}\u0000${a.agentKey}`) ?? []) {
        text.push(`   * ${when(new Date(s.occurredAt).toISOString())}  ${name(s.title)}`)
        if (s.summary !== "") text.push(`     ${para(s.summary)}`)
        for (const f of (JSON.parse(s.fields) as Array<{ label: string; value: string }>).slice(
          0,
          LIMITS.fieldsPerEvent,
        ))
          text.push(`     ${name(f.label)}: ${para(f.value)}`)
        const link = safeUrl(s.link)
        if (link) text.push(`     ${link}`)
      }
      if (a.count > LIMITS.eventsPerAgent)
        text.push(`   … and ${plural(a.count - LIMITS.eventsPerAgent, "more event")}`)
    }
    if (t.agents.length > LIMITS.agentsPerType)
      text.push(`-- … and ${plural(t.agents.length - LIMITS.agentsPerType, "more agent")}`)
    text.push("")
  }
  if (moreTypes) text.push(moreTypes, "")
  if (dashboard) text.push(`Open agentgov: ${dashboard}`)
  text.push(`Sent by agentgov-connector-email (${o.frequency}).`)

  // --- HTML
  const e = escapeHtml
  const font = "font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif"
  const chip = (s: Severity) =>
    `<span style="display:inline-block;padding:1px 8px;border-radius:10px;background:${SEVERITY_STYLE[s].colour};color:#fff;font-size:12px">${e(SEVERITY_STYLE[s].label)}</span>`
  const html: Array<string> = [
    "<!doctype html>",
    `<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${e(subject)}</title></head>`,
    `<body style="margin:0;padding:0;background:#f4f5f7;${font};color:#1d2433">`,
    `<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="background:#f4f5f7"><tr><td align="center" style="padding:24px 12px">`,
    `<table role="presentation" width="640" cellpadding="0" cellspacing="0" style="max-width:640px;width:100%;background:#fff;border-radius:8px;border:1px solid #e3e6ea">`,
    `<tr><td style="padding:20px 24px;border-bottom:1px solid #e3e6ea"><div style="font-size:20px;font-weight:600">${e(heading(o.frequency))}</div>`,
    `<div style="color:#5b6474;font-size:14px;margin-top:4px">${e(at ?? "")} · ${e(plural(total, "event"))} of ${e(plural(all.length, "type"))}</div></td></tr>`,
    `<tr><td style="padding:16px 24px"><table role="presentation" width="100%" cellpadding="6" cellspacing="0" style="font-size:14px;border-collapse:collapse">`,
    `<tr style="color:#5b6474;text-align:left"><th align="left">Event type</th><th align="left">Severity</th><th align="right">Count</th></tr>`,
    ...types.map(
      (t) =>
        `<tr style="border-top:1px solid #eef0f3"><td><a href="#${e(name(t.type))}" style="color:#1d2433">${e(name(t.type))}</a></td><td>${chip(t.severity)}</td><td align="right" style="font-weight:600">${e(t.count.toLocaleString("en-US"))}</td></tr>`,
    ),
    ...(moreTypes ? [`<tr><td colspan="3" style="color:#5b6474">${e(moreTypes)}</td></tr>`] : []),
    "</table></td></tr>",
  ]
  for (const t of types) {
    html.push(
      `<tr><td style="padding:8px 24px 16px"><h2 id="${e(name(t.type))}" style="font-size:16px;margin:12px 0 8px;border-left:4px solid ${SEVERITY_STYLE[t.severity].colour};padding-left:8px">${e(name(typeTitle(t.type)))} <span style="color:#5b6474;font-weight:400">· ${e(plural(t.count, "event"))}</span></h2>`,
    )
    for (const a of t.agents.slice(0, LIMITS.agentsPerType)) {
      html.push(
        `<div style="margin:10px 0 4px;font-size:14px"><strong>${e(a.agentLabel === "" ? "no agent" : name(a.agentLabel))}</strong> <span style="color:#5b6474">· ${e(plural(a.count, "event"))}</span></div>`,
        `<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="font-size:13px">`,
      )
      for (const s of sampleOf.get(`${a.type}\u0000${a.agentKey}`) ?? []) {
        const link = safeUrl(s.link)
        const fields = (JSON.parse(s.fields) as Array<{ label: string; value: string }>).slice(0, LIMITS.fieldsPerEvent)
        html.push(
          `<tr><td style="padding:6px 0 6px 12px;border-left:2px solid #e3e6ea">`,
          `<div><span style="color:#5b6474">${e(when(new Date(s.occurredAt).toISOString()) ?? "")}</span> ${e(name(s.title))}</div>`,
          s.summary === "" ? "" : `<div style="color:#3b4455;margin-top:2px">${e(para(s.summary))}</div>`,
          fields.length === 0
            ? ""
            : `<div style="color:#5b6474;margin-top:2px">${fields.map((f) => `${e(name(f.label))}: <span style="color:#1d2433">${e(para(f.value))}</span>`).join(" · ")}</div>`,
          link
            ? `<div style="margin-top:2px"><a href="${e(link)}" style="color:#2e5bda">Open in agentgov</a></div>`
            : "",
          "</td></tr>",
        )
      }
      html.push("</table>")
      if (a.count > LIMITS.eventsPerAgent)
        html.push(
          `<div style="color:#5b6474;font-size:13px;padding-left:14px">… and ${e(plural(a.count - LIMITS.eventsPerAgent, "more event"))}</div>`,
        )
    }
    if (t.agents.length > LIMITS.agentsPerType)
      html.push(
        `<div style="color:#5b6474;font-size:13px;margin-top:6px">… and ${e(plural(t.agents.length - LIMITS.agentsPerType, "more agent"))}</div>`,
      )
    html.push("</td></tr>")
  }
  if (moreTypes) html.push(`<tr><td style="padding:8px 24px;color:#5b6474;font-size:13px">${e(moreTypes)}</td></tr>`)
  html.push(
    `<tr><td style="padding:16px 24px;border-top:1px solid #e3e6ea;font-size:13px;color:#5b6474">`,
    dashboard ? `<a href="${e(dashboard)}" style="color:#2e5bda">Open agentgov</a> · ` : "",
    `Sent by agentgov-connector-email (${e(o.frequency)}).</td></tr>`,
    "</table></td></tr></table></body></html>",
  )
  return { subject, text: text.join("\n"), html: html.join("\n") }
}
