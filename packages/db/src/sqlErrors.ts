import {
  AuthenticationError,
  AuthorizationError,
  ConnectionError,
  ConstraintError,
  DeadlockError,
  LockTimeoutError,
  SerializationError,
  SqlError,
  type SqlErrorReason,
  SqlSyntaxError,
  StatementTimeoutError,
  UniqueViolation,
  UnknownError,
} from "effect/sql/SqlError"

/**
 * Turns a driver error (postgres.js carries the SQLSTATE in `code`)
 * into effect's structured SqlError, so that callers can react to a unique
 * violation without knowing which driver is underneath.
 */
export const toSqlError = (cause: unknown, operation = "query"): SqlError => {
  const err = cause as {
    code?: unknown
    constraint?: unknown
    constraint_name?: unknown
    message?: unknown
    severity?: unknown
  }
  const code = typeof err?.code === "string" ? err.code : undefined
  const message = typeof err?.message === "string" ? err.message : "database error"
  const props = { cause, message, operation }
  // FATAL (or PANIC) ends the session whatever the SQLSTATE: a database not accepting connections (55000 at
  // start-up), a session terminated. The store is out of reach for this request, not wrong about it; refused
  // credentials (class 28) stay what they are.
  if ((err?.severity === "FATAL" || err?.severity === "PANIC") && !code?.startsWith("28"))
    return new SqlError({ reason: new ConnectionError(props) })
  return new SqlError({ reason: classify(code, err?.constraint ?? err?.constraint_name, props) })
}

/**
 * A connection that could not be made or was lost, as postgres.js and Node name it (they carry no SQLSTATE), beside
 * PostgreSQL's own classes 08 (connection exception) and 57P (the server shutting down, restarting or not yet up).
 */
const CONNECTION_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECTION_ENDED",
])

const classify = (
  code: string | undefined,
  constraint: unknown,
  props: { cause: unknown; message: string; operation: string },
): SqlErrorReason => {
  if (code === undefined) return new UnknownError(props)
  if (code.startsWith("08") || code.startsWith("57P") || CONNECTION_CODES.has(code)) return new ConnectionError(props)
  if (code.startsWith("28")) return new AuthenticationError(props)
  if (code === "42501") return new AuthorizationError(props)
  if (code.startsWith("42")) return new SqlSyntaxError(props)
  if (code === "23505") {
    return new UniqueViolation({
      ...props,
      constraint: typeof constraint === "string" && constraint !== "" ? constraint : "unknown",
    })
  }
  if (code.startsWith("23")) return new ConstraintError(props)
  if (code === "40P01") return new DeadlockError(props)
  if (code === "40001") return new SerializationError(props)
  if (code === "55P03") return new LockTimeoutError(props)
  if (code === "57014") return new StatementTimeoutError(props)
  return new UnknownError(props)
}

/** The constraint name of a unique violation, or undefined for any other error. */
export const uniqueViolation = (error: SqlError): string | undefined =>
  error.reason._tag === "UniqueViolation" ? error.reason.constraint : undefined

/**
 * Whether a failure is the store unable to serve now: out of reach (down, restarting, the connection lost:
 * `ConnectionError`), or a lock it waited for longer than its `lock_timeout` (`LockTimeoutError`: another session
 * holds it). Either way the request changed nothing and may be retried.
 */
export const storeUnreachable = (error: unknown): boolean =>
  error instanceof SqlError && (error.reason._tag === "ConnectionError" || error.reason._tag === "LockTimeoutError")
