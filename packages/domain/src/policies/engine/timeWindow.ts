import type { TimeWindow, Weekday } from "./language.ts"
import { WEEKDAYS } from "./language.ts"

/**
 * Time-window conditions. A window `{days?, from, to, tz}` holds when the wall-clock time in
 * `tz` is in [from, to) on one of `days` (every day when absent). When `to` is earlier than
 * `from` the window runs past midnight and belongs to the day it starts on: `{days: ["fri"],
 * from: "22:00", to: "06:00"}` holds from Friday 22:00 to Saturday 06:00. Wall-clock time
 * follows the zone's daylight-saving rules, so a window that names a skipped hour never holds
 * on that day, and a repeated hour holds twice.
 */

const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/

/** Minutes since midnight of `HH:MM` (24:00 allowed when `allowEndOfDay`), or undefined. */
export const parseHhMm = (s: string, allowEndOfDay: boolean): number | undefined => {
  if (allowEndOfDay && s === "24:00") return 1_440
  const m = HHMM.exec(s)
  return m ? Number(m[1]) * 60 + Number(m[2]) : undefined
}

const formatters = new Map<string, Intl.DateTimeFormat>()

/** The formatter of a zone, or undefined when the zone is unknown to this runtime. */
export const zoneFormatter = (tz: string): Intl.DateTimeFormat | undefined => {
  let f = formatters.get(tz)
  if (f) return f
  try {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      weekday: "short",
      hour: "2-digit",
      minute: "2-digit",
    })
  } catch {
    return undefined
  }
  if (formatters.size < 1_000) formatters.set(tz, f)
  return f
}

const SHORT_DAYS: Readonly<Record<string, number>> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 }

/** Local weekday (0 = Sunday) and minute of the day of `minuteMs` in the formatter's zone. */
const localTime = (f: Intl.DateTimeFormat, minuteMs: number): { day: number; minute: number } => {
  let day = 0
  let hour = 0
  let minute = 0
  for (const part of f.formatToParts(minuteMs)) {
    if (part.type === "weekday") day = SHORT_DAYS[part.value] ?? 0
    else if (part.type === "hour") hour = Number(part.value)
    else if (part.type === "minute") minute = Number(part.value)
  }
  return { day, minute: hour * 60 + minute }
}

export interface CompiledWindow {
  readonly holds: (nowMs: number) => boolean
}

/**
 * A window for a valid {@link TimeWindow}. Zone offsets only change on whole minutes, so the
 * local time is computed once per UTC minute and remembered: evaluation is a comparison.
 */
export const compileWindow = (w: TimeWindow): CompiledWindow => {
  const from = parseHhMm(w.from, false)!
  const to = parseHhMm(w.to, true)!
  const f = zoneFormatter(w.tz)!
  let days = 0x7f
  if (w.days) {
    days = 0
    for (const d of w.days) days |= 1 << WEEKDAYS.indexOf(d as Weekday)
  }
  const onDay = (day: number) => (days & (1 << day)) !== 0
  const overnight = to < from
  let cachedMinute = Number.NaN
  let cachedHolds = false
  return {
    holds: (nowMs) => {
      const utcMinute = Math.floor(nowMs / 60_000)
      if (utcMinute === cachedMinute) return cachedHolds
      const { day, minute } = localTime(f, utcMinute * 60_000)
      cachedHolds = overnight
        ? (minute >= from && onDay(day)) || (minute < to && onDay((day + 6) % 7))
        : minute >= from && minute < to && onDay(day)
      cachedMinute = utcMinute
      return cachedHolds
    },
  }
}
