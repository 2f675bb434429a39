import {
  type AnyTRPCProcedure,
  initTRPC,
  type TRPCBuiltRouter,
  TRPCError,
  type TRPCMutationProcedure,
  type TRPCQueryProcedure,
} from "@trpc/server"
import { ApiError, formatPath } from "./ApiError.ts"
import { type AnyDefinedOperation, operations } from "./catalog.ts"
import type { Executor, SessionRequest } from "./Executor.ts"
import { honoursIdempotencyKey, type Operation, RenderedDocument } from "./Operation.ts"
import { findUnstorable } from "./rest/http.ts"

export interface TrpcContext {
  readonly authorization: string | undefined
  readonly requestId: string
  /** The client's address, for the rate limit of requests without a valid credential. */
  readonly address?: string | undefined
  /** A dashboard request authenticated by its session cookie (no Authorization header). */
  readonly session?: SessionRequest | undefined
  /** The request's `Idempotency-Key` header, if any: refused where REST would honour it (see the router). */
  readonly idempotencyKey?: string | ReadonlyArray<string> | undefined
}

type TrpcCode = ConstructorParameters<typeof TRPCError>[0]["code"]

const CODES: Record<number, TrpcCode> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_SUPPORTED",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  422: "UNPROCESSABLE_CONTENT",
  429: "TOO_MANY_REQUESTS",
  503: "SERVICE_UNAVAILABLE",
}

const fail = (error: ApiError): never => {
  throw new TRPCError({ code: CODES[error.status] ?? "INTERNAL_SERVER_ERROR", message: error.message, cause: error })
}

/**
 * Errors tRPC's adapter raises itself, before any procedure runs (the body too
 * large, a method or content type it does not take, no such procedure): the
 * status and code REST answers for the same mistake. The rest are 400.
 */
const ADAPTER_ERRORS: Partial<Record<TrpcCode, readonly [status: number, code: string, message?: string]>> = {
  NOT_FOUND: [404, "NOT_FOUND"],
  METHOD_NOT_SUPPORTED: [405, "METHOD_NOT_ALLOWED"],
  PAYLOAD_TOO_LARGE: [413, "PAYLOAD_TOO_LARGE", "request body too large"],
  UNSUPPORTED_MEDIA_TYPE: [415, "UNSUPPORTED_MEDIA_TYPE"],
}

const adapterError = (code: TrpcCode, message: string): ApiError => {
  if (code === "INTERNAL_SERVER_ERROR") return new ApiError(500, "INTERNAL_ERROR", "internal error")
  const [status, apiCode, fixed] = ADAPTER_ERRORS[code] ?? [400, "BAD_REQUEST"]
  return new ApiError(status, apiCode, fixed ?? message)
}

const t = initTRPC.context<TrpcContext>().create({
  /** Every error carries the envelope's (`data.apiError`), with the HTTP status REST would answer. */
  errorFormatter: ({ shape, error }) => {
    const api = error.cause instanceof ApiError ? error.cause : adapterError(error.code, error.message)
    return {
      ...shape,
      message: api.message,
      data: { code: shape.data.code, httpStatus: api.status, path: shape.data.path, apiError: api.toJSON() },
    }
  },
})

type Root = (typeof t)["_config"]["$types"]

/** What a client sends: the input schema's encoded side; optional when every field is. */
type InputOf<Op extends AnyDefinedOperation> =
  Partial<Op["input"]["Encoded"]> extends Op["input"]["Encoded"]
    ? Op["input"]["Encoded"] | undefined
    : Op["input"]["Encoded"]
type OutputOf<Op> = Op extends Operation<any, infer O, any, any> ? O : never
type ProcedureDef<Op extends AnyDefinedOperation> = {
  input: InputOf<Op>
  output: OutputOf<Op>
  meta: Root["meta"]
  errorShape: Root["errorShape"]
}
/** GET operations are queries, the rest mutations. */
type ProcedureOf<Op extends AnyDefinedOperation> = Op["method"] extends "GET"
  ? TRPCQueryProcedure<ProcedureDef<Op>>
  : TRPCMutationProcedure<ProcedureDef<Op>>

/** `"agents.versions.create"` → `{ agents: { versions: { create: V } } }`. */
type Nest<Path extends string, V> = Path extends `${infer Head}.${infer Rest}`
  ? { [K in Head]: Nest<Rest, V> }
  : { [K in Path]: V }
type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never
type Merged<T> = T extends AnyTRPCProcedure ? T : { [K in keyof T]: Merged<T[K]> }

/** One operation's procedure at its name's path (distributes over a union of operations). */
type Placed<Op> = Op extends AnyDefinedOperation ? Nest<Op["name"], ProcedureOf<Op>> : never

/** Every operation's procedure, at its name's path. */
export type AgentgovRouterRecord = Merged<UnionToIntersection<Placed<AnyDefinedOperation>>>

/**
 * The tRPC router's type, for `createTRPCClient<AgentgovRouter>`: every operation with its input (what is
 * sent) and output (what is answered), and the error shape whose `data.apiError` is the REST envelope's.
 */
export type AgentgovRouter = TRPCBuiltRouter<Root, AgentgovRouterRecord>

/**
 * The tRPC router (`/trpc`), one procedure per operation (`agents.list`, …):
 * GET operations are queries, the rest mutations. Procedures go through the
 * same executor as REST, so they authenticate, authorise, validate and fail
 * identically; `error.data.apiError` carries the envelope's error.
 */
export const makeTrpcRouter = (executor: Executor): AgentgovRouter => {
  const procedure = (op: Operation) => {
    const resolve = async ({ ctx, input }: { ctx: TrpcContext; input: unknown }) => {
      // A public operation (D1) takes no credential and is limited by the client's address alone.
      const auth = (
        op.public
          ? await executor.admitPublic(ctx.address, ctx.requestId)
          : ctx.session
            ? await executor.authenticateSession(ctx.session, ctx.requestId)
            : await executor.authenticate(ctx.authorization, ctx.address, ctx.requestId)
      ).result
      if (!auth.ok) return fail(auth.error)
      const denied = op.public ? undefined : executor.authorize(op, auth.value)
      if (denied) return fail(denied)
      const raw = input ?? {}
      const unstorable = findUnstorable(raw)
      if (unstorable) {
        const field = formatPath(unstorable.path) || "input"
        return fail(
          new ApiError(422, "VALIDATION_ERROR", `${field}: ${unstorable.issue}`, { field, issue: unstorable.issue }),
        )
      }
      const decoded = executor.decode(op, raw, 422)
      if (!decoded.ok) return fail(decoded.error)
      // Where REST honours an Idempotency-Key (a POST that uses it), tRPC refuses it: one header cannot name one
      // of the mutations a request may batch, and ignoring it would let a retry run twice.
      if (honoursIdempotencyKey(op) && ctx.idempotencyKey !== undefined) {
        const issue = "not supported over tRPC; send the call to the REST API (/api/v1) to make a retry safe"
        return fail(
          new ApiError(400, "BAD_REQUEST", `Idempotency-Key is ${issue}`, { field: "Idempotency-Key", issue }),
        )
      }
      const result = await executor.run(op, decoded.value, auth.value, ctx.requestId)
      if (!result.ok) return fail(result.error)
      return result.value instanceof RenderedDocument ? result.value.toJSON() : result.value
    }
    const base = t.procedure.input((v: unknown) => v)
    return op.method === "GET" ? base.query(resolve) : base.mutation(resolve)
  }

  // "agents.versions.create" → { agents: { versions: { create } } }
  const tree: Record<string, any> = {}
  for (const op of operations) {
    const parts = op.name.split(".")
    let node = tree
    for (const part of parts.slice(0, -1)) node = node[part] ??= {}
    node[parts.at(-1)!] = procedure(op)
  }
  const build = (node: Record<string, any>): ReturnType<typeof t.router> =>
    t.router(
      Object.fromEntries(Object.entries(node).map(([k, v]) => [k, typeof v === "function" || v._def ? v : build(v)])),
    )
  // Built from the same list the type is, by the same rule (name → path, GET → query); the typed client's
  // tests call through it.
  return build(tree) as unknown as AgentgovRouter
}
