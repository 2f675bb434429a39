import { createHash } from "node:crypto"
import {
  type Actor,
  Authenticator,
  canonicalize,
  type DomainServices,
  Idempotency,
  type IdempotencyRequest,
  Replayed,
  type Scope,
} from "@agentgov/domain"
import { Cause, Effect, Exit, type ManagedRuntime, Schema } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { ApiError, type DomainError, formatPath, internalError, toApiError } from "./ApiError.ts"
import type { Operation } from "./Operation.ts"

export type Runtime = ManagedRuntime.ManagedRuntime<DomainServices | SqlClient.SqlClient, never>

export type Result<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: ApiError }

export interface Logger {
  readonly error: (message: string, fields: Record<string, unknown>) => void
}

export interface IdempotentResponse {
  readonly status: number
  readonly body: string
  readonly replayed: boolean
}

/**
 * Runs operations for every transport: authenticates, checks scope, decodes
 * input with the operation's schema, runs the handler on the shared runtime and
 * maps its failure to an ApiError. Transports add only their framing.
 */
export const makeExecutor = (runtime: Runtime, log: Logger) => {
  const validators = new Map<Operation, ReturnType<typeof Schema.toStandardSchemaV1>>()
  const validatorOf = (op: Operation) => {
    let v = validators.get(op)
    if (!v) {
      v = Schema.toStandardSchemaV1(op.input as Schema.Codec<unknown, unknown>, {
        parseOptions: { errors: "all", onExcessProperty: "error" },
      })
      validators.set(op, v)
    }
    return v
  }

  const settle = <A>(exit: Exit.Exit<A, DomainError>, context: Record<string, unknown>): Result<A> => {
    if (Exit.isSuccess(exit)) return { ok: true, value: exit.value }
    const failure = exit.cause.reasons.find(Cause.isFailReason)
    if (failure)
      return { ok: false, error: failure.error instanceof ApiError ? failure.error : toApiError(failure.error) }
    // A defect: log the cause here, answer a generic 500.
    log.error("operation failed", { ...context, cause: Cause.pretty(exit.cause) })
    return { ok: false, error: internalError() }
  }

  /** Bearer credential → Actor, or a 401. */
  const authenticate = async (authorization: string | undefined): Promise<Result<Actor>> => {
    if (!authorization)
      return {
        ok: false,
        error: new ApiError(401, "UNAUTHORIZED", "missing credential: send Authorization: Bearer <key>"),
      }
    const m = /^Bearer +(\S+) *$/i.exec(authorization)
    if (!m)
      return { ok: false, error: new ApiError(401, "UNAUTHORIZED", "Authorization must be 'Bearer <credential>'") }
    const exit = await runtime.runPromiseExit(Authenticator.use((a) => a.authenticate(m[1]!)))
    return settle(exit, { stage: "authenticate" })
  }

  const requireScope = (actor: Actor, scope: Scope): ApiError | undefined =>
    actor.scopes.has(scope)
      ? undefined
      : new ApiError(403, "FORBIDDEN", `this credential lacks the scope ${scope}`, {
          field: "scope",
          issue: `requires ${scope}`,
        })

  const authorize = (op: Operation, actor: Actor): ApiError | undefined =>
    op.scope === null ? undefined : requireScope(actor, op.scope)

  /** Decodes raw input; `status` is 422 for bodies and 400 for query strings (decision D2). */
  const decode = (op: Operation, raw: unknown, status: 400 | 422): Result<unknown> => {
    const result = validatorOf(op)["~standard"].validate(raw)
    if (result instanceof Promise) throw new Error(`schema of ${op.name} is asynchronous`)
    if (!result.issues) return { ok: true, value: result.value }
    const first = result.issues[0]!
    const field = formatPath(first.path ?? []) || "body"
    const message = result.issues.map((i) => `${formatPath(i.path ?? []) || "body"}: ${i.message}`).join("; ")
    return {
      ok: false,
      error: new ApiError(status, status === 422 ? "VALIDATION_ERROR" : "BAD_REQUEST", message, {
        field,
        issue: first.message,
      }),
    }
  }

  const run = async (op: Operation, input: unknown, actor: Actor, requestId: string): Promise<Result<unknown>> =>
    settle(await runtime.runPromiseExit(op.handler(input, actor, {})), { op: op.name, requestId })

  /**
   * Runs a POST under an Idempotency-Key (Stripe semantics): the stored response
   * is written in the transaction of the change, so a retry after a crash
   * either replays it or finds nothing was done. Same key and body within
   * 24 h: the first response again; a different body: 409. A concurrent
   * request with the same key waits for the first to finish.
   */
  const runIdempotent = async (
    op: Operation,
    input: unknown,
    actor: Actor,
    key: string,
    fingerprint: unknown,
    respond: (value: unknown) => {
      response: { status: number; body: string }
      stored: { status: number; body: string }
    },
    requestId: string,
  ): Promise<Result<IdempotentResponse>> => {
    const requestHash = createHash("sha256").update(canonicalize(fingerprint)).digest("hex")
    const idempotency: IdempotencyRequest = {
      key,
      operation: op.name,
      requestHash,
      render: (value) => respond(value).stored,
    }
    const answer = (value: unknown): IdempotentResponse =>
      value instanceof Replayed
        ? { status: value.status, body: value.body, replayed: true }
        : { ...respond(value).response, replayed: false }
    const program = op.ownsIdempotency
      ? op.handler(input, actor, { idempotency }).pipe(Effect.map(answer))
      : Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const store = yield* Idempotency
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              const claim = yield* store.claim(actor.workspaceId, idempotency)
              if (!claim.claimed) return answer(claim.replay)
              const value = yield* op.handler(input, actor, {})
              if (value instanceof Replayed) return answer(value)
              const { response, stored } = respond(value)
              yield* store.complete(actor.workspaceId, [{ key, ...stored }])
              return { ...response, replayed: false }
            }),
          )
        }).pipe(Effect.catchTag("SqlError", Effect.die))
    return settle(
      await runtime.runPromiseExit(
        program as Effect.Effect<IdempotentResponse, DomainError, DomainServices | SqlClient.SqlClient>,
      ),
      {
        op: op.name,
        requestId,
      },
    )
  }

  return { authenticate, authorize, requireScope, decode, run, runIdempotent }
}

export type Executor = ReturnType<typeof makeExecutor>
