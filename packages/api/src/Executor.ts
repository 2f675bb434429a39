import { hash } from "node:crypto"
import {
  ACCESS_TOKEN_PREFIX,
  type Actor,
  Authenticator,
  ChainClosed,
  canonicalize,
  csrfMatches,
  type DomainServices,
  Idempotency,
  type IdempotencyRequest,
  OAuthService,
  PeopleService,
  RateLimiter,
  type RateLimitVerdict,
  Replayed,
  type Scope,
  SdkTokens,
  Sessions,
  storeUnreachable,
} from "@agentgov/domain"
import { Cause, Effect, Exit, type ManagedRuntime, type Schema, SchemaIssue, type StandardSchema } from "effect"
import * as SchemaParser from "effect/SchemaParser"
import * as SqlClient from "effect/sql/SqlClient"
import {
  ApiError,
  type DomainError,
  formatPath,
  internalError,
  storeUnavailable,
  toApiError,
  workspaceDeleted,
} from "./ApiError.ts"
import { type FastHandler, type Operation, type OperationContext, PUBLIC_ACTOR } from "./Operation.ts"

export type Runtime = ManagedRuntime.ManagedRuntime<DomainServices | SqlClient.SqlClient, never>

type StandardResult = StandardSchema.StandardSchemaV1.Result<unknown>

export type Result<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: ApiError }

export interface Logger {
  readonly error: (message: string, fields: Record<string, unknown>) => void
}

export interface Admission {
  readonly result: Result<Actor>
  /** Rate-limit headers for the response, whatever its status. */
  readonly headers: Readonly<Record<string, string>>
}

export interface IdempotentResponse {
  readonly status: number
  readonly body: string
  readonly replayed: boolean
}

/** What a cookie-authenticated request (the dashboard) brings besides the cookie. */
export interface SessionRequest {
  /** The session cookie's value. */
  readonly secret: string
  readonly method: string
  /** `X-CSRF-Token`. */
  readonly csrfToken: string | undefined
  /** `Origin`, when the browser sent one. */
  readonly origin: string | undefined
  /** `X-Agentgov-Workspace`: the workspace the dashboard acts in; default the person's first. */
  readonly workspaceId: string | undefined
  readonly address: string | undefined
}

export interface ExecutorOptions {
  /** Where the dashboard is served: a cookie-authenticated request from another origin is refused. */
  readonly publicOrigin?: string
  /**
   * Told of each operation's result as it settles, with `performance.now()` at its start (the metrics, issue 34):
   * called in line, so that observing adds no promise to a request's path.
   */
  readonly observe?: (op: Operation, result: Result<unknown>, startedAt: number) => void
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"])

/** The credential of an `Authorization: Bearer <credential>` header, else undefined. */
export const bearerOf = (authorization: string | undefined): string | undefined =>
  authorization === undefined ? undefined : /^Bearer +(\S+) *$/i.exec(authorization)?.[1]

/**
 * No credential holds a comma: an Authorization value with one is several headers (joined by `authorizationOf`) or
 * several credentials in one, and which one a proxy in front acted on is unknown. Every reader of the header refuses
 * it (the API, the event stream, /metrics, OAuth client authentication).
 */
export const severalCredentials = (authorization: string | undefined): boolean => authorization?.includes(",") === true

/**
 * Runs operations for every transport: authenticates, checks scope, decodes
 * input with the operation's schema, runs the handler on the shared runtime and
 * maps its failure to an ApiError. Transports add only their framing.
 */
export const makeExecutor = (runtime: Runtime, log: Logger, options: ExecutorOptions = {}) => {
  /**
   * Each operation's decoder, built once. Schema.toStandardSchemaV1 would do the same, but it starts a fiber
   * per call; a synchronous schema's parser answers an Exit without one. Issues are formatted as the
   * Standard Schema adapter formats them.
   */
  const decoders = new Map<Operation, (raw: unknown) => StandardResult>()
  const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()
  const parseOptions = { errors: "all", onExcessProperty: "error" } as const
  const decoderOf = (op: Operation) => {
    let decoder = decoders.get(op)
    if (!decoder) {
      const parse = SchemaParser.decodeUnknownExit(op.input as Schema.Codec<unknown, unknown>)
      // `Struct({})` takes any object, whatever `onExcessProperty` says: an operation without input fields
      // refuses every field itself, or a typo (`{"scopes": [...]}` to POST /tokens) would pass unnoticed.
      const fields = (op.input as { readonly fields?: object }).fields
      const takesNoFields = fields !== undefined && Object.keys(fields).length === 0
      decoder = (raw) => {
        if (takesNoFields && typeof raw === "object" && raw !== null) {
          const [excess] = Object.keys(raw)
          if (excess !== undefined) return { issues: [{ message: "Expected no excess property", path: [excess] }] }
        }
        const exit = parse(raw, parseOptions)
        if (Exit.isSuccess(exit)) return { value: exit.value }
        const failure = exit.cause.reasons.find(Cause.isFailReason)
        if (failure === undefined) throw Cause.squash(exit.cause)
        return formatIssue(failure.error)
      }
      decoders.set(op, decoder)
    }
    return decoder
  }

  const settle = <A>(exit: Exit.Exit<A, DomainError>, context: Record<string, unknown>): Result<A> => {
    if (Exit.isSuccess(exit)) return { ok: true, value: exit.value }
    const failure = exit.cause.reasons.find(Cause.isFailReason)
    if (failure)
      return { ok: false, error: failure.error instanceof ApiError ? failure.error : toApiError(failure.error) }
    const defect = Cause.squash(exit.cause)
    // A write that raced its workspace's deletion wrote nothing (AuditLog closed the chain under it): answered as
    // the deleted workspace's credentials are from then on, whichever operation it was.
    if (defect instanceof ChainClosed) return { ok: false, error: workspaceDeleted() }
    // A defect: log the cause here, answer a generic 500; the store out of reach, a 503 the client retries.
    log.error("operation failed", { ...context, cause: Cause.pretty(exit.cause) })
    return { ok: false, error: storeUnreachable(defect) ? storeUnavailable() : internalError() }
  }

  let hot:
    | {
        readonly tokens: SdkTokens["Service"]
        readonly oauth: OAuthService["Service"]
        readonly limiter: RateLimiter["Service"]
      }
    | undefined

  const hotServices = async () => {
    hot = await runtime.runPromise(
      Effect.gen(function* () {
        return { tokens: yield* SdkTokens, oauth: yield* OAuthService, limiter: yield* RateLimiter }
      }),
    )
    return hot
  }

  const unauthorized = (message: string) => Effect.fail(new ApiError(401, "UNAUTHORIZED", message))

  /** Bearer credential → Actor, or a 401. */
  const credentialOf = (
    authorization: string | undefined,
  ): Effect.Effect<Actor, DomainError | ApiError, Authenticator> => {
    if (!authorization) return unauthorized("missing credential: send Authorization: Bearer <key>")
    if (severalCredentials(authorization))
      return unauthorized("send one Authorization header with one credential: 'Bearer <credential>'")
    const bearer = bearerOf(authorization)
    if (bearer === undefined) return unauthorized("Authorization must be 'Bearer <credential>'")
    return Authenticator.use((a) => a.authenticate(bearer))
  }

  /**
   * Authenticates and applies the rate limits of decision D10 in one step:
   * the credential's limits (key, workspace by plan, agent) when it is valid,
   * the client address's otherwise, so that guessing keys is limited too.
   * `headers` are the X-RateLimit-* of the most restrictive limit, for every
   * response; over a limit the result is a 429 with Retry-After.
   */
  const authenticate = async (
    authorization: string | undefined,
    address = "unknown",
    requestId?: string,
  ): Promise<Admission> => {
    // The hot path: a token verified before (an SDK token, or an OAuth access token), counted in-process, answers
    // without entering the runtime. Only verified tokens are in the caches, so a hit proves the shape and the
    // prefix is enough to try it; the full shape check is the Authenticator's, on a miss (on a 1 KB token it
    // costs as much as the cache's hash).
    const bearer = authorization?.startsWith("Bearer ") ? authorization.slice(7) : undefined
    const jwt = bearer?.startsWith("eyJ") === true
    if (bearer !== undefined && (jwt || bearer.startsWith(ACCESS_TOKEN_PREFIX))) {
      const services = hot ?? (await hotServices())
      const now = Date.now()
      const actor = jwt ? services.tokens.cached(bearer, now) : services.oauth.cached(bearer, now)
      if (actor) {
        const pending = services.limiter.checkNow(actor, now)
        const verdict = pending instanceof Promise ? await pending : pending
        if (verdict === "off") return { result: { ok: true, value: actor }, headers: {} }
        if (verdict !== undefined) return admission({ _tag: "Success", success: actor }, verdict)
      }
    }
    const program = Effect.gen(function* () {
      const limiter = yield* RateLimiter
      const actor = yield* Effect.result(credentialOf(authorization))
      const verdict =
        actor._tag === "Success" ? yield* limiter.check(actor.success) : yield* limiter.checkAnonymous(address)
      return { actor, verdict }
    })
    const exit = await runtime.runPromiseExit(program)
    if (Exit.isFailure(exit))
      return {
        result: settle<Actor>(exit as Exit.Exit<never, never>, { stage: "authenticate", requestId }),
        headers: {},
      }
    const { actor, verdict } = exit.value
    return admission(actor, verdict)
  }

  /**
   * A dashboard request, authenticated by its session cookie (D16): a request that changes something must
   * carry the session's CSRF token (and, when the browser names its origin, come from the dashboard's own);
   * the session is read from the store each time, and so is the membership it acts through, so that a
   * sign-out, a removal or a role change holds at once on every instance. The person acts in the workspace
   * the request names (or their first) with their role's scopes; with no workspace, with none.
   */
  const authenticateSession = async (request: SessionRequest, requestId?: string): Promise<Admission> => {
    const refuse = (error: ApiError): Admission => ({ result: { ok: false, error }, headers: {} })
    if (!SAFE_METHODS.has(request.method.toUpperCase())) {
      if (request.origin !== undefined && options.publicOrigin !== undefined && request.origin !== options.publicOrigin)
        return refuse(new ApiError(403, "CSRF_FAILED", "cross-origin request refused"))
      if (!csrfMatches(request.secret, request.csrfToken))
        return refuse(
          new ApiError(403, "CSRF_FAILED", "missing or wrong X-CSRF-Token: read it from GET /auth/session", {
            field: "x-csrf-token",
            issue: "does not match the session",
          }),
        )
    }
    const program = Effect.gen(function* () {
      const session = yield* Sessions.use((s) => s.resolve(request.secret))
      if (!session)
        return yield* Effect.fail(new ApiError(401, "UNAUTHORIZED", "signed out, or the session has expired"))
      const people = yield* PeopleService
      const credential = { type: "user" as const, id: session.userId }
      const opts = { enterpriseOnly: session.enterprise }
      let workspaceId = request.workspaceId
      if (workspaceId === undefined) {
        const mine = yield* people.workspacesOf(session.userId)
        workspaceId = mine.find((m) => !session.enterprise || m.plan === "enterprise")?.workspaceId
      }
      const actor: Actor =
        (workspaceId !== undefined
          ? yield* people.actorOf(session.userId, workspaceId, credential, opts)
          : undefined) ??
        (request.workspaceId !== undefined
          ? yield* Effect.fail(
              new ApiError(403, "NOT_A_MEMBER", `you are not a member of workspace ${request.workspaceId}`, {
                field: "x-agentgov-workspace",
                issue: "not a member",
              }),
            )
          : // Signed in, in no workspace yet: they may read who they are and accept an invitation.
            {
              workspaceId: "",
              environment: "live",
              credential,
              keyType: "workspace",
              scopes: new Set(),
              userId: session.userId,
            })
      const limiter = yield* RateLimiter
      return { actor, verdict: yield* limiter.check(actor) }
    })
    const exit = await runtime.runPromiseExit(program)
    if (Exit.isFailure(exit))
      return { result: settle<Actor>(exit as Exit.Exit<never, never>, { stage: "session", requestId }), headers: {} }
    return admission({ _tag: "Success", success: exit.value.actor }, exit.value.verdict)
  }

  const admission = (
    actor:
      | { readonly _tag: "Success"; readonly success: Actor }
      | { readonly _tag: "Failure"; readonly failure: unknown },
    verdict: RateLimitVerdict | undefined,
  ): Admission => {
    const headers: Record<string, string> = verdict
      ? {
          "x-ratelimit-limit": String(verdict.limit),
          "x-ratelimit-remaining": String(verdict.remaining),
          "x-ratelimit-reset": String(verdict.reset),
        }
      : {}
    if (verdict && !verdict.admitted) {
      const retryAfter = String(verdict.retryAfter)
      return {
        result: {
          ok: false,
          error: new ApiError(
            429,
            "RATE_LIMITED",
            `rate limit of ${verdict.limit} requests exceeded; retry after ${retryAfter} s`,
            undefined,
            {
              "retry-after": retryAfter,
            },
          ),
        },
        headers,
      }
    }
    if (actor._tag === "Failure") {
      const error = actor.failure instanceof ApiError ? actor.failure : toApiError(actor.failure as DomainError)
      return { result: { ok: false, error }, headers }
    }
    return { result: { ok: true, value: actor.success }, headers }
  }

  /**
   * Admits a call to a public operation (D1): no credential is read, whatever the request carries; the
   * client's address is counted (the limit of requests without a valid credential, D10). The actor is
   * PUBLIC_ACTOR.
   */
  const admitPublic = async (address = "unknown", requestId?: string): Promise<Admission> => {
    // The hot path: counted without entering the runtime (in-process counters answer at once, Redis's in a promise).
    const services = hot ?? (await hotServices())
    const pending = services.limiter.checkAnonymousNow(address, Date.now())
    const verdict = pending instanceof Promise ? await pending.catch(() => undefined) : pending
    if (verdict === "off") return { result: { ok: true, value: PUBLIC_ACTOR }, headers: {} }
    if (verdict !== undefined) return admission({ _tag: "Success", success: PUBLIC_ACTOR }, verdict)
    const exit = await runtime.runPromiseExit(RateLimiter.use((l) => l.checkAnonymous(address)))
    if (Exit.isFailure(exit))
      return {
        result: settle<Actor>(exit as Exit.Exit<never, never>, { stage: "admitPublic", requestId }),
        headers: {},
      }
    return admission({ _tag: "Success", success: PUBLIC_ACTOR }, exit.value)
  }

  const requireScope = (actor: Actor, scope: Scope): ApiError | undefined =>
    actor.scopes.has(scope)
      ? undefined
      : new ApiError(403, "FORBIDDEN", `this credential lacks the scope ${scope}`, {
          field: "scope",
          issue: `requires ${scope}`,
        })

  const authorize = (op: Operation, actor: Actor): ApiError | undefined =>
    op.scope === null || (op.orScope !== undefined && actor.scopes.has(op.orScope))
      ? undefined
      : requireScope(actor, op.scope)

  /** Decodes raw input; `status` is 422 for bodies and 400 for query strings (decision D2). */
  const decode = (op: Operation, raw: unknown, status: 400 | 422): Result<unknown> => {
    const result = decoderOf(op)(raw)
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

  /**
   * Each hot operation's fast handler, once built (null while it is being built, or when that failed);
   * until then, and whenever it declines, calls take the runtime.
   */
  const fastHandlers = new Map<Operation, FastHandler<unknown, unknown> | null>()
  const fastOf = (op: Operation): FastHandler<unknown, unknown> | undefined => {
    if (op.fast === undefined) return undefined
    const handler = fastHandlers.get(op)
    if (handler !== undefined) return handler ?? undefined
    fastHandlers.set(op, null)
    runtime.runPromise(op.fast).then(
      (built) => fastHandlers.set(op, built),
      (cause) =>
        log.error("fast handler unavailable; the operation runs on the runtime", { op: op.name, cause: String(cause) }),
    )
    return undefined
  }

  /** The operation's exit: from its fast handler when it has one that takes the call, else from the runtime. */
  const exitOf = (op: Operation, input: unknown, actor: Actor, context: OperationContext) =>
    fastOf(op)?.(input, actor, context) ??
    runtime.runPromiseExit(op.handler(input, actor, context) as Effect.Effect<unknown, DomainError>)

  const observe = options.observe
  const run = async (op: Operation, input: unknown, actor: Actor, requestId: string): Promise<Result<unknown>> => {
    const t0 = observe ? performance.now() : 0
    const result = settle(await exitOf(op, input, actor, {}), { op: op.name, requestId })
    observe?.(op, result, t0)
    return result
  }

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
    const t0 = observe ? performance.now() : 0
    // The credential is part of the request: another one reusing the key is refused (409), never answered
    // with the first caller's response (an agent would get another agent's decision). Tokens count as their key.
    const requestHash = hash("sha256", canonicalize({ credential: actor.credential.id, request: fingerprint }), "hex")
    // The stored and the answered response of a value come from one rendering.
    let last: { readonly value: unknown; readonly rendered: ReturnType<typeof respond> } | undefined
    const rendered = (value: unknown) => {
      if (last === undefined || last.value !== value) last = { value, rendered: respond(value) }
      return last.rendered
    }
    const idempotency: IdempotencyRequest = {
      key,
      operation: op.name,
      requestHash,
      render: (value) => rendered(value).stored,
    }
    const answer = (value: unknown): IdempotentResponse =>
      value instanceof Replayed
        ? { status: value.status, body: value.body, replayed: true }
        : { ...rendered(value).response, replayed: false }
    if (op.ownsIdempotency) {
      const exit = await exitOf(op, input, actor, { idempotency })
      const result = settle(Exit.map(exit, answer), { op: op.name, requestId })
      observe?.(op, result, t0)
      return result
    }
    const program = Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* Idempotency
      return answer(
        yield* sql.withTransaction(store.within(actor.workspaceId, idempotency, op.handler(input, actor, {}))),
      )
    }).pipe(Effect.catchTag("SqlError", Effect.die))
    const result = settle(
      await runtime.runPromiseExit(
        program as Effect.Effect<IdempotentResponse, DomainError, DomainServices | SqlClient.SqlClient>,
      ),
      { op: op.name, requestId },
    )
    observe?.(op, result, t0)
    return result
  }

  return { authenticate, admitPublic, authenticateSession, authorize, requireScope, decode, run, runIdempotent }
}

export type Executor = ReturnType<typeof makeExecutor>
