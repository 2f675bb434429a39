/**
 * JSON logs: one object per line (`time`, `level`, `connector`, `msg`, then the details), on
 * stdout. Nothing secret is ever passed in: the runtime logs ids, types, statuses and reasons.
 */

export type LogLevel = "debug" | "info" | "warn" | "error"

const LEVELS: ReadonlyArray<LogLevel> = ["debug", "info", "warn", "error"]

/**
 * The logger a connector's `deliver` gets in its context.
 *
 * @example
 * ```ts
 * ctx.log.info("slack message posted", { channel, ts })
 * ```
 */
export interface Logger {
  debug(msg: string, details?: Record<string, unknown>): void
  info(msg: string, details?: Record<string, unknown>): void
  warn(msg: string, details?: Record<string, unknown>): void
  error(msg: string, details?: Record<string, unknown>): void
}

export const isLogLevel = (v: unknown): v is LogLevel =>
  typeof v === "string" && (LEVELS as ReadonlyArray<string>).includes(v)

export const jsonLogger = (
  connector: string,
  level: LogLevel,
  write: (line: string) => void = (line) => process.stdout.write(line),
): Logger => {
  const min = LEVELS.indexOf(level)
  const at =
    (l: LogLevel) =>
    (msg: string, details: Record<string, unknown> = {}) => {
      if (LEVELS.indexOf(l) < min) return
      write(`${JSON.stringify({ time: new Date().toISOString(), level: l, connector, msg, ...details })}\n`)
    }
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }
}
