import { Clock, Effect } from "effect"

/** Now as the API writes it: ISO 8601 UTC with milliseconds, from effect's Clock (so tests can fix it). */
export const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => isoOf(ms))

/** An instant (epoch ms) as the API writes it. */
export const isoOf = (ms: number): string => new Date(ms).toISOString()

/** A day, in milliseconds. */
export const DAY_MS = 86_400_000
