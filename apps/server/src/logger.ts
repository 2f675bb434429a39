import type { LogLevel } from "./config.ts"

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

export interface Logger {
  readonly debug: (msg: string, fields?: Record<string, unknown>) => void
  readonly info: (msg: string, fields?: Record<string, unknown>) => void
  readonly warn: (msg: string, fields?: Record<string, unknown>) => void
  readonly error: (msg: string, fields?: Record<string, unknown>) => void
}

/** JSON lines on stderr. Callers never pass secrets; there is no per-request log on the hot path. */
export const makeLogger = (level: LogLevel, write: (line: string) => void = (l) => process.stderr.write(l)): Logger => {
  const at =
    (l: LogLevel) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      if (ORDER[l] < ORDER[level]) return
      write(`${JSON.stringify({ time: new Date().toISOString(), level: l, msg, ...fields })}\n`)
    }
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }
}
