import type { LogLevel } from "./config.ts"
import { activeTraceId } from "./tracing.ts"

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

export interface Logger {
  readonly debug: (msg: string, fields?: Record<string, unknown>) => void
  readonly info: (msg: string, fields?: Record<string, unknown>) => void
  readonly warn: (msg: string, fields?: Record<string, unknown>) => void
  readonly error: (msg: string, fields?: Record<string, unknown>) => void
}

/**
 * JSON lines on stderr. Callers never pass secrets; there is no per-request log on the hot path. A
 * line written about a request carries its `requestId` (the caller's field) and, when tracing is on
 * and a span is active, the `traceId` that finds its trace.
 */
export const makeLogger = (level: LogLevel, write: (line: string) => void = (l) => process.stderr.write(l)): Logger => {
  const at =
    (l: LogLevel) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      if (ORDER[l] < ORDER[level]) return
      const traceId = activeTraceId()
      write(
        `${JSON.stringify({ time: new Date().toISOString(), level: l, msg, ...fields, ...(traceId ? { traceId } : {}) })}\n`,
      )
    }
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }
}
