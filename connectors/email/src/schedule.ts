/**
 * When digests are due: `immediate` (as soon as events wait), `hourly` (at the top of each hour,
 * UTC), `daily` (at `EMAIL_DIGEST_AT`, a time of day in an IANA time zone, default 08:00 UTC).
 */

export type Frequency = "immediate" | "hourly" | "daily"

export const FREQUENCIES: ReadonlyArray<Frequency> = ["immediate", "hourly", "daily"]

/** A time of day in a zone: `08:00`, `17:30 Europe/Berlin`. */
export interface DigestAt {
  readonly hour: number
  readonly minute: number
  readonly zone: string
}

const zoneProblem = (zone: string): string | undefined => {
  try {
    new Intl.DateTimeFormat("en-GB", { timeZone: zone })
    return undefined
  } catch {
    return `"${zone}" is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)`
  }
}

/** Parses `HH:MM[ zone]`; a string is a problem. */
export const parseDigestAt = (text: string): DigestAt | string => {
  const match = /^([01]?\d|2[0-3]):([0-5]\d)(?:\s+(\S+))?$/.exec(text.trim())
  if (!match)
    return `"${text}" is not a time of day: write HH:MM, optionally followed by a time zone ("08:00 Europe/Berlin")`
  const zone = match[3] ?? "UTC"
  const problem = zoneProblem(zone)
  return problem ?? { hour: Number(match[1]), minute: Number(match[2]), zone }
}

/** The zone's offset from UTC at instant `t`, in ms (Berlin in winter: +3,600,000). */
const offsetAt = (t: number, zone: string): number => {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    })
      .formatToParts(new Date(t))
      .map((p) => [p.type, Number(p.value)]),
  ) as Record<string, number>
  const asUtc = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!)
  return asUtc - Math.floor(t / 1000) * 1000
}

/** The zone's calendar date at instant `t`. */
const dateIn = (t: number, zone: string) => {
  const local = new Date(t + offsetAt(t, zone))
  return { y: local.getUTCFullYear(), m: local.getUTCMonth(), d: local.getUTCDate() }
}

/** The instant of `hour:minute` on a calendar day in `zone` (a time skipped by DST moves forward). */
const instantOf = (y: number, m: number, d: number, at: DigestAt): number => {
  const wall = Date.UTC(y, m, d, at.hour, at.minute)
  let t = wall - offsetAt(wall, at.zone)
  t = wall - offsetAt(t, at.zone)
  return t
}

/** The first due time strictly after `now` (`immediate`: `now` itself). */
export const nextDue = (frequency: Frequency, now: number, at: DigestAt): number => {
  if (frequency === "immediate") return now
  if (frequency === "hourly") return (Math.floor(now / 3_600_000) + 1) * 3_600_000
  const { y, m, d } = dateIn(now, at.zone)
  for (let day = 0; day < 3; day++) {
    const t = instantOf(y, m, d + day, at)
    if (t > now) return t
  }
  throw new Error("unreachable: a daily time is always within two days")
}
